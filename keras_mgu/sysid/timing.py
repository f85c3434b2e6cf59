"""How long the recipe will train a model: a few of one run's training steps, timed.

:func:`estimate_training` builds the network the recipe's first run would
train on ``data`` (its settings resolved for the record, as
:func:`~keras_mgu.sysid.identify` resolves them), compiles it as a run does,
and times ``steps`` of its training steps on the run's own windows after one
untimed step (tracing, compilation and first-call allocation excluded)::

    run seconds   = median step seconds * iterations
    total seconds = run seconds * runs

``runs``: the ``restarts``, plus one when the linear model is a candidate
structure (the network alone and on its residual each get a run). Runs that
share their settings train side by side as one population
(:mod:`~keras_mgu.sysid.training.population`): MGU runs then share one loop per layer
and may take less than the total; other cells' runs cost about their sum.
Validation checks are not timed. The estimate is of this machine at its
present load, not a promise: ``config.time_budget`` caps the wall time.
"""

from __future__ import annotations

import dataclasses
import statistics
import time

from keras_mgu.datasets import SysIdData
from keras_mgu.sysid.choice.candidates import structures
from keras_mgu.sysid.choice.held_out import hold_out
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.training.run import build_run_model, run_optimizer, training_windows

__all__ = ["TrainingEstimate", "describe_seconds", "estimate_training"]


@dataclasses.dataclass(frozen=True)
class TrainingEstimate:
    """The timed step and what it adds up to.

    Attributes:
        cell: The recurrent layer timed (``"mgu"``, ``"gru"``, ``"lstm"``).
        step_seconds: Median wall time of one training step (one batch of
            windows), seconds.
        iterations: Training steps of each run.
        runs: Runs the recipe trains.
    """

    cell: str
    step_seconds: float
    iterations: int
    runs: int

    @property
    def run_seconds(self) -> float:
        """One run's training, seconds: ``step_seconds * iterations``."""
        return self.step_seconds * self.iterations

    @property
    def seconds(self) -> float:
        """All runs, one after the other, seconds: ``run_seconds * runs``."""
        return self.run_seconds * self.runs


def estimate_training(
    data: SysIdData,
    config: RecipeConfig | None = None,
    restarts: int = 3,
    steps: int = 3,
    seed: int = 0,
) -> TrainingEstimate:
    """Time ``steps`` training steps of the recipe's first run on ``data``.

    Args:
        data: Estimation, validation and test records (only the estimation
            and validation records are read).
        config: The recipe's settings (default :class:`RecipeConfig`).
        restarts: As :func:`~keras_mgu.sysid.identify`'s.
        steps: Timed steps, ``>= 1``, after one untimed step.
        seed: Seeds the network and the windows.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"`steps` must be a positive integer; received {steps!r}.")
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1:
        raise ValueError(f"`restarts` must be a positive integer; received {restarts!r}.")
    config = config or RecipeConfig()
    data = hold_out(data, config.held_out, config.held_out_at)[0]  # what identify's runs fit
    options, _ = structures(data, config)
    first = options[0]
    est, _ = first.path.records(
        data, first.config.validation_continues, first.config.initial_state == "learned"
    )
    model = build_run_model(est, first.config, seed)
    model.compile(run_optimizer(first.config), "mse")
    windows = training_windows(est, first.config, seed)
    times = []
    for k in range(steps + 1):
        x, y, weights = windows[k % len(windows)]
        start = time.perf_counter()
        model.train_on_batch(x, y, sample_weight=weights)
        times.append(time.perf_counter() - start)
    runs = restarts + len(options) - 1
    return TrainingEstimate(
        first.config.cell, statistics.median(times[1:]), first.config.iterations, runs
    )


def describe_seconds(seconds: float) -> str:
    """``"40 s"``, ``"12 min"``, ``"3.5 h"``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
