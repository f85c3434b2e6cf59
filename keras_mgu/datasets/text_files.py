"""Delimited text files: comma, semicolon, tab or whitespace, with or without a header.

:func:`read_text_table` reads what spreadsheets and MATLAB's ``writematrix``
or ``writetable`` write: one row per sample, numbers with a decimal point.

* Delimiter: the first non-blank line decides; it is ``;`` if that line has
  one, else a tab, else ``,``, else runs of spaces and tabs. A header with
  none of them (one name) leaves the choice to the first data line.
* Header: the first non-blank line is a header row when one of its cells is
  not a number; otherwise every line is data and the columns are known by
  their 0-based index (or the names given with ``columns``). A header names
  every column that holds values, one name per column.
* Every row must have as many cells as the first; blank lines are skipped;
  spaces around cells are stripped.
"""

from __future__ import annotations

import contextlib
import csv
import gc
import math
import os
import re

import numpy as np

from keras_mgu.datasets.tables import Table

__all__ = ["TextTable", "detect_delimiter", "read_text_table"]

#: Delimiters tried, in order, on the first non-blank line (``None``: whitespace).
DELIMITERS = (";", "\t", ",")
_DECIMAL_COMMA = re.compile(r"^[-+]?\d*,\d+$")


def detect_delimiter(line: str) -> str | None:
    """The delimiter of a file whose first non-blank line is ``line`` (``None``: whitespace)."""
    return next((d for d in DELIMITERS if d in line), None)


def _file_delimiter(lines: list[str]) -> str | None:
    """The delimiter of the first line, or of the second when the first is a header
    without one (``u`` over ``1.0,2.0``: the rows decide, and the header is one name short).
    """
    delimiter = detect_delimiter(lines[0])
    if delimiter is None and len(lines) > 1 and not all(map(_is_number, lines[0].split())):
        delimiter = detect_delimiter(lines[1])
    return delimiter


def _check_header(path: str, names: list[str], rows: list[tuple[int, list[str]]]) -> None:
    """Raise ``ValueError`` for a header with another number of names than the first data
    row has values, or without a name for a column that holds values (a column left empty
    on every row, such as a trailing delimiter's, needs none)."""
    line, cells = rows[0]
    if len(names) != len(cells):
        raise ValueError(
            f"{path}: the header names {_columns(len(names))} ({', '.join(names)}) but line "
            f"{line} has {len(cells)} values; give one name per column."
        )
    for k, name in enumerate(names):
        if not name and any(k < len(cells) and cells[k].strip() for _, cells in rows):
            raise ValueError(
                f"{path}: column {k + 1} of the header has no name; give one name per column."
            )


def _columns(n: int) -> str:
    """``1 column``, ``2 columns``."""
    return f"{n} column" if n == 1 else f"{n} columns"


def _split(lines: list[str], delimiter: str | None) -> list[list[str]]:
    """Cells of each line, spaces around them kept (one CSV reader over all lines: fast
    on long files)."""
    if delimiter is None:
        return [line.split() for line in lines]
    return list(csv.reader(lines, delimiter=delimiter))


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


class TextTable(Table):
    """The cells of a delimited text file, with the line each row came from."""

    def __init__(self, path: str, names, rows: list[tuple[int, list[str]]], header: bool):
        super().__init__(path, names, header_row=header)
        self.rows = rows
        self._n_columns = len(names) if names is not None else len(rows[0][1])

    @property
    def n_columns(self) -> int:
        return self._n_columns

    def values(self, index: int) -> np.ndarray:
        """Column ``index`` as float64 ``(N,)``; converted at once, cell by cell only to
        name the line of a bad value."""
        try:
            out = np.array([cells[index] for _, cells in self.rows]).astype(np.float64)
        except ValueError:
            out = None
        if out is not None and np.isfinite(out).all():
            return out
        return np.array([self._number(cells[index], line, index) for line, cells in self.rows])

    def first_cell(self, index: int) -> str:
        """The cell of column ``index`` in the first data row (for a value, such as a
        sampling period, that a file gives once)."""
        return self.rows[0][1][index].strip()

    def _number(self, cell: str, line: int, index: int) -> float:
        cell = cell.strip()
        where = f"{self.path}, line {line}, {self.column_label(index)}"
        if not cell:
            raise ValueError(f"{where}: empty cell; expected a number.")
        try:
            value = float(cell)
        except ValueError:
            hint = (
                "; decimal commas are not read, write 1.5, not 1,5"
                if (_DECIMAL_COMMA.match(cell))
                else ""
            )
            raise ValueError(f"{where}: {cell!r} is not a number{hint}.") from None
        if not math.isfinite(value):
            raise ValueError(
                f"{where}: {cell!r} is not a finite number; expected finite values only "
                "(fill or cut out the gap)."
            )
        return value


@contextlib.contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector: splitting a long file makes millions of
    small lists, none of them in a cycle, and the collector's passes over them would take
    most of the time (about 5x on 188,000 lines)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_text_table(path: str) -> TextTable:
    """The header (if any) and rows of the delimited text file ``path``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is empty, has a header but no data rows, a header
            with another number of names than the first data row has values
            or without a name for a column of values, or a row with another
            number of cells than the first (file and line named).
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such data file: {path!r}.")
    with _collector_paused():
        with open(path, newline="", encoding="utf-8-sig") as f:
            lines = [(k, t) for k, t in enumerate(f.read().splitlines(), 1) if t.strip()]
        if not lines:
            raise ValueError(
                f"{path} is empty; expected rows of numbers, one per sample, with or without "
                "a header row."
            )
        delimiter = _file_delimiter([text for _, text in lines[:2]])
        split = _split([text for _, text in lines], delimiter)
        rows = list(zip([k for k, _ in lines], split))
    if len(split) != len(lines):
        raise ValueError(
            f"{path}: a quotation mark opens a cell that runs past the end of its line; "
            "expected one row per line."
        )
    header = not all(_is_number(cell) for cell in rows[0][1])
    names = [cell.strip() for cell in rows.pop(0)[1]] if header else None
    if not rows:
        raise ValueError(f"{path} has a header row ({', '.join(names)}) but no data rows.")
    if header:
        _check_header(path, names, rows)
    expected, first_line = len(names if header else rows[0][1]), lines[0][0]
    if {len(cells) for cells in split} != {expected}:
        line, cells = next((k, c) for k, c in rows if len(c) != expected)
        raise ValueError(
            f"{path}, line {line}: {len(cells)} cell(s), but line {first_line} has "
            f"{expected}; expected {expected} {_SEPARATED[delimiter]} cells on every row."
        )
    return TextTable(path, names, rows, header)


_SEPARATED = {
    ";": "semicolon-separated",
    "\t": "tab-separated",
    ",": "comma-separated",
    None: "whitespace-separated",
}
