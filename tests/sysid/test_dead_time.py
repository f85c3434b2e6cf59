"""Dead time through an identification: estimated or given, the inputs shifted exactly once
(simulation, prediction, scores), kept in the model file and in the exported ONNX simulator."""

import dataclasses
import importlib.util

import numpy as np
import pytest
from scipy.signal import lfilter

from keras_mgu import sysid
from keras_mgu.datasets import Record, SysIdData
from keras_mgu.export import ONNX_PACKAGES
from tests.helpers import BACKEND, requires

#: One sample of the sampled plant's own, then this dead time: its delay is DEAD_TIME + 1.
DEAD_TIME = 12
HAS_ONNX = all(
    importlib.util.find_spec(name) is not None for name in ("onnxruntime", *ONNX_PACKAGES[BACKEND])
)
needs_onnx = pytest.mark.skipif(not HAS_ONNX, reason="the `export` extra is not installed")
converts_on_jax = requires("jax", "jax2onnx", subject="the ONNX conversion on JAX")


def _hand_shift(u, delay):
    """Each column ``i`` of ``u`` delayed by ``delay[i]``, the first sample held: a loop."""
    out = np.empty_like(u)
    for k in range(len(u)):
        for i, nk in enumerate(delay):
            out[k, i] = u[max(k - nk, 0), i]
    return out


def _dead_time_data(n=1800, seed=0, noise=0.01):
    rng = np.random.default_rng(seed)
    u = np.repeat(rng.standard_normal(n // 3), 3)[:, None]  # held three samples: a slower input
    y = lfilter([0.0, 0.3, 0.2], [1.0, -1.2, 0.4], _hand_shift(u, (DEAD_TIME,))[:, 0])
    y = (y + noise * y.std() * rng.standard_normal(n))[:, None]
    a, b = int(0.6 * n), int(0.8 * n)
    return SysIdData(Record(u[:a], y[:a]), Record(u[a:b], y[a:b]), Record(u[b:], y[b:]))


def _undelayed(found):
    """``found`` with every run's delay taken out: it must be given hand-shifted inputs."""

    def bare(run):
        return dataclasses.replace(run, path=dataclasses.replace(run.path, input_delay=()))

    arx = None if found.arx is None else bare(found.arx)
    return dataclasses.replace(found, runs=[bare(run) for run in found.runs], arx=arx)


@pytest.fixture(scope="module")
def data():
    return _dead_time_data()


@pytest.fixture(scope="module")
def linear(data):
    config = sysid.RecipeConfig(model_classes=("linear",), iterations=20, validation_checks=2)
    return sysid.identify(data, config, restarts=1)


def test_the_delay_is_estimated_and_the_model_simulates_the_plant(linear, data):
    assert linear.path.input_delay == (DEAD_TIME + 1,)
    assert linear.arx.path.input_delay == (DEAD_TIME + 1,)
    test = data.test
    y_sim = linear.simulate(test.u, test.y[:30])
    rmse = np.sqrt(np.mean((y_sim[30:] - test.y[30:]) ** 2))
    assert rmse < 0.05 * test.y.std()
    text = linear.describe()
    assert f"input delay {DEAD_TIME + 1} samples (estimated)" in text and "ARX(" in text


def test_the_inputs_are_shifted_exactly_once(linear, data):
    """Against the same model without its delay, given inputs shifted by hand: a double or a
    missing shift in simulate, predict, predictions or score would differ."""
    test, bare = data.test, _undelayed(linear)
    u, y, n = test.u, test.y, 30
    shifted = _hand_shift(u, linear.path.input_delay)
    np.testing.assert_allclose(linear.simulate(u, y[:n]), bare.simulate(shifted, y[:n]), atol=1e-9)
    np.testing.assert_allclose(linear.simulate(u), bare.simulate(shifted), atol=1e-9)
    ours = linear.predictions(u, y, (1, 5, 400), n)
    theirs = bare.predictions(shifted, y, (1, 5, 400), n)
    for k in (1, 5, 400):
        np.testing.assert_allclose(ours[k], theirs[k], atol=1e-9, err_msg=f"k={k}")
    np.testing.assert_allclose(linear.predict(u, y, 5, n), theirs[5], atol=1e-9)
    shifted_test = Record(shifted, y, test.ts)
    assert linear.score(test, "all") == pytest.approx(bare.score(shifted_test, "all"), abs=1e-12)
    # Without the delay the same coefficients simulate the unshifted inputs badly.
    wrong = bare.simulate(u, y[:n])
    assert np.sqrt(np.mean((wrong[n:] - y[n:]) ** 2)) > 0.3 * y.std()


def test_evaluate_and_the_band_shift_once(linear, data):
    test, bare = data.test, _undelayed(linear)
    shifted = Record(_hand_shift(test.u, linear.path.input_delay), test.y, test.ts)
    y, lower, upper = linear.simulate(test.u, test.y[:30], band=0.9)
    y_bare, lower_bare, _ = bare.simulate(shifted.u, test.y[:30], band=0.9)
    np.testing.assert_allclose(y, y_bare, atol=1e-9)
    np.testing.assert_allclose(lower, lower_bare, atol=1e-9)
    ours = sysid.evaluate(linear, test.u, test.y, 30, steps_ahead=5)
    theirs = sysid.evaluate(bare, shifted.u, test.y, 30, steps_ahead=5)
    np.testing.assert_allclose(ours.simulation, theirs.simulation, atol=1e-9)
    assert ours.rmse == pytest.approx(theirs.rmse, abs=1e-9)
    assert ours.prediction["rmse"] == pytest.approx(theirs.prediction["rmse"], abs=1e-9)


def test_no_score_reads_a_delayed_input_from_before_its_record(linear, data):
    """The validation record does not start at rest: its first DEAD_TIME + 1 delayed inputs
    are held at its first input, not the plant's. Training's view of it starts after them,
    and the validation error and the choice's simulations start from as many more measured
    samples (a transient of the held inputs scored as the model's error, otherwise)."""
    run, val, dead = linear.runs[0], data.validation, DEAD_TIME + 1
    _, seen = run.path.records(data, continues=False)
    np.testing.assert_array_equal(seen.y, run.path.record(val).y[dead:])
    n = run.config.n_initial + dead
    outer = run.path.outer
    y_sim = linear.simulate(val.u, val.y[:n])
    expected = outer.transform_y(y_sim[n:]) - outer.transform_y(val.y[n:])
    assert run.validation_error.shape == expected.shape
    np.testing.assert_allclose(run.validation_error, expected, rtol=1e-5, atol=1e-7)
    assert linear.measured_n() == max(linear.resolve_n_initial(), n)
    # From the encoder's samples alone, the held inputs' transient is there to see.
    short = run.config.n_initial
    y_short = linear.simulate(val.u, val.y[:short])
    head = np.abs(y_short[short:n] - val.y[short:n]).max()
    assert head > 5 * np.abs(y_sim[n:] - val.y[n:]).max()


def test_the_order_search_on_a_delay_equals_it_on_inputs_shifted_by_hand():
    """The ARX orders, their validation scores and the settings derived from them are those
    of the same record with its input shifted by hand (the dead samples dropped): no fit or
    score reads an input from before a record. The plant starts away from rest, as a tank
    warming from the room's temperature does, where the held input would answer wrongly."""
    from keras_mgu.sysid.choice.candidates import lag_structures

    nk, data = DEAD_TIME + 1, _dead_time_data(n=1500, seed=3)
    records = (data.estimation, data.validation, data.test)
    warm = [dataclasses.replace(r, y=r.y + 10.0 * np.exp(-np.arange(len(r.y)) / 15.0)[:, None])
            for r in records]  # fmt: skip
    data = SysIdData(*warm)
    shifted = SysIdData(*[Record(r.u[:-nk], r.y[nk:]) for r in warm])
    config = sysid.RecipeConfig(model_classes=("linear",))
    (delayed,) = lag_structures(data, dataclasses.replace(config, input_delay=nk), ("linear",))
    (hand,) = lag_structures(shifted, dataclasses.replace(config, input_delay=0), ("linear",))
    scores = [[row["validation_rmse"] for row in s.orders_table] for s in (delayed, hand)]
    np.testing.assert_allclose(scores[0], scores[1], rtol=1e-9)
    assert delayed.linear.orders == hand.linear.orders
    assert delayed.config.window == hand.config.window
    np.testing.assert_allclose(delayed.linear.b, hand.linear.b, rtol=1e-9, atol=1e-12)


def test_a_given_delay_is_used_as_given(data, capsys):
    config = sysid.RecipeConfig(
        model_classes=("linear",), iterations=5, validation_checks=2, input_delay=4
    )
    found = sysid.identify(data, config, restarts=1, verbose=1)
    assert found.path.input_delay == (4,)
    assert "input delay 4 samples (given)" in found.describe()
    printed = capsys.readouterr().out
    assert "input delay 4 samples (given): every class sees u(k - 4)" in printed
    assert "ARX orders: ARX(" in printed
    with pytest.raises(ValueError, match="2 delays for 1 inputs"):
        sysid.identify(data, dataclasses.replace(config, input_delay=(1, 2)), restarts=1)


def test_the_delay_is_kept_in_the_model_file(linear, data, tmp_path):
    loaded = sysid.load(linear.save(tmp_path / "delayed.kmgu"))
    assert loaded.path.input_delay == linear.path.input_delay
    assert loaded.arx.path.input_delay == linear.arx.path.input_delay
    test = data.test
    np.testing.assert_allclose(
        loaded.simulate(test.u, test.y[:30]), linear.simulate(test.u, test.y[:30]), atol=1e-6
    )
    np.testing.assert_allclose(
        loaded.predict(test.u, test.y, 3, 30), linear.predict(test.u, test.y, 3, 30), atol=1e-6
    )


def _onnx_simulation(path, feeds):
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0][0]


@needs_onnx
@pytest.mark.parametrize("state", ["learned", "encoder"])
def test_a_delayed_network_exports_as_an_onnx_simulator(data, state, tmp_path):
    from keras_mgu.sysid.files.onnx_export import export_simulator

    extra = {"initial_state": "encoder", "n_initial": 5, "window": 60, "batch_size": 4}
    config = sysid.RecipeConfig(
        units=(4,), iterations=4, steps_per_epoch=2, validation_checks=2, input_delay=3,
        model_classes=("network",), **(extra if state == "encoder" else {}),
    )  # fmt: skip
    found = sysid.identify(data, config, restarts=1)
    path = str(tmp_path / "delayed.onnx")
    export_simulator(found, path)
    u, y = data.test.u, data.test.y
    as32 = lambda a: a[None].astype("float32")  # noqa: E731
    for steps in (len(u), 40):
        if state == "learned":
            got, want = _onnx_simulation(path, {"u": as32(u[:steps])}), found.simulate(u[:steps])
        else:
            feeds = {"u_initial": as32(u[:5]), "y_initial": as32(y[:5]), "u": as32(u[5:steps])}
            got, want = _onnx_simulation(path, feeds), found.simulate(u[:steps], y[:5])[5:]
        np.testing.assert_allclose(got, want, atol=1e-4 * np.abs(want).max())


@needs_onnx
@converts_on_jax
def test_a_delayed_linear_class_exports_as_an_onnx_simulator(linear, data, tmp_path):
    from keras_mgu.sysid.files.onnx_export import export_simulator

    path = str(tmp_path / "linear.onnx")
    export_simulator(linear, path)
    u, y, n = data.test.u, data.test.y, linear.config.n_initial
    as32 = lambda a: a[None].astype("float32")  # noqa: E731
    feeds = {"u_initial": as32(u[:n]), "y_initial": as32(y[:n]), "u": as32(u[n:])}
    want = linear.simulate(u, y[:n])[n:]
    np.testing.assert_allclose(_onnx_simulation(path, feeds), want, atol=1e-4 * np.abs(want).max())


def test_the_command_line_takes_the_delay_and_refuses_a_bad_one(capsys):
    import argparse

    from keras_mgu.cli.identify import add_arguments, recipe_options

    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_arguments(parser)
    assert recipe_options(parser.parse_args(["--input-delay", "3", "5"]))["input_delay"] == (3, 5)
    assert "input_delay" not in recipe_options(parser.parse_args([]))
    for bad in ("-1", "2.5", "x"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--input-delay", bad])
        assert "whole number of samples >= 0" in capsys.readouterr().err
    assert "dead time" in parser.format_help() and "estimated" in parser.format_help()


def test_results_json_states_the_delay_and_the_orders(linear, data):
    from keras_mgu.cli.identify import results_row

    test = data.test
    evaluation = sysid.evaluate(linear, test.u, test.y, 30)
    row = results_row(linear, evaluation, {"wall": 1.0, "cpu": 1.0})
    assert row["input_delay"] == {"samples": [DEAD_TIME + 1], "estimated": True}
    assert row["arx_orders"]["nb"] == row["arx_orders"]["na"] + 1
