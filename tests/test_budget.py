"""TimeBudget: fit ends within its wall time and the decay schedule shrinks with the run."""

import time

import keras
import numpy as np
import pytest

from keras_mgu.callbacks import LearningRateDecayPoints, TimeBudget, decay_epochs


class _SlowEpochs(keras.callbacks.Callback):
    """Every epoch takes at least ``seconds``."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def on_epoch_end(self, epoch, logs=None):
        time.sleep(self.seconds)


def _fit(callbacks, epochs):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.1), "mse")
    x = np.ones((8, 2), "float32")
    return model.fit(x, x[:, :1], epochs=epochs, verbose=0, callbacks=callbacks)


def test_run_is_planned_after_its_second_epoch_and_the_schedule_follows():
    schedule = LearningRateDecayPoints((0.5, 0.8), decay_rate=0.1)
    budget = TimeBudget(4.0, schedule)
    start = time.perf_counter()
    history = _fit([_SlowEpochs(0.4), schedule, budget], epochs=100)
    elapsed = time.perf_counter() - start
    ran = len(history.history["loss"])
    assert budget.planned_epochs is not None and 4 <= budget.planned_epochs <= 10
    assert ran == budget.planned_epochs and budget.stopped_epoch == ran
    assert elapsed < 4.0 + 0.8
    assert schedule.decay_epochs == [max(3, d) for d in decay_epochs((0.5, 0.8), ran)]
    rates = history.history["learning_rate"]
    assert rates[0] == pytest.approx(0.1) and rates[-1] < rates[0]


def test_a_run_that_fits_is_left_alone():
    schedule = LearningRateDecayPoints((0.5,), decay_rate=0.1)
    budget = TimeBudget(60.0, schedule)
    history = _fit([schedule, budget], epochs=6)
    assert len(history.history["loss"]) == 6 and budget.stopped_epoch is None
    assert budget.planned_epochs == 6 and schedule.decay_epochs == [3]


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan"), True, "10"])
def test_bad_budgets_are_refused(seconds):
    with pytest.raises(ValueError, match="positive number"):
        TimeBudget(seconds)
