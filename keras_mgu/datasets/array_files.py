"""Array files: MATLAB ``.mat`` (v7 and older) and NumPy ``.npz``.

Each variable (array) is a column named after it: a vector of ``N`` samples
(MATLAB's ``N x 1`` and ``1 x N`` too) is one column; an ``N x k`` matrix
(rows are samples) gives ``k`` columns, ``name_0`` to ``name_{k-1}``.
Scalars (such as a sampling time), text and structs are not columns and are
left out. Every column must have the same number of samples. MATLAB v7.3
files (HDF5) are not read: save with ``save(..., '-v7')``.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from keras_mgu.datasets.tables import Table

__all__ = ["ArrayTable", "read_mat_table", "read_npz_table"]

_HDF5_MAT = b"MATLAB 7.3 MAT-file"


class ArrayTable(Table):
    """Named columns taken from the arrays of a ``.mat`` or ``.npz`` file."""

    def __init__(self, path: str, columns: dict[str, np.ndarray]):
        super().__init__(path, list(columns))
        self.columns = list(columns.values())

    @property
    def n_columns(self) -> int:
        return len(self.columns)

    def values(self, index: int) -> np.ndarray:
        column = self.columns[index]
        bad = ~np.isfinite(column)
        if bad.any():
            sample = int(np.argmax(bad))
            raise ValueError(
                f"{self.path}, {self.column_label(index)}, sample {sample} (0-based): "
                f"{column[sample]} is not a finite number; expected finite values only "
                f"({int(bad.sum())} non-finite in this column)."
            )
        return column


def _columns(path: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Vectors and matrices of ``arrays`` as 1-D float columns of one length."""
    columns = {}
    for name, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf" or arr.size <= 1:
            continue  # text, structs, cells, scalars: not a signal
        if arr.ndim == 2 and 1 in arr.shape:
            arr = arr.reshape(-1)
        if arr.ndim == 1:
            columns[name] = arr.astype(np.float64)
        elif arr.ndim == 2:
            for j in range(arr.shape[1]):
                columns[f"{name}_{j}"] = arr[:, j].astype(np.float64)
        else:
            raise ValueError(
                f"{path}: variable {name!r} has shape {arr.shape}; expected a vector or an "
                "N x k matrix (rows are samples)."
            )
    if not columns:
        raise ValueError(
            f"{path} holds no numeric vector or matrix; expected one variable per signal "
            "(or one N x k matrix)."
        )
    lengths = {name: len(col) for name, col in columns.items()}
    if len(set(lengths.values())) > 1:
        listing = ", ".join(f"{name}: {n}" for name, n in lengths.items())
        raise ValueError(
            f"{path}: the variables have different numbers of samples ({listing}); expected "
            "one length for all."
        )
    return columns


def read_mat_table(path: str) -> ArrayTable:
    """The columns of a MATLAB ``.mat`` file (v4 to v7) read with ``scipy.io.loadmat``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a v7.3 (HDF5) file, a file SciPy cannot read, no numeric
            variable, a variable with more than two dimensions, or variables of
            different lengths.
    """
    from scipy import io

    with open(path, "rb") as f:
        head = f.read(128)
    if head.startswith(_HDF5_MAT):
        raise ValueError(
            f"{path} is a MATLAB v7.3 (HDF5) file, which is not read here; save it as v7 "
            f"in MATLAB: save('{os.path.basename(path)}', ..., '-v7')."
        )
    try:
        arrays = io.loadmat(path, squeeze_me=False)
    except Exception as err:  # SciPy's parser raises many kinds on a foreign file
        message = " ".join(str(err).split())
        raise ValueError(
            f"{path} cannot be read as a MATLAB .mat file ({message}); expected a file saved "
            "with MATLAB's save(..., '-v7')."
        ) from None
    return ArrayTable(path, _columns(path, {k: v for k, v in arrays.items() if k[:2] != "__"}))


def read_npz_table(path: str) -> ArrayTable:
    """The columns of a NumPy ``.npz`` file (``np.savez``), array names as column names.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not an ``.npz`` file, object arrays, no numeric array, an
            array with more than two dimensions, or arrays of different lengths.
    """
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile) as err:
        if isinstance(err, FileNotFoundError):
            raise
        message = " ".join(str(err).split())
        raise ValueError(
            f"{path} cannot be read as a NumPy .npz file ({message}); expected numeric arrays "
            "saved with np.savez."
        ) from None
    return ArrayTable(path, _columns(path, arrays))
