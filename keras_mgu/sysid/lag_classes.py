"""The lag classes (NARX and the linear loop) in the recipe: their settings and one run.

The settings follow from the record and the ARX model fitted first:

* **orders**: ``na = max(4, na_ARX)``, ``nb = na + 1`` (the ARX order chosen on
  validation, at least 4 so that the network sees velocity and acceleration
  of a second-order plant through noise); the ARX is refitted by least
  squares at that order and is where both classes start.
* **window** ``T`` (:func:`window_for_modes`): half the period of the slowest
  oscillating mode of the ARX model (``2 pi / angle(p)`` samples for its
  complex pole ``p`` of lowest frequency), or, without one, twice its slowest
  time constant; within ``[16, 256]`` and at most an eighth of the estimation
  record.
* **work**: ``iterations`` window steps (2,000 times ``effort``), after
  ``2.5 iterations`` one-step steps for NARX and ``iterations / 2`` for the loop;
  Adam at :data:`LEARNING_RATE`, no weight decay; 32 windows a batch.

Every lag-class run reads ``L = na`` measured samples before a window, so its
resolved :class:`~keras_mgu.sysid.RecipeConfig` says ``initial_state =
"encoder"`` and ``n_initial = L``: :class:`~keras_mgu.sysid.Identification`
simulates, predicts, saves and exports it as it does the encoder models.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from keras_mgu.datasets import Record
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.linear import LinearModel
from keras_mgu.sysid.linear_loop import build_linear_loop
from keras_mgu.sysid.narx import build_narx
from keras_mgu.sysid.run import RunResult
from keras_mgu.sysid.window_training import WindowSchedule, train_on_windows

__all__ = [
    "LAG_CLASSES",
    "LEARNING_RATE",
    "lag_config",
    "lag_orders",
    "train_lag_run",
    "window_for_modes",
]

#: The lag classes' names, as :attr:`RunResult.structure` says them.
LAG_CLASSES = ("narx", "loop")
#: Adam's learning rate of the lag classes (no weight decay).
LEARNING_RATE = 1e-3
#: Least ARX order of the lag classes, and the window's bounds.
MIN_ORDER, WINDOW_MIN, WINDOW_MAX = 4, 16, 256
#: Window steps of a run at ``effort=1``; hidden layers of the NARX network.
ITERATIONS, NARX_HIDDEN = 2000, (64, 64)


def lag_orders(linear: LinearModel | None) -> int:
    """``na`` of the lag classes: the chosen ARX order, at least :data:`MIN_ORDER`."""
    return max(MIN_ORDER, linear.orders[0] if linear is not None else MIN_ORDER)


def window_for_modes(linear: LinearModel, n_samples: int) -> int:
    """``T`` from the ARX model's slowest mode (module docstring)."""
    poles = np.concatenate([np.roots(np.r_[1.0, a]) for a in linear.a])
    angles = np.abs(np.angle(poles))
    oscillating = angles[(angles > 1e-6) & (np.abs(poles) > 0.5)]
    if len(oscillating):
        wanted = 0.5 * 2.0 * math.pi / float(oscillating.min())
    else:
        tau = linear.time_constant
        wanted = 2.0 * tau if math.isfinite(tau) else WINDOW_MAX
    return int(min(WINDOW_MAX, max(WINDOW_MIN, round(wanted)), max(1, n_samples // 8)))


def lag_config(
    config: RecipeConfig, linear: LinearModel, n_samples: int, name: str
) -> RecipeConfig:
    """``config`` resolved for lag class ``name`` on an ``n_samples`` estimation record."""
    na = linear.orders[0]
    iterations = config.iterations or config.effort * ITERATIONS
    return dataclasses.replace(
        config,
        cell=config.cell if name == "loop" else "mlp",
        units=(config.units or (32,)) if name == "loop" else NARX_HIDDEN,
        linear_prior=True,
        initial_state="encoder",
        n_initial=na,
        iterations=iterations,
        learning_rate=LEARNING_RATE,
        weight_decay=0.0,
        window=config.window or window_for_modes(linear, n_samples),
        batch_size=32,
        washout=0,
        validation_continues=False,
    )


def train_lag_run(
    name: str,
    linear: LinearModel,
    estimation: Record,
    validation: Record,
    config: RecipeConfig,
    seed: int,
    verbose: int = 0,
) -> RunResult:
    """One run of lag class ``name`` on standardised records, ``config`` from :func:`lag_config`.

    ``validation_score`` is the best validation RMSE (standardised) and
    ``best_iteration`` the step it was reached at (0: the ARX model itself).
    """
    if name == "narx":
        model = build_narx(linear, hidden=config.units, seed=seed)
        one_step = 5 * config.iterations // 2
    else:
        model = build_linear_loop(linear, cell=config.cell, units=config.units[0], seed=seed)
        one_step = config.iterations // 2
    schedule = WindowSchedule(
        config.window, config.iterations, one_step, config.learning_rate,
        config.decay_points, config.decay_rate, min(config.validation_checks, 20),
    )  # fmt: skip
    info = train_on_windows(model, estimation, validation, schedule, seed, verbose=verbose)
    run = RunResult(model, seed, info["score"], info["iteration"], info["seconds"], None, config)
    run.validation_history = info["history"]
    return run
