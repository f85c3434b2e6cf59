"""Measured benchmark data.

* :func:`load_cascaded_tanks`: the Cascaded Tanks benchmark from its
  ``dataBenchmark.csv``.
* :func:`load_wh2009`: the Wiener-Hammerstein benchmark (2009) from its
  ``WienerHammerBenchmark.csv``.
* :func:`load_emps`: the EMPS benchmark from ``DATA_EMPS.csv`` and
  ``DATA_EMPS_PULSES.csv``.
* :func:`load_benchmark`: any of those three by name.
* :func:`load_nonlinear_benchmark`: an adapter for the optional
  ``nonlinear-benchmarks`` package (Cascaded Tanks, Silverbox,
  Wiener-Hammerstein, EMPS).

Every loader attaches the benchmark's :class:`~keras_mgu.datasets.Protocol`
(``data.protocol``, ``data.n_initial``): how the test record is scored.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_mgu.datasets.protocols import PROTOCOLS, Protocol, dataset_key
from keras_mgu.datasets.records import Record, SysIdData
from keras_mgu.datasets.text_files import read_text_table

__all__ = [
    "CASCADED_TANKS_FILE",
    "EMPS_FILES",
    "WH2009_FILE",
    "load_benchmark",
    "load_cascaded_tanks",
    "load_emps",
    "load_nonlinear_benchmark",
    "load_wh2009",
]


CASCADED_TANKS_FILE = "dataBenchmark.csv"


def _file_in(path: str | os.PathLike, file_name: str) -> str:
    """``path`` itself, or ``path/file_name`` when ``path`` is a folder."""
    path = os.fspath(path)
    return os.path.join(path, file_name) if os.path.isdir(path) else path


def _split_estimation(
    full: Record, validation_fraction: float, prefix: str
) -> tuple[Record, Record]:
    """``(estimation, validation)``: the last ``validation_fraction`` of ``full`` validates."""
    estimation, validation = full.split(validation_fraction)
    return estimation, dataclasses.replace(validation, name=f"{prefix}/validation")


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

    Returns:
        :class:`SysIdData` with ``u``/``y`` of shape ``(N, 1)`` in volts
        (819, 205 and 1024 samples by default), ``ts = 4`` and
        ``protocol = PROTOCOLS["cascaded_tanks"]`` (``n_initial = 50``, V).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a column is missing, a value is not a finite number, a row
            has another number of cells than the header, or ``Ts`` is missing
            or not positive (file, line and column named).
    """
    path = _file_in(path, CASCADED_TANKS_FILE)
    data, first = _columns(path, ["uEst", "yEst", "uVal", "yVal"], first_row=["Ts"])
    ts = _positive_cell(first["Ts"], "The sampling period 'Ts'", path)
    names = {"input_names": ("u",), "output_names": ("y",)}
    full = Record(data[:, 0:1], data[:, 1:2], ts, name="cascaded_tanks/estimation", **names)
    estimation, validation = _split_estimation(full, validation_fraction, "cascaded_tanks")
    test = Record(data[:, 2:3], data[:, 3:4], ts, name="cascaded_tanks/test", **names)
    return SysIdData(estimation, validation, test, protocol=PROTOCOLS["cascaded_tanks"])


# --------------------------------------------------------------------------- columns by name


def _columns(
    path: str, columns: Sequence[str], first_row: Sequence[str] = ()
) -> tuple[np.ndarray, dict[str, str]]:
    """Named columns of a benchmark's text file (:func:`read_text_table`).

    Returns the ``(N, len(columns))`` float64 array and the first data row's
    cells of the ``first_row`` columns (values, such as a sampling rate, that
    the file gives in its first row only). Every value of ``columns`` must be
    a finite number; errors name the file, line and column.
    """
    table = read_text_table(path)
    data = np.stack([table.values(table.index(c)) for c in columns], axis=1)
    return data, {c: table.first_cell(table.index(c)) for c in first_row}


def _positive_cell(cell: str, what: str, path: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"{what} of {path!r} must be a positive number in the first data row; found {cell!r}."
        )
    return value


# --------------------------------------------------------------------------- Wiener-Hammerstein

WH2009_FILE = "WienerHammerBenchmark.csv"
_WH_ESTIMATION = (5200, 105200)  # samples of the estimation record (protocol "wh2009")
_WH_TEST = (105200, 184000)  # samples of the test record


def load_wh2009(path: str | os.PathLike, validation_fraction: float = 0.2) -> SysIdData:
    """The Wiener-Hammerstein benchmark (2009) from its ``WienerHammerBenchmark.csv``.

    The file has columns ``uBenchMark`` (input, V), ``yBenchMark`` (output, V)
    and ``fs`` (sampling rate in Hz, first data row only); 188,000 rows. The
    split is that of the ``"wh2009"`` protocol: estimation data = samples
    5200:105200 (its last ``validation_fraction`` is the validation record),
    test record = samples 105200:184000 (78,800 samples; report on it only).
    Scores are published in mV over test samples ``n_initial = 50`` onward.

    Args:
        path: The CSV file, or a folder containing ``WienerHammerBenchmark.csv``.
        validation_fraction: Fraction of the estimation data (from its end)
            used for validation, in ``(0, 1)``.

    Returns:
        :class:`SysIdData` with ``u``/``y`` of shape ``(N, 1)`` in volts
        (80,000, 20,000 and 78,800 samples by default), ``ts = 1 / fs`` and
        ``protocol = PROTOCOLS["wh2009"]``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a column is missing, a value is not a finite number,
            ``fs`` is missing or not positive, or the file has fewer than
            184,000 samples.
    """
    path = _file_in(path, WH2009_FILE)
    data, first = _columns(path, ["uBenchMark", "yBenchMark"], first_row=["fs"])
    fs = _positive_cell(first["fs"], "The sampling rate 'fs'", path)
    if data.shape[0] < _WH_TEST[1]:
        raise ValueError(
            f"{path!r} has {data.shape[0]} samples; the wh2009 protocol needs at least "
            f"{_WH_TEST[1]} (estimation = samples {_WH_ESTIMATION[0]}:{_WH_ESTIMATION[1]}, "
            f"test = samples {_WH_TEST[0]}:{_WH_TEST[1]})."
        )
    names = {"ts": 1.0 / fs, "input_names": ("u",), "output_names": ("y",)}
    est, test = data[slice(*_WH_ESTIMATION)], data[slice(*_WH_TEST)]
    full = Record(est[:, :1], est[:, 1:], name="wh2009/estimation", **names)
    estimation, validation = _split_estimation(full, validation_fraction, "wh2009")
    test = Record(test[:, :1], test[:, 1:], name="wh2009/test", **names)
    return SysIdData(estimation, validation, test, protocol=PROTOCOLS["wh2009"])


# --------------------------------------------------------------------------- EMPS

EMPS_FILES = ("DATA_EMPS.csv", "DATA_EMPS_PULSES.csv")  # estimation, test
_EMPS_TS_TOLERANCE = 0.01  # largest relative deviation of a time step from the mean


def _emps_record(path: str, name: str) -> Record:
    """``u = vir`` (N) and ``y = qm`` (m) of one EMPS file, ``ts`` from its ``t`` column."""
    data, _ = _columns(path, ["t", "vir", "qm"])
    if data.shape[0] < 2:
        raise ValueError(
            f"{path!r} has {data.shape[0]} sample(s); at least 2 are needed to find the "
            "sampling period from column 't'."
        )
    steps = np.diff(data[:, 0])
    ts = float(steps.mean())
    if not ts > 0:
        raise ValueError(
            f"Column 't' of {path!r} must increase (mean time step {ts!r}); expected times in s."
        )
    deviation = float(np.abs(steps - ts).max()) / ts
    if deviation > _EMPS_TS_TOLERANCE:
        raise ValueError(
            f"Column 't' of {path!r} is not uniformly sampled: a time step differs from the mean "
            f"{ts:.6g} s by {100 * deviation:.3g}% (at most {100 * _EMPS_TS_TOLERANCE:g}% allowed)."
        )
    return Record(
        data[:, 1:2],
        data[:, 2:3],
        ts,
        input_names=("force",),
        output_names=("position",),
        name=name,
    )


def load_emps(path: str | os.PathLike, validation_fraction: float = 0.2) -> SysIdData:
    """The EMPS benchmark from ``DATA_EMPS.csv`` and ``DATA_EMPS_PULSES.csv``.

    Both files have columns ``t`` (s), ``vir`` (motor force, N), ``qm``
    (measured motor position, m) and ``qg`` (reference position; not used);
    the pulses file also has ``pulses_N``. ``u = vir`` and ``y = qm``. The
    split is that of the ``"emps"`` protocol: estimation data = all of
    ``DATA_EMPS.csv`` (its last ``validation_fraction`` is the validation
    record), test record = all of ``DATA_EMPS_PULSES.csv`` (report on it only).
    Scores are published in mm over test samples ``n_initial = 20`` onward.

    Args:
        path: The folder holding both files.
        validation_fraction: Fraction of the estimation data (from its end)
            used for validation, in ``(0, 1)``.

    Returns:
        :class:`SysIdData` with ``u`` ``(N, 1)`` in N and ``y`` ``(N, 1)`` in m
        (19,873, 4,968 and 24,841 samples for the published files), ``ts``
        the mean step of ``t`` (about 1 ms) and ``protocol = PROTOCOLS["emps"]``.

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: a column is missing, a value is not a finite number, ``t``
            is not increasing and uniformly sampled, or the two files'
            sampling periods differ by more than 1%.
    """
    folder = os.fspath(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"No such folder: {folder!r}; expected the folder holding {' and '.join(EMPS_FILES)}."
        )
    full = _emps_record(os.path.join(folder, EMPS_FILES[0]), "emps/estimation")
    test = _emps_record(os.path.join(folder, EMPS_FILES[1]), "emps/test")
    if abs(test.ts - full.ts) > _EMPS_TS_TOLERANCE * full.ts:
        raise ValueError(
            f"The sampling periods of {EMPS_FILES[0]} ({full.ts:.6g} s) and {EMPS_FILES[1]} "
            f"({test.ts:.6g} s) in {folder!r} differ; expected the same period."
        )
    estimation, validation = _split_estimation(full, validation_fraction, "emps")
    return SysIdData(estimation, validation, test, protocol=PROTOCOLS["emps"])


# --------------------------------------------------------------------------- by name

_FILE_LOADERS = {
    "cascaded_tanks": load_cascaded_tanks,
    "wh2009": load_wh2009,
    "emps": load_emps,
}


def load_benchmark(
    name: str, path: str | os.PathLike, validation_fraction: float = 0.2
) -> SysIdData:
    """A measured benchmark by name, from its files under ``path``.

    ``name`` is ``"cascaded_tanks"`` (:func:`load_cascaded_tanks`),
    ``"wh2009"`` (:func:`load_wh2009`) or ``"emps"`` (:func:`load_emps`);
    ``path`` and ``validation_fraction`` are passed on (``-`` in ``name``
    reads as ``_``). The returned :class:`SysIdData` carries the benchmark's
    protocol.

    Raises:
        ValueError: unknown ``name`` (the message lists the known ones), or
            any error of the loader.
    """
    name = dataset_key(name)
    if name not in _FILE_LOADERS:
        raise ValueError(
            f"Unknown benchmark {name!r} for load_benchmark; expected one of "
            f"{sorted(_FILE_LOADERS)}."
        )
    return _FILE_LOADERS[name](path, validation_fraction=validation_fraction)


# --------------------------------------------------------------------------- nonlinear-benchmarks

_BENCHMARK_LOADERS = {
    "cascaded_tanks": "Cascaded_Tanks",
    "silverbox": "Silverbox",
    "wiener_hammerstein": "WienerHammerBenchMark",
    "emps": "EMPS",
}
_BENCHMARK_PROTOCOLS = {  # name here -> key of PROTOCOLS
    "cascaded_tanks": "cascaded_tanks",
    "silverbox": "silverbox",
    "wiener_hammerstein": "wh2009",
    "emps": "emps",
}


def _benchmark_protocol(name: str, test: Any) -> Protocol:
    """The table's protocol for ``name``, with ``n_initial`` taken from the test object.

    The package sets ``state_initialization_window_length`` on its test
    records (its value has changed between releases); without one the
    table's ``n_initial`` is kept.
    """
    protocol = PROTOCOLS[_BENCHMARK_PROTOCOLS[name]]
    n = getattr(test, "state_initialization_window_length", None)
    if n is None:
        return protocol
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(
            f"The test record's `state_initialization_window_length` must be a non-negative "
            f"integer; received {n!r}."
        )
    if int(n) == protocol.n_initial:
        return protocol
    return dataclasses.replace(protocol, n_initial=int(n))


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
    ``"wiener_hammerstein"`` or ``"emps"`` (``-`` reads as ``_``). The
    package's own train/test split is kept: the validation record is the last
    ``validation_fraction`` of its training record, the estimation record the
    rest; ``test_index`` picks the test record where the package gives several
    (Silverbox: 0 multisine, 1 full arrow, 2 arrow without extrapolation). The package downloads the
    data on first use into its cache (``dir_placement`` overrides the cache
    folder).

    The result carries the benchmark's protocol (``PROTOCOLS`` entry
    ``"cascaded_tanks"``, ``"silverbox"``, ``"wh2009"`` or ``"emps"``) with
    ``n_initial`` taken from the test record's
    ``state_initialization_window_length`` when the package sets it (its
    value depends on the package release).

    Returns:
        :class:`SysIdData` with ``u`` ``(N, n_inputs)`` and ``y``
        ``(N, n_outputs)`` (1-D signals become one channel).

    Raises:
        ImportError: the package is not installed
            (``pip install nonlinear-benchmarks``).
        ValueError: unknown ``name``, or an invalid
            ``state_initialization_window_length``.
    """
    name = dataset_key(name)
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
    estimation, validation = _split_estimation(full, validation_fraction, name)
    test_data = _single(test, test_index, "test_index")
    protocol = _benchmark_protocol(name, test_data)
    test = _record_from_benchmark(test_data, name=f"{name}/test")
    return SysIdData(estimation, validation, test, protocol=protocol)
