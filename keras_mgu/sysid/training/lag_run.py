"""The lag classes (NARX, the linear loop, the linear model) in the recipe: settings, one run.

The settings follow from the record and the ARX model fitted first:

* **orders**: ``na = max(4, na_ARX)``, ``nb = na + 1`` (the ARX order chosen on
  validation, at least 4 so that the network sees velocity and acceleration
  of a second-order plant through noise); the ARX is refitted by least
  squares at that order and is where both classes start.
* **window** ``T`` (:func:`window_for_modes`): the longer of half the period
  of the slowest oscillating mode of the ARX model (``pi / angle(p)``
  samples for its complex pole ``p`` of lowest frequency) and twice the time
  constant of its slowest real mode (``-2 / ln p``; an integrator: the
  longest window), so that a window spans the plant's memory on slow plants
  as on oscillators; within ``[16, 256]`` and at most an eighth of the
  estimation record.
* **work** (:func:`lag_iterations`): in proportion to the record, 16 passes
  over its window starts (``16 W / 32`` steps of 32 windows, ``W`` about
  ``N``), at least 2,000 steps, at most 64,000, and at most
  :data:`SAMPLE_BUDGET` simulated samples (``steps T 32``), all times
  ``effort``; before them one-step steps, 2.5 for NARX and 0.5 for the loop
  per window step of the first 2,000 (times ``effort``): 5,000 and 1,000 by
  default; none for the linear class. Adam at
  :data:`LEARNING_RATE`, no weight decay; 32 windows a batch.
* **range**: NARX and the loop fade to the ARX model of the order chosen on
  validation (the ``anchor``) outside the estimation record's range of their
  regressors
  (:class:`~keras_mgu.sysid.models.loop_cell.ArxLoopCell`'s ``bounds``); the linear
  class (:mod:`~keras_mgu.sysid.models.output_error`) extrapolates as a linear model.

**Training** (:func:`train_lag_model`, on the one trainer
:func:`~keras_mgu.sysid.training.trainer.fit_windows`): windows cut at every
start ``s`` of the standardised estimation record, each experiment on its own
(:func:`~keras_mgu.sysid.training.windows.measured_windows`)::

    u_past = u[s-L : s],  y_past = y[s-L : s]     measured: the state at s
    u      = u[s : s+T],  target  = y[s : s+T]     simulated free-run, all T scored

so the loss is the simulation error over ``T`` steps from the measured
outputs just before the window. Two phases, each a fixed number of Adam steps
(no weight decay, so nothing pulls the linear part towards zero; gradient
norm clipped at 1), on windows drawn in an order set by ``seed`` alone:

1. ``one_step_iterations`` steps on windows of one sample (the one-step
   prediction error, as a NARX model is first fitted);
2. ``iterations`` steps on windows of ``T`` samples, the learning rate
   multiplied by ``decay_rate`` at the ``decay_points`` fractions of the phase
   (:class:`~keras_mgu.callbacks.LearningRateDecayPoints` by iteration).

The validation record is simulated free-run from its first ``L`` measured
samples (:class:`~keras_mgu.callbacks.WeightedEarlyStopping`) at the start,
after phase 1, every ``iterations // validation_checks`` steps of phase 2 and
at its end; the weights with the lowest validation RMSE are kept (the start,
where the model is the linear model, included).

Every lag-class run reads ``L = na`` measured samples before a window, so its
resolved :class:`~keras_mgu.sysid.RecipeConfig` says ``initial_state =
"encoder"`` and ``n_initial = L``: :class:`~keras_mgu.sysid.Identification`
simulates, predicts, saves and exports it as it does the encoder models.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from keras_mgu.callbacks import LearningRateDecayPoints, WeightedEarlyStopping
from keras_mgu.datasets import Record
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.models.arx import LinearModel
from keras_mgu.sysid.models.loop import build_linear_loop
from keras_mgu.sysid.models.loop_cell import regressor_bounds
from keras_mgu.sysid.models.narx import build_narx
from keras_mgu.sysid.models.output_error import build_output_error
from keras_mgu.sysid.training.run import RunResult
from keras_mgu.sysid.training.trainer import execution_block, fit_windows
from keras_mgu.sysid.training.windows import measured_windows

__all__ = [
    "LAG_CLASSES",
    "LEARNING_RATE",
    "lag_config",
    "lag_iterations",
    "lag_orders",
    "train_lag_model",
    "train_lag_run",
    "window_schedule",
    "window_for_modes",
]

#: Windows of one batch in phase 2, and one-step samples of one batch in phase 1.
WINDOW_BATCH, ONE_STEP_BATCH = 32, 256


@dataclasses.dataclass(frozen=True)
class WindowSchedule:
    """How a lag model trains (module docstring).

    Attributes:
        window: ``T``, the simulated samples of a training window (>= 1).
        iterations: Steps on windows of ``T`` (>= 1).
        one_step_iterations: Steps on one-sample windows first (>= 0).
        learning_rate: Adam's initial learning rate.
        decay_points, decay_rate: Learning-rate decays of phase 2.
        validation_checks: Validation simulations in phase 2.
    """

    window: int
    iterations: int
    one_step_iterations: int = 0
    learning_rate: float = 1e-3
    decay_points: tuple[float, ...] = (0.5, 0.8)
    decay_rate: float = 0.3
    validation_checks: int = 20

    def __post_init__(self) -> None:
        for name, least in (("window", 1), ("iterations", 1), ("one_step_iterations", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"`{name}` must be an integer >= {least}; received {value!r}.")


#: The lag classes' names, as :attr:`RunResult.structure` says them.
LAG_CLASSES = ("narx", "loop", "linear", "polynomial")
#: Adam's learning rate of the lag classes (no weight decay).
LEARNING_RATE = 1e-3
#: Least ARX order of the lag classes, and the window's bounds.
MIN_ORDER, WINDOW_MIN, WINDOW_MAX = 4, 16, 256
#: Least and most window steps of a run at ``effort=1``; hidden layers of the NARX network.
ITERATIONS, MAX_ITERATIONS, NARX_HIDDEN = 2000, 64_000, (64, 64)
#: Passes over the window starts, and windows of a batch.
PASSES, BATCH = 16, 32
#: Most simulated samples (steps x window x batch) of a run at ``effort=1``.
SAMPLE_BUDGET = 2 * 32_000 * 16 * BATCH
#: One-step steps before the window steps, per window step of the first ``effort * ITERATIONS``.
ONE_STEP = {"narx": 2.5, "loop": 0.5, "linear": 0.0}


def lag_orders(linear: LinearModel | None) -> int:
    """``na`` of the lag classes: the chosen ARX order, at least :data:`MIN_ORDER`."""
    return max(MIN_ORDER, linear.orders[0] if linear is not None else MIN_ORDER)


def window_for_modes(linear: LinearModel, n_samples: int) -> int:
    """``T`` from the ARX model's slowest modes (module docstring)."""
    poles = np.concatenate([np.roots(np.r_[1.0, a]) for a in linear.a])
    poles = poles[np.abs(poles) > 0.5]  # faster modes set no window
    angles = np.abs(np.angle(poles))
    oscillating = angles[(angles > 1e-6) & (angles < math.pi - 1e-6)]
    real = np.abs(poles[(angles <= 1e-6)])
    wanted = float(WINDOW_MIN)
    if len(oscillating):
        wanted = max(wanted, math.pi / float(oscillating.min()))
    if len(real):
        radius = float(real.max())
        wanted = max(wanted, -2.0 / math.log(radius) if radius < 1.0 else math.inf)
    return int(min(WINDOW_MAX, round(min(wanted, 1e9)), max(1, n_samples // 8)))


def lag_iterations(n_windows: int, window: int, effort: int = 1) -> int:
    """Window steps for ``n_windows`` starts of windows of ``window`` samples (module docstring)."""
    wanted = math.ceil(PASSES * n_windows / BATCH)
    budget = SAMPLE_BUDGET // (window * BATCH)
    return effort * int(max(ITERATIONS, min(wanted, MAX_ITERATIONS, budget)))


def lag_config(
    config: RecipeConfig, linear: LinearModel, n_samples: int, name: str
) -> RecipeConfig:
    """``config`` resolved for lag class ``name`` on an ``n_samples`` estimation record."""
    na = linear.orders[0]
    window = config.window or window_for_modes(linear, n_samples)
    iterations = config.iterations or lag_iterations(n_samples - na, window, config.effort)
    units = {"loop": config.units or (32,), "narx": NARX_HIDDEN, "linear": ()}[name]
    return dataclasses.replace(
        config,
        cell=config.cell if name == "loop" else "mlp",
        units=units,
        linear_prior=True,
        initial_state="encoder",
        n_initial=na,
        iterations=iterations,
        learning_rate=LEARNING_RATE,
        weight_decay=0.0,
        window=window,
        batch_size=BATCH,
        washout=0,
        validation_continues=False,
    )


def one_step_iterations(name: str, config: RecipeConfig) -> int:
    """The one-step steps a run of class ``name`` takes before its ``config.iterations`` window
    steps (:data:`ONE_STEP`; none for the other classes). A run's iterations are counted
    through both phases: its best iteration can be up to their sum."""
    return int(ONE_STEP.get(name, 0.0) * min(config.iterations, config.effort * ITERATIONS))


def window_schedule(config: RecipeConfig, one_step: int = 0) -> WindowSchedule:
    """The :class:`WindowSchedule` of a lag run's resolved ``config``, ``one_step`` steps first."""
    return WindowSchedule(
        config.window, config.iterations, one_step, config.learning_rate,
        config.decay_points, config.decay_rate, min(config.validation_checks, 20),
    )  # fmt: skip


def train_lag_run(
    name: str,
    linear: LinearModel,
    estimation: Record,
    validation: Record,
    config: RecipeConfig,
    seed: int,
    verbose: int = 0,
    anchor: LinearModel | None = None,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    race: Any = None,
) -> RunResult:
    """One run of lag class ``name`` on standardised records, ``config`` from :func:`lag_config`.

    ``validation_score`` is the best validation RMSE (standardised) and
    ``best_iteration`` the step it was reached at (0: the ARX model itself).
    NARX and the loop fade to ``anchor`` (default ``linear``) outside
    ``estimation``'s range. (The polynomial class trains by
    :mod:`~keras_mgu.sysid.training.polynomial_run`.) ``verbose`` and
    ``callbacks`` go to ``fit``. ``race``: a
    :class:`~keras_mgu.sysid.choice.racing.RaceCheckpoint` (or None) that
    may stop the window phase at its checkpoint.
    """
    bounds = regressor_bounds(
        (estimation.u.min(0), estimation.u.max(0)), (estimation.y.min(0), estimation.y.max(0)),
        *linear.orders,
    )  # fmt: skip
    if name == "narx":
        model = build_narx(linear, hidden=config.units, seed=seed, bounds=bounds, anchor=anchor)
    elif name == "loop":
        model = build_linear_loop(
            linear,
            cell=config.cell,
            units=config.units[0],
            seed=seed,
            bounds=bounds,
            anchor=anchor,
        )
    else:
        model = build_output_error(linear)
    schedule = window_schedule(config, one_step_iterations(name, config))
    info = train_lag_model(model, estimation, validation, schedule, seed, verbose, callbacks, race)
    run = RunResult(model, seed, info["score"], info["iteration"], info["seconds"], None, config)
    run.validation_history = info["history"]
    return run


def train_lag_model(
    model: keras.Model,
    estimation: Record,
    validation: Record,
    schedule: WindowSchedule,
    seed: int,
    verbose: int = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    race: Any = None,
) -> dict[str, Any]:
    """Train a lag model (standardised records, lag ``L`` from its inputs) in two phases.

    ``race`` (a :class:`~keras_mgu.sysid.choice.racing.RaceCheckpoint`, or
    None) watches the window phase, on the best validation RMSE of both.

    Returns a dict: ``score`` (the best validation RMSE, standardised),
    ``iteration`` (when it was reached; 0: the start), ``history`` (``(step,
    rmse)`` pairs) and ``seconds``; the model holds the best weights.
    """
    lag = model.inputs[0].shape[1]
    rng, u, y = np.random.default_rng(seed), validation.u.astype("float32"), validation.y
    simulated = ([u[None, :lag], y[None, :lag].astype("float32"), u[None, lag:]], y[None, lag:])
    phases, done, seconds = [], 0, 0.0
    for one_step, window, steps, batch in _phases(schedule):
        windows = _drawn(measured_windows(estimation, lag, window), steps, batch, rng)
        every = steps if one_step else max(1, steps // schedule.validation_checks)
        stopper = WeightedEarlyStopping(
            {"val_rmse": 1.0}, simulated, every, restore_best_weights=not one_step,
            check_at_start=True, check_at_end=True,
        )  # fmt: skip
        decay = None
        if not one_step:
            decay = LearningRateDecayPoints(
                schedule.decay_points, schedule.decay_rate, unit="iteration"
            )
        optimizer = keras.optimizers.Adam(schedule.learning_rate, clipnorm=1.0)
        extra = ()
        if race is not None and not one_step:
            race.watch(_best_so_far(phases, stopper), steps, every, offset=done)
            extra = (race,)
        seconds += fit_windows(
            model, windows, optimizer, stopper, decay, steps_per_epoch=steps,
            batch_size=len(windows[1]) // steps, verbose=verbose,
            callbacks=(*callbacks, *extra), steps_per_execution=execution_block(every, steps),
        )  # fmt: skip
        phases.append((done, stopper))
        done += steps
    return _best_of(model, phases, seconds)


def _best_so_far(phases: list, stopper: WeightedEarlyStopping):
    """The best validation RMSE of the phases done and ``stopper``'s, as a one-member list."""
    return lambda: [min([s.best_score for _, s in phases] + [stopper.best_score])]


def _phases(schedule: WindowSchedule) -> list[tuple[bool, int, int, int]]:
    """``(one_step, window, steps, batch)`` of the one-step phase (if any) and the window phase."""
    first = [(True, 1, schedule.one_step_iterations, ONE_STEP_BATCH)]
    return (first if schedule.one_step_iterations else []) + [
        (False, schedule.window, schedule.iterations, WINDOW_BATCH)
    ]


def _drawn(data: tuple, iterations: int, batch: int, rng: np.random.Generator) -> tuple:
    """``([u_past, y_past, u], y)``: ``iterations`` batches of windows drawn by ``rng``."""
    u_past, y_past, u, y = data
    n = len(u)
    batch = min(batch, n)
    order = np.concatenate([rng.permutation(n) for _ in range(-(-iterations * batch // n))])
    take = order[: iterations * batch]
    return [u_past[take], y_past[take], u[take]], y[take]


def _best_of(model: keras.Model, phases: list, seconds: float) -> dict[str, Any]:
    """The best check of all phases (the first of equal ones); the model is given its weights."""
    history, best = [], None
    for offset, stopper in phases:
        for check in stopper.history:
            if history and offset and check["iteration"] == 0:
                continue  # a phase starts where the one before it ended: checked already
            history.append((offset + check["iteration"], check["score"]))
        if best is None or stopper.best_score < best[1].best_score:
            best = (offset, stopper)
    offset, stopper = best
    if stopper is not phases[-1][1]:
        model.set_weights(stopper.best_weights)
    iteration = offset + int(stopper.best_iteration or 0)
    score = float(stopper.best_score)
    return {"score": score, "iteration": iteration, "history": history, "seconds": seconds}
