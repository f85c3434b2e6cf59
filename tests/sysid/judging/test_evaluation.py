"""``sysid.evaluate``: a model judged on a measured experiment, each number from its definition."""

import json

import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.sysid import RecipeConfig, evaluate, fit_percent, identify, rmse
from tests.helpers import NETWORK_CLASSES

TINY = RecipeConfig(
    units=(4,), iterations=6, steps_per_epoch=3, validation_checks=3, model_classes=NETWORK_CLASSES
)


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
    assert set(plain["prediction"]) == {"steps_ahead", "rmse", "fit_percent", "coverage"}
    assert set(plain["from_n"]) == {"rmse", "fit_percent"}
    assert "y_pred" in ev.prediction and "simulation" in ev.from_n  # the evaluation keeps them
    assert "lower" in ev.from_n and "upper" in ev.prediction
    free = evaluate(model, test.u[:40], test.y[:40], 0, None).to_dict()
    assert free["from_n"] is None and free["prediction"] is None
    assert free["band"] is None and free["reference"] is None


def test_headline_is_the_simulation_from_n_unless_the_test_starts_where_estimation_did(found):
    """A record of its own is quoted from its first n outputs; a continuation by the free run."""
    test, model = found
    u, y = test.u[:40], test.y[:40]
    own = evaluate(model, u, y, 6)
    head = own.headline
    assert head["rmse"] == own.from_n["rmse"] and head["scored_from"] == 6
    assert head["start"] == "the first 6 measured outputs"
    np.testing.assert_allclose(head["simulation"], model.simulate(u, y[:6]))
    same = evaluate(model, u, y, 6, same_start=True).headline
    assert same["rmse"] == own.rmse and same["scored_from"] == 0
    assert same["start"] == "the estimation record's start state"
    free = evaluate(model, u, y, 0).headline  # no measured output: the free run alone
    assert free["rmse"] == own.rmse and free["start"] == "the estimation record's start state"
    plain = own.to_dict()["headline"]
    assert "simulation" not in plain and plain["rmse"] == own.from_n["rmse"]


class TwoOutputs:
    """A stand-in model of two outputs: ``y1 = u``, ``y2 = 2 u`` (+1 from the measured start)."""

    def simulate(self, u, y_initial=None):
        sim = np.hstack([u, 2 * u]) + (0.0 if y_initial is None else 1.0)
        if y_initial is not None:
            sim[: len(y_initial)] = y_initial
        return sim


def test_every_output_is_scored_by_its_name():
    rng = np.random.default_rng(0)
    u = rng.normal(size=(60, 1))
    y = np.hstack([u + 0.1 * rng.normal(size=(60, 1)), 2 * u + rng.normal(size=(60, 1))])
    ev = evaluate(TwoOutputs(), u, y, 5, input_names=("u",), output_names=("pos", "vel"))
    assert list(ev.outputs) == ["pos", "vel"]
    free, from_5 = TwoOutputs().simulate(u), TwoOutputs().simulate(u, y[:5])
    for i, name in enumerate(("pos", "vel")):
        scores = ev.outputs[name]
        assert scores["rmse"] == pytest.approx(rmse(y[:, i], free[:, i]))
        assert scores["fit_percent"] == pytest.approx(fit_percent(y[:, i], free[:, i])[0])
        assert scores["rmse_from_n"] == pytest.approx(rmse(y[5:, i], from_5[5:, i]))
    assert ev.outputs["pos"]["rmse"] < ev.outputs["vel"]["rmse"]
    assert ev.residuals.output_names == ("pos", "vel")
    assert json.loads(json.dumps(ev.to_dict()))["outputs"] == ev.outputs
    unnamed = evaluate(TwoOutputs(), u, y, 0)
    assert list(unnamed.outputs) == ["y0", "y1"] and "rmse_from_n" not in unnamed.outputs["y0"]


def test_band_coverage_and_the_reference_figures_follow_their_definitions(found):
    test, model = found
    u, y, n = test.u, test.y, 6
    ev = evaluate(model, u, y, n, 2, band=0.8)
    inside = lambda t: float(np.mean((y[n:] >= t.lower[n:]) & (y[n:] <= t.upper[n:])))  # noqa: E731
    assert ev.band["level"] == 0.8
    assert ev.band["coverage"]["simulation"] == inside(model.simulate(u, y[:n], band=0.8))
    for k in (1, 10):
        drawn = model.predict(u, y, k, n, band=0.8)
        assert ev.band["coverage"][str(k)] == pytest.approx(inside(drawn))
    assert ev.prediction["coverage"] == pytest.approx(inside(model.predict(u, y, 2, n, band=0.8)))
    arx = model.reference()
    assert ev.reference["arx"]["simulation"] == pytest.approx(
        rmse(y[n:], arx.simulate(u, y[:n])[n:])
    )
    one = arx.predict(u, y, 1, n)
    assert ev.reference["arx"]["one_step"] == pytest.approx(rmse(y[n:], one[n:]))
    assert ev.reference["last_sample"] == pytest.approx(rmse(y[n:], y[n - 1 : -1]))
    assert json.loads(json.dumps(ev.to_dict()))["band"]["coverage"]["10"] >= 0.0
    sim = model.simulate(u, y[:n], band=0.8)
    inside_each = (y[n:] >= sim.lower[n:]) & (y[n:] <= sim.upper[n:])
    assert ev.band["coverage_by_output"] == pytest.approx(list(inside_each.mean(axis=0)))
    assert ev.band["joint_coverage"] == pytest.approx(inside_each.all(axis=1).mean())
    assert evaluate(model, u, y, n, band=None).band is None


def test_without_the_reference_its_network_is_neither_made_nor_run(found, tmp_path):
    """``reference=False`` (``keras-mgu simulate``): no reference figures, the ARX model's network
    left in the loaded file unless the prediction mix reads it; the model's own numbers as with
    the reference."""
    from keras_mgu import sysid
    from keras_mgu.sysid.training.run import deferred_source

    test, model = found
    u, y, n = test.u, test.y, 6
    loaded = sysid.load(model.save(tmp_path / "model.kmgu"))
    ev = evaluate(loaded, u, y, n, 2, band=0.8, reference=False)
    assert ev.reference is None and ev.reference_simulation is None
    assert ev.to_dict()["reference"] is None
    # not made, but where the k-step prediction is mixed with the ARX model's
    assert (deferred_source(loaded.arx) is None) == (loaded.prediction_mix is not None)
    full = evaluate(loaded, u, y, n, 2, band=0.8)
    assert full.reference is not None and deferred_source(loaded.arx) is None
    np.testing.assert_array_equal(ev.from_n["simulation"], full.from_n["simulation"])
    np.testing.assert_array_equal(ev.prediction["y_pred"], full.prediction["y_pred"])
    assert ev.band == full.band
