"""The identification recipe: train simulation models on an estimation record, keep the best.

One run (:func:`train_simulator`):

1. Build :func:`~keras_mgu.sysid.model.build_simulator` (MGU, learned initial
   state, linear path) with the run's seed.
2. Train it with ``model.fit`` on :class:`~keras_mgu.sysid.windows.TrainingWindows`
   of the standardised estimation record: Adam with decoupled weight decay
   (AdamW) and optional gradient-norm clipping, the learning rate cut at fixed
   fractions of the run
   (:class:`~keras_mgu.callbacks.LearningRateDecayPoints`).
3. Every ``iterations / validation_checks`` iterations, simulate the
   validation record free-run and keep the weights with the best score
   (:class:`~keras_mgu.callbacks.WeightedEarlyStopping`).

:func:`identify` standardises the data (statistics of the estimation record
only), trains ``restarts`` runs from different seeds and keeps the one with the
best *validation* score. The test record is never seen by any of it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np

from keras_mgu.callbacks import LearningRateDecayPoints, WeightedEarlyStopping
from keras_mgu.datasets import Normalizer, Record, SysIdData
from keras_mgu.sysid.model import build_simulator
from keras_mgu.sysid.scoring import score
from keras_mgu.sysid.windows import TrainingWindows

__all__ = ["Identification", "RecipeConfig", "RunResult", "identify", "train_simulator"]

#: Records up to this many estimation samples train on the whole record at once.
WHOLE_RECORD_MAX = 2048
#: Window length for longer records.
LONG_RECORD_WINDOW = 1024


@dataclasses.dataclass(frozen=True)
class RecipeConfig:
    """Settings of the recipe; ``None`` fields are derived from the record length.

    Attributes:
        cell: Recurrent layer: ``"mgu"``, or ``"gru"``/``"lstm"`` to compare.
        units: State size of each stacked MGU layer.
        linear_path: Add the linear input-to-output path.
        iterations: Gradient steps per run.
        learning_rate: Adam's initial learning rate.
        clipnorm: Gradient-norm clipping (``None``: off).
        weight_decay: Decoupled weight decay (AdamW): every step multiplies the
            weights by ``1 - learning_rate * weight_decay`` (``0``: plain Adam).
        decay_points, decay_rate: The learning rate is multiplied by
            ``decay_rate`` at these fractions of the run.
        window: Training window length. ``None``: the whole estimation record
            when it has at most ``WHOLE_RECORD_MAX`` samples, else
            ``LONG_RECORD_WINDOW``.
        batch_size: Windows per batch (1 when the window is the whole record).
        washout: Unscored leading samples of windows that start after the
            record's start. ``None``: a quarter of the window.
        steps_per_epoch: Iterations per Keras epoch (one progress line each).
        validation_checks: How many times a run scores the validation record.
        validation_continues: The validation record continues the estimation
            record (as :meth:`Record.split` cuts it): the two are simulated
            together from the learned initial state and the score is the RMSE
            over both. ``False``: the validation record is simulated on its
            own, its first ``washout`` samples unscored.
        score_weights: Weights of :class:`WeightedEarlyStopping`'s score
            (``val_rmse``: validation RMSE, standardised units).
    """

    cell: str = "mgu"
    units: tuple[int, ...] = (32,)
    linear_path: bool = True
    iterations: int = 2000
    learning_rate: float = 0.01
    clipnorm: float | None = None
    weight_decay: float = 0.1
    decay_points: tuple[float, ...] = (0.5, 0.8)
    decay_rate: float = 0.3
    window: int | None = None
    batch_size: int = 16
    washout: int | None = None
    steps_per_epoch: int = 100
    validation_checks: int = 100
    validation_continues: bool = True
    score_weights: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {"val_rmse": 1.0}
    )

    def resolved(self, n_samples: int) -> RecipeConfig:
        """A copy with ``window`` and ``washout`` set for an ``n_samples`` record."""
        for name in ("iterations", "batch_size", "steps_per_epoch", "validation_checks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive integer; received {value!r}.")
        decay = self.weight_decay
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not decay >= 0:
            raise ValueError(f"`weight_decay` must be a number >= 0; received {decay!r}.")
        window = self.window
        if window is None:
            window = min(n_samples, LONG_RECORD_WINDOW)
            window = n_samples if n_samples <= WHOLE_RECORD_MAX else window
        elif isinstance(window, bool) or not isinstance(window, int) or window < 2:
            raise ValueError(f"`window` must be an integer >= 2; received {window!r}.")
        elif window > n_samples:
            raise ValueError(
                f"The estimation record has {n_samples} samples, fewer than the training window "
                f"of {window}; choose a window of at most {n_samples} samples (or None)."
            )
        washout = window // 4 if self.washout is None else self.washout
        if isinstance(washout, bool) or not isinstance(washout, int) or not 0 <= washout < window:
            raise ValueError(
                f"`washout` must be an integer in [0, window={window}); received {washout!r}."
            )
        return dataclasses.replace(self, window=window, washout=washout)


@dataclasses.dataclass
class RunResult:
    """One trained run: its model, seed and validation score (standardised units)."""

    model: keras.Model
    seed: int
    validation_score: float
    best_iteration: int
    seconds: float
    stopper: WeightedEarlyStopping


def _check_record(record: Any, what: str, min_samples: int = 2) -> Record:
    if not isinstance(record, Record):
        raise TypeError(f"`{what}` must be a keras_mgu.datasets.Record; got {type(record)}.")
    if record.n_samples < min_samples:
        raise ValueError(
            f"The {what} record has {record.n_samples} samples; the recipe needs at least "
            f"{min_samples}."
        )
    return record


def _validation_data(estimation: Record, validation: Record, config: RecipeConfig):
    """``(u, y, weights)``: one sequence whose weighted free-run RMSE is the validation score.

    A continuing validation record is simulated after the estimation record
    from the learned initial state, and the score is the RMSE over both: the
    free-run error of the whole experiment, whose last part training never
    saw. A separate validation record is simulated on its own, its first
    ``washout`` samples unscored.
    """
    if config.validation_continues:
        u = np.concatenate([estimation.u, validation.u])
        y = np.concatenate([estimation.y, validation.y])
        weights = np.ones(len(u), dtype="float32")
    else:
        u, y = validation.u, validation.y
        weights = np.ones(len(u), dtype="float32")
        weights[: min(config.washout, len(u) - 1)] = 0.0
    as32 = lambda a: np.asarray(a, dtype="float32")[None]  # noqa: E731
    return as32(u), as32(y), weights[None]


def train_simulator(
    estimation: Record,
    validation: Record,
    config: RecipeConfig | None = None,
    seed: int = 0,
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
) -> RunResult:
    """Train one simulation model on *standardised* records (see :func:`identify`).

    Args:
        estimation: Record to train on.
        validation: Record to score for early stopping and restart selection.
        config: The recipe's settings (default :class:`RecipeConfig`).
        seed: Seeds the weights and the window draws.
        verbose: ``model.fit``'s verbosity (``2``: one line per epoch).
        callbacks: Further Keras callbacks for ``fit``.
    """
    config = (config or RecipeConfig()).resolved(_check_record(estimation, "estimation").n_samples)
    _check_record(validation, "validation", min_samples=1)
    model = build_simulator(
        estimation.n_inputs, estimation.n_outputs, config.units, config.linear_path,
        seed=seed, cell=config.cell,
    )  # fmt: skip
    optimizer = keras.optimizers.AdamW(
        config.learning_rate, weight_decay=config.weight_decay, clipnorm=config.clipnorm
    )
    rmse = keras.metrics.RootMeanSquaredError(name="rmse")
    model.compile(optimizer, "mse", weighted_metrics=[rmse])
    windows = TrainingWindows(
        estimation.u, estimation.y, config.window, config.batch_size,
        config.steps_per_epoch, config.washout, seed=seed,
    )  # fmt: skip
    stopper = WeightedEarlyStopping(
        dict(config.score_weights),
        validation_data=_validation_data(estimation, validation, config),
        validation_frequency=max(1, config.iterations // config.validation_checks),
        restore_best_weights=True,
    )
    schedule = LearningRateDecayPoints(config.decay_points, decay_rate=config.decay_rate)
    epochs = max(1, -(-config.iterations // config.steps_per_epoch))
    start = time.perf_counter()
    model.fit(
        windows, epochs=epochs, verbose=verbose, shuffle=False,  # windows are drawn at random
        callbacks=[schedule, stopper, *callbacks],
    )  # fmt: skip
    return RunResult(
        model, seed, float(stopper.best_score), int(stopper.best_iteration),
        time.perf_counter() - start, stopper,
    )  # fmt: skip


@dataclasses.dataclass
class Identification:
    """The result of :func:`identify`: the chosen model and every restart's score.

    ``simulate`` and ``score`` work in physical units.
    """

    model: keras.Model
    normalizer: Normalizer
    runs: list[RunResult]
    best: int
    config: RecipeConfig

    @property
    def validation_scores(self) -> list[float]:
        return [run.validation_score for run in self.runs]

    def simulate(self, u: Any) -> np.ndarray:
        """Free-run simulation ``(N, n_outputs)`` of inputs ``u`` ``(N, n_inputs)``."""
        u = np.asarray(u, dtype=np.float64)
        if u.ndim != 2 or u.shape[1] != len(self.normalizer.u_mean):
            raise ValueError(
                f"`u` must have shape (N, {len(self.normalizer.u_mean)}); received {u.shape}."
            )
        x = self.normalizer.transform_u(u)[None].astype("float32")
        y = keras.ops.convert_to_numpy(self.model(x, training=False))[0]
        return self.normalizer.inverse_transform_y(y)

    def score(self, record: Record, convention: str = "all", n_initial: int = 50) -> float:
        """RMSE of the free-run simulation of ``record`` (see :mod:`keras_mgu.sysid.scoring`)."""
        return score(record.y, self.simulate(record.u), convention, n_initial)


def identify(
    data: SysIdData,
    config: RecipeConfig | None = None,
    restarts: int = 3,
    seed: int = 0,
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
) -> Identification:
    """Identify a simulation model of ``data`` (physical units) with the recipe.

    Standardises with the estimation record's statistics, trains ``restarts``
    runs (seeds ``seed + 1000 * k``) and keeps the run with the lowest
    validation score. ``data.test`` is not used.

    Args:
        data: Estimation, validation and test records.
        config: The recipe's settings (default :class:`RecipeConfig`).
        restarts: Independent runs to choose from.
        seed: Seed of the first run.
        verbose, callbacks: Passed to every run's ``fit``.
    """
    if not isinstance(data, SysIdData):
        raise TypeError(f"`data` must be a keras_mgu.datasets.SysIdData; got {type(data)}.")
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1:
        raise ValueError(f"`restarts` must be a positive integer; received {restarts!r}.")
    config = config or RecipeConfig()
    normalizer = Normalizer.fit(data.estimation)
    est, val = normalizer.transform(data.estimation), normalizer.transform(data.validation)
    runs = []
    for k in range(restarts):
        run = train_simulator(est, val, config, seed + 1000 * k, verbose, callbacks)
        if verbose:
            print(
                f"restart {k + 1}/{restarts} (seed {run.seed}): validation score "
                f"{run.validation_score:.4f} at iteration {run.best_iteration}, "
                f"{run.seconds:.0f} s",
                flush=True,
            )
        runs.append(run)
    scores = [r.validation_score if np.isfinite(r.validation_score) else np.inf for r in runs]
    best = int(np.argmin(scores))
    return Identification(runs[best].model, normalizer, runs, best, config)
