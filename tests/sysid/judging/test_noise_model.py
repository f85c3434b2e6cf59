"""The simulation residual's noise model against its equations, written out in NumPy."""

import numpy as np
import pytest

from keras_mgu.sysid.judging.noise_model import MAX_ROOT, NoiseModel, fit_noise_model


def reference_prediction(a: np.ndarray, e: np.ndarray, k: int) -> np.ndarray:
    """``e_hat(t | t - k)``: the recursion run ``k`` steps from ``e`` up to ``t - k``."""
    p, out = len(a), np.zeros_like(e)
    for t in range(k, len(e)):
        origin = t - k
        known = {tau: e[tau] for tau in range(max(origin - p + 1, 0), origin + 1)}
        for tau in range(origin + 1, t + 1):
            known[tau] = sum(a[i] * known.get(tau - 1 - i, 0.0) for i in range(p))
        out[t] = known[t]
    return out


def ar_series(rng, a, n, scale=1.0):
    e, w = np.zeros(n), rng.normal(scale=scale, size=n)
    for t in range(n):
        e[t] = w[t] + sum(a[i] * e[t - 1 - i] for i in range(len(a)) if t - 1 - i >= 0)
    return e


@pytest.mark.parametrize("k", [1, 2, 7])
def test_prediction_follows_the_recursion(rng, k):
    a = np.array([[1.2, 0.5], [-0.4, 0.0], [0.1, 0.0]])  # orders 3 and 1
    e = rng.normal(size=(40, 2))
    got = NoiseModel(a).predict(e, k)
    for j in range(2):
        np.testing.assert_allclose(got[:, j], reference_prediction(a[:, j], e[:, j], k), atol=1e-12)
    assert NoiseModel(a).orders == [3, 1]


def test_a_horizon_past_the_record_or_no_coefficients_predict_zero(rng):
    e = rng.normal(size=(10, 1))
    assert not NoiseModel(np.array([[0.9]])).predict(e, 10).any()
    assert not NoiseModel(np.zeros((2, 1))).predict(e, 1).any()


def test_fit_recovers_an_autoregression_and_keeps_it_stable(rng):
    a = [1.5, -0.7]  # poles 0.75 -+ 0.37j
    est = [ar_series(rng, a, 4000)[:, None]]
    val = ar_series(rng, a, 2000)[:, None]
    model = fit_noise_model(est, val)
    assert model.orders[0] >= 2
    np.testing.assert_allclose(model.coefficients[:2, 0], a, atol=0.05)
    np.testing.assert_allclose(model.coefficients[2:, 0], 0.0, atol=0.06)
    # a random walk's unit root is pulled inside the unit circle
    walk = np.cumsum(rng.normal(size=3000))[:, None]
    fitted = fit_noise_model([walk], walk[:1000], orders=(1,))
    assert 0.9 < fitted.coefficients[0, 0] <= MAX_ROOT + 1e-12


def test_white_residual_gets_little_or_no_correction(rng):
    """Where the residual has no memory, the correction chosen on validation stays small."""
    est, val = [rng.normal(size=(3000, 1))], rng.normal(size=(3000, 1))
    model = fit_noise_model(est, val)
    corrected = val - model.predict(val, 1)
    assert np.mean(corrected[1:] ** 2) <= np.mean(val[1:] ** 2) * 1.01


def test_gains_are_the_least_squares_shrinkage_of_each_horizon_on_validation(rng):
    """``g_k = <e, e_hat> / <e_hat, e_hat>`` clipped to [0, 1], recomputed from the recursion; a
    horizon between two takes the longer one's gain."""
    from keras_mgu.sysid.judging.noise_model import GAIN_HORIZONS

    a = [0.95]
    est = [ar_series(rng, a, 3000)[:, None]]
    val = (ar_series(rng, a, 3000) + rng.normal(scale=2.0, size=3000))[:, None]  # noisy: g < 1
    model = fit_noise_model(est, val)
    for row, k in enumerate(GAIN_HORIZONS):
        e_hat = np.array([reference_prediction(model.coefficients[:, 0], val[:, 0], k)]).T
        e, e_hat = val[k:, 0], e_hat[k:, 0]
        expected = np.clip(e @ e_hat / (e_hat @ e_hat), 0.0, 1.0)
        assert model.gains[row, 0] == pytest.approx(expected, rel=1e-9)
    assert 0.0 < model.gains[0, 0] < 1.0
    np.testing.assert_allclose(model.predict(val, 3), model.recursion(val, 3) * model.gains[2])
    np.testing.assert_allclose(model.predict(val, 500), model.recursion(val, 500) * model.gains[-1])
    # each gain lowers the validation error of its horizon, or leaves it
    for k in GAIN_HORIZONS:
        with_gain = np.mean((val[k:] - model.predict(val, k)[k:]) ** 2)
        assert with_gain <= np.mean((val[k:] - model.recursion(val, k)[k:]) ** 2) + 1e-15
        assert with_gain <= np.mean(val[k:] ** 2) + 1e-15
