"""Racing: the rule on given scores, the checkpoint in a Keras fit, and whole identifications
where the class that wins is never stopped and one far behind is."""

import dataclasses
import math
import types

import keras
import numpy as np
import pytest

from keras_mgu import datasets, sysid
from keras_mgu.datasets import Normalizer, Record
from keras_mgu.sysid.choice.racing import (
    RACE_FACTOR,
    RaceCheckpoint,
    checkpoint_iteration,
    goes_on,
    network_scale,
    race_against,
    with_stop,
)
from keras_mgu.sysid.models.signals import SignalPath
from tests.helpers import END_TO_END


@pytest.mark.parametrize(
    "iterations, every, expected",
    [(2000, 20, 500), (2000, 30, 510), (2000, 500, 500), (2000, 700, 700), (10, 100, 10)],
)
def test_the_checkpoint_is_the_first_check_from_a_quarter_on(iterations, every, expected):
    assert checkpoint_iteration(iterations, every) == expected


def test_the_rule_on_given_scores():
    reference = 0.02  # the best finished run's choice RMSE
    edge = RACE_FACTOR * reference * math.sqrt(2.0)  # a validation RMSE whose floor is the bound
    assert goes_on([edge * 0.99], [1.0], reference)
    assert not goes_on([edge * 1.01], [1.0], reference)
    # A network of the residual: its units are scaled down to the standardised outputs.
    assert goes_on([edge * 1.01 / 0.5], [0.49], reference)
    assert not goes_on([edge * 1.01 / 0.5], [0.5], reference)
    # A population goes on while any member may still win.
    assert goes_on([10.0, edge * 0.5], [1.0, 1.0], reference)
    assert not goes_on([10.0, edge * 2], [1.0, 1.0], reference)
    # A member with no finite check is behind; nothing finished: nothing to race against.
    assert not goes_on([math.nan], [1.0], reference)
    assert not goes_on([math.inf], [1.0], reference)
    assert goes_on([10.0], [1.0], math.inf)
    with pytest.raises(ValueError, match="one each"):
        goes_on([1.0, 2.0], [1.0], reference)


def _finished(score, not_kept=None):
    return types.SimpleNamespace(choice_rmse=score, not_kept=not_kept)


def _option(name, inner=None):
    path = SignalPath(Normalizer(np.zeros(1), np.ones(1), np.zeros(1), np.ones(1)), None, inner)
    return types.SimpleNamespace(name=name, path=path)


def test_a_run_races_the_best_kept_run_finished_before_it():
    finished = [_finished(0.5), _finished(0.01, not_kept="ran off (up)"), _finished(0.2)]
    race = race_against([_option("narx")], finished)
    assert race.reference == 0.2  # the one that ran off is no reference
    assert race.scales == [1.0]
    assert race_against([_option("polynomial")], finished) is None  # a quick class
    assert race_against([_option("network")], [_finished(0.01, not_kept="ran off (up)")]) is None
    assert race_against([_option("network")], []) is None


def test_the_residual_networks_scale_is_its_smallest_deviation():
    inner = Normalizer(np.zeros(2), np.ones(2), np.zeros(2), np.array([0.3, 0.7]))
    assert network_scale(_option("linear+network", inner).path) == pytest.approx(0.3)
    assert network_scale(_option("network").path) == 1.0


class _Counting(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1


def _fit(race, iterations=40, steps_per_epoch=10):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.ones((8 * iterations, 2), "float32"), np.ones((8 * iterations, 1), "float32")
    counting = _Counting()
    model.fit(
        x, y, batch_size=8, epochs=iterations // steps_per_epoch,
        steps_per_epoch=steps_per_epoch, verbose=0, callbacks=[race, counting],
    )  # fmt: skip
    return counting.batches


def test_the_checkpoint_stops_a_fit_at_its_check_only_where_the_run_is_behind():
    reads = []
    behind = RaceCheckpoint(reference=0.01, scales=[1.0])
    behind.watch(lambda: reads.append(len(reads)) or [1.0], iterations=40, every=4)
    assert _fit(behind) == 12  # the first check from 10 on: 12
    assert reads == [0]  # read once, at the checkpoint
    assert behind.stopped == {
        "iteration": 12, "iterations": 40, "floors": [pytest.approx(1 / math.sqrt(2))],
        "reference": 0.01,
    }  # fmt: skip
    ahead = RaceCheckpoint(reference=0.01, scales=[1.0])
    ahead.watch(lambda: [0.02], iterations=40, every=4)
    assert _fit(ahead) == 40 and ahead.stopped is None
    with pytest.raises(RuntimeError, match="watch"):
        _fit(RaceCheckpoint(0.01, [1.0]))


def _saturating_record(n, seed):
    """A first-order plant behind a hard saturation: the linear model is far from it."""
    rng = np.random.default_rng(seed)
    u = np.repeat(rng.uniform(-3, 3, size=(n // 20 + 1, 1)), 20, axis=0)[:n]
    y = np.zeros((n, 1))
    for k in range(1, n):
        y[k] = 0.8 * y[k - 1] + 0.2 * np.clip(u[k - 1], -0.5, 0.5) * 4
    return Record(u, y + 0.01 * rng.normal(size=y.shape))


@END_TO_END
def test_the_class_that_wins_is_never_stopped():
    """NARX, far better than the linear class it races on a saturating plant, runs to its end
    and is chosen."""
    data = datasets.SysIdData(
        _saturating_record(900, 0), _saturating_record(300, 1), _saturating_record(300, 2)
    )
    config = sysid.RecipeConfig(model_classes=("linear", "narx"), iterations=80)
    found = sysid.identify(data, config, restarts=1, seed=0)
    narx = next(run for run in found.runs if run.structure == "narx")
    linear = next(run for run in found.runs if run.structure == "linear")
    assert narx.stopped is None
    assert found.runs[found.best].structure == "narx"
    assert narx.choice_rmse < linear.choice_rmse / 2


@END_TO_END
def test_a_class_far_behind_is_stopped_at_its_checkpoint_and_not_chosen():
    """A small network with a tiny learning rate races the polynomial on a Duffing oscillator:
    it stops at its checkpoint, says so in the class table, and the polynomial is kept."""
    plant = datasets.zoo_plant("duffing", n_samples=700, seed=1)
    config = sysid.RecipeConfig(
        model_classes=("polynomial", "network"), units=(4,), iterations=40,
        validation_checks=10, steps_per_epoch=10, learning_rate=1e-5,
    )  # fmt: skip
    found = sysid.identify(plant.data, config, restarts=1, seed=0)
    network = next(run for run in found.runs if run.structure == "network")
    polynomial = next(run for run in found.runs if run.structure == "polynomial")
    assert network.stopped is not None
    assert network.stopped["iteration"] == 12 and network.stopped["iterations"] == 40
    assert network.stopped["reference"] == pytest.approx(polynomial.choice_rmse)
    assert network.stopped["floor"] > RACE_FACTOR * polynomial.choice_rmse
    assert network.best_iteration <= 12  # its weights are those of its checks so far
    assert found.runs[found.best].structure == "polynomial"
    row = next(r for r in found.class_table if r["class"] == "network")
    assert (row["stopped_at"], row["stopped_of"]) == (12, 40)
    assert network.stopper.history[-1]["iteration"] <= 12
    # Without racing the same network does all its iterations.
    unraced = dataclasses.replace(config, racing=False)
    alone = sysid.identify(plant.data, unraced, restarts=1, seed=0)
    assert all(run.stopped is None for run in alone.runs)
    assert (
        next(r for r in alone.runs if r.structure == "network").stopper.history[-1]["iteration"]
        == 40
    )


@dataclasses.dataclass
class _Run:
    stopped: dict | None = None


def test_each_member_of_a_stopped_population_keeps_its_own_floor():
    race = RaceCheckpoint(0.01, [1.0, 0.5])
    run = _Run()
    assert with_stop(run, race) is run  # not stopped: the run as it was
    race.stopped = {"iteration": 5, "iterations": 20, "floors": [0.3, 0.2], "reference": 0.01}
    assert with_stop(run, race, 1).stopped == {
        "iteration": 5, "iterations": 20, "floor": 0.2, "reference": 0.01
    }  # fmt: skip
    assert with_stop(run, race, 0).stopped["floor"] == 0.3
    assert with_stop(run, None) is run
