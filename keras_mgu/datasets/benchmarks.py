"""Measured benchmark data.

* :func:`load_cascaded_tanks`: the Cascaded Tanks benchmark from its
  ``dataBenchmark.csv``.
* :func:`load_nonlinear_benchmark`: an adapter for the optional
  ``nonlinear-benchmarks`` package (Cascaded Tanks, Silverbox,
  Wiener-Hammerstein, EMPS).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

from keras_mgu.datasets.files import _column_index, _numeric_columns, _read_table
from keras_mgu.datasets.records import Record, SysIdData

__all__ = ["CASCADED_TANKS_FILE", "load_cascaded_tanks", "load_nonlinear_benchmark"]


CASCADED_TANKS_FILE = "dataBenchmark.csv"


def load_cascaded_tanks(path: str | os.PathLike, validation_fraction: float = 0.2) -> SysIdData:
    """The measured Cascaded Tanks benchmark from its ``dataBenchmark.csv``.

    The file has columns ``uEst, uVal, yEst, yVal, Ts`` (``Ts``, 4 s, only in
    the first data row). Following the benchmark protocol, ``(uVal, yVal)`` is
    the test record (report results on it only) and the estimation data is
    ``(uEst, yEst)``; the validation record is the last
    ``validation_fraction`` of the estimation experiment and the estimation
    record keeps the rest. Both measured experiments start from the same
    unknown initial state; the validation record, being a continuation, starts
    from wherever the plant was at the cut.

    Args:
        path: The CSV file, or a folder containing ``dataBenchmark.csv``.
        validation_fraction: Fraction of ``(uEst, yEst)`` (from its end) used
            for validation, in ``(0, 1)``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a column is missing, a value is malformed, the columns have
            different lengths or ``Ts`` is missing or not positive.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, CASCADED_TANKS_FILE)
    header, rows = _read_table(path)
    data = _numeric_columns(header, rows, ["uEst", "yEst", "uVal", "yVal"], path)
    ts_idx = _column_index(header, "Ts", path)
    line, first = rows[0]
    ts_cell = first[ts_idx] if ts_idx < len(first) else ""
    try:
        ts = float(ts_cell)
    except ValueError:
        raise ValueError(
            f"The sampling period 'Ts' of {path!r} must be a number in the first data row "
            f"(line {line}); found {ts_cell!r}."
        ) from None
    if not (math.isfinite(ts) and ts > 0):
        raise ValueError(
            f"The sampling period 'Ts' of {path!r} must be positive; found {ts_cell!r}."
        )
    names = {"input_names": ("u",), "output_names": ("y",)}
    full = Record(data[:, 0:1], data[:, 1:2], ts, name="cascaded_tanks/estimation", **names)
    estimation, validation = full.split(validation_fraction)
    validation = dataclasses.replace(validation, name="cascaded_tanks/validation")
    test = Record(data[:, 2:3], data[:, 3:4], ts, name="cascaded_tanks/test", **names)
    return SysIdData(estimation, validation, test)


# --------------------------------------------------------------------------- nonlinear-benchmarks

_BENCHMARK_LOADERS = {
    "cascaded_tanks": "Cascaded_Tanks",
    "silverbox": "Silverbox",
    "wiener_hammerstein": "WienerHammerBenchMark",
    "emps": "EMPS",
}


def _record_from_benchmark(data: Any, name: str | None = None) -> Record:
    """Map an object with ``u``, ``y`` and ``sampling_time`` attributes to a Record.

    1-D signals become one channel; a missing ``sampling_time`` (a
    discrete-time record) becomes ``ts = 1``.
    """
    try:
        u, y, ts = data.u, data.y, data.sampling_time
    except AttributeError:
        raise TypeError(
            "Expected a data object with `u`, `y` and `sampling_time` attributes; received "
            f"{type(data).__name__}."
        ) from None
    u = np.asarray(u, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    u = u[:, None] if u.ndim == 1 else u
    y = y[:, None] if y.ndim == 1 else y
    label = name if name is not None else str(getattr(data, "name", "") or "")
    return Record(u, y, 1.0 if ts is None else float(ts), name=label)


def _single(part: Any, index: int, what: str) -> Any:
    if isinstance(part, (tuple, list)):
        if not -len(part) <= index < len(part):
            raise ValueError(f"`{what}` must index one of the {len(part)} records; got {index}.")
        return part[index]
    return part


def load_nonlinear_benchmark(
    name: str,
    validation_fraction: float = 0.2,
    test_index: int = 0,
    dir_placement: str | None = None,
    force_download: bool = False,
) -> SysIdData:
    """A benchmark from the optional ``nonlinear-benchmarks`` package.

    ``name`` is one of ``"cascaded_tanks"``, ``"silverbox"``,
    ``"wiener_hammerstein"`` or ``"emps"``. The package's own train/test split
    is kept: the validation record is the last ``validation_fraction`` of its
    training record, the estimation record the rest; ``test_index`` picks the
    test record where the package gives several (Silverbox: 0 multisine,
    1 full arrow, 2 arrow without extrapolation). The package downloads the
    data on first use into its cache (``dir_placement`` overrides the cache
    folder).

    Raises:
        ImportError: the package is not installed
            (``pip install nonlinear-benchmarks``).
        ValueError: unknown ``name``.
    """
    if name not in _BENCHMARK_LOADERS:
        raise ValueError(
            f"Unknown benchmark {name!r}; expected one of {sorted(_BENCHMARK_LOADERS)}."
        )
    try:
        import nonlinear_benchmarks
    except ImportError as err:
        raise ImportError(
            "load_nonlinear_benchmark needs the optional `nonlinear-benchmarks` package: "
            "pip install nonlinear-benchmarks"
        ) from err
    loader = getattr(nonlinear_benchmarks, _BENCHMARK_LOADERS[name])
    train, test = loader(
        train_test_split=True,
        dir_placement=dir_placement,
        force_download=force_download,
        atleast_2d=True,
    )
    full = _record_from_benchmark(_single(train, 0, "train"), name=f"{name}/estimation")
    estimation, validation = full.split(validation_fraction)
    validation = dataclasses.replace(validation, name=f"{name}/validation")
    test = _record_from_benchmark(_single(test, test_index, "test_index"), name=f"{name}/test")
    return SysIdData(estimation, validation, test)
