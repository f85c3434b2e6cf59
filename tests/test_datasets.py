"""Tests of keras_mgu.datasets: records, tank simulator, CSV loaders, normaliser, windows."""

from __future__ import annotations

import json
import math
import os
import sys
import types

import numpy as np
import pytest

from keras_mgu import datasets as ds
from keras_mgu.datasets import (
    Normalizer,
    Record,
    SysIdData,
    TankParameters,
    load_cascaded_tanks,
    load_csv_records,
    load_nonlinear_benchmark,
    make_windows,
    simulate_cascaded_tanks,
    simulate_tank_levels,
)

# --------------------------------------------------------------------------- helpers


def _write(path, text: str) -> str:
    with open(path, "w", newline="") as f:
        f.write(text)
    return str(path)


def _run_lengths(x: np.ndarray) -> list[int]:
    change = np.nonzero(np.diff(x) != 0)[0] + 1
    edges = np.concatenate([[0], change, [len(x)]])
    return list(np.diff(edges))


def _rk45_levels(u, ts, p, h0):
    """Independent reference: SciPy's adaptive RK45 on each hold interval (no overflow)."""
    integrate = pytest.importorskip("scipy.integrate")
    out, h = [], np.asarray(h0, dtype=float)
    for uk in u:
        out.append(h.copy())

        def f(_, x, uk=uk):
            s1, s2 = np.sqrt(max(x[0], 0.0)), np.sqrt(max(x[1], 0.0))
            return [-p.k1 * s1 + p.k2 * uk, p.k3 * s1 - p.k4 * s2]

        sol = integrate.solve_ivp(f, (0.0, ts), h, method="RK45", rtol=1e-11, atol=1e-12)
        h = sol.y[:, -1]
    return np.array(out)


# --------------------------------------------------------------------------- Record


def test_record_converts_and_names_channels():
    rec = Record([[1, 2], [3, 4], [5, 6]], [[0], [1], [2]], ts=2)
    assert rec.u.dtype == np.float64 and rec.u.shape == (3, 2)
    assert rec.input_names == ("u0", "u1") and rec.output_names == ("y0",)
    assert rec.ts == 2.0 and rec.n_samples == 3 and (rec.n_inputs, rec.n_outputs) == (2, 1)
    np.testing.assert_allclose(rec.time, [0.0, 2.0, 4.0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"u": np.zeros(5), "y": np.zeros((5, 1))}, r"2-D array.*\(5,\).*reshape"),
        ({"u": np.zeros((5, 1)), "y": np.zeros((4, 1))}, "same number of samples.*5.*4"),
        ({"u": [[0.0], [np.nan]], "y": [[0.0], [1.0]]}, "finite.*sample 1, channel 0"),
        ({"u": [[0.0], [1.0]], "y": [[0.0], [np.inf]]}, "`y` must contain only finite"),
        ({"u": [[0.0]], "y": [[0.0]], "ts": 0.0}, "`ts`.*positive"),
        ({"u": [[0.0]], "y": [[0.0]], "ts": -4}, "`ts`.*positive"),
        ({"u": [[0.0]], "y": [[0.0]], "input_names": ("a", "b")}, "input_names.*1 string"),
        ({"u": np.zeros((0, 1)), "y": np.zeros((0, 1))}, "at least one sample"),
    ],
)
def test_record_validation_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Record(**kwargs)


def test_record_rejects_non_numeric():
    with pytest.raises(TypeError, match="numeric"):
        Record([["a"], ["b"]], [[0.0], [1.0]])


def test_record_split_and_slice():
    u = np.arange(10.0)[:, None]
    rec = Record(u, 2 * u, ts=0.5, input_names=("p",), output_names=("q",), name="r")
    first, last = rec.split(0.2)
    assert (first.n_samples, last.n_samples) == (8, 2)
    np.testing.assert_array_equal(last.u[:, 0], [8.0, 9.0])
    np.testing.assert_array_equal(last.y[:, 0], [16.0, 18.0])
    assert last.ts == 0.5 and last.input_names == ("p",) and first.name == "r"
    assert rec.slice(2, 5, name="s").name == "s"
    for bad in (0.0, 1.0, 1.5, 0.01):
        with pytest.raises(ValueError, match="validation_fraction|empty part"):
            rec.split(bad)


def test_sysid_data_checks_records():
    a = Record(np.zeros((4, 1)), np.zeros((4, 1)))
    b = Record(np.zeros((4, 2)), np.zeros((4, 1)))
    with pytest.raises(ValueError, match="test record has 2 input"):
        SysIdData(a, a, b)
    with pytest.raises(TypeError, match="validation.*Record"):
        SysIdData(a, np.zeros((4, 1)), a)


# --------------------------------------------------------------------------- simulator physics


def test_tank_parameters_validation():
    with pytest.raises(ValueError, match="k1 must be a positive"):
        TankParameters(k1=0.0)
    with pytest.raises(ValueError, match="overflow_fraction must be in"):
        TankParameters(overflow_fraction=1.5)


def test_levels_stay_in_tanks_and_output_in_sensor_range():
    p = TankParameters()
    # Long full-power pumping overflows both tanks, then the pump stops and they drain.
    u = np.concatenate([np.full(150, 10.0), np.zeros(400), np.full(100, 3.0)])
    levels = simulate_tank_levels(u, ts=4.0, parameters=p, initial_levels=(0.0, 0.0))
    assert levels.shape == (u.size, 2)
    assert levels.min() >= 0.0
    assert levels[:, 0].max() <= p.h1_max and levels[:, 1].max() <= p.h2_max
    assert levels[:, 0].max() == p.h1_max and levels[:, 1].max() == p.h2_max  # overflow happened
    assert levels[549, 0] < 0.05  # nearly drained after 1600 s without pumping

    data = simulate_cascaded_tanks(
        n_samples=300, seed=3, u_mean=4.0, u_std=2.5, noise_std=0.3, initial_levels="random"
    )
    for rec in (data.estimation, data.validation, data.test):
        assert rec.u.min() >= 0.0 and rec.u.max() <= 10.0
        assert rec.y.min() >= 0.0 and rec.y.max() <= p.sensor_max
        assert np.any(rec.y == p.sensor_max)  # this excitation saturates the sensor


@pytest.mark.parametrize("u, params", [(2.0, {}), (3.0, {"k1": 0.05, "k3": 0.04, "k4": 0.035})])
def test_steady_state_without_overflow(u, params):
    p = TankParameters(**params)
    h1_star = (p.k2 * u / p.k1) ** 2
    h2_star = (p.k3 / p.k4) ** 2 * h1_star
    assert h1_star < p.h1_max and h2_star < p.h2_max
    levels = simulate_tank_levels(np.full(800, u), ts=4.0, parameters=p)
    np.testing.assert_allclose(levels[-1], [h1_star, h2_star], rtol=1e-6)
    np.testing.assert_allclose(p.steady_state(u), [h1_star, h2_star], rtol=1e-12)


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
def test_steady_state_with_overflow(fraction):
    p = TankParameters(h2_max=100.0, sensor_max=100.0, overflow_fraction=fraction)
    u = 6.0
    assert (p.k2 * u / p.k1) ** 2 > p.h1_max
    spill = p.k2 * u - p.k1 * math.sqrt(p.h1_max)  # upper-tank level rate that is spilled
    h2_star = ((p.k3 * math.sqrt(p.h1_max) + fraction * p.k3 / p.k1 * spill) / p.k4) ** 2
    levels = simulate_tank_levels(np.full(1000, u), ts=4.0, parameters=p)
    np.testing.assert_allclose(levels[-1], [p.h1_max, h2_star], rtol=1e-6)
    np.testing.assert_allclose(p.steady_state(u), [p.h1_max, h2_star], rtol=1e-12)


def test_rk4_matches_adaptive_reference_and_converges():
    p = TankParameters()
    k = np.arange(120)
    u = 2.6 + 0.6 * np.sin(2 * np.pi * k / 40.0) + 0.3 * np.sign(np.sin(2 * np.pi * k / 17.0))
    h0 = p.steady_state(2.6)
    ref = _rk45_levels(u, 4.0, p, h0)
    runs = {s: simulate_tank_levels(u, 4.0, p, h0, substeps=s) for s in (1, 2, 4, 8)}
    errs = {s: np.abs(runs[s] - ref).max() for s in runs}
    assert errs[8] < 1e-8
    # Fourth order: halving the step divides the error by about 16.
    for s in (1, 2):
        assert 8.0 < errs[s] / errs[2 * s] < 32.0, errs


def test_rk4_substep_halving_with_overflow_changes_little():
    kwargs = {"n_samples": 300, "seed": 5, "noise_std": 0.0, "u_mean": 3.6, "u_std": 1.5}
    coarse = simulate_cascaded_tanks(substeps=8, **kwargs).estimation.y
    fine = simulate_cascaded_tanks(substeps=16, **kwargs).estimation.y
    assert 0.05 < np.mean(coarse == 10.0) < 0.5  # the comparison covers overflow and saturation
    assert np.abs(coarse - fine).max() < 1e-4


def test_output_is_sensor_of_simulated_levels_plus_noise():
    p = TankParameters()
    clean = simulate_cascaded_tanks(n_samples=256, seed=7, noise_std=0.0)
    for rec in (clean.estimation, clean.validation, clean.test):
        levels = simulate_tank_levels(rec.u, 4.0, p, p.steady_state(2.8))
        np.testing.assert_allclose(rec.y[:, 0], np.clip(levels[:, 1], 0.0, 10.0), atol=1e-12)
    # Same records start from the same documented state.
    first = [r.y[0, 0] for r in (clean.estimation, clean.validation, clean.test)]
    np.testing.assert_allclose(first, p.steady_state(2.8)[1])

    noisy = simulate_cascaded_tanks(n_samples=256, seed=7, noise_std=0.05)
    np.testing.assert_array_equal(noisy.test.u, clean.test.u)
    inside = clean.test.y < 9.8
    residual = (noisy.test.y - clean.test.y)[inside]
    assert 0.04 < residual.std() < 0.06


def test_default_output_resembles_benchmark():
    ys = []
    for seed in range(3):
        data = simulate_cascaded_tanks(seed=seed)
        assert data.estimation.n_samples == 1024 and data.test.ts == 4.0
        assert data.estimation.input_names == ("u",) and data.test.output_names == ("y",)
        ys += [r.y[:, 0] for r in (data.estimation, data.validation, data.test)]
    y = np.concatenate(ys)
    assert np.mean((y >= 2.0) & (y <= 10.0)) > 0.9
    assert 0.001 < np.mean(y == 10.0) < 0.1


def test_seeding():
    a = simulate_cascaded_tanks(n_samples=200, seed=11)
    b = simulate_cascaded_tanks(n_samples=200, seed=11)
    c = simulate_cascaded_tanks(n_samples=200, seed=12)
    for part in ("estimation", "validation", "test"):
        np.testing.assert_array_equal(getattr(a, part).u, getattr(b, part).u)
        np.testing.assert_array_equal(getattr(a, part).y, getattr(b, part).y)
        assert not np.allclose(getattr(a, part).u, getattr(c, part).u)
    # The three records get independent excitations.
    assert not np.allclose(a.estimation.u, a.test.u)
    assert not np.allclose(a.estimation.u, a.validation.u)


def test_multisine_excitation_spectrum():
    n, ts = 1024, 4.0
    data = simulate_cascaded_tanks(n_samples=n, ts=ts, seed=2, u_range=(-100.0, 100.0))
    u = data.estimation.u[:, 0]
    assert u.mean() == pytest.approx(2.8) and u.std() == pytest.approx(1.0)
    amp = np.abs(np.fft.rfft(u - u.mean()))
    flat = np.arange(1, 20)  # harmonics up to 0.0047 Hz with f0 = 1 / 4096 Hz
    high = np.arange(20, 60)  # up to 0.0145 Hz
    np.testing.assert_allclose(amp[flat], amp[1], rtol=1e-9)
    np.testing.assert_allclose(amp[high], 0.1 * amp[1], rtol=1e-9)
    assert amp[60:].max() < 1e-9 * amp[1]
    # Default clipping to 0..10 V.
    clipped = simulate_cascaded_tanks(n_samples=n, seed=2, u_std=3.0).estimation.u
    assert clipped.min() == 0.0 and clipped.max() <= 10.0


def test_steps_excitation():
    data = simulate_cascaded_tanks(n_samples=600, excitation="steps", seed=4, hold_samples=(5, 9))
    for rec in (data.estimation, data.validation, data.test):
        u = rec.u[:, 0]
        runs = _run_lengths(u)
        assert len(runs) > 600 // 9
        assert all(5 <= r <= 9 for r in runs[:-1]) and runs[-1] <= 9
        lo, hi = 2.8 - math.sqrt(3.0), 2.8 + math.sqrt(3.0)
        assert u.min() >= lo and u.max() <= hi
        assert np.all(np.isfinite(rec.y))
    assert not np.allclose(data.estimation.u, data.test.u)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"excitation": "chirp"}, "excitation"),
        ({"n_samples": 1}, "n_samples"),
        ({"initial_levels": "full"}, "initial_levels"),
        ({"initial_levels": (1.0, 2.0, 3.0)}, "initial_levels"),
        ({"substeps": 0}, "substeps"),
        ({"hold_samples": (0, 3)}, "hold_samples"),
        ({"n_samples": 8, "max_frequency_hz": 0.001}, "too short"),
    ],
)
def test_simulator_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate_cascaded_tanks(**kwargs)


# --------------------------------------------------------------------------- CSV


def test_load_csv_records_happy_path(tmp_path):
    text = "time, u1 ,u2,y,notes\n0,1.5,2,-3,a\n1, 2.5 ,3e0,-4,b\n\n2,3.5,4,-5.25,\n\n"
    path = _write(tmp_path / "run1.csv", text)
    rec = load_csv_records(path, inputs=["u1", "u2"], outputs=["y"], ts=0.1)
    np.testing.assert_array_equal(rec.u, [[1.5, 2.0], [2.5, 3.0], [3.5, 4.0]])
    np.testing.assert_array_equal(rec.y, [[-3.0], [-4.0], [-5.25]])
    assert rec.input_names == ("u1", "u2") and rec.output_names == ("y",)
    assert rec.ts == 0.1 and rec.name == "run1"
    assert load_csv_records(path, "u2", "time", name="x").name == "x"


@pytest.mark.parametrize(
    "text, match",
    [
        ("a,b\n1,2\n", r"Column 'c' not found.*available columns: 'a', 'b'"),
        ("a,b,c\n1,2,3\n4,x5,6\n", r"Non-numeric value 'x5' in column 'b'.*line 3"),
        ("a,b,c\n1,2,3\n4,5,6\n7,,9\n", r"Columns .* different lengths.*'b': 2.*'c': 3"),
        ("a,b,c\n1,2,3\n4,,6\n7,8,9\n", r"Empty cell in column 'b'.*line 3"),
        ("a,b,c\n1,2,3\n4,5\n", r"different lengths.*'c': 1"),
        ("a,b,c\n1,2,nan\n", r"Non-finite value 'nan' in column 'c'.*line 2"),
        ("a,b,c\n", "no data rows"),
        ("", "is empty"),
        ("\n\n", "is empty"),
    ],
)
def test_load_csv_records_errors(tmp_path, text, match):
    path = _write(tmp_path / "bad.csv", text)
    with pytest.raises(ValueError, match=match):
        load_csv_records(path, inputs=["a", "b"], outputs=["c"])


def test_load_csv_records_missing_file_and_bad_columns(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.csv"):
        load_csv_records(tmp_path / "nowhere.csv", ["a"], ["b"])
    path = _write(tmp_path / "ok.csv", "a,b\n1,2\n")
    with pytest.raises(ValueError, match="inputs"):
        load_csv_records(path, inputs=[], outputs=["b"])


# --------------------------------------------------------------------------- Cascaded Tanks file


def _benchmark_csv(n: int, ts: float = 4.0) -> tuple[str, np.ndarray]:
    """Text in the benchmark's layout (trailing commas, Ts in the first row) and its data."""
    rng = np.random.default_rng(0)
    data = np.round(rng.uniform(0, 10, size=(n, 4)), 4)  # uEst, uVal, yEst, yVal
    lines = ['"uEst","uVal","yEst","yVal","Ts",']
    for i, row in enumerate(data):
        ts_cell = f"{ts:g}" if i == 0 else ""
        lines.append(",".join(f"{v:g}" for v in row) + f",{ts_cell},")
    return "\n".join(lines) + "\n\n", data


def test_load_cascaded_tanks_synthetic_file(tmp_path):
    text, data = _benchmark_csv(50)
    path = _write(tmp_path / "dataBenchmark.csv", text)
    for source in (path, tmp_path):  # the file itself or its folder
        d = load_cascaded_tanks(source, validation_fraction=0.2)
        assert (d.estimation.n_samples, d.validation.n_samples, d.test.n_samples) == (40, 10, 50)
        np.testing.assert_array_equal(d.estimation.u[:, 0], data[:40, 0])
        np.testing.assert_array_equal(d.estimation.y[:, 0], data[:40, 2])
        np.testing.assert_array_equal(d.validation.u[:, 0], data[40:, 0])
        np.testing.assert_array_equal(d.validation.y[:, 0], data[40:, 2])
        np.testing.assert_array_equal(d.test.u[:, 0], data[:, 1])
        np.testing.assert_array_equal(d.test.y[:, 0], data[:, 3])
        assert d.estimation.ts == d.validation.ts == d.test.ts == 4.0
        assert d.test.name == "cascaded_tanks/test"
    assert load_cascaded_tanks(path, validation_fraction=0.5).validation.n_samples == 25


def test_load_cascaded_tanks_malformed(tmp_path):
    text, _ = _benchmark_csv(10)
    no_ts = text.replace(",4,\n", ",,\n", 1)
    with pytest.raises(ValueError, match="'Ts'.*first data row"):
        load_cascaded_tanks(_write(tmp_path / "a.csv", no_ts))
    bad_ts = text.replace(",4,\n", ",-4,\n", 1)
    with pytest.raises(ValueError, match="'Ts'.*positive"):
        load_cascaded_tanks(_write(tmp_path / "b.csv", bad_ts))
    no_col = text.replace('"yVal"', '"yTest"')
    with pytest.raises(ValueError, match="'yVal' not found"):
        load_cascaded_tanks(_write(tmp_path / "c.csv", no_col))
    with pytest.raises(FileNotFoundError):
        load_cascaded_tanks(tmp_path / "missing")


def test_load_cascaded_tanks_real_file(shared_data_dir):
    path = os.path.join(shared_data_dir, "cascaded_tanks", "dataBenchmark.csv")
    if not os.path.isfile(path):
        pytest.skip("the Cascaded Tanks benchmark file is not beside this checkout")
    d = load_cascaded_tanks(path)
    assert d.estimation.n_samples + d.validation.n_samples == 1024
    assert d.validation.n_samples == round(0.2 * 1024) and d.test.n_samples == 1024
    assert d.test.ts == 4.0
    # First data row of the file: 3.2567, 0.97619, 5.205, 4.9728, 4.
    np.testing.assert_allclose(
        [d.estimation.u[0, 0], d.test.u[0, 0], d.estimation.y[0, 0], d.test.y[0, 0]],
        [3.2567, 0.97619, 5.205, 4.9728],
    )
    assert d.test.y.max() == 10.0 and d.validation.u.shape == (205, 1)


# --------------------------------------------------------------------------- Normalizer


def test_normalizer_fits_estimation_only_and_round_trips():
    data = simulate_cascaded_tanks(n_samples=256, seed=1)
    norm = Normalizer.fit(data)
    same = Normalizer.fit(data.estimation)
    assert norm.get_config() == same.get_config()
    np.testing.assert_allclose(norm.u_mean, data.estimation.u.mean(axis=0))
    np.testing.assert_allclose(norm.y_std, data.estimation.y.std(axis=0))
    assert norm.y_mean[0] != pytest.approx(data.test.y.mean())

    scaled = norm.transform(data)
    np.testing.assert_allclose(scaled.estimation.u.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(scaled.estimation.y.std(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(
        scaled.test.y, (data.test.y - norm.y_mean[0]) / norm.y_std[0], rtol=1e-12
    )
    assert scaled.test.name == data.test.name
    windows = norm.transform_y(make_windows(data.test.u, data.test.y, 16, 16)[1])
    assert windows.shape == (16, 16, 1)
    np.testing.assert_allclose(norm.inverse_transform_y(windows)[3], data.test.y[48:64])


def test_normalizer_config_is_plain_and_restores():
    rec = Record(np.array([[1.0, 5.0], [3.0, 9.0], [2.0, 4.0]]), np.array([[0.0], [1.0], [5.0]]))
    norm = Normalizer.fit(rec)
    config = json.loads(json.dumps(norm.get_config()))
    assert all(isinstance(v, float) for vals in config.values() for v in vals)
    restored = Normalizer.from_config(config)
    keras = pytest.importorskip("keras")
    revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(norm))
    assert isinstance(revived, Normalizer) and revived.get_config() == norm.get_config()
    np.testing.assert_array_equal(restored.transform(rec).u, norm.transform(rec).u)
    np.testing.assert_array_equal(
        restored.inverse_transform_y([[0.5]]), [[0.5 * math.sqrt(14.0 / 3.0) + 2.0]]
    )


def test_normalizer_errors():
    constant = Record(np.ones((5, 1)), np.arange(5.0)[:, None], input_names=("pump",))
    with pytest.raises(ValueError, match="'pump'.*constant"):
        Normalizer.fit(constant)
    with pytest.raises(ValueError, match="u_std.*positive"):
        Normalizer(u_mean=[0.0], u_std=[0.0], y_mean=[0.0], y_std=[1.0])
    norm = Normalizer(u_mean=[0.0], u_std=[1.0], y_mean=[0.0, 1.0], y_std=[1.0, 2.0])
    with pytest.raises(ValueError, match="2 channel"):
        norm.inverse_transform_y(np.zeros((4, 3)))
    with pytest.raises(TypeError, match="Record or SysIdData"):
        Normalizer.fit(np.zeros((3, 1)))


# --------------------------------------------------------------------------- windows


def test_make_windows_shapes_and_content():
    u = np.arange(20.0).reshape(10, 2)
    y = -np.arange(10.0)
    uw, yw = make_windows(u, y, window=4)
    assert uw.shape == (7, 4, 2) and yw.shape == (7, 4, 1)
    for i in range(7):
        np.testing.assert_array_equal(uw[i], u[i : i + 4])
        np.testing.assert_array_equal(yw[i, :, 0], y[i : i + 4])
    uw, yw = make_windows(u, y, window=4, stride=3)
    assert uw.shape == (3, 4, 2)
    np.testing.assert_array_equal(uw[2], u[6:10])
    np.testing.assert_array_equal(yw[1, :, 0], y[3:7])
    uw, _ = make_windows(u, y, window=10, stride=5)
    assert uw.shape == (1, 10, 2)
    uw[0, 0, 0] = 99.0
    assert u[0, 0] == 0.0  # windows are copies


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"window": 0}, "window"),
        ({"window": 11}, r"window.*N=10"),
        ({"window": 3, "stride": 0}, "stride"),
        ({"window": 2.0}, "window"),
    ],
)
def test_make_windows_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_windows(np.zeros((10, 1)), np.zeros((10, 1)), **kwargs)
    with pytest.raises(ValueError, match="same length"):
        make_windows(np.zeros((10, 1)), np.zeros((9, 1)), 3)


# --------------------------------------------------------------------------- nonlinear-benchmarks


def test_nonlinear_benchmark_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "nonlinear_benchmarks", None)
    with pytest.raises(ImportError, match="pip install nonlinear-benchmarks"):
        load_nonlinear_benchmark("silverbox")
    with pytest.raises(ValueError, match="Unknown benchmark 'f16'"):
        load_nonlinear_benchmark("f16")


def test_nonlinear_benchmark_dispatch(monkeypatch):
    """Dispatch and splitting, with a module that mimics the package's loader signatures."""
    calls = []

    def data(n, ts, offset):
        u = np.arange(n, dtype=float)[:, None] + offset
        return types.SimpleNamespace(u=u, y=2.0 * u, sampling_time=ts, name="x")

    def loader(train, test):
        def load(**kwargs):
            calls.append(kwargs)
            return train, test

        return load

    fake = types.ModuleType("nonlinear_benchmarks")
    fake.Cascaded_Tanks = loader(data(100, 4.0, 0.0), data(30, 4.0, 1000.0))
    fake.Silverbox = loader(
        data(50, 0.5, 0.0), tuple(data(20 + i, 0.5, 100.0 * i) for i in range(3))
    )
    monkeypatch.setitem(sys.modules, "nonlinear_benchmarks", fake)

    d = load_nonlinear_benchmark("cascaded_tanks", validation_fraction=0.25)
    assert calls[-1]["atleast_2d"] is True and calls[-1]["train_test_split"] is True
    assert (d.estimation.n_samples, d.validation.n_samples, d.test.n_samples) == (75, 25, 30)
    np.testing.assert_array_equal(d.validation.u[0], [75.0])
    np.testing.assert_array_equal(d.test.y[:, 0], 2.0 * (np.arange(30) + 1000.0))
    assert d.test.ts == 4.0 and d.validation.name == "cascaded_tanks/validation"

    d = load_nonlinear_benchmark("silverbox", test_index=2)
    assert d.test.n_samples == 22 and d.test.u[0, 0] == 200.0 and d.estimation.ts == 0.5
    with pytest.raises(ValueError, match="test_index"):
        load_nonlinear_benchmark("silverbox", test_index=3)


def test_nonlinear_benchmark_object_mapping():
    nb = pytest.importorskip("nonlinear_benchmarks")
    u, y = np.linspace(0.0, 1.0, 12), np.linspace(2.0, 3.0, 12)
    obj = nb.Input_output_data(u=u, y=y, sampling_time=0.25, name="demo")
    for item in (obj, obj.atleast_2d()):
        rec = ds._record_from_benchmark(item)
        assert rec.u.shape == (12, 1) and rec.y.shape == (12, 1)
        np.testing.assert_array_equal(rec.u[:, 0], u)
        np.testing.assert_array_equal(rec.y[:, 0], y)
        assert rec.ts == 0.25 and rec.name == "demo"
    discrete = nb.Input_output_data(u=u, y=y)
    assert ds._record_from_benchmark(discrete).ts == 1.0


def test_nonlinear_benchmark_cached_cascaded_tanks():
    pytest.importorskip("nonlinear_benchmarks")
    # The package's cache folders (looked up without creating them).
    bases = [
        os.path.expanduser("~/.nonlinear_benchmarks"),
        os.path.expanduser("~/Library/Application Support/nonlinear_benchmarks"),
        os.path.join(os.environ.get("LOCALAPPDATA", ""), "nonlinear_benchmarks"),
    ]
    found = [
        b
        for b in bases
        if os.path.isfile(os.path.join(b, "Cascaded_Tanks", "CascadedTanksFiles.zip"))
    ]
    if not found:
        pytest.skip("the package's Cascaded Tanks download is not cached here")
    d = load_nonlinear_benchmark("cascaded_tanks", dir_placement=found[0])
    assert d.test.n_samples == 1024 and d.test.ts == 4.0
    assert d.estimation.n_samples + d.validation.n_samples == 1024
