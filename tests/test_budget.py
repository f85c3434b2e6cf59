"""TimeBudget: fit ends within its wall time and the decay schedule shrinks with the run.

The callback's clock is replaced by a fake one that each epoch advances by a fixed amount, so the
tests do not depend on the machine's speed.
"""

import keras
import numpy as np
import pytest

from keras_mgu.callbacks import LearningRateDecayPoints, TimeBudget, decay_epochs
from keras_mgu.callbacks import budget as budget_module


class _Clock:
    """A fake ``perf_counter``: the first epoch takes ``first`` s (compiling), the rest ``each``."""

    def __init__(self, first, each):
        self.now, self.first, self.each = 0.0, first, each

    def __call__(self):
        return self.now


class _Advance(keras.callbacks.Callback):
    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def on_epoch_end(self, epoch, logs=None):
        self.clock.now += self.clock.first if epoch == 0 else self.clock.each


def _fit(callbacks, epochs):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.1), "mse")
    x = np.ones((8, 2), "float32")
    return model.fit(x, x[:, :1], epochs=epochs, verbose=0, callbacks=callbacks)


@pytest.fixture
def clock(monkeypatch):
    fake = _Clock(first=3.0, each=1.0)
    monkeypatch.setattr(budget_module.time, "perf_counter", fake)
    return fake


def test_run_is_planned_after_its_second_epoch_and_the_schedule_follows(clock):
    schedule = LearningRateDecayPoints((0.5, 0.8), decay_rate=0.1)
    budget = TimeBudget(10.0, schedule)
    history = _fit([_Advance(clock), schedule, budget], epochs=100)
    # After two epochs 4 s are spent at 1 s an epoch: 2 + floor(6 / 1) = 8 epochs in all.
    assert budget.planned_epochs == 8 and len(history.history["loss"]) == 8
    assert budget.stopped_epoch == 8
    assert schedule.decay_epochs == [max(3, d) for d in decay_epochs((0.5, 0.8), 8)] == [4, 7]
    rates = history.history["learning_rate"]
    assert rates[0] == pytest.approx(0.1) and rates[3] == pytest.approx(0.01)
    assert rates[-1] == pytest.approx(0.001)


def test_a_first_epoch_over_half_the_budget_does_not_stop_the_run(clock):
    clock.first = 6.0  # compilation: 6 s of a 10 s budget
    budget = TimeBudget(10.0)
    history = _fit([_Advance(clock), budget], epochs=100)
    # Two epochs spend 7 s; 3 s are left for 1 s epochs: 2 + 3 epochs in all.
    assert len(history.history["loss"]) == 5 == budget.planned_epochs


def test_a_run_that_fits_is_left_alone(clock):
    schedule = LearningRateDecayPoints((0.5,), decay_rate=0.1)
    budget = TimeBudget(60.0, schedule)
    history = _fit([_Advance(clock), schedule, budget], epochs=6)
    assert len(history.history["loss"]) == 6 and budget.stopped_epoch is None
    assert budget.planned_epochs == 6 and schedule.decay_epochs == [3]


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan"), True, "10"])
def test_bad_budgets_are_refused(seconds):
    with pytest.raises(ValueError, match="positive number"):
        TimeBudget(seconds)
