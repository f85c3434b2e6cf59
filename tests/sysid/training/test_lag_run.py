"""The lag classes in the recipe: settings from the record, the choice beside the ARX model,
saving, the k-step prediction's order and the standalone simulator."""

import dataclasses

import keras
import numpy as np
import pytest

from keras_mgu import datasets, sysid
from keras_mgu.sysid import LinearModel, RecipeConfig
from keras_mgu.sysid.choice.report import describe_class_table, linear_not_beaten
from keras_mgu.sysid.files.standalone import standalone_simulator
from keras_mgu.sysid.models.signals import SignalPath
from keras_mgu.sysid.training.lag_run import (
    ITERATIONS,
    MAX_ITERATIONS,
    SAMPLE_BUDGET,
    lag_config,
    lag_iterations,
    train_lag_run,
    window_for_modes,
)
from keras_mgu.sysid.training.windows import measured_windows

FEW = RecipeConfig(model_classes=("narx", "loop"), units=(4,), iterations=40, validation_checks=3)


def _second_order(period: float, radius: float) -> LinearModel:
    angle = 2 * np.pi / period
    a = np.array([[-2 * radius * np.cos(angle), radius**2]])
    return LinearModel(a, np.ones((1, 1, 3)), np.zeros(1))


def test_the_window_is_half_the_slowest_oscillation():
    assert window_for_modes(_second_order(100.0, 0.98), 10_000) == 50
    assert window_for_modes(_second_order(1000.0, 0.99), 10_000) == 256  # the upper bound
    assert window_for_modes(_second_order(100.0, 0.98), 200) == 25  # an eighth of the record
    damped = LinearModel(np.array([[-0.9]]), np.ones((1, 1, 2)), np.zeros(1))
    assert window_for_modes(damped, 10_000) == round(2 * damped.time_constant)


def test_a_slow_real_mode_beside_a_fast_oscillation_sets_the_window():
    # A slow tank (pole 0.977, tau 43 samples) beside a fast resonance (period 34): the window
    # spans twice the slow memory, not half the fast period.
    fast = np.poly([0.82 * np.exp(0.18j), 0.82 * np.exp(-0.18j)]).real
    a = np.polymul(fast, [1.0, -0.977])[1:]
    slow = LinearModel(a[None], np.ones((1, 1, 4)), np.zeros(1))
    assert window_for_modes(slow, 10_000) == round(-2 / np.log(0.977))
    integrator = LinearModel(np.array([[-1.0]]), np.ones((1, 1, 2)), np.zeros(1))
    assert window_for_modes(integrator, 10_000) == 256


def test_the_work_grows_with_the_record_within_its_bounds():
    assert lag_iterations(2_000, 45) == ITERATIONS  # a short record: the least
    assert lag_iterations(60_000, 16) == 30_000  # 16 passes of 32 windows a step
    assert lag_iterations(1_000_000, 16) == MAX_ITERATIONS
    assert lag_iterations(60_000, 256) == SAMPLE_BUDGET // (256 * 32)  # long windows cost more
    assert lag_iterations(60_000, 16, effort=2) == 60_000


def test_measured_windows_start_after_their_lag_within_each_experiment():
    u = np.arange(10.0)[:, None]
    record = datasets.Record(u, 100 + u, boundaries=(6,))
    u_past, y_past, u_w, y_w = measured_windows(record, 2, 3)
    assert u_past.shape == (2, 2, 1) and u_w.shape == (2, 3, 1)  # starts 2..3 only
    np.testing.assert_array_equal(u_past[:, :, 0], [[0, 1], [1, 2]])
    np.testing.assert_array_equal(y_w[:, :, 0], [[102, 103, 104], [103, 104, 105]])
    with pytest.raises(ValueError, match="No estimation experiment holds 12 samples"):
        measured_windows(record, 2, 10)


@pytest.fixture(scope="module")
def found_and_plant():
    plant = datasets.zoo_plant("hardening_oscillator", n_samples=800, seed=3)
    return sysid.identify(plant.data, FEW, restarts=2, seed=0), plant


def test_the_classes_are_chosen_beside_the_arx_model(found_and_plant):
    found, _ = found_and_plant
    rows = {row["class"]: row for row in found.class_table}
    assert set(rows) == {"ARX(4, 5)", "narx", "loop"}
    assert found.class_table[0]["runs"] == 0
    for run in found.runs:  # the start (the ARX model) is among the checks kept
        assert run.validation_score <= run.validation_history[0][1] + 1e-9
        assert run.config.n_initial == 4 and run.config.weight_decay == 0.0
    winner = found.runs[found.best].structure
    assert all(found.runs[k].structure == winner for k in found.members or (found.best,))
    text = describe_class_table(found.class_table, winner)
    assert f"{winner:<16}" in text and "<- chosen" in text


def test_a_warning_when_no_network_beats_the_linear_model():
    table = [
        {"class": "ARX(4, 5)", "runs": 0, "best": 0.3},
        {"class": "narx", "runs": 3, "best": 0.3},
    ]
    assert "no network beats the linear model" in linear_not_beaten(table)
    table[1]["best"] = 0.2
    assert linear_not_beaten(table) is None


def test_a_lag_class_saves_loads_and_exports(found_and_plant, tmp_path):
    found, plant = found_and_plant
    test = plant.data.test
    expected = found.simulate(test.u, test.y[:20])
    loaded = sysid.load(found.save(tmp_path / "lag.kmgu"))
    np.testing.assert_allclose(loaded.simulate(test.u, test.y[:20]), expected, atol=1e-5)
    assert loaded.class_table == found.class_table
    model = standalone_simulator(found)
    n = found.config.n_initial
    got = model.predict([test.u[None, 16:20], test.y[None, 16:20], test.u[None, 20:]], verbose=0)
    # Both run in float32; a lightly damped loop carries their rounding on (0.2 % seen).
    np.testing.assert_allclose(got[0], expected[20:], atol=0.01 * test.y.std())
    np.testing.assert_allclose(got[0, :50], expected[20:70], atol=1e-4)
    assert n == 4


def test_the_prediction_improves_as_the_horizon_shortens(found_and_plant):
    found, plant = found_and_plant
    test, n = plant.data.test, 50
    error = {
        k: sysid.rmse(test.y[n:], found.predict(test.u, test.y, steps_ahead=k, n_initial=n)[n:])
        for k in (1, 10)
    }
    free = sysid.rmse(test.y[n:], found.simulate(test.u, test.y[:n])[n:])
    last_sample = sysid.rmse(test.y[n:], test.y[n - 1 : -1])
    assert error[1] <= 1.05 * error[10] <= 1.05**2 * free
    assert error[1] < last_sample


def test_model_classes_take_all_or_names_and_refuse_others():
    assert RecipeConfig(model_classes="all").model_classes == (
        "network",
        "linear+network",
        "narx",
        "loop",
        "linear",
        "polynomial",
    )
    assert RecipeConfig(model_classes="narx").model_classes == ("narx",)
    assert RecipeConfig().model_classes is None
    with pytest.raises(ValueError, match="`model_classes` must name some of"):
        RecipeConfig(model_classes=("narx", "arx"))
    with pytest.raises(ValueError, match="`model_classes` must name some of"):
        RecipeConfig(model_classes=())


def _output_error_record(rng, n):
    """A second-order plant whose noise is on the output only: least squares ARX is biased."""
    u = rng.normal(size=(n, 1))
    x = np.zeros(n)
    for t in range(2, n):
        x[t] = 1.5 * x[t - 1] - 0.7 * x[t - 2] + 0.5 * u[t - 1, 0]
    y = x + 0.5 * x.std() * rng.normal(size=n)
    return datasets.Record(u, ((y - y.mean()) / y.std())[:, None])


def test_the_linear_class_refines_the_arx_model_on_the_simulation_error(rng):
    record = _output_error_record(rng, 3000)
    est, val = record.slice(0, 2400), record.slice(2400, None)
    linear = LinearModel.fit(est.u, est.y, 2)
    config = lag_config(RecipeConfig(iterations=1000), linear, est.n_samples, "linear")
    run = train_lag_run("linear", linear, est, val, config, seed=0)
    assert config.units == () and run.validation_history[0][0] == 0
    start, best = run.validation_history[0][1], run.validation_score
    noise = np.sqrt(0.25 / 1.25)  # the noise's share of the standardised output
    assert best < start - 0.5 * (start - noise)  # from the biased start, half way to the noise
    cell = run.model.get_layer("loop").cell
    assert cell.hidden == () and cell.bounds is None  # a linear model: nothing to fade
    # linear in its inputs: the response to 2 u is twice that to u (from zero state)
    u = rng.normal(size=(1, 50, 1)).astype("float32")
    zeros = np.zeros((1, 2, 1), "float32")
    one = keras.ops.convert_to_numpy(run.model([zeros, zeros, u]))
    two = keras.ops.convert_to_numpy(run.model([zeros, zeros, 2 * u]))
    bias = keras.ops.convert_to_numpy(run.model([zeros, zeros, 0 * u]))
    np.testing.assert_allclose(two - bias, 2 * (one - bias), rtol=1e-4, atol=1e-4)


def test_runs_are_chosen_on_validation_and_the_horizon_equally(found_and_plant):
    found, plant = found_and_plant
    data = plant.data
    n = found.resolve_n_initial()
    for k, run in enumerate(found.runs):
        alone = found.run_alone(k)
        horizon = alone.horizon_error(data.estimation)
        assert horizon.shape == (data.estimation.n_samples - n, 1)
        test_like = alone.test_like_error(data.validation)
        assert test_like.shape == (data.validation.n_samples - n, 1)
        squares = [sysid.rmse(e, 0 * e) ** 2 for e in (test_like, horizon)]
        expected = np.sqrt(sum(squares) / 2)
        np.testing.assert_allclose(run.choice_rmse, expected, rtol=1e-6)
    chosen = found.runs[found.best].structure
    pool = [k for k, run in enumerate(found.runs) if run.structure == chosen]
    assert found.runs[found.best].choice_rmse == min(found.runs[k].choice_rmse for k in pool)
    winner = min(found.runs, key=lambda run: run.choice_rmse)
    assert found.runs[found.best].structure == winner.structure
    arx = found.class_table[0]
    assert arx["runs"] == 0 and {"validation", "horizon"} <= set(arx)


def test_equal_weights_make_each_error_count_the_same():
    from keras_mgu.sysid.judging.scoring import equal_weights, error_rmse

    short, long = np.full((10, 1), 2.0), np.full((1000, 1), 1.0)
    np.testing.assert_allclose(error_rmse(equal_weights(short, long)), np.sqrt((4 + 1) / 2))
    np.testing.assert_allclose(error_rmse(equal_weights(short, np.zeros((0, 1)))), 2.0)


def test_the_report_says_why_the_network_on_the_residual_was_not_tried():
    from keras_mgu.sysid.choice.report import why_no_prior

    table = [{"na": 2, "validation_rmse": 0.8, "baseline_rmse": 1.0}]
    assert "80% of the constant predictor's RMSE, more than the 70%" in why_no_prior(table, False)
    assert "several experiments" in why_no_prior(table, True)


def test_an_ensemble_predicts_with_every_member(found_and_plant):
    found, plant = found_and_plant
    test = plant.data.test
    # A second member that surely differs: the first run read through shifted output statistics.
    first = found.runs[0]
    config = first.path.outer.get_config()
    config["y_mean"] = [m + 0.1 for m in config["y_mean"]]
    shifted = dataclasses.replace(first, path=SignalPath(datasets.Normalizer(**config)))
    pair = dataclasses.replace(
        found, runs=[first, shifted], best=0, members=(0, 0, 1), prediction_mix=None
    )  # the members' own (the mix: its own tests)
    for k in (1, 10):
        alone = [pair.run_alone(j).predict(test.u, test.y, steps_ahead=k) for j in (0, 1)]
        assert not np.allclose(alone[0], alone[1])
        got = pair.predict(test.u, test.y, steps_ahead=k)
        np.testing.assert_allclose(got, (2 * alone[0] + alone[1]) / 3, rtol=1e-6, atol=1e-9)
