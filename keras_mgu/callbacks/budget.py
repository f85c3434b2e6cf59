"""``TimeBudget``: end ``fit`` within a wall-time budget, shortening its schedule to match."""

from __future__ import annotations

import math
import time

import keras

from keras_mgu.callbacks.decay import LearningRateDecayPoints, decay_epochs

__all__ = ["TimeBudget"]


@keras.saving.register_keras_serializable(package="keras_mgu")
class TimeBudget(keras.callbacks.Callback):
    """Stop training before ``seconds`` of wall time are spent.

    At the end of the second epoch (the first one includes compilation) the
    run's length is planned: with ``t`` the second epoch's time and ``s`` the
    time spent so far, the run keeps ``min(E, 2 + floor((seconds - s) / t))``
    of its ``E`` epochs. When that is fewer than ``E`` and a
    :class:`LearningRateDecayPoints` ``schedule`` is given, its decay epochs
    are recomputed for the shorter run, so the learning rate still decays at
    the same fractions of it. Training stops after the planned epoch, or
    earlier when the next epoch would overrun the budget (judged by the last
    epoch's time from the second epoch on; the first only stops a run that has
    already spent the budget).

    Args:
        seconds: Wall-time budget of the ``fit`` call.
        schedule: The run's decay schedule, shortened with the run.

    Attributes:
        planned_epochs: Epochs the run keeps (``None`` before the plan).
        stopped_epoch: Epoch (from 1) after which it stopped the run, or None.
    """

    def __init__(self, seconds: float, schedule: LearningRateDecayPoints | None = None) -> None:
        super().__init__()
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise ValueError(f"`seconds` must be a positive number; received {seconds!r}.")
        self.seconds = float(seconds)
        if schedule is not None and schedule.unit != "epoch":
            raise ValueError(
                "TimeBudget shortens a schedule by whole epochs; give it a "
                f"LearningRateDecayPoints with unit='epoch' (received unit={schedule.unit!r})."
            )
        self.schedule = schedule
        self.planned_epochs: int | None = None
        self.stopped_epoch: int | None = None

    def on_train_begin(self, logs: dict | None = None) -> None:
        self._start = time.perf_counter()
        self._epoch_start = self._start
        self.planned_epochs, self.stopped_epoch = None, None

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch_start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        now = time.perf_counter()
        spent, last = now - self._start, now - self._epoch_start
        if epoch == 1:
            self._plan(spent, last)
        done = epoch + 1
        # The first epoch's time includes compilation: it does not predict the next.
        over = spent + (last if epoch else 0.0) > self.seconds
        if (self.planned_epochs is not None and done >= self.planned_epochs) or over:
            if done < self.params.get("epochs", done + 1):
                self.model.stop_training = True
                self.stopped_epoch = done

    def _plan(self, spent: float, last: float) -> None:
        epochs = int(self.params.get("epochs") or 0)
        fit = 2 + math.floor(max(0.0, self.seconds - spent) / max(last, 1e-9))
        self.planned_epochs = max(2, min(epochs, fit))
        if self.schedule is not None and self.planned_epochs < epochs:
            self.schedule.decay_epochs = [
                max(3, d) for d in decay_epochs(self.schedule.decay_points, self.planned_epochs)
            ]

    def get_config(self) -> dict:
        return {"seconds": self.seconds}
