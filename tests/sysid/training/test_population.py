"""Population training: K runs at once give the numbers of K runs one by one."""

import dataclasses

import keras
import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.callbacks import PopulationEarlyStopping
from keras_mgu.callbacks.population import weighted_rmse
from keras_mgu.datasets import Normalizer
from keras_mgu.sysid import (
    PlannedRun,
    identify,
    population_groups,
    train_population,
    train_simulator,
)
from tests.helpers import END_TO_END, short_network_config

TINY = short_network_config(5, 30, 3)
ENCODER = dataclasses.replace(
    TINY, window=24, batch_size=3, initial_state="encoder", n_initial=4, units=(4, 3)
)


@pytest.fixture(scope="module")
def records():
    data = datasets.simulate_cascaded_tanks(n_samples=240, seed=0)
    norm = Normalizer.fit(data.estimation)
    return data, norm.transform(data.estimation), norm.transform(data.validation)


@pytest.mark.parametrize(
    "config",
    [TINY, ENCODER, *(dataclasses.replace(TINY, cell=c, iterations=12) for c in ("gru", "lstm"))],
    ids=["learned", "encoder", "keras-gru", "keras-lstm"],
)
def test_population_equals_runs_one_by_one(records, config):
    """Also Keras's GRU and LSTM (``--compare``): their runs train side by side as branches."""
    _, est, val = records
    config = config.resolved(est.n_samples)
    seeds = [7, 0]  # two branches, not in seed order
    alone = [train_simulator(est, val, config, s) for s in seeds]
    together = train_population([PlannedRun(est, val, config, s) for s in seeds])
    for a, b in zip(alone, together, strict=True):
        assert b.seed == a.seed and b.best_iteration == a.best_iteration
        np.testing.assert_allclose(
            [h["score"] for h in b.stopper.history], [h["score"] for h in a.stopper.history],
            rtol=2e-5,
        )  # fmt: skip
        for wa, wb in zip(a.model.get_weights(), b.model.get_weights(), strict=True):
            np.testing.assert_allclose(wb, wa, rtol=1e-4, atol=1e-5)
        # The branch is the run's own simulator, usable on its own.
        u = val.u[None, :20].astype("float32")
        if config.initial_state == "learned":
            np.testing.assert_allclose(
                b.model.predict(u, verbose=0), a.model.predict(u, verbose=0), atol=1e-4
            )
    assert together[0].model.name == alone[0].model.name  # names restored after training


@END_TO_END
def test_identify_chooses_the_same_run_either_way(records):
    data, _, _ = records
    config = dataclasses.replace(TINY, linear_prior=False)
    one_by_one = identify(data, config, restarts=3, seed=2, population=False)
    at_once = identify(data, config, restarts=3, seed=2, population=True)
    assert at_once.best == one_by_one.best
    assert [r.seed for r in at_once.runs] == [r.seed for r in one_by_one.runs] == [2, 1002, 2002]
    # Runs trained side by side report the population's wall time: one figure for both.
    assert at_once.runs[1].seconds == at_once.runs[2].seconds
    np.testing.assert_allclose(
        [r.validation_rmse for r in at_once.runs],
        [r.validation_rmse for r in one_by_one.runs],
        rtol=1e-4,
    )


def test_groups_follow_the_shared_settings():
    a = TINY.resolved(200)
    b = dataclasses.replace(a, units=(9,), window=50)  # may differ inside a population
    c = dataclasses.replace(a, learning_rate=0.003)  # may not
    assert population_groups([a, c, b, c]) == [[0, 2], [1, 3]]


def test_mixed_settings_and_empty_populations_are_refused(records):
    _, est, val = records
    a = TINY.resolved(est.n_samples)
    c = dataclasses.replace(a, learning_rate=0.003)
    with pytest.raises(ValueError, match="must agree on iterations"):
        train_population([PlannedRun(est, val, a, 0), PlannedRun(est, val, c, 1)])
    with pytest.raises(ValueError, match="at least one member"):
        train_population([])


def test_weighted_rmse_is_keras_rmse_with_sample_weights(rng):
    y_true = rng.normal(size=(2, 7, 3)).astype("float32")
    y_pred = rng.normal(size=(2, 7, 3)).astype("float32")
    w = (rng.random((2, 7)) > 0.3).astype("float32")
    metric = keras.metrics.RootMeanSquaredError()
    metric.update_state(y_true, y_pred, sample_weight=w)
    expected = float(keras.ops.convert_to_numpy(metric.result()))
    assert weighted_rmse(y_pred, y_true, w) == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="sum to zero"):
        weighted_rmse(y_pred, y_true, np.zeros_like(w))


def _dense_population(seeds):
    branches = []
    for k, seed in enumerate(seeds):
        keras.utils.set_random_seed(seed)
        with keras.name_scope(f"b{k}"):
            x = keras.Input((None, 1))
            dense = keras.layers.Dense(1, kernel_initializer="zeros")
            branches.append(keras.Model(x, dense(x), name=f"b{k}"))
    inputs = [keras.Input((None, 1)) for _ in branches]
    model = keras.Model(inputs, [b(x) for b, x in zip(branches, inputs, strict=True)])
    model.compile(keras.optimizers.SGD(0.1), ["mse"] * len(branches))
    return model, branches


def test_each_branch_stops_on_its_own_and_keeps_its_best(rng):
    """Both branches learn y = x; branch 1 is validated against -x, so it only gets worse."""
    x = rng.normal(size=(1, 16, 1)).astype("float32")
    model, branches = _dense_population([0, 1])
    w = np.ones((1, 16), "float32")
    stopper = PopulationEarlyStopping(
        branches, [(x, x, w), (x, -x, w)], {"val_rmse": 1.0}, validation_frequency=2, patience=2
    )
    model.fit([x, x], [x, x], epochs=40, verbose=0, callbacks=[stopper])
    improving, worsening = stopper.members
    assert improving.stopped_epoch is None and len(improving.history) == 21
    assert worsening.stopped_epoch is not None and len(worsening.history) == 3
    assert worsening.best_iteration == 1
    for got, best in zip(branches[1].get_weights(), worsening.best_weights, strict=True):
        np.testing.assert_array_equal(got, best)
    assert [h["loss"] for h in improving.train_history][-1] < 1e-3  # its own loss


def test_training_stops_when_every_branch_has_stopped(rng):
    x = rng.normal(size=(1, 16, 1)).astype("float32")
    model, branches = _dense_population([0, 1])
    w = np.ones((1, 16), "float32")
    stopper = PopulationEarlyStopping(
        branches, [(x, -x, w), (x, -x, w)], {"val_rmse": 1.0}, validation_frequency=1, patience=2
    )
    history = model.fit([x, x], [x, x], epochs=40, verbose=0, callbacks=[stopper])
    assert len(history.history["loss"]) == 3


def test_bad_population_callback_arguments_are_refused(rng):
    x = rng.normal(size=(1, 4, 1)).astype("float32")
    _, branches = _dense_population([0])
    data = [(x, x, np.ones((1, 4), "float32"))]
    with pytest.raises(ValueError, match="one validation"):
        PopulationEarlyStopping(branches, data * 2, {"val_rmse": 1.0}, 1)
    with pytest.raises(ValueError, match="'val_rmse' and 'loss'"):
        PopulationEarlyStopping(branches, data, {"val_mae": 1.0}, 1)
    with pytest.raises(ValueError, match="validation_frequency"):
        PopulationEarlyStopping(branches, data, {"val_rmse": 1.0}, 0.5)
