"""One entry point for your own data: :func:`load_record` picks the reader by suffix.

========================================  =================================================
suffix                                    read as
========================================  =================================================
``.csv``, ``.txt``, ``.tsv``, ``.dat``,   delimited text, with or without a header row
``.asc``                                  (:mod:`~keras_mgu.datasets.text_files`)
``.mat``                                  MATLAB v4 to v7 (:mod:`~keras_mgu.datasets.array_files`)
``.npz``                                  NumPy ``np.savez`` (same module)
========================================  =================================================
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from keras_mgu.datasets.array_files import read_mat_table, read_npz_table
from keras_mgu.datasets.records import Record
from keras_mgu.datasets.tables import Table, record_from_table
from keras_mgu.datasets.text_files import read_text_table

__all__ = ["READERS", "load_csv_records", "load_record", "read_table"]

#: File suffix (lower case) -> reader of its columns.
READERS: dict[str, Callable[[str], Table]] = {
    ".csv": read_text_table,
    ".txt": read_text_table,
    ".tsv": read_text_table,
    ".dat": read_text_table,
    ".asc": read_text_table,
    ".mat": read_mat_table,
    ".npz": read_npz_table,
}


def read_table(path: str | os.PathLike) -> Table:
    """The columns of the data file ``path``, read as its suffix says.

    Raises:
        FileNotFoundError: no such file.
        ValueError: an unknown suffix, or a file its reader refuses.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such data file: {path!r}.")
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in READERS:
        raise ValueError(
            f"{path}: unknown file type {suffix or '(no suffix)'!r}; expected one of "
            f"{', '.join(READERS)}."
        )
    return READERS[suffix](path)


def load_record(
    path: str | os.PathLike,
    inputs: Sequence[str | int],
    outputs: Sequence[str | int],
    ts: float = 1.0,
    columns: Sequence[str] | None = None,
    name: str | None = None,
) -> Record:
    """A :class:`Record` from a text (``.csv``, ``.txt``, ...), ``.mat`` or ``.npz`` file.

    One row (text) or element (arrays) per sample. ``inputs`` and
    ``outputs`` select the columns of ``u`` ``(N, len(inputs))`` and ``y``
    ``(N, len(outputs))``: by name (a text file's header, a ``.mat``
    variable, an ``.npz`` array, ``name_j`` for column ``j`` of a matrix, or
    the names given in ``columns``) or by 0-based index (``"0"`` or ``0``).

    Args:
        path: The file.
        inputs, outputs: Column names or 0-based indices.
        ts: Sampling period in seconds.
        columns: Names for all the file's columns, in order; for files without
            a header row (a text file with one refuses them).
        name: The record's name (default: the file name without suffix).

    Raises:
        FileNotFoundError: no such file.
        ValueError: one line that says what was expected and where (file,
            line or sample, column): an unknown suffix, an empty file, a
            ragged row, a missing column (the available ones listed), a cell
            that is not a finite number, a MATLAB v7.3 file.
    """
    table = read_table(path)
    return record_from_table(table, inputs, outputs, ts=ts, columns=columns, name=name)


def load_csv_records(
    path: str | os.PathLike,
    inputs: Sequence[str],
    outputs: Sequence[str],
    ts: float = 1.0,
    name: str | None = None,
) -> Record:
    """A :class:`Record` from a delimited text file with a header row, whatever its suffix.

    :func:`load_record` for text files (same reader, checks and messages):
    ``inputs`` and ``outputs`` name the header's columns that form ``u``
    ``(N, len(inputs))`` and ``y`` ``(N, len(outputs))``; other columns are
    ignored.

    Raises:
        FileNotFoundError: no such file.
        ValueError: see :func:`load_record`.
    """
    return record_from_table(read_text_table(os.fspath(path)), inputs, outputs, ts=ts, name=name)
