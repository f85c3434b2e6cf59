"""CSV files: :func:`load_csv_records` reads a :class:`Record` from named columns.

The table readers here (header row, blank lines skipped, numeric columns with
messages that name the column and line) are shared with the benchmark file
loader in :mod:`keras_mgu.datasets.benchmarks`.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_mgu.datasets.records import Record

__all__ = ["load_csv_records"]


def _read_table(path: str | os.PathLike) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and non-blank rows ``(line number, cells)`` of a CSV file."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such data file: {path!r}.")
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = None
        rows = []
        for cells in reader:
            cells = [c.strip() for c in cells]
            if not any(cells):
                continue
            if header is None:
                header = cells
            else:
                rows.append((reader.line_num, cells))
    if header is None:
        raise ValueError(f"The CSV file {path!r} is empty (expected a header row).")
    return header, rows


def _column_index(header: list[str], column: str, path: str) -> int:
    matches = [i for i, h in enumerate(header) if h == column]
    available = ", ".join(repr(h) for h in header if h)
    if not matches:
        raise ValueError(
            f"Column {column!r} not found in {path!r}; available columns: {available}."
        )
    if len(matches) > 1:
        raise ValueError(
            f"Column {column!r} appears {len(matches)} times in the header of {path!r}."
        )
    return matches[0]


def _numeric_columns(
    header: list[str], rows: list[tuple[int, list[str]]], columns: Sequence[str], path: str
) -> np.ndarray:
    """``(N, len(columns))`` float array; every column must fill the same leading rows."""
    if not rows:
        raise ValueError(f"The CSV file {path!r} has a header but no data rows.")
    values, lengths = [], {}
    for column in columns:
        idx = _column_index(header, column, path)
        cells = [(line, c[idx] if idx < len(c) else "") for line, c in rows]
        filled = [i for i, (_, c) in enumerate(cells) if c]
        if not filled:
            raise ValueError(f"Column {column!r} of {path!r} has no values (all cells are empty).")
        length = filled[-1] + 1
        col = np.empty(length)
        for i, (line, cell) in enumerate(cells[:length]):
            if not cell:
                raise ValueError(f"Empty cell in column {column!r} of {path!r} at line {line}.")
            try:
                col[i] = float(cell)
            except ValueError:
                raise ValueError(
                    f"Non-numeric value {cell!r} in column {column!r} of {path!r} at line {line}."
                ) from None
            if not math.isfinite(col[i]):
                raise ValueError(
                    f"Non-finite value {cell!r} in column {column!r} of {path!r} at line {line}."
                )
        values.append(col)
        lengths[column] = length
    if len(set(lengths.values())) > 1:
        listing = ", ".join(f"{c!r}: {n}" for c, n in lengths.items())
        raise ValueError(
            f"Columns of {path!r} have different lengths (number of values): {listing}."
        )
    return np.stack(values, axis=1)


def _as_column_list(field: str, columns: Any) -> list[str]:
    if isinstance(columns, str):
        columns = [columns]
    columns = list(columns)
    if not columns or not all(isinstance(c, str) and c for c in columns):
        raise ValueError(
            f"`{field}` must be a non-empty list of column names; received {columns!r}."
        )
    return columns


def load_csv_records(
    path: str | os.PathLike,
    inputs: Sequence[str],
    outputs: Sequence[str],
    ts: float = 1.0,
    name: str | None = None,
) -> Record:
    """Read a :class:`Record` from a CSV file with a header row.

    One row per sample; ``inputs`` and ``outputs`` name the columns that form
    ``u`` ``(N, len(inputs))`` and ``y`` ``(N, len(outputs))``. Other columns
    are ignored; blank lines are skipped; cells are stripped of spaces.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is empty or has no data rows; a column is missing
            (the message lists the available ones); a value is not a finite
            number (message gives column and line); a selected column has an
            empty cell before its last value, or the selected columns have
            different numbers of values.
    """
    inputs = _as_column_list("inputs", inputs)
    outputs = _as_column_list("outputs", outputs)
    header, rows = _read_table(path)
    data = _numeric_columns(header, rows, inputs + outputs, os.fspath(path))
    if name is None:
        name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return Record(
        u=data[:, : len(inputs)],
        y=data[:, len(inputs) :],
        ts=ts,
        input_names=tuple(inputs),
        output_names=tuple(outputs),
        name=name,
    )
