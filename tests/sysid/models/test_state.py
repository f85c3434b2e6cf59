"""The state of a new experiment from its first measured outputs: encoder history, fitted state,
``Identification.simulate(u, y_initial)`` and its errors."""

import dataclasses

import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.sysid import RecipeConfig, build_simulator, fit_initial_state, identify
from keras_mgu.sysid.models.state import encoder_history, state_model
from tests.helpers import NETWORK_CLASSES

TINY = RecipeConfig(
    units=(4,), iterations=6, steps_per_epoch=3, validation_checks=3, model_classes=NETWORK_CLASSES
)


def test_encoder_history_pads_short_histories_with_the_first_sample():
    u, y = np.arange(3.0)[:, None], 10 + np.arange(3.0)[:, None]
    u_past, y_past = encoder_history(u, y, lag=5)
    assert u_past.shape == (1, 5, 1) and y_past.shape == (1, 5, 1)
    np.testing.assert_array_equal(u_past[0, :, 0], [0, 0, 0, 1, 2])
    np.testing.assert_array_equal(y_past[0, :, 0], [10, 10, 10, 11, 12])
    u_past, _ = encoder_history(np.arange(9.0)[:, None], np.arange(9.0)[:, None], lag=4)
    np.testing.assert_array_equal(u_past[0, :, 0], [5, 6, 7, 8])


def test_state_model_reproduces_the_simulator_from_its_learned_state(rng):
    model = build_simulator(2, 1, units=(5, 3), seed=0)
    for i, n in enumerate((5, 3)):
        model.get_layer(f"initial_state_{i}_0").state.assign(rng.normal(size=n).astype("float32"))
    sim, states = state_model(model)
    u = rng.normal(size=(2, 12, 2)).astype("float32")
    expected = model.predict(u, verbose=0)
    got = sim.predict([u, *(np.tile(s, (2, 1)) for s in states)], verbose=0)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_the_state_model_is_made_once_per_network_and_reads_its_learned_state_each_time(rng):
    """The kept model (and its compiled prediction) fits as a fresh one does, to the bit."""
    from keras_mgu.sysid.models import state

    model = build_simulator(1, 1, units=3, seed=0)
    u = rng.normal(size=(2, 8, 1)).astype("float32")
    y = rng.normal(size=(2, 8, 1))
    sim, _ = state_model(model)
    kept, fitted = fit_initial_state(model, u, y)
    assert kept is sim and state_model(model)[0] is sim
    state._STATE_MODELS.clear()
    fresh, refitted = fit_initial_state(model, u, y)
    assert fresh is not sim
    np.testing.assert_array_equal(fitted[0], refitted[0])
    learned = rng.normal(size=3).astype("float32")
    model.get_layer("initial_state_0_0").state.assign(learned)
    np.testing.assert_array_equal(state_model(model)[1][0], learned)


def test_fitted_state_beats_the_learned_state_on_a_record_that_starts_elsewhere(rng):
    """The plant is the model itself, started from another state than the learned one."""
    model = build_simulator(1, 1, units=6, seed=3)
    bias = model.get_layer("mgu_0").weights[2]
    bias.assign(np.r_[np.full(6, -3.0), np.zeros(6)].astype("float32"))  # slow forget gate
    sim, (learned,) = state_model(model)
    true_state = learned + rng.normal(scale=1.0, size=learned.shape).astype("float32")
    u = rng.normal(size=(1, 80, 1)).astype("float32")
    y = sim.predict([u, true_state[None]], verbose=0)[0]
    n = 15
    _, (fitted,) = fit_initial_state(model, u[0, :n], y[:n])
    from_learned = sim.predict([u, learned[None]], verbose=0)[0]
    from_fitted = sim.predict([u, fitted[None]], verbose=0)[0]
    err = lambda a, part: float(np.sqrt(np.mean((a[part] - y[part]) ** 2)))  # noqa: E731
    given, rest = slice(0, n), slice(n, None)
    # Six states seen through one output for 15 samples are partly unobservable:
    # the fit matches the given samples closely and the rest only better.
    assert err(from_fitted, given) < 0.3 * err(from_learned, given)
    assert err(from_fitted, rest) < 0.7 * err(from_learned, rest)


@pytest.fixture(scope="module")
def tanks_found():
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    return data, identify(data, TINY, restarts=1)


def test_y_initial_keeps_the_measured_samples_and_simulates_the_rest(tanks_found):
    data, found = tanks_found
    test = data.test
    for n in (1, 5):
        y_sim = found.simulate(test.u, test.y[:n])
        assert y_sim.shape == test.y.shape and np.all(np.isfinite(y_sim))
        np.testing.assert_array_equal(y_sim[:n], test.y[:n])
    n = 5
    expected = np.sqrt(np.mean((found.simulate(test.u, test.y[:n])[n:] - test.y[n:]) ** 2))
    assert found.score(test, "benchmark", n_initial=n) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    "y_initial, match",
    [
        (np.zeros((0, 1)), "between 1 and"),
        (np.zeros((160, 1)), "between 1 and"),
        (np.zeros((500, 1)), "between 1 and"),
        (np.full((3, 1), np.nan), "NaN"),
        (np.zeros((3, 2)), r"shape \(N, 1\)"),
        (np.zeros(3), r"shape \(N, 1\)"),
    ],
)
def test_bad_y_initial_is_refused_with_what_was_expected(tanks_found, y_initial, match):
    data, found = tanks_found
    with pytest.raises(ValueError, match=match):
        found.simulate(data.test.u, y_initial)


def test_encoder_model_uses_the_first_outputs_of_a_new_experiment():
    """A long record trains the encoder; y_initial then changes the simulation's start."""
    rng = np.random.default_rng(0)
    u = rng.normal(size=(4000, 1))
    y = np.zeros((4000, 1))
    for k in range(1, 4000):
        y[k] = 0.95 * y[k - 1] + 0.3 * np.tanh(u[k - 1])
    est, val = datasets.Record(u[:3000], y[:3000]), datasets.Record(u[3000:], y[3000:])
    data = datasets.SysIdData(est, val, val)
    config = dataclasses.replace(TINY, iterations=30, steps_per_epoch=10, n_initial=4)
    found = identify(data, dataclasses.replace(config, linear_prior=False), restarts=1)
    assert found.config.initial_state == "encoder"
    assert {"u_past", "y_past"} <= {layer.name for layer in found.model.layers}
    shifted = val.y + 3.0  # a record whose outputs start far from the estimation start
    a = found.simulate(val.u, shifted[:4])
    b = found.simulate(val.u, val.y[:4])
    np.testing.assert_array_equal(a[:4], shifted[:4])
    assert not np.allclose(a[4:], b[4:])
