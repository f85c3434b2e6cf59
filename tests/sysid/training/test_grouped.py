"""GroupedSimulators: K simulators of one structure computed at once, equal to each alone."""

import dataclasses

import keras
import numpy as np
import pytest

from keras_mgu import kernels, native
from keras_mgu.kernels import reference
from keras_mgu.sysid import PlannedRun, train_population, train_simulator
from keras_mgu.sysid.models.network import build_simulator
from keras_mgu.sysid.training import population
from keras_mgu.sysid.training.grouped import GroupedSimulators, grouped_unsupported_reason
from tests.helpers import random_mgu_weights, to_numpy, value_and_grad

from .test_population import TINY, records  # noqa: F401  (a fixture)


def _simulators(count, **kwargs):
    out = []
    for k in range(count):
        with keras.name_scope(f"run_{k}"):
            out.append(build_simulator(2, 1, seed=k, **kwargs))
    return out


def _inputs(rng, count, lag, batch=2, steps=11):
    u = rng.normal(size=(batch, count, steps, 2)).astype("float32")
    if lag is None:
        return u, [u[:, k] for k in range(count)]
    u_past = rng.normal(size=(batch, count, lag, 2)).astype("float32")
    y_past = rng.normal(size=(batch, count, lag, 1)).astype("float32")
    return [u_past, y_past, u], [[u_past[:, k], y_past[:, k], u[:, k]] for k in range(count)]


@pytest.mark.parametrize("use_native", [True, False], ids=["native", "backend"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"units": (5,)},
        {"units": (6, 3), "linear_path": False},
        {"units": (4,), "encoder_lag": 3, "encoder_units": 7},
        {"units": (3,), "learn_initial_state": False},
    ],
    ids=["learned", "stacked-no-linear", "encoder", "zero-state"],
)
def test_grouped_outputs_equal_each_simulator(rng, kwargs, use_native):
    simulators = _simulators(3, **kwargs)
    for s in simulators:  # give the initial states values other than zero
        for w in s.weights:
            if w.path.endswith("state"):
                w.assign(rng.normal(size=w.shape).astype("float32"))
    grouped, alone = _inputs(rng, 3, kwargs.get("encoder_lag"))
    layer = GroupedSimulators(simulators)
    if use_native:
        out = to_numpy(layer(grouped))
    else:
        with native.turned_off():
            out = to_numpy(layer(grouped))
    assert out.shape == (2, 3, 11, 1)
    for k, s in enumerate(simulators):
        np.testing.assert_allclose(out[:, k], to_numpy(s(alone[k])), rtol=1e-5, atol=1e-6)
    # One stacked (K, ...) weight per weight of a simulator, none of the simulators' own.
    first = simulators[0].trainable_weights
    assert [tuple(w.shape) for w in layer.trainable_weights] == [(3, *w.shape) for w in first]


def test_run_views_and_write_back_touch_one_run_only(rng):
    simulators = _simulators(3, units=(4,))
    layer = GroupedSimulators(simulators)
    before = [s.get_weights() for s in simulators]
    view = layer.member(1)
    assert view.name == simulators[1].name
    for got, want in zip(view.get_weights(), before[1], strict=True):
        np.testing.assert_array_equal(got, want)
    new = [w + 1.0 for w in view.get_weights()]
    view.set_weights(new)
    layer.write_back()
    for k, s in enumerate(simulators):
        for got, old, changed in zip(s.get_weights(), before[k], new, strict=True):
            np.testing.assert_array_equal(got, changed if k == 1 else old)


@pytest.mark.parametrize("use_native", [True, False], ids=["native", "backend"])
def test_grouped_sequence_matches_the_reference_and_its_gradients(rng, use_native):
    groups, batch, steps, d, h = 3, 2, 7, 2, 5
    x = rng.normal(size=(groups, batch, steps, d)).astype("float32")
    h0 = rng.normal(size=(groups, batch, h)).astype("float32")
    weights = [random_mgu_weights(rng, d, h) for _ in range(groups)]
    w, u, b = (np.stack(parts) for parts in zip(*weights, strict=True))

    def loss(x, h0, w, u, b):
        states = kernels.grouped_sequence(x, h0, w, u, b)
        return keras.ops.sum(states * keras.ops.cos(states))

    def per_group(x, h0, w, u, b):
        total = 0.0
        for g in range(groups):
            states = kernels.mgu_sequence(x[g], h0[g], w[g], u[g], b[g], None)[0]
            total = total + keras.ops.sum(states * keras.ops.cos(states))
        return total

    if use_native:
        states = to_numpy(kernels.grouped_sequence(x, h0, w, u, b))
        value, grads = value_and_grad(loss, [x, h0, w, u, b])
    else:
        with native.turned_off():
            states = to_numpy(kernels.grouped_sequence(x, h0, w, u, b))
            value, grads = value_and_grad(loss, [x, h0, w, u, b])
    for g in range(groups):
        expected = reference.mgu_sequence(x[g], w[g], u[g], b[g], h0[g])[0]
        np.testing.assert_allclose(states[g], expected, rtol=1e-5, atol=1e-5)
    want_value, want = value_and_grad(per_group, [x, h0, w, u, b])
    assert value == pytest.approx(want_value, rel=1e-5)
    for got, ref in zip(grads, want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_grouped_sequence_refuses_bad_shapes(rng):
    x = np.zeros((2, 1, 3, 2), "float32")
    h0 = np.zeros((2, 1, 4), "float32")
    w, u, b = np.zeros((2, 2, 8), "float32"), np.zeros((2, 4, 8), "float32"), None
    with pytest.raises(ValueError, match=r"\(G, H, 2H\)"):
        kernels.grouped_sequence(x, h0, w, u[:, :, :6], b)
    with pytest.raises(ValueError, match=r"\(G=3, batch, steps, features\)"):
        kernels.grouped_sequence(x, h0, w, np.zeros((3, 4, 8), "float32"), b)


def test_simulators_that_cannot_be_grouped_say_why():
    assert grouped_unsupported_reason([]) == "there are no simulators"
    gru = _simulators(2, units=(4,), cell="gru")
    assert "has no grouped form" in grouped_unsupported_reason(gru)
    mixed = [*_simulators(1, units=(4,)), *_simulators(1, units=(5,))]
    assert "differ in shape" in grouped_unsupported_reason(mixed)
    encoder = [*_simulators(1, units=(4,)), *_simulators(1, units=(4,), encoder_lag=2)]
    assert "layers differ" in grouped_unsupported_reason(encoder)
    with pytest.raises(ValueError, match="cannot be grouped: .*no grouped form"):
        GroupedSimulators(gru)
    x = keras.Input((None, 2))
    other = keras.Model(x, keras.layers.Dense(1, name="head")(x))
    assert "not built by build_simulator" in grouped_unsupported_reason([other])


def test_populations_of_alike_runs_are_grouped(records):  # noqa: F811
    _, est, val = records
    config = TINY.resolved(est.n_samples)
    branches = _simulators(2, units=(5,))
    assert population.groupable([PlannedRun(est, val, config, s) for s in (0, 1)], branches)
    other = dataclasses.replace(config, window=config.window - 1)
    mixed = [PlannedRun(est, val, config, 0), PlannedRun(est, val, other, 1)]
    assert not population.groupable(mixed, branches)
    clipped = dataclasses.replace(config, clipnorm=1.0)
    assert not population.groupable([PlannedRun(est, val, clipped, s) for s in (0, 1)], branches)
    assert not population.groupable([PlannedRun(est, val, config, 0)], branches[:1])


def test_a_grouped_population_scores_each_runs_own_training_loss(records):  # noqa: F811
    """With the training loss in the score, each run's is its own, as when trained alone."""
    _, est, val = records
    config = dataclasses.replace(TINY, score_weights={"val_rmse": 1.0, "loss": 0.5})
    config = config.resolved(est.n_samples)
    seeds = [4, 1]
    alone = [train_simulator(est, val, config, s) for s in seeds]
    together = train_population([PlannedRun(est, val, config, s) for s in seeds])
    for a, b in zip(alone, together, strict=True):
        np.testing.assert_allclose(
            [h["loss"] for h in b.stopper.train_history],
            [h["loss"] for h in a.stopper.train_history],
            rtol=1e-4,
        )
        np.testing.assert_allclose(
            [h["score"] for h in b.stopper.history], [h["score"] for h in a.stopper.history],
            rtol=1e-4,
        )  # fmt: skip


def test_identify_trains_alike_restarts_as_one_grouped_model(records, monkeypatch):  # noqa: F811
    data, _, _ = records
    seen = []
    original = population._grouped_model

    def spy(branches):
        seen.append(len(branches))
        return original(branches)

    monkeypatch.setattr(population, "_grouped_model", spy)
    config = dataclasses.replace(TINY, linear_prior=False)
    from keras_mgu.sysid import identify

    identify(data, config, restarts=4, seed=0)
    assert seen == [3]  # the first run alone, then the other three at once
