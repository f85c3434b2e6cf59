"""The k-step prediction mixed with the ARX reference's: the fit, the lookup, the model's use."""

import dataclasses

import numpy as np
import pytest

from keras_mgu import datasets, sysid
from keras_mgu.sysid import identify
from keras_mgu.sysid.judging.prediction_mix import (
    PredictionMix,
    fit_prediction_mix,
    last_sample_predictions,
)
from tests.helpers import BACKEND_INDEPENDENT
from tests.sysid.judging.test_evaluation import TINY


def brute_force(y, p, r, last, steps=201):
    """``(a, b)`` of the least squared error of ``a p + b last + (1 - a - b) r`` on a grid."""
    grid = np.linspace(0.0, 1.0, steps)
    best = (np.inf, None)
    for a in grid:
        for b in grid[grid <= 1.0 - a + 1e-12]:
            error = np.sum((y - a * p - b * last - (1 - a - b) * r) ** 2)
            best = min(best, (error, (a, b)), key=lambda item: item[0])
    return best[1]


@BACKEND_INDEPENDENT
def test_the_mix_minimises_the_squared_error_on_the_triangle():
    """Against a brute-force grid: inside the triangle, on each edge, at a corner."""
    rng = np.random.default_rng(0)
    y = np.cumsum(rng.normal(size=(200, 4)), axis=0)  # a slow output: the last sample helps
    model = {1: y + 0.8 * rng.normal(size=y.shape), 5: y + rng.normal(size=y.shape)}
    reference = {1: y + 0.9 * rng.normal(size=y.shape), 5: y + 0.5 * rng.normal(size=y.shape)}
    model[1][:, 2], reference[1][:, 2] = y[:, 2] + 5.0, y[:, 2] + 4.0  # best past the edge
    model[1][:, 3] = y[:, 3] + 0.01 * rng.normal(size=200)  # the model alone
    model[5][17, 1] = np.inf  # a model that diverges on an output: no share
    mix = fit_prediction_mix(model, reference, y, n=10)
    last = last_sample_predictions(y, (1, 5), 10)
    for row, k in enumerate((1, 5)):
        for j in range(4):
            got = (mix.weights[row, j], mix.last[row, j])
            if k == 5 and j == 1:  # the model's share is 0: the last sample's against the ARX's
                assert got[0] == 0.0
                want = brute_force(y[10:, j], *(m[k][10:, j] for m in (reference, reference, last)))
                assert got[1] == pytest.approx(want[1], abs=6e-3)
                continue
            want = brute_force(y[10:, j], *(m[k][10:, j] for m in (model, reference, last)))
            np.testing.assert_allclose(got, want, atol=6e-3)
    assert 0 < mix.last[0, 0] < 1 and 0 < mix.weights[0, 0]  # inside: all three share
    assert mix.weights[0, 3] == pytest.approx(1.0, abs=0.02)
    same = fit_prediction_mix({1: y}, {1: y}, y, 0)
    np.testing.assert_array_equal(same.weights, np.ones((1, 4)))  # nothing to choose: the model
    mixed = mix.mixed(model, reference, last)
    assert np.all(np.isfinite(mixed[5]))
    a, b = mix.weights[0], mix.last[0]
    np.testing.assert_allclose(mixed[1], a * model[1] + b * last[1] + (1 - a - b) * reference[1])
    with pytest.raises(ValueError, match="pass `last`"):
        mix.mixed(model, reference)


@BACKEND_INDEPENDENT
def test_the_last_sample_predictor_is_the_sample_each_prediction_starts_after():
    y = np.arange(10.0)[:, None]
    last = last_sample_predictions(y, (1, 3), n=2)
    np.testing.assert_array_equal(last[1][:, 0], [0, 1, 1, 2, 3, 4, 5, 6, 7, 8])
    np.testing.assert_array_equal(last[3][:, 0], [0, 1, 1, 1, 1, 2, 3, 4, 5, 6])  # s >= n


@BACKEND_INDEPENDENT
def test_a_mix_saved_before_the_last_sample_joined_gives_it_no_share():
    old = PredictionMix.from_config({"horizons": [1, 5], "weights": [[0.3], [0.6]]})
    assert old.last is None and float(old.last_weight(1)[0]) == 0.0
    p, r = {1: np.ones((4, 1))}, {1: np.zeros((4, 1))}
    np.testing.assert_allclose(old.mixed(p, r)[1], 0.3)


@BACKEND_INDEPENDENT
def test_a_horizon_takes_the_weights_of_the_next_longer_one_fitted():
    mix = PredictionMix(np.array([1, 5, 10]), np.array([[0.1], [0.5], [0.9]]))
    assert [float(mix.weight(k)[0]) for k in (1, 2, 5, 6, 10, 11, 500)] == [
        0.1, 0.5, 0.5, 0.9, 0.9, 1.0, 1.0,
    ]  # fmt: skip
    again = PredictionMix.from_config(mix.to_config())
    np.testing.assert_array_equal(again.weights, mix.weights)
    mix = PredictionMix(np.array([1, 5]), np.array([[0.1], [0.5]]), np.array([[0.7], [0.2]]))
    assert [float(mix.last_weight(k)[0]) for k in (1, 2, 5, 6)] == [0.7, 0.2, 0.2, 0.0]
    np.testing.assert_array_equal(PredictionMix.from_config(mix.to_config()).last, mix.last)


def test_an_identification_predicts_with_the_mix_fitted_on_validation(tmp_path):
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    found = identify(data, TINY, restarts=1, seed=0)
    assert found.prediction_mix is not None and found.arx is not None
    alone = dataclasses.replace(found, prediction_mix=None)
    fitted = alone.with_prediction_mix(data.validation)
    np.testing.assert_allclose(fitted.prediction_mix.weights, found.prediction_mix.weights)
    u, y, n = data.test.u, data.test.y, 6
    model = alone.predictions(u, y, (1, 3), n)
    reference = found.reference().predictions(u, y, (1, 3), n)
    last = last_sample_predictions(y, (1, 3), n)
    got = found.predictions(u, y, (1, 3), n)
    for k in (1, 3):
        a, b = found.prediction_mix.weight(k), found.prediction_mix.last_weight(k)
        want = a * model[k] + b * last[k] + (1 - a - b) * reference[k]
        np.testing.assert_allclose(got[k], want, rtol=1e-10)
    back = sysid.load(found.save(tmp_path / "mix.kmgu"))
    np.testing.assert_array_equal(back.prediction_mix.weights, found.prediction_mix.weights)
    assert found.run_alone(found.best).prediction_mix is None
