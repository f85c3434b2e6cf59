"""Tests of keras_mgu.datasets.benchmarks: the Cascaded Tanks file and nonlinear-benchmarks."""

from __future__ import annotations

import os
import sys
import types

import numpy as np
import pytest

from keras_mgu.datasets import benchmarks as bm
from keras_mgu.datasets import (
    load_cascaded_tanks,
    load_nonlinear_benchmark,
)
from tests.datasets.common import write_file

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
    with pytest.raises(ValueError, match="'yVal' not found"):
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
        rec = bm._record_from_benchmark(item)
        assert rec.u.shape == (12, 1) and rec.y.shape == (12, 1)
        np.testing.assert_array_equal(rec.u[:, 0], u)
        np.testing.assert_array_equal(rec.y[:, 0], y)
        assert rec.ts == 0.25 and rec.name == "demo"
    discrete = nb.Input_output_data(u=u, y=y)
    assert bm._record_from_benchmark(discrete).ts == 1.0


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
