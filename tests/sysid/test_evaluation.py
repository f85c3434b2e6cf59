"""``sysid.evaluate``: a model judged on a measured experiment, each number from its definition."""

import json

import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.sysid import RecipeConfig, evaluate, fit_percent, identify, rmse

TINY = RecipeConfig(units=(4,), iterations=6, steps_per_epoch=3, validation_checks=3)


@pytest.fixture(scope="module")
def found():
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    return data.test, identify(data, TINY, restarts=1, seed=0)


def test_scores_follow_the_simulations_and_the_prediction(found):
    test, model = found
    u, y, n, k = test.u[:40], test.y[:40], 6, 3
    ev = evaluate(model, u, y, n, k)
    free, from_n = model.simulate(u), model.simulate(u, y[:n])
    np.testing.assert_allclose(ev.simulation, free)
    assert ev.rmse == pytest.approx(rmse(y, free))
    np.testing.assert_allclose(ev.fit_percent, fit_percent(y, free))
    assert ev.from_n["rmse"] == pytest.approx(rmse(y[n:], from_n[n:]))
    y_k = model.predict(u, y, steps_ahead=k, n_initial=n)
    np.testing.assert_allclose(ev.prediction["y_pred"], y_k, rtol=1e-5, atol=1e-6)
    assert ev.prediction["steps_ahead"] == k
    assert ev.prediction["rmse"] == pytest.approx(rmse(y[n:], y_k[n:]), rel=1e-5)


def test_to_dict_holds_the_numbers_and_no_arrays(found):
    test, model = found
    ev = evaluate(model, test.u[:40], test.y[:40], 6, 2)
    plain = ev.to_dict()
    json.dumps(plain)  # plain numbers and lists only
    assert set(plain["prediction"]) == {"steps_ahead", "rmse", "fit_percent"}
    assert set(plain["from_n"]) == {"rmse", "fit_percent"}
    assert "y_pred" in ev.prediction and "simulation" in ev.from_n  # the evaluation keeps them
    free = evaluate(model, test.u[:40], test.y[:40], 0, None).to_dict()
    assert free["from_n"] is None and free["prediction"] is None
