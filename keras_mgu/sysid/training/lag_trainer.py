"""Training a lag model on short windows that start from measured outputs.

A lag model (:func:`~keras_mgu.sysid.models.lag_model.lag_simulator`: the NARX and
the linear-loop classes) maps ``[u_past, y_past, u]`` to ``y``. Its training
windows are cut at every start ``s`` of the (standardised) estimation record,
each experiment on its own::

    u_past = u[s-L : s],  y_past = y[s-L : s]     measured: the state at s
    u      = u[s : s+T],  target  = y[s : s+T]     simulated free-run, all T scored

so the loss is the simulation error over ``T`` steps from the measured
outputs just before the window, never one simulation through the whole
record. Two phases, each a fixed number of Adam steps (no weight decay, so
nothing pulls the linear part towards zero; gradient norm clipped at 1):

1. ``one_step_iterations`` steps on windows of one sample (the one-step
   prediction error, as a NARX model is first fitted);
2. ``iterations`` steps on windows of ``T`` samples, the learning rate
   multiplied by ``decay_rate`` at the ``decay_points`` fractions of the phase.

The validation record is simulated free-run from its first ``L`` measured
samples at the start, after phase 1 and every ``iterations //
validation_checks`` steps of phase 2; the weights with the lowest validation
RMSE are kept (the start, where the model is the linear model, included).
Windows are drawn in an order set by ``seed`` alone: the same seed, backend
and machine give the same model.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import keras
import numpy as np

from keras_mgu.datasets import Record

__all__ = ["WindowSchedule", "measured_windows", "train_on_windows", "validation_rmse"]

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


def measured_windows(record: Record, lag: int, window: int) -> tuple[np.ndarray, ...]:
    """Every window of ``record`` with ``lag`` measured samples before it.

    Returns ``(u_past (W, lag, n_u), y_past (W, lag, n_y), u (W, T, n_u),
    y (W, T, n_y))`` as float32, ``W`` windows over all starts ``s`` of each
    experiment (``lag <= s <= n - T``). Raises ``ValueError`` when no
    experiment holds ``lag + window`` samples.
    """
    parts = []
    u, y = record.u, record.y
    for first, stop in record.experiments:
        starts = np.arange(first + lag, stop - window + 1)
        if len(starts):
            past, future = starts[:, None] + np.arange(-lag, 0), starts[:, None] + np.arange(window)
            parts.append((u[past], y[past], u[future], y[future]))
    if not parts:
        raise ValueError(
            f"No estimation experiment holds {lag + window} samples ({lag} to set the state, "
            f"{window} to simulate); give a longer record or a shorter window."
        )
    return tuple(np.concatenate(p).astype("float32") for p in zip(*parts))


def validation_rmse(model: keras.Model, record: Record, lag: int) -> float:
    """RMSE of ``record`` simulated from its first ``lag`` samples, scored after them."""
    u, y = record.u.astype("float32"), record.y
    out = model([u[None, :lag], y[None, :lag].astype("float32"), u[None, lag:]], training=False)
    err = keras.ops.convert_to_numpy(out)[0].astype(np.float64) - y[lag:]
    return float(np.sqrt(np.mean(err**2))) if np.all(np.isfinite(err)) else float("inf")


class _KeepBest(keras.callbacks.Callback):
    """Scores the validation record after every epoch of ``per_epoch`` steps; keeps the best."""

    def __init__(self, record: Record, lag: int, offset: int, per_epoch: int, keeper: dict):
        super().__init__()
        self.record, self.lag, self.keeper = record, lag, keeper
        self.offset, self.per_epoch = offset, per_epoch

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        step = self.offset + (epoch + 1) * self.per_epoch
        check(self.model, self.record, self.lag, step, self.keeper)


def check(model: keras.Model, record: Record, lag: int, iteration: int, keeper: dict) -> None:
    """Scores ``record``; stores the weights in ``keeper`` when they validate best so far."""
    score = validation_rmse(model, record, lag)
    keeper.setdefault("history", []).append((iteration, score))
    if score < keeper.get("score", np.inf):
        keeper.update(score=score, iteration=iteration, weights=model.get_weights())


def train_on_windows(
    model: keras.Model,
    estimation: Record,
    validation: Record,
    schedule: WindowSchedule,
    seed: int,
    verbose: int = 0,
) -> dict[str, Any]:
    """Train ``model`` (standardised records, lag ``L`` from its inputs) as the module says.

    Returns a dict: ``score`` (the best validation RMSE, standardised),
    ``iteration`` (when it was reached; 0: the start), ``history`` (``(step,
    rmse)`` pairs) and ``seconds``; the model holds the best weights.
    """
    lag = model.inputs[0].shape[1]
    started, keeper = time.perf_counter(), {}
    rng = np.random.default_rng(seed)
    check(model, validation, lag, 0, keeper)
    done = 0
    if schedule.one_step_iterations:
        data = measured_windows(estimation, lag, 1)
        steps, rate = schedule.one_step_iterations, schedule.learning_rate
        _fit(model, data, steps, ONE_STEP_BATCH, rate, rng, verbose)
        done = schedule.one_step_iterations
        check(model, validation, lag, done, keeper)
    data = measured_windows(estimation, lag, schedule.window)
    every = max(1, schedule.iterations // schedule.validation_checks)
    lr = keras.optimizers.schedules.PiecewiseConstantDecay(
        [int(p * schedule.iterations) for p in schedule.decay_points],
        [
            schedule.learning_rate * schedule.decay_rate**k
            for k in range(len(schedule.decay_points) + 1)
        ],
    )
    keep = _KeepBest(validation, lag, done, every, keeper)
    _fit(model, data, schedule.iterations, WINDOW_BATCH, lr, rng, verbose, every, keep)
    model.set_weights(keeper["weights"])
    keeper.pop("weights")
    keeper["seconds"] = time.perf_counter() - started
    return keeper


def _fit(model, data, iterations, batch, learning_rate, rng, verbose, every=None, callback=None):
    """``iterations`` Adam steps on batches drawn from ``data`` by ``rng``."""
    u_past, y_past, u, y = data
    n = len(u)
    batch = min(batch, n)
    order = np.concatenate([rng.permutation(n) for _ in range(-(-iterations * batch // n))])
    take = order[: iterations * batch]
    model.compile(optimizer=keras.optimizers.Adam(learning_rate, clipnorm=1.0), loss="mse")
    every = every or iterations
    epochs = -(-iterations // every)
    model.fit(
        [u_past[take], y_past[take], u[take]], y[take], batch_size=batch,
        epochs=epochs, steps_per_epoch=every, shuffle=False, verbose=verbose,
        callbacks=[callback] if callback else [],
    )  # fmt: skip
