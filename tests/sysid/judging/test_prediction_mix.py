"""The k-step prediction mixed with the ARX reference's: the fit, the lookup, the model's use."""

import dataclasses

import numpy as np
import pytest

from keras_mgu import datasets, sysid
from keras_mgu.sysid import identify
from keras_mgu.sysid.judging.prediction_mix import PredictionMix, fit_prediction_mix
from tests.helpers import BACKEND_INDEPENDENT
from tests.sysid.judging.test_evaluation import TINY


@BACKEND_INDEPENDENT
def test_the_mix_minimises_the_squared_error_within_zero_and_one():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(200, 3))
    model = {1: y + 0.1 * rng.normal(size=y.shape), 5: y + rng.normal(size=y.shape)}
    reference = {1: y + 0.3 * rng.normal(size=y.shape), 5: y + 0.5 * rng.normal(size=y.shape)}
    model[1][:, 2], reference[1][:, 2] = y[:, 2] + 5.0, y[:, 2] + 4.0  # the best mix is past 0
    model[5][17, 1] = np.inf  # a model that diverges on an output: the reference alone
    mix = fit_prediction_mix(model, reference, y, n=10)
    grid = np.linspace(0.0, 1.0, 2001)
    for row, k in enumerate((1, 5)):
        for j in range(3):
            if k == 5 and j == 1:
                assert mix.weights[row, j] == 0.0
                continue
            p, r = model[k][10:, j], reference[k][10:, j]
            errors = [np.sum((y[10:, j] - a * p - (1 - a) * r) ** 2) for a in grid]
            assert mix.weights[row, j] == pytest.approx(grid[int(np.argmin(errors))], abs=1e-3)
    assert mix.weights[0, 2] == 0.0  # clipped at 0
    same = fit_prediction_mix({1: y}, {1: y}, y, 0)
    np.testing.assert_array_equal(same.weights, np.ones((1, 3)))  # nothing to choose: the model
    mixed = mix.mixed(model, reference)
    assert np.all(np.isfinite(mixed[5]))
    a = mix.weights[0]
    np.testing.assert_allclose(mixed[1], a * model[1] + (1 - a) * reference[1])


@BACKEND_INDEPENDENT
def test_a_horizon_takes_the_weights_of_the_next_longer_one_fitted():
    mix = PredictionMix(np.array([1, 5, 10]), np.array([[0.1], [0.5], [0.9]]))
    assert [float(mix.weight(k)[0]) for k in (1, 2, 5, 6, 10, 11, 500)] == [
        0.1, 0.5, 0.5, 0.9, 0.9, 1.0, 1.0,
    ]  # fmt: skip
    again = PredictionMix.from_config(mix.to_config())
    np.testing.assert_array_equal(again.weights, mix.weights)


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
    got = found.predictions(u, y, (1, 3), n)
    for k in (1, 3):
        a = found.prediction_mix.weight(k)
        np.testing.assert_allclose(got[k], a * model[k] + (1 - a) * reference[k], rtol=1e-10)
    back = sysid.load(found.save(tmp_path / "mix.kmgu"))
    np.testing.assert_array_equal(back.prediction_mix.weights, found.prediction_mix.weights)
    assert found.run_alone(found.best).prediction_mix is None
