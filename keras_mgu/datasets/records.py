"""Records: one input/output experiment and the estimation/validation/test triple.

* :class:`Record`: one experiment, ``u`` ``(N, n_inputs)`` and ``y``
  ``(N, n_outputs)`` sampled every ``ts`` seconds, or several experiments
  end to end (:func:`join_experiments`; ``boundaries`` says where each
  starts).
* :class:`SysIdData`: the estimation, validation and test records of one
  system.

Also the input checks they share with the rest of the package (signals,
channel names, sampling period).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_mgu.datasets.protocols import Protocol

__all__ = ["VALIDATION_FRACTION", "Record", "SysIdData", "join_experiments"]

#: The share of the estimation samples, cut from the end, that validates when no
#: validation record is given (``keras-mgu identify --val-fraction``'s default).
VALIDATION_FRACTION = 0.2


def _as_signal(name: str, value: Any) -> np.ndarray:
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`{name}` must be a numeric array; could not convert it: {err}") from None
    if arr.ndim != 2:
        raise ValueError(
            f"`{name}` must be a 2-D array of shape (N, channels); received shape {arr.shape} "
            f"(reshape a single channel with `.reshape(-1, 1)`)."
        )
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(
            f"`{name}` must have at least one sample and one channel; shape {arr.shape}."
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"`{name}` must contain only finite values; found {arr[row, col]} at sample {row}, "
            f"channel {col} ({int(bad.sum())} non-finite values in all)."
        )
    return arr


def _as_names(field: str, names: Any, count: int, prefix: str) -> tuple[str, ...]:
    if names is None or (isinstance(names, (tuple, list)) and len(names) == 0):
        return tuple(f"{prefix}{i}" for i in range(count))
    if isinstance(names, str):
        names = (names,)
    names = tuple(names)
    if len(names) != count or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"`{field}` must be {count} string(s), one per channel; received {names!r}."
        )
    return names


def _check_ts(ts: Any) -> float:
    try:
        value = float(ts)
    except (TypeError, ValueError):
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"`ts` (the sampling period in seconds) must be positive; received {ts!r}."
        )
    return value


def _check_boundaries(boundaries: Any, n_samples: int) -> tuple[int, ...]:
    try:
        values = tuple(int(b) for b in boundaries)
    except (TypeError, ValueError):
        values = None
    if values is None or any(
        not 0 < b < n_samples or (k and b <= values[k - 1]) for k, b in enumerate(values)
    ):
        raise ValueError(
            f"`boundaries` must be increasing sample indices in (0, {n_samples}); received "
            f"{boundaries!r}."
        )
    return values


@dataclasses.dataclass(frozen=True, eq=False)
class Record:
    """One input/output experiment sampled with period ``ts``.

    Attributes:
        u: ``(N, n_inputs)`` float64 array; ``u[k]`` is held over
            ``[k ts, (k + 1) ts)``.
        y: ``(N, n_outputs)`` float64 array; ``y[k]`` is measured at ``k ts``.
        ts: Sampling period in seconds (positive).
        input_names, output_names: One name per channel; empty means
            ``("u0", "u1", ...)`` / ``("y0", ...)``.
        name: Free-form label.
        boundaries: Samples at which a new experiment starts, for several
            experiments end to end (:func:`join_experiments`); ``()``: one
            experiment. Each experiment starts from a state of its own, not
            where the one before it ended: training windows do not cross a
            boundary.

    The arrays are converted to float64 copies. Raises ``ValueError`` when an
    array is not 2-D, the lengths differ, a value is not finite, ``ts`` is not
    positive, the names do not match the channels or the boundaries are not
    increasing samples inside the record.
    """

    u: np.ndarray
    y: np.ndarray
    ts: float = 1.0
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    name: str = ""
    boundaries: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        u = _as_signal("u", self.u)
        y = _as_signal("y", self.y)
        if u.shape[0] != y.shape[0]:
            raise ValueError(
                f"`u` and `y` must have the same number of samples; received u with {u.shape[0]} "
                f"and y with {y.shape[0]}."
            )
        object.__setattr__(self, "u", u)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "ts", _check_ts(self.ts))
        object.__setattr__(
            self, "input_names", _as_names("input_names", self.input_names, u.shape[1], "u")
        )
        object.__setattr__(
            self, "output_names", _as_names("output_names", self.output_names, y.shape[1], "y")
        )
        object.__setattr__(self, "name", str(self.name))
        object.__setattr__(self, "boundaries", _check_boundaries(self.boundaries, u.shape[0]))

    @property
    def n_samples(self) -> int:
        return int(self.u.shape[0])

    @property
    def n_inputs(self) -> int:
        return int(self.u.shape[1])

    @property
    def n_outputs(self) -> int:
        return int(self.y.shape[1])

    @property
    def experiments(self) -> list[tuple[int, int]]:
        """``(start, stop)`` samples of each experiment (one pair without boundaries)."""
        edges = [0, *self.boundaries, self.n_samples]
        return list(zip(edges[:-1], edges[1:]))

    @property
    def time(self) -> np.ndarray:
        """Sample instants ``k * ts``, shape ``(N,)``."""
        return np.arange(self.n_samples) * self.ts

    def slice(self, start: int | None = None, stop: int | None = None, name: str | None = None):
        """The samples ``[start:stop]`` as a new :class:`Record` (the boundaries inside kept)."""
        first, last, _ = slice(start, stop).indices(self.n_samples)
        return dataclasses.replace(
            self,
            u=self.u[start:stop],
            y=self.y[start:stop],
            name=self.name if name is None else name,
            boundaries=tuple(b - first for b in self.boundaries if first < b < last),
        )

    def split(self, validation_fraction: float) -> tuple[Record, Record]:
        """Split into ``(first part, last validation_fraction of the samples)``.

        With several experiments the validation part is cut from the end of
        the last one, and must not reach into the one before.
        """
        fraction = float(validation_fraction)
        if not 0.0 < fraction < 1.0:
            raise ValueError(
                f"`validation_fraction` must be in (0, 1); received {validation_fraction!r}."
            )
        n_val = int(round(self.n_samples * fraction))
        if n_val < 1 or n_val >= self.n_samples:
            raise ValueError(
                f"validation_fraction={fraction} of {self.n_samples} samples leaves an empty part."
            )
        cut = self.n_samples - n_val
        last_start = self.experiments[-1][0]
        if cut < last_start:
            raise ValueError(
                f"validation_fraction={fraction} of {self.n_samples} samples is {n_val} samples, "
                f"more than the last experiment's {self.n_samples - last_start}; expected a "
                "validation part within the last experiment (give a smaller fraction or a "
                "validation record of its own)."
            )
        return self.slice(0, cut), self.slice(cut, None)


def join_experiments(records: Sequence[Record], name: str | None = None) -> Record:
    """Several experiments of one system as one :class:`Record` with ``boundaries``.

    The records must have the same channels and sampling period; the result
    keeps the first one's channel names (and name, unless ``name`` is given).
    One record is returned as it is.
    """
    records = list(records)
    if not records or not all(isinstance(r, Record) for r in records):
        raise TypeError("`records` must be a non-empty sequence of Record objects.")
    first = records[0]
    for rec in records[1:]:
        if (rec.n_inputs, rec.n_outputs) != (first.n_inputs, first.n_outputs):
            raise ValueError(
                f"Experiment {rec.name!r} has {rec.n_inputs} input(s) and {rec.n_outputs} "
                f"output(s) but {first.name!r} has {first.n_inputs} and {first.n_outputs}; "
                "expected the same channels in every experiment."
            )
        if not math.isclose(rec.ts, first.ts, rel_tol=1e-9):
            raise ValueError(
                f"Experiment {rec.name!r} is sampled every {rec.ts} s but {first.name!r} every "
                f"{first.ts} s; expected one sampling period."
            )
    if len(records) == 1 and name is None:
        return first
    starts = np.cumsum([0] + [r.n_samples for r in records])
    boundaries = [
        int(start + b)
        for rec, start in zip(records, starts[:-1])
        for b in (0, *rec.boundaries)
        if start + b > 0
    ]
    return dataclasses.replace(
        first,
        u=np.concatenate([r.u for r in records]),
        y=np.concatenate([r.y for r in records]),
        name=first.name if name is None else name,
        boundaries=tuple(boundaries),
    )


@dataclasses.dataclass(frozen=True, eq=False)
class SysIdData:
    """Estimation (training), validation and test records of one system.

    All three must have the same input/output channels. The validation record
    may be carved from the end of the estimation experiment (see
    :meth:`Record.split`).

    ``protocol`` (optional) is the benchmark's :class:`Protocol`: how the test
    record is scored (``n_initial``, unit and scale of the published figures).
    Loaders of measured benchmarks attach it; it is ``None`` otherwise.
    """

    estimation: Record
    validation: Record
    test: Record
    protocol: Protocol | None = None

    def __post_init__(self) -> None:
        records = {"estimation": self.estimation, "validation": self.validation, "test": self.test}
        for field, rec in records.items():
            if not isinstance(rec, Record):
                raise TypeError(f"`{field}` must be a Record; received {type(rec).__name__}.")
        if self.protocol is not None and not isinstance(self.protocol, Protocol):
            raise TypeError(
                f"`protocol` must be a Protocol or None; received {type(self.protocol).__name__}."
            )
        ref = self.estimation
        for field, rec in records.items():
            if (rec.n_inputs, rec.n_outputs) != (ref.n_inputs, ref.n_outputs):
                raise ValueError(
                    f"The {field} record has {rec.n_inputs} input(s) and {rec.n_outputs} "
                    f"output(s) but the estimation record has {ref.n_inputs} and {ref.n_outputs}."
                )

    @property
    def n_initial(self) -> int | None:
        """Measured test outputs a model may use to set its state (``protocol.n_initial``).

        ``None`` when no protocol is attached.
        """
        return None if self.protocol is None else self.protocol.n_initial

    @classmethod
    def from_experiments(
        cls,
        experiments: Record | Sequence[Record],
        test: Record | None = None,
        validation: Record | None = None,
        validation_fraction: float = VALIDATION_FRACTION,
    ) -> SysIdData:
        """Estimation experiments, with a validation record or the end of the last as one.

        ``experiments`` (one record, or several separate experiments joined by
        :func:`join_experiments`) estimate; ``validation``, else the last
        ``validation_fraction`` of their samples (:meth:`Record.split`),
        validates. Without a ``test`` record the validation record stands in
        (:func:`keras_mgu.sysid.identify` does not use the test record).
        """
        if isinstance(experiments, Record):
            experiments = [experiments]
        estimation = join_experiments(experiments)
        if validation is None:
            estimation, validation = estimation.split(validation_fraction)
        return cls(estimation, validation, validation if test is None else test)

    @classmethod
    def coerce(cls, data: Any) -> SysIdData:
        """``data`` itself when a :class:`SysIdData`, else :meth:`from_experiments` of it.

        Raises ``TypeError`` unless ``data`` is a SysIdData, a :class:`Record` or
        a non-empty list or tuple of Records.
        """
        if isinstance(data, cls):
            return data
        if _is_experiments(data):
            return cls.from_experiments(data)
        raise TypeError(
            "`data` must be a keras_mgu.datasets.SysIdData, a Record (its last "
            f"{VALIDATION_FRACTION:.0%} validates) or a non-empty list of Records (separate "
            f"experiments; the end of the last validates); received {_describe(data)}."
        )


def _is_experiments(data: Any) -> bool:
    """Whether ``data`` is a Record or a non-empty list or tuple of Records."""
    if isinstance(data, Record):
        return True
    return (
        isinstance(data, (list, tuple))
        and bool(data)
        and all(isinstance(item, Record) for item in data)
    )


def _describe(data: Any) -> str:
    """``data``'s type, and for a list or tuple its items' types."""
    if isinstance(data, (list, tuple)) and data:
        kinds = sorted({type(item).__name__ for item in data})
        return f"a {type(data).__name__} of {', '.join(kinds)}"
    return type(data).__name__
