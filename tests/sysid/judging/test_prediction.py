"""k-step-ahead prediction (``Identification.predict``) against its definition, and the batched
state fit it uses against one fit per history."""

import collections
import dataclasses

import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.sysid import RecipeConfig, build_simulator, fit_initial_state, identify
from keras_mgu.sysid.models.state import state_model
from tests.helpers import NETWORK_CLASSES
from tests.sysid.judging.test_noise_model import reference_prediction

TINY = RecipeConfig(
    units=(4,), iterations=6, steps_per_epoch=3, validation_checks=3, model_classes=NETWORK_CLASSES
)


@pytest.fixture(scope="module", params=["learned", "encoder"])
def found(request):
    """Two restarts averaged (an ensemble), the linear model in front when it helps."""
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    window = 64 if request.param == "encoder" else None  # the encoder reads samples before each
    config = dataclasses.replace(TINY, initial_state=request.param, n_initial=6, window=window)
    result = identify(data, config, restarts=2, seed=1)
    result = dataclasses.replace(result, members=(result.best, result.best, 1 - result.best))
    return data.test, result


def gain_of(noise, k):
    """The gain of the smallest gain horizon at least ``k`` (the last one's beyond)."""
    from keras_mgu.sysid.judging.noise_model import GAIN_HORIZONS

    longer = [row for row, h in enumerate(GAIN_HORIZONS) if h >= k]
    return noise.gains[longer[0] if longer else -1]


def reference(found, u, y, k, n):
    """The lag classes' ``y_pred[t] = simulate(u[s-n : t+1], y[s-n : s])[-1]``, ``s = max(n,
    t - k + 1)``; the network classes' ``y_sim[t] + e_hat(t | t - k)``, the recursion written out;
    mixed with the ARX reference's and the last sample by the model's shares (``prediction_mix``).
    """
    counts = collections.Counter(found.members or (found.best,))
    preds = []
    for run in counts:
        alone = found.run_alone(run)
        limit = alone.runs[run].window_horizon
        limit = float("inf") if limit is None else limit
        if alone.runs[run].structure in NETWORK_CLASSES or k > limit:
            sim = alone.simulate(u, y[:n])
            noise, e = alone.runs[run].noise, y - sim
            a, gain = noise.coefficients, gain_of(noise, k)
            preds.append(sim + gain * np.stack(
                [reference_prediction(a[:, j], e[:, j], k) for j in range(y.shape[1])], axis=1
            ))  # fmt: skip
            continue
        out = np.array(y, dtype=float)
        for t in range(n, len(u)):
            s = max(n, t - k + 1)
            out[t] = alone.simulate(u[s - n : t + 1], y[s - n : s])[-1]
        preds.append(out)
    mean = np.average(preds, axis=0, weights=list(counts.values()))
    if found.prediction_mix is None:
        return mean
    # Mixed with the ARX reference's (defined alike), the sample the prediction starts after
    # and the free run from the same first n outputs.
    mix = found.prediction_mix
    share, last_share, free_share = mix.weight(k), mix.last_weight(k), mix.free_weight(k)
    last = np.array(y, dtype=float)
    for t in range(n, len(u)):
        last[t] = y[max(n, t - k + 1) - 1]
    arx = reference(found.reference(), u, y, k, n)
    free = found.simulate(u, y[:n])
    rest = 1 - share - last_share - free_share
    return share * mean + last_share * last + free_share * free + rest * arx


@pytest.fixture(scope="module")
def narx():
    """A NARX run: its prediction starts from the measured lags."""
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    config = dataclasses.replace(TINY, model_classes=("narx",), iterations=20)
    return data.test, identify(data, config, restarts=1, seed=1)


@pytest.mark.parametrize("k", [1, 4])
def test_k_step_prediction_follows_its_definition(found, k):
    test, result = found
    u, y, n = test.u[:28], test.y[:28], 6
    got = result.predict(u, y, steps_ahead=k, n_initial=n)
    assert all(run.noise is not None for run in result.runs)
    np.testing.assert_allclose(got, reference(result, u, y, k, n), rtol=1e-4, atol=1e-5)
    # the tolerance of a lag class (the ARX reference's windows run batched in float32); the
    # model's own part, without the mix, to the tighter one
    alone = dataclasses.replace(result, prediction_mix=None)
    own = alone.predict(u, y, steps_ahead=k, n_initial=n)
    np.testing.assert_allclose(own, reference(alone, u, y, k, n), rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(got[:n], y[:n])


@pytest.mark.parametrize("limit", [None, 0, 2])
@pytest.mark.parametrize("k", [1, 4])
def test_lag_class_prediction_starts_from_the_measured_lags_up_to_its_window_horizon(
    narx, k, limit
):
    """Up to the window horizon from the measured lags, beyond it as a network class."""
    test, result = narx
    run = dataclasses.replace(result.runs[0], window_horizon=limit)
    result = dataclasses.replace(result, runs=[run])
    u, y, n = test.u[:28], test.y[:28], 6
    got = result.predict(u, y, steps_ahead=k, n_initial=n)
    assert run.noise is not None
    np.testing.assert_allclose(got, reference(result, u, y, k, n), rtol=1e-4, atol=1e-5)


def test_the_window_horizon_is_where_the_lags_stop_helping_on_validation(narx):
    """The longest calibrated horizon up to which the windows err no more than the simulation
    with the noise model, on the validation record (recomputed here from the two predictors)."""
    from keras_mgu.sysid.judging.prediction import WINDOW_ALWAYS, WINDOW_HORIZONS, RunSimulator

    test, result = narx
    chosen = result.with_window_horizons(test).runs[0].window_horizon
    sim = RunSimulator(result.runs[0], result.start)
    n = result.resolve_n_initial()
    ks = tuple(k for k in WINDOW_HORIZONS if k < test.n_samples - n)
    lags = sim.window_predictions(test.u, test.y, ks, n)
    noise = sim.noise_predictions(test.u, test.y, ks, n)
    err = lambda a: np.sqrt(np.mean((a[n:] - test.y[n:]) ** 2))  # noqa: E731
    better = [err(lags[k]) <= err(noise[k]) for k in ks]
    expected = (
        0 if not better[0] else ks[better.index(False) - 1] if False in better else WINDOW_ALWAYS
    )
    assert chosen == expected


def test_a_band_comes_with_the_trajectory_when_asked_for(found):
    test, result = found
    n = 6
    plain = result.predict(test.u, test.y, 3, n)
    drawn = result.predict(test.u, test.y, 3, n, band=0.9)
    np.testing.assert_array_equal(drawn.y, plain)
    width = result.band.half_width(0.9, 3)
    np.testing.assert_allclose(
        drawn.upper[n:] - drawn.y[n:], np.broadcast_to(width, (len(plain) - n, 1))
    )
    np.testing.assert_array_equal(drawn.lower[:n], test.y[:n])
    sim = result.simulate(test.u, test.y[:n], band=0.9)
    np.testing.assert_allclose(
        sim.upper[n:] - sim.y[n:], np.broadcast_to(result.band.half_width(0.9), (len(plain) - n, 1))
    )
    with pytest.raises(ValueError, match="no calibrated band"):
        result.run_alone(0).simulate(test.u, band=0.9)
    again = result.run_alone(0).with_band(test)
    assert again.simulate(test.u, band=0.9).upper.shape == test.y.shape


def test_prediction_as_long_as_the_record_is_the_simulation(found):
    test, result = found
    n = 6
    sim = result.simulate(test.u, test.y[:n])
    for k in (len(test.u) - n, len(test.u)):
        got = result.predict(test.u, test.y, steps_ahead=k, n_initial=n)
        np.testing.assert_allclose(got, sim, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("found", ["learned"], indirect=True)
def test_one_step_prediction_is_closer_than_the_simulation(found):
    """With the residual's noise model, the prediction a step ahead errs less than the free run."""
    test, result = found
    n = 6
    err = lambda a: np.sqrt(np.mean((a[n:] - test.y[n:]) ** 2))  # noqa: E731
    one = result.predict(test.u, test.y, 1, n)
    assert err(one) < err(result.simulate(test.u, test.y[:n]))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"steps_ahead": 0}, "steps_ahead"),
        ({"steps_ahead": 2.5}, "steps_ahead"),
        ({"n_initial": 0}, "n_initial"),
        ({"n_initial": 200}, "n_initial"),
    ],
)
def test_bad_prediction_arguments_say_what_was_expected(found, kwargs, match):
    test, result = found
    with pytest.raises(ValueError, match=match):
        result.predict(test.u, test.y, **kwargs)
    with pytest.raises(ValueError, match="same number"):
        result.predict(test.u, test.y[:-1])


def test_batched_state_fit_equals_one_fit_per_history(rng):
    """Each history gets its own fit: the same outputs as fitting it alone (float32 rounding)."""
    model = build_simulator(1, 1, units=5, seed=2)
    sim, (learned,) = state_model(model)
    u = rng.normal(size=(3, 12, 1)).astype("float32")
    true = learned + rng.normal(scale=0.5, size=(3, 5)).astype("float32")
    y = sim.predict_on_batch([u, true])
    _, (batched,) = fit_initial_state(model, u, y)
    assert batched.shape == (3, 5)
    for b in range(3):
        _, (alone,) = fit_initial_state(model, u[b], y[b])
        y_batched = sim.predict_on_batch([u[b : b + 1], batched[b : b + 1]])
        y_alone = sim.predict_on_batch([u[b : b + 1], alone[None]])
        np.testing.assert_allclose(y_batched, y_alone, atol=2e-3 * np.std(y))
        assert np.sqrt(np.mean((y_alone[0] - y[b]) ** 2)) < 0.2 * np.std(y)


def assert_several_horizons_equal_one_prediction_each(test, result):
    u, y, n = test.u[:40], test.y[:40], 6
    several = result.predictions(u, y, (1, 3, 50), n_initial=n)
    for k, y_k in several.items():
        np.testing.assert_allclose(y_k, result.predict(u, y, k, n), rtol=1e-6, atol=1e-9)


def test_several_horizons_at_once_equal_one_prediction_each(found, narx):
    assert_several_horizons_equal_one_prediction_each(*found)
    assert_several_horizons_equal_one_prediction_each(*narx)


def test_free_run_without_measured_outputs_starts_at_its_own_first_estimation_samples(narx):
    """The start state is the estimation record's first ``n_initial`` samples of the run itself,
    however many the identification keeps (it keeps the longest lag of every class tried)."""
    _, found = narx
    est = datasets.simulate_cascaded_tanks(n_samples=160, seed=0).estimation
    n = found.runs[found.best].config.n_initial
    longer = dataclasses.replace(found, start=(est.u[: n + 12], est.y[: n + 12]))
    y_sim = longer.simulate(est.u)
    np.testing.assert_allclose(y_sim[:n], est.y[:n])
    np.testing.assert_allclose(y_sim, found.simulate(est.u, est.y[:n]), rtol=1e-6, atol=1e-9)
