"""The identification recipe: train simulation models on an estimation record, keep the best.

One run (:func:`train_simulator`), on records as the network sees them:

1. Build :func:`~keras_mgu.sysid.model.build_simulator` (MGU, linear path;
   a learned initial state, or an encoder of the samples before each window)
   with the run's seed.
2. Train it with ``model.fit`` on :class:`~keras_mgu.sysid.windows.TrainingWindows`:
   Adam with decoupled weight decay (AdamW), the learning rate cut at fixed
   fractions of the run (:class:`~keras_mgu.callbacks.LearningRateDecayPoints`),
   within a time budget (:class:`~keras_mgu.callbacks.TimeBudget`).
3. Every ``iterations / validation_checks`` iterations, simulate the
   validation record free-run and keep the weights with the best score
   (:class:`~keras_mgu.callbacks.WeightedEarlyStopping`).

:func:`identify` standardises the data (statistics of the estimation record
only), fits a linear model first where it explains the validation record
(:mod:`~keras_mgu.sysid.linear`), derives the settings the config leaves open
from the record (:mod:`~keras_mgu.sysid.config`), trains ``restarts`` runs
from different seeds and keeps the one with the best *validation* score. The
test record is never seen by any of it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from keras_mgu.callbacks import LearningRateDecayPoints, TimeBudget, WeightedEarlyStopping
from keras_mgu.datasets import Normalizer, Record, SysIdData
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.identification import Identification, SignalPath
from keras_mgu.sysid.linear import LinearModel, select_linear_model
from keras_mgu.sysid.model import build_simulator
from keras_mgu.sysid.windows import TrainingWindows

__all__ = ["RunResult", "identify", "prepare", "train_simulator"]

@dataclasses.dataclass
class RunResult:
    """One trained run: its model, seed and validation scores.

    ``validation_score`` is the early-stopping score (the network's units);
    ``validation_rmse`` is the RMSE of the validation record alone in the
    estimation record's standardised output units, the same for every
    structure (with or without the linear model), set by :func:`identify`.
    """

    model: keras.Model
    seed: int
    validation_score: float
    best_iteration: int
    seconds: float
    stopper: WeightedEarlyStopping
    validation_rmse: float = float("nan")


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
    """``(x, y, weights)``: one sequence whose weighted free-run RMSE is the validation score.

    A continuing validation record is simulated after the estimation record
    from the learned initial state, and the score is the RMSE over both: the
    free-run error of the whole experiment, whose last part training never
    saw. A separate validation record is simulated on its own: with the
    encoder, from the state its first ``n_initial`` samples give (the rest
    scored); else from the learned state, its first ``washout`` samples
    unscored.
    """
    as32 = lambda a: np.asarray(a, dtype="float32")[None]  # noqa: E731
    if config.validation_continues:
        u = np.concatenate([estimation.u, validation.u])
        y = np.concatenate([estimation.y, validation.y])
    else:
        u, y = validation.u, validation.y
    if config.initial_state == "encoder":
        lag = config.n_initial
        if len(u) <= lag:
            raise ValueError(
                f"The validation record has {len(u)} samples; the encoder reads {lag}, so it "
                f"needs more than {lag}."
            )
        x = (as32(u[:lag]), as32(y[:lag]), as32(u[lag:]))
        return x, as32(y[lag:]), np.ones((1, len(u) - lag), dtype="float32")
    weights = np.ones(len(u), dtype="float32")
    if not config.validation_continues:
        weights[: min(config.washout, len(u) - 1)] = 0.0
    return as32(u), as32(y), weights[None]


def _windows(estimation: Record, config: RecipeConfig, seed: int) -> TrainingWindows:
    history = config.n_initial if config.initial_state == "encoder" else 0
    return TrainingWindows(
        estimation.u, estimation.y, config.window, config.batch_size,
        config.steps_per_epoch, config.washout, seed=seed, history=history,
    )  # fmt: skip


def train_simulator(
    estimation: Record,
    validation: Record,
    config: RecipeConfig | None = None,
    seed: int = 0,
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    time_budget: float | None = None,
) -> RunResult:
    """Train one simulation model on records as the network sees them (see :func:`identify`).

    Args:
        estimation: Record to train on.
        validation: Record to score for early stopping and restart selection.
        config: The recipe's settings (default :class:`RecipeConfig`; open
            fields are resolved for ``estimation``).
        seed: Seeds the weights and the window draws.
        verbose: ``model.fit``'s verbosity (``2``: one line per epoch).
        callbacks: Further Keras callbacks for ``fit``.
        time_budget: Seconds for this run (default: the config's budget).
    """
    n = _check_record(estimation, "estimation").n_samples
    config = (config or RecipeConfig()).resolved(n)
    _check_record(validation, "validation", min_samples=1)
    encoder = config.n_initial if config.initial_state == "encoder" else None
    model = build_simulator(
        estimation.n_inputs, estimation.n_outputs, config.units, config.linear_path,
        seed=seed, cell=config.cell, encoder_lag=encoder,
    )  # fmt: skip
    optimizer = keras.optimizers.AdamW(
        config.learning_rate, weight_decay=config.weight_decay, clipnorm=config.clipnorm
    )
    rmse = keras.metrics.RootMeanSquaredError(name="rmse")
    model.compile(optimizer, "mse", weighted_metrics=[rmse])
    stopper = WeightedEarlyStopping(
        dict(config.score_weights),
        validation_data=_validation_data(estimation, validation, config),
        validation_frequency=max(1, config.iterations // config.validation_checks),
        restore_best_weights=True,
    )
    schedule = LearningRateDecayPoints(config.decay_points, decay_rate=config.decay_rate)
    budget = TimeBudget(time_budget or config.time_budget, schedule)
    epochs = max(1, -(-config.iterations // config.steps_per_epoch))
    start = time.perf_counter()
    model.fit(
        _windows(estimation, config, seed), epochs=epochs, verbose=verbose,
        shuffle=False,  # windows are drawn at random
        callbacks=[schedule, budget, stopper, *callbacks],
    )  # fmt: skip
    return RunResult(
        model, seed, float(stopper.best_score), int(stopper.best_iteration or 0),
        time.perf_counter() - start, stopper,
    )  # fmt: skip


def _network_records(path: SignalPath, data: SysIdData, continues: bool) -> tuple[Record, Record]:
    """The estimation and validation records as the network sees them."""
    est, val = data.estimation, data.validation
    if not continues:
        return path.record(est), path.record(val)
    joined = path.record(
        Record(np.concatenate([est.u, val.u]), np.concatenate([est.y, val.y]), est.ts)
    )
    return joined.slice(0, est.n_samples), joined.slice(est.n_samples, None)


def prepare(data: SysIdData, config: RecipeConfig) -> tuple[SignalPath, RecipeConfig, list]:
    """The signal path and the resolved settings for ``data``, and the linear models tried.

    The linear model is fitted on the standardised estimation record and kept
    when the config asks for it, or (``linear_prior=None``) when it explains
    the validation record (:func:`~keras_mgu.sysid.linear.select_linear_model`).
    """
    outer = Normalizer.fit(data.estimation)
    est, val = outer.transform(data.estimation), outer.transform(data.validation)
    draft = config.resolved(est.n_samples, data.n_initial)  # the validation layout
    linear, table = None, []
    if config.linear_prior is not False:
        linear, table = select_linear_model(est, val, continues=draft.validation_continues)
        if linear is None and config.linear_prior:
            linear = LinearModel.fit(est.u, est.y, min(table, key=_val_rmse)["na"])
    inner = None
    if linear is not None:
        y_lin = linear.simulate(est.u, est.y[0])
        inner = Normalizer.fit(Record(np.concatenate([est.u, y_lin], axis=1), est.y - y_lin))
    resolved = config.resolved(
        est.n_samples, data.n_initial,
        time_constant=None if linear is None else linear.time_constant,
        linear_prior=linear is not None,
    )  # fmt: skip
    return SignalPath(outer, linear, inner), resolved, table


def _val_rmse(row: dict) -> float:
    return row["validation_rmse"]


def identify(
    data: SysIdData,
    config: RecipeConfig | None = None,
    restarts: int = 3,
    seed: int = 0,
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
) -> Identification:
    """Identify a simulation model of ``data`` (physical units) with the recipe.

    Standardises with the estimation record's statistics, fits the linear
    model first where it helps, trains ``restarts`` runs (seeds
    ``seed + 1000 * k``), each within its share of the time budget, and keeps
    the run with the lowest validation score. ``data.test`` is not used.

    Args:
        data: Estimation, validation and test records.
        config: The recipe's settings (default :class:`RecipeConfig`; ``None``
            fields are derived from the record).
        restarts: Independent runs to choose from.
        seed: Seed of the first run.
        verbose: ``model.fit``'s verbosity; ``>= 1`` also prints the settings
            and a line per restart.
        callbacks: Passed to every run's ``fit``.
    """
    if not isinstance(data, SysIdData):
        raise TypeError(f"`data` must be a keras_mgu.datasets.SysIdData; got {type(data)}.")
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1:
        raise ValueError(f"`restarts` must be a positive integer; received {restarts!r}.")
    path, config, linear_table = prepare(data, config or RecipeConfig())
    est, val = _network_records(path, data, config.validation_continues)
    if verbose:
        _print_settings(data, config, path, restarts)
    runs, start = [], time.perf_counter()
    for k in range(restarts):
        left = config.time_budget - (time.perf_counter() - start)
        share = max(left / (restarts - k), 1e-3)
        run = train_simulator(est, val, config, seed + 1000 * k, verbose, callbacks, share)
        if verbose:
            print(
                f"restart {k + 1}/{restarts} (seed {run.seed}): validation score "
                f"{run.validation_score:.4f} at iteration {run.best_iteration}, "
                f"{run.seconds:.0f} s",
                flush=True,
            )
        runs.append(run)
    scores = [r.validation_score if np.isfinite(r.validation_score) else np.inf for r in runs]
    lag = config.n_initial
    first = (data.estimation.u[:lag], data.estimation.y[:lag])
    best = int(np.argmin(scores))
    found = Identification(runs, best, path, config, data.n_initial, first, linear_table)
    for k, run in enumerate(runs):
        run.validation_rmse = dataclasses.replace(found, best=k).validation_rmse(data)
    return found


def _print_settings(data: SysIdData, config: RecipeConfig, path: SignalPath, restarts: int):
    linear = "none" if path.linear is None else f"ARX{path.linear.orders}"
    encoder = config.initial_state == "encoder"
    print(
        f"recipe: {data.estimation.n_samples} estimation samples -> {config.cell.upper()} "
        f"{list(config.units)}, {config.initial_state} initial state"
        f"{f' (encoder of {config.n_initial} samples)' if encoder else ''}"
        f", linear model {linear}, window {config.window} x batch {config.batch_size}, "
        f"{config.iterations} iterations, learning rate {config.learning_rate:g}, weight decay "
        f"{config.weight_decay:.3g}, {restarts} restart(s) within {config.time_budget:.0f} s",
        flush=True,
    )
