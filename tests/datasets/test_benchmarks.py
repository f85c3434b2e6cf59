"""Tests of keras_mgu.datasets.benchmarks: the benchmark files and nonlinear-benchmarks."""

from __future__ import annotations

import os
import re
import shutil
import sys
import types

import numpy as np
import pytest

from keras_mgu.datasets import (
    PROTOCOLS,
    load_benchmark,
    load_cascaded_tanks,
    load_emps,
    load_nonlinear_benchmark,
    load_wh2009,
)
from keras_mgu.datasets import benchmarks as bm
from tests.datasets.common import write_file
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT

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
    path = write_file(tmp_path / "dataBenchmark.csv", text)
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
        assert d.protocol is PROTOCOLS["cascaded_tanks"] and d.n_initial == 50
    assert load_cascaded_tanks(path, validation_fraction=0.5).validation.n_samples == 25


def test_load_cascaded_tanks_malformed(tmp_path):
    text, _ = _benchmark_csv(10)
    no_ts = text.replace(",4,\n", ",,\n", 1)
    with pytest.raises(ValueError, match="'Ts'.*first data row"):
        load_cascaded_tanks(write_file(tmp_path / "a.csv", no_ts))
    bad_ts = text.replace(",4,\n", ",-4,\n", 1)
    with pytest.raises(ValueError, match="'Ts'.*positive"):
        load_cascaded_tanks(write_file(tmp_path / "b.csv", bad_ts))
    no_col = text.replace('"yVal"', '"yTest"')
    with pytest.raises(ValueError, match="no column 'yVal'"):
        load_cascaded_tanks(write_file(tmp_path / "c.csv", no_col))
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


# ------------------------------------------------------------------------- Wiener-Hammerstein file

_WH_HEADER = '"uBenchMark","yBenchMark","fs",\n'


def _write_wh(path, n_rows: int, fs: str = "51200") -> str:
    """The benchmark's layout (trailing commas, fs in the first row) with u = k, y = 2k + 1."""
    k = np.arange(n_rows)
    with open(path, "w", newline="") as f:
        f.write(_WH_HEADER)
        f.write(f"0,1,{fs},\n")
        np.savetxt(f, np.stack([k[1:], 2 * k[1:] + 1], axis=1), fmt="%d,%d,,")
        f.write("\n")  # the published file ends with a blank line
    return str(path)


@pytest.fixture(scope="module")
def wh_file(tmp_path_factory):
    """A file with exactly the 184,000 samples the protocol needs."""
    return _write_wh(tmp_path_factory.mktemp("wh") / "WienerHammerBenchmark.csv", 184_000)


def test_load_wh2009_split(wh_file):
    for source in (wh_file, os.path.dirname(wh_file)):  # the file itself or its folder
        d = load_wh2009(source)
        assert (d.estimation.n_samples, d.validation.n_samples, d.test.n_samples) == (
            80_000,
            20_000,
            78_800,
        )
        assert d.estimation.u.shape == (80_000, 1) and d.test.y.shape == (78_800, 1)
        # Sample k of the file has u = k, y = 2k + 1.
        assert (d.estimation.u[0, 0], d.estimation.y[0, 0]) == (5200.0, 10401.0)
        assert (d.estimation.u[-1, 0], d.validation.u[0, 0]) == (85_199.0, 85_200.0)
        assert (d.validation.u[-1, 0], d.test.u[0, 0]) == (105_199.0, 105_200.0)
        assert (d.test.u[-1, 0], d.test.y[-1, 0]) == (183_999.0, 367_999.0)
        assert d.estimation.ts == d.validation.ts == d.test.ts == 1 / 51200
        assert d.protocol is PROTOCOLS["wh2009"] and d.n_initial == 50
        assert [r.name for r in (d.estimation, d.validation, d.test)] == [
            "wh2009/estimation",
            "wh2009/validation",
            "wh2009/test",
        ]
        assert d.test.input_names == ("u",) and d.test.output_names == ("y",)
    assert load_wh2009(wh_file, validation_fraction=0.5).validation.n_samples == 50_000
    assert load_benchmark("wh2009", wh_file).test.n_samples == 78_800


def test_load_wh2009_sampling_rate_from_file(tmp_path, wh_file):
    text = open(wh_file).read().replace(",1,51200,", ",1,1000,", 1)
    d = load_wh2009(write_file(tmp_path / "wh.csv", text))
    assert d.test.ts == 0.001 and d.estimation.ts == 0.001


@pytest.mark.parametrize(
    "edit, error, match",
    [
        (lambda t: t.replace('"yBenchMark"', '"yBench"'), ValueError, "no column 'yBenchMark'"),
        (lambda t: t.replace('"fs",', '"Fs",'), ValueError, "no column 'fs'"),
        (lambda t: t.replace(",1,51200,", ",1,,", 1), ValueError, "'fs'.*positive.*first"),
        (lambda t: t.replace(",1,51200,", ",1,-3,", 1), ValueError, "'fs'.*positive"),
        (
            lambda t: t.replace("\n7,15,,", "\nnan,15,,"),
            ValueError,
            "line 9, column 'uBenchMark': 'nan' is not a finite",
        ),
        (
            lambda t: t.replace("\n9,19,,", "\n9,abc,,"),
            ValueError,
            "line 11, column 'yBenchMark': 'abc' is not a number",
        ),
        (
            lambda t: t.replace("\n9,19,,", "\n9,,,"),
            ValueError,
            "line 11, column 'yBenchMark': empty cell",
        ),
        (lambda t: _WH_HEADER, ValueError, "header row.*but no data rows"),
        (lambda t: "", ValueError, "empty"),
        (lambda t: t, ValueError, "1000 samples.*at least 184000.*105200:184000"),
    ],
)
def test_load_wh2009_errors(tmp_path, edit, error, match):
    text = open(_write_wh(tmp_path / "small.csv", 1000)).read()
    with pytest.raises(error, match=match):
        load_wh2009(write_file(tmp_path / "edited.csv", edit(text)))


def test_load_wh2009_one_sample_short(tmp_path, wh_file):
    lines = open(wh_file).read().rstrip("\n").split("\n")
    short = write_file(tmp_path / "short.csv", "\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match="183999 samples.*at least 184000"):
        load_wh2009(short)


def test_load_wh2009_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="WienerHammerBenchmark.csv"):
        load_wh2009(tmp_path)  # a folder without the file
    with pytest.raises(FileNotFoundError, match="nothing.csv"):
        load_wh2009(tmp_path / "nothing.csv")


def test_load_wh2009_real_file(shared_data_dir):
    path = os.path.join(shared_data_dir, "wh2009", "WienerHammerBenchmark.csv")
    if not os.path.isfile(path):
        pytest.skip("the Wiener-Hammerstein benchmark file is not beside this checkout")
    d = load_wh2009(os.path.dirname(path))
    assert d.estimation.n_samples + d.validation.n_samples == 100_000
    assert d.test.n_samples == 78_800 and d.test.ts == 1 / 51200
    # Data rows 5200 and 183999 of the file (0-based).
    np.testing.assert_allclose([d.estimation.u[0, 0], d.estimation.y[0, 0]], [-0.034678, -0.11124])
    np.testing.assert_allclose([d.test.u[-1, 0], d.test.y[-1, 0]], [-1.1584, -0.070385])


# --------------------------------------------------------------------------- EMPS files


def _write_emps(folder, n: int = 50, ts: float = 0.001, pulses_ts: float | None = None) -> str:
    """DATA_EMPS.csv (vir = k, qm = k / 1000) and DATA_EMPS_PULSES.csv (vir = -k)."""
    os.makedirs(folder, exist_ok=True)
    k = np.arange(n, dtype=float)
    qg = np.zeros(n)
    est = np.stack([k * ts, k, k / 1000, qg], axis=1)
    test_ts = ts if pulses_ts is None else pulses_ts
    test = np.stack([k * test_ts, -k, -k / 1000, qg, np.ones(n)], axis=1)
    for name, data, header in (
        ("DATA_EMPS.csv", est, "t,vir,qm,qg"),
        ("DATA_EMPS_PULSES.csv", test, "t,vir,qm,qg,pulses_N"),
    ):
        path = os.path.join(folder, name)
        np.savetxt(path, data, fmt="%.10g", delimiter=",", header=header, comments="")
    return str(folder)


def test_load_emps_split(tmp_path):
    folder = _write_emps(tmp_path / "emps")
    for d in (load_emps(folder), load_benchmark("emps", folder)):
        assert (d.estimation.n_samples, d.validation.n_samples, d.test.n_samples) == (40, 10, 50)
        assert d.estimation.u.shape == (40, 1) and d.test.y.shape == (50, 1)
        np.testing.assert_array_equal(d.estimation.u[:, 0], np.arange(40.0))
        np.testing.assert_allclose(d.validation.y[:, 0], np.arange(40.0, 50.0) / 1000)
        np.testing.assert_array_equal(d.test.u[:, 0], -np.arange(50.0))
        assert d.estimation.ts == pytest.approx(0.001, rel=1e-12) and d.test.ts == d.estimation.ts
        assert d.protocol is PROTOCOLS["emps"] and d.n_initial == 20
        assert d.test.input_names == ("force",) and d.test.output_names == ("position",)
        assert [r.name for r in (d.estimation, d.validation, d.test)] == [
            "emps/estimation",
            "emps/validation",
            "emps/test",
        ]
    assert load_emps(folder, validation_fraction=0.5).validation.n_samples == 25


def _edit_file(path, old: str, new: str) -> None:
    text = open(path).read()
    assert old in text
    write_file(path, text.replace(old, new, 1))


def test_load_emps_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="DATA_EMPS.csv and DATA_EMPS_PULSES.csv"):
        load_emps(tmp_path / "nowhere")
    folder = _write_emps(tmp_path / "a")
    os.remove(os.path.join(folder, "DATA_EMPS_PULSES.csv"))
    with pytest.raises(FileNotFoundError, match="DATA_EMPS_PULSES.csv"):
        load_emps(folder)

    folder = _write_emps(tmp_path / "b")
    _edit_file(os.path.join(folder, "DATA_EMPS.csv"), "t,vir,qm,qg", "t,vir,q,qg")
    with pytest.raises(
        ValueError, match="no column 'qm'; available columns: 't', 'vir', 'q', 'qg'"
    ):
        load_emps(folder)

    folder = _write_emps(tmp_path / "c")
    _edit_file(os.path.join(folder, "DATA_EMPS_PULSES.csv"), "\n0.003,-3,", "\n0.003,nan,")
    with pytest.raises(
        ValueError, match="DATA_EMPS_PULSES.csv, line 5, column 'vir': 'nan' is not a finite"
    ):
        load_emps(folder)

    with pytest.raises(ValueError, match="sampling periods.*differ"):
        load_emps(_write_emps(tmp_path / "d", pulses_ts=0.002))
    with pytest.raises(ValueError, match="'t'.*must increase"):
        load_emps(_write_emps(tmp_path / "e", ts=-0.001))

    folder = _write_emps(tmp_path / "f")
    path = os.path.join(folder, "DATA_EMPS.csv")
    t = np.loadtxt(path, delimiter=",", skiprows=1)
    t[10:, 0] += 0.0005  # one step of 1.5 ms
    np.savetxt(path, t, delimiter=",", header="t,vir,qm,qg", comments="")
    with pytest.raises(ValueError, match="not uniformly sampled"):
        load_emps(folder)

    folder = _write_emps(tmp_path / "g", n=1)
    with pytest.raises(ValueError, match="1 sample.*at least 2"):
        load_emps(folder)


def test_load_emps_real_files(shared_data_dir):
    folder = os.path.join(shared_data_dir, "emps")
    if not all(os.path.isfile(os.path.join(folder, f)) for f in bm.EMPS_FILES):
        pytest.skip("the EMPS benchmark files are not beside this checkout")
    d = load_emps(folder)
    assert d.estimation.n_samples + d.validation.n_samples == 24_841
    assert d.test.n_samples == 24_841
    assert d.estimation.ts == pytest.approx(0.001, rel=1e-9)
    assert d.test.ts == pytest.approx(0.001, rel=1e-9)
    # First row of DATA_EMPS.csv: t 0, vir 2.5386..., qm 7.45e-06.
    np.testing.assert_allclose([d.estimation.u[0, 0], d.estimation.y[0, 0]], [2.53862809, 7.45e-6])
    assert 0.05 < float(np.std(d.test.y)) < 0.12  # metres; the README gives 82.7 mm


# --------------------------------------------------------------------------- by name


def test_load_benchmark_by_name(tmp_path, shared_data_dir):
    with pytest.raises(
        ValueError, match=r"Unknown benchmark 'silverbox'.*'cascaded_tanks'.*'wh2009'"
    ):
        load_benchmark("silverbox", tmp_path)
    text, _ = _benchmark_csv(20)
    folder = tmp_path / "tanks"
    folder.mkdir()
    write_file(folder / "dataBenchmark.csv", text)
    d = load_benchmark("cascaded_tanks", folder, validation_fraction=0.25)
    assert d.validation.n_samples == 5 and d.protocol.name == "cascaded_tanks"
    assert load_benchmark("cascaded-tanks", folder).protocol.name == "cascaded_tanks"
    shutil.rmtree(folder)
    with pytest.raises(FileNotFoundError):
        load_benchmark("cascaded_tanks", folder)


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
    # No state_initialization_window_length on the test object: the table's protocol.
    assert d.protocol is PROTOCOLS["cascaded_tanks"] and d.n_initial == 50

    d = load_nonlinear_benchmark("silverbox", test_index=2)
    assert d.test.n_samples == 22 and d.test.u[0, 0] == 200.0 and d.estimation.ts == 0.5
    with pytest.raises(ValueError, match="test_index"):
        load_nonlinear_benchmark("silverbox", test_index=3)


def _fake_package(monkeypatch, **windows):
    """A fake package whose test objects carry the given state_initialization_window_length."""

    def test_object(window):
        u = np.linspace(0.0, 1.0, 40)[:, None]
        obj = types.SimpleNamespace(u=u, y=u**2, sampling_time=0.5, name="test")
        if window is not None:
            obj.state_initialization_window_length = window
        return obj

    def loader(window, several=False):
        train = types.SimpleNamespace(u=np.zeros((60, 1)), y=np.ones((60, 1)), sampling_time=0.5)
        test = tuple(test_object(window) for _ in range(3)) if several else test_object(window)
        return lambda **kwargs: (train, test)

    fake = types.ModuleType("nonlinear_benchmarks")
    fake.Cascaded_Tanks = loader(windows.get("cascaded_tanks"))
    fake.WienerHammerBenchMark = loader(windows.get("wiener_hammerstein"))
    fake.EMPS = loader(windows.get("emps"))
    fake.Silverbox = loader(windows.get("silverbox"), several=True)
    monkeypatch.setitem(sys.modules, "nonlinear_benchmarks", fake)


def test_nonlinear_benchmark_protocol_from_window_length(monkeypatch):
    _fake_package(
        monkeypatch, cascaded_tanks=5, wiener_hammerstein=np.int64(50), emps=20, silverbox=7
    )
    # The package's value wins over the table (50 for Cascaded Tanks; 5 up to release 1.0.0).
    d = load_nonlinear_benchmark("cascaded_tanks")
    assert d.n_initial == 5 and d.protocol.name == "cascaded_tanks"
    assert d.protocol.unit == "V" and d.protocol.published == PROTOCOLS["cascaded_tanks"].published
    assert PROTOCOLS["cascaded_tanks"].n_initial == 50  # the table is left alone
    # Names map onto the table: wiener_hammerstein -> wh2009.
    d = load_nonlinear_benchmark("wiener_hammerstein")
    assert d.protocol is PROTOCOLS["wh2009"] and type(d.n_initial) is int
    assert load_nonlinear_benchmark("emps").protocol is PROTOCOLS["emps"]
    d = load_nonlinear_benchmark("silverbox", test_index=1)
    assert d.protocol.name == "silverbox" and d.n_initial == 7 and d.protocol.unit == "mV"


def test_nonlinear_benchmark_protocol_fallback_and_errors(monkeypatch):
    _fake_package(monkeypatch, emps=None, wiener_hammerstein=-1, cascaded_tanks="5")
    assert load_nonlinear_benchmark("emps").n_initial == 20  # None: the table's n
    for name in ("wiener_hammerstein", "cascaded_tanks"):
        with pytest.raises(ValueError, match="state_initialization_window_length.*non-negative"):
            load_nonlinear_benchmark(name)


def test_nonlinear_benchmark_object_mapping():
    nb = pytest.importorskip("nonlinear_benchmarks")
    u, y = np.linspace(0.0, 1.0, 12), np.linspace(2.0, 3.0, 12)
    obj = nb.Input_output_data(u=u, y=y, sampling_time=0.25, name="demo")
    for item in (obj, obj.atleast_2d()):
        rec = bm._record_from_benchmark(item)
        assert rec.u.shape == (12, 1) and rec.y.shape == (12, 1)
        np.testing.assert_array_equal(rec.u[:, 0], u)
        np.testing.assert_array_equal(rec.y[:, 0], y)
        assert rec.ts == 0.25 and rec.name == "demo"
    discrete = nb.Input_output_data(u=u, y=y)
    assert bm._record_from_benchmark(discrete).ts == 1.0


# The real package, its loaders reading .mat files written here instead of downloaded ones.


def _mat_files(tmp_path, monkeypatch, nb, files: dict) -> None:
    """Write ``{relative path: {variable: array}}`` as .mat files where the package looks.

    ``cashed_download`` is the package's download-and-cache step; every loader
    reads its files from the folder it returns.
    """
    from scipy.io import savemat

    for relative, variables in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        savemat(str(path), variables)

    def no_download(url, name_dir, *args, **kwargs):
        return str(tmp_path)

    monkeypatch.setattr(nb.benchmarks, "cashed_download", no_download)


def _column(values) -> np.ndarray:
    return np.asarray(values, dtype=float)[:, None]


def test_nonlinear_benchmark_package_cascaded_tanks(tmp_path, monkeypatch):
    """The installed package's Cascaded_Tanks objects, from local arrays, through the adapter."""
    nb = pytest.importorskip("nonlinear_benchmarks")
    rng = np.random.default_rng(0)
    u_est, u_val, y_est, y_val = rng.uniform(0, 10, size=(4, 120))
    mat = {"uEst": _column(u_est), "uVal": _column(u_val), "yEst": _column(y_est),
           "yVal": _column(y_val), "Ts": np.array([[4.0]])}  # fmt: skip
    _mat_files(tmp_path, monkeypatch, nb, {"CascadedTanksFiles/dataBenchmark.mat": mat})
    d = load_nonlinear_benchmark("cascaded_tanks", validation_fraction=0.25)
    assert (d.estimation.n_samples, d.validation.n_samples, d.test.n_samples) == (90, 30, 120)
    np.testing.assert_array_equal(d.estimation.u[:, 0], u_est[:90])
    np.testing.assert_array_equal(d.validation.y[:, 0], y_est[90:])
    np.testing.assert_array_equal(d.test.u[:, 0], u_val)
    np.testing.assert_array_equal(d.test.y[:, 0], y_val)
    assert d.test.ts == d.estimation.ts == 4.0
    # The package's state_initialization_window_length is the table's n (release 1.0.1: 50).
    assert d.protocol is PROTOCOLS["cascaded_tanks"] and d.n_initial == 50


def test_nonlinear_benchmark_package_emps_wh_and_silverbox(tmp_path, monkeypatch):
    """The package's other loaders: n, splits and sampling times as the table gives them."""
    nb = pytest.importorskip("nonlinear_benchmarks")
    t = np.arange(300) * 0.001
    emps = {
        name: {
            "t": _column(t),
            "vir": _column(np.sin(t + k)),
            "qm": _column(np.cos(t + k)),
            "qg": _column(t),
        }
        for k, name in enumerate(("DATA_EMPS", "DATA_EMPS_PULSES"))
    }
    ramp = np.arange(188_000, dtype=float)
    wh = {"uBenchMark": _column(ramp), "yBenchMark": _column(-ramp), "fs": np.array([[51200.0]])}
    silverbox = {"V1": ramp[None, :131_072], "V2": 2.0 * ramp[None, :131_072]}
    files = {f"{name}.mat": v for name, v in emps.items()}
    files["WienerHammerBenchMark.mat"] = wh
    files["SilverboxFiles/SNLS80mV.mat"] = silverbox
    _mat_files(tmp_path, monkeypatch, nb, files)  # fmt: skip

    d = load_nonlinear_benchmark("emps")
    assert d.protocol is PROTOCOLS["emps"] and d.n_initial == 20
    np.testing.assert_allclose(d.test.y[:, 0], np.cos(t + 1))
    assert d.test.ts == pytest.approx(0.001)

    d = load_nonlinear_benchmark("wiener_hammerstein", validation_fraction=0.2)
    assert d.protocol is PROTOCOLS["wh2009"] and d.n_initial == 50
    assert (d.estimation.n_samples, d.validation.n_samples, d.test.n_samples) == (
        80_000, 20_000, 78_800,
    )  # fmt: skip
    assert d.estimation.u[0, 0] == 5200 and d.test.u[0, 0] == 105_200  # samples 105200:184000
    assert d.test.ts == pytest.approx(PROTOCOLS["wh2009"].sampling_time)

    for index in range(3):  # multisine, full arrow, arrow without extrapolation
        d = load_nonlinear_benchmark("silverbox", test_index=index)
        assert d.protocol is PROTOCOLS["silverbox"] and d.n_initial == 50
        np.testing.assert_array_equal(d.test.y, 2.0 * d.test.u)
    assert d.test.n_samples == 32_000 and d.test.u[0, 0] == 100  # the arrow, samples 100:
    assert load_nonlinear_benchmark("silverbox").test.u[0, 0] == 40_650 + int(86_750 * 0.75)


def test_nonlinear_benchmark_package_ced_matches_the_table():
    """CED has no adapter name; the package's own CED test records carry the table's n."""
    nb = pytest.importorskip("nonlinear_benchmarks")
    source = open(nb.benchmarks.__file__, encoding="utf-8").read()
    windows = re.findall(r"test\[\d\]\.state_initialization_window_length = (\d+)", source)
    assert windows and {int(n) for n in windows} == {PROTOCOLS["ced"].n_initial}


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
