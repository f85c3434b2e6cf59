"""Tables: the columns of one data file, and the :class:`Record` chosen from them.

A :class:`Table` is what a reader (:mod:`~keras_mgu.datasets.text_files`,
:mod:`~keras_mgu.datasets.array_files`) found in a file: its columns, their
names (``None`` when the file names none) and where each value came from
(a line of a text file, a sample of an array). :func:`record_from_table`
picks the input and output columns by name or by 0-based index and checks
every value it takes: a cell that is not a finite number is an error that
says which file, line (or sample) and column.
"""

from __future__ import annotations

import abc
import numbers
import os
from collections.abc import Sequence

import numpy as np

from keras_mgu.datasets.records import Record

__all__ = ["Table", "record_from_table"]


class Table(abc.ABC):
    """The columns of one file, before their values are checked.

    Attributes:
        path: The file.
        names: One name per column, or ``None`` when the file names none
            (columns are then known by their 0-based index).
        header_row: Whether the names come from a header row of a text file
            (such names cannot be replaced by ``columns``).
    """

    def __init__(self, path: str, names: Sequence[str] | None, header_row: bool = False):
        self.path = path
        self.names = None if names is None else tuple(names)
        self.header_row = header_row

    @property
    @abc.abstractmethod
    def n_columns(self) -> int:
        """Number of columns."""

    @abc.abstractmethod
    def values(self, index: int) -> np.ndarray:
        """Column ``index`` as a float64 array ``(N,)``; raises ``ValueError`` at a bad value."""

    def column_label(self, index: int) -> str:
        """``column 'y'`` or ``column 2`` (0-based), as error messages name it."""
        if self.names is None:
            return f"column {index} (0-based)"
        return f"column {self.names[index]!r}"

    def rename(self, columns: Sequence[str]) -> None:
        """Name the columns ``columns`` (one name per column)."""
        columns = _as_names("columns", columns)
        if self.header_row:
            raise ValueError(
                f"{self.path} has a header row ({', '.join(self.names)}); names given with "
                "`columns` are for files without one: select its columns by header name."
            )
        if len(columns) != self.n_columns:
            raise ValueError(
                f"{self.path} has {self.n_columns} column(s) but {len(columns)} name(s) were "
                f"given for them ({', '.join(columns)}); expected one name per column."
            )
        self.names = tuple(columns)

    def index(self, selector: str) -> int:
        """The column a name (or, failing that, a 0-based index such as ``"2"``) selects."""
        if self.names is not None and selector in self.names:
            matches = [i for i, name in enumerate(self.names) if name == selector]
            if len(matches) > 1:
                raise ValueError(f"{self.path}: column {selector!r} appears {len(matches)} times.")
            return matches[0]
        if selector.isdigit() and int(selector) < self.n_columns:
            return int(selector)
        raise ValueError(f"{self.path}: no column {selector!r}; {self._available()}.")

    def _available(self) -> str:
        indices = f"0-based indices 0 to {self.n_columns - 1}"
        if self.names is None:
            return (
                f"the file has no header row, so its columns are known by {indices} "
                "(or name them all with `columns`)"
            )
        return f"available columns: {', '.join(repr(n) for n in self.names)} (or {indices})"


def _as_names(field: str, names: str | Sequence[str]) -> list[str]:
    if isinstance(names, str):
        names = [names]
    names = [str(n) if isinstance(n, numbers.Integral) and not isinstance(n, bool) else n
             for n in names]  # fmt: skip
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(
            f"`{field}` must be a non-empty list of column names or 0-based indices; "
            f"received {names!r}."
        )
    return names


def record_from_table(
    table: Table,
    inputs: Sequence[str],
    outputs: Sequence[str],
    ts: float = 1.0,
    columns: Sequence[str] | None = None,
    name: str | None = None,
) -> Record:
    """The :class:`Record` of ``table``'s ``inputs`` and ``outputs`` columns.

    Args:
        table: The file's columns.
        inputs, outputs: Column names, or 0-based column indices (``"0"``, or
            ``0``) for files whose columns have no (such) name.
        ts: Sampling period in seconds.
        columns: Names for all the columns, in order, for a file without a
            header row (``None``: keep the file's names or indices).
        name: The record's name (default: the file's name without suffix).

    Returns:
        ``Record`` with ``u`` ``(N, len(inputs))`` and ``y`` ``(N, len(outputs))``;
        channels named after the columns (``u0``, ``y0``, ... for unnamed ones).
    """
    inputs, outputs = _as_names("inputs", inputs), _as_names("outputs", outputs)
    if columns is not None:
        table.rename(columns)
    picked = [table.index(s) for s in inputs + outputs]
    both = sorted(set(picked[: len(inputs)]) & set(picked[len(inputs) :]))
    if both:
        labels = ", ".join(table.column_label(i) for i in both)
        raise ValueError(
            f"{table.path}: {labels} is selected as an input and as an output; a model "
            "predicts its outputs from other columns: give different input and output columns."
        )
    data = np.stack([table.values(i) for i in picked], axis=1)
    labels = None if table.names is None else [table.names[i] for i in picked]
    if name is None:
        name = os.path.splitext(os.path.basename(table.path))[0]
    return Record(
        u=data[:, : len(inputs)],
        y=data[:, len(inputs) :],
        ts=ts,
        input_names=() if labels is None else tuple(labels[: len(inputs)]),
        output_names=() if labels is None else tuple(labels[len(inputs) :]),
        name=name,
    )
