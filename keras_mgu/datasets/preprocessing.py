"""Preprocessing for training: normalisation and windows.

* :class:`Normalizer`: per-channel standardisation fitted on estimation data
  (registered for Keras serialisation as ``keras_mgu>Normalizer``).
* :func:`make_windows`: paired ``(u, y)`` training windows from a long record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from keras_mgu.datasets.records import Record, SysIdData

__all__ = ["Normalizer", "make_windows"]


def _check_stats(field: str, values: Any, positive: bool) -> list[float]:
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or (positive and np.any(arr <= 0)):
        kind = "positive finite" if positive else "finite"
        raise ValueError(f"`{field}` must be a non-empty list of {kind} numbers; got {values!r}.")
    return [float(v) for v in arr]


@keras.saving.register_keras_serializable(package="keras_mgu")
class Normalizer:
    """Per-channel standardisation ``(x - mean) / std`` of inputs and outputs.

    Fit it on the estimation record only (``Normalizer.fit(data.estimation)``
    or ``Normalizer.fit(data)``, which uses ``data.estimation``) and apply the
    same statistics to validation and test data. A channel whose estimation
    standard deviation is below ``min_std`` (constant channel) is refused with
    a ``ValueError`` rather than scaled by a tiny number.

    Args:
        u_mean, u_std: One float per input channel.
        y_mean, y_std: One float per output channel.
    """

    def __init__(
        self,
        u_mean: Sequence[float],
        u_std: Sequence[float],
        y_mean: Sequence[float],
        y_std: Sequence[float],
    ) -> None:
        self.u_mean = _check_stats("u_mean", u_mean, positive=False)
        self.u_std = _check_stats("u_std", u_std, positive=True)
        self.y_mean = _check_stats("y_mean", y_mean, positive=False)
        self.y_std = _check_stats("y_std", y_std, positive=True)
        if len(self.u_mean) != len(self.u_std) or len(self.y_mean) != len(self.y_std):
            raise ValueError("Means and standard deviations must have one entry per channel.")

    @classmethod
    def fit(cls, data: Record | SysIdData, min_std: float = 1e-8) -> Normalizer:
        """Statistics of ``data`` (a Record, or the estimation record of a SysIdData)."""
        record = data.estimation if isinstance(data, SysIdData) else data
        if not isinstance(record, Record):
            raise TypeError(
                f"Normalizer.fit expects a Record or SysIdData; got {type(data).__name__}."
            )
        stats = {}
        for kind, arr, names in (
            ("u", record.u, record.input_names),
            ("y", record.y, record.output_names),
        ):
            mean, std = arr.mean(axis=0), arr.std(axis=0)
            scale = np.maximum(1.0, np.abs(mean))
            for i in np.nonzero(std < min_std * scale)[0]:
                raise ValueError(
                    f"Channel {names[i]!r} of {record.name or 'the record'} is constant "
                    f"(std {std[i]:.3g}); it cannot be standardised. Drop it or add variation."
                )
            stats[f"{kind}_mean"], stats[f"{kind}_std"] = mean, std
        return cls(**stats)

    @staticmethod
    def _apply(x: Any, mean: list[float], std: list[float], what: str, inverse: bool) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim < 1 or x.shape[-1] != len(mean):
            raise ValueError(
                f"`{what}` must have {len(mean)} channel(s) in its last axis; got shape {x.shape}."
            )
        m, s = np.asarray(mean), np.asarray(std)
        return x * s + m if inverse else (x - m) / s

    def transform_u(self, u: Any) -> np.ndarray:
        """``(u - u_mean) / u_std`` over the last axis, any leading shape."""
        return self._apply(u, self.u_mean, self.u_std, "u", inverse=False)

    def transform_y(self, y: Any) -> np.ndarray:
        """``(y - y_mean) / y_std`` over the last axis, any leading shape."""
        return self._apply(y, self.y_mean, self.y_std, "y", inverse=False)

    def inverse_transform_y(self, y: Any) -> np.ndarray:
        """``y * y_std + y_mean``: model outputs back in physical units."""
        return self._apply(y, self.y_mean, self.y_std, "y", inverse=True)

    def transform(self, data: Record | SysIdData) -> Record | SysIdData:
        """Normalised copy of a Record (or of every record of a SysIdData)."""
        if isinstance(data, SysIdData):
            records = (self.transform(r) for r in (data.estimation, data.validation, data.test))
            return SysIdData(*records, protocol=data.protocol)
        if not isinstance(data, Record):
            raise TypeError(f"transform expects a Record or SysIdData; got {type(data).__name__}.")
        return dataclasses.replace(data, u=self.transform_u(data.u), y=self.transform_y(data.y))

    def get_config(self) -> dict[str, list[float]]:
        return {
            "u_mean": list(self.u_mean),
            "u_std": list(self.u_std),
            "y_mean": list(self.y_mean),
            "y_std": list(self.y_std),
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Normalizer:
        return cls(**config)


def make_windows(
    u: np.ndarray, y: np.ndarray, window: int, stride: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Cut paired ``(u, y)`` sequences into training windows.

    Window ``i`` covers samples ``[i * stride, i * stride + window)`` of both
    signals; trailing samples that do not fill a window are dropped. Each
    window is an independent copy. ``keras.utils.timeseries_dataset_from_array``
    is not used because it pairs each input window with a single target
    (sample-aligned), not with the output sequence of the same window.

    Args:
        u: ``(N, n_in)`` inputs (a 1-D ``(N,)`` array is one channel).
        y: ``(N, n_out)`` outputs, same ``N``.
        window: Samples per window, ``1 <= window <= N``.
        stride: Offset between consecutive window starts (default 1: every
            possible window, overlapping).

    Returns:
        ``(n_windows, window, n_in)`` and ``(n_windows, window, n_out)``
        arrays, ``n_windows = (N - window) // stride + 1``.
    """
    u = np.asarray(u)
    y = np.asarray(y)
    u = u[:, None] if u.ndim == 1 else u
    y = y[:, None] if y.ndim == 1 else y
    if u.ndim != 2 or y.ndim != 2 or u.shape[0] != y.shape[0]:
        raise ValueError(
            "`u` and `y` must be (N, channels) arrays of the same length; "
            f"received shapes {u.shape} and {y.shape}."
        )
    n = u.shape[0]
    if (
        isinstance(window, bool)
        or not isinstance(window, (int, np.integer))
        or not 1 <= window <= n
    ):
        raise ValueError(f"`window` must be an integer in [1, N={n}]; received {window!r}.")
    stride = 1 if stride is None else stride
    if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or stride < 1:
        raise ValueError(f"`stride` must be a positive integer; received {stride!r}.")
    starts = np.arange(0, n - window + 1, stride)
    idx = starts[:, None] + np.arange(window)[None, :]
    return u[idx], y[idx]
