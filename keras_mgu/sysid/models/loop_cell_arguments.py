"""What an :class:`~keras_mgu.sysid.models.loop_cell.ArxLoopCell` is given: an ARX model's
arrays in the cell's order, and the checks of the cell's arguments.

The cell's regressors are ``r_t = [z_t, u_t]``, its state ``z_t`` the output
lags ``1..na`` then the input lags ``1..nb - 1``, newest first
(:mod:`~keras_mgu.sysid.models.loop_cell`). :func:`lag_state_size` is the size
of ``z``; :func:`arx_kernel` writes an ARX model's coefficients as the
cell's ``W`` ``(nz + n_inputs, n_outputs)``, rows in the order of ``r_t``;
:func:`anchor_arrays` gives the linear model a cell fades to outside its
range, and :func:`regressor_bounds` each regressor's range on the estimation
record. Each ``check_*`` function returns an argument as the cell keeps it,
or raises a ``ValueError`` that names the argument.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

__all__ = [
    "FADE",
    "anchor_arrays",
    "arx_kernel",
    "check_array",
    "check_branch",
    "check_fade",
    "check_order",
    "check_range_pair",
    "check_term_outputs",
    "check_terms",
    "lag_state_size",
    "regressor_bounds",
    "state_sizes",
]

#: How far outside its estimation range (a share of the range) a regressor
#: takes the model all the way back to its anchor (a linear model).
FADE = 0.25


def lag_state_size(n_inputs: int, n_outputs: int, na: int, nb: int) -> int:
    """Size of ``z``: ``na`` output lags and ``nb - 1`` input lags."""
    return na * n_outputs + (nb - 1) * n_inputs


def arx_kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``W`` ``(nz + n_inputs, n_outputs)`` of ARX coefficients, rows ordered as ``r_t``.

    ``a`` ``(n_outputs, na)`` and ``b`` ``(n_outputs, n_inputs, nb)`` as in
    :class:`~keras_mgu.sysid.models.arx.LinearModel` (``y_i[k] = -sum_j a_ij
    y_i[k-j] + sum_mj b_imj u_m[k-j] + c_i``).
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n_outputs, na = a.shape
    _, n_inputs, nb = b.shape
    nz = lag_state_size(n_inputs, n_outputs, na, nb)
    kernel = np.zeros((nz + n_inputs, n_outputs))
    for i in range(n_outputs):
        for j in range(1, na + 1):
            kernel[(j - 1) * n_outputs + i, i] = -a[i, j - 1]
        for m in range(n_inputs):
            for j in range(1, nb):
                kernel[na * n_outputs + (j - 1) * n_inputs + m, i] = b[i, m, j]
            kernel[nz + m, i] = b[i, m, 0]
    return kernel


def anchor_arrays(anchor: Any, linear: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``(kernel, bias)`` of ARX model ``anchor`` in ``linear``'s orders; None for no anchor.

    Both are :class:`~keras_mgu.sysid.models.arx.LinearModel`; ``anchor``'s
    orders are at most ``linear``'s (its missing lags are zeros).
    """
    if anchor is None:
        return None
    padded = anchor.padded(*linear.orders)
    return arx_kernel(padded.a, padded.b), padded.c


def regressor_bounds(
    u_range: tuple[np.ndarray, np.ndarray], y_range: tuple[np.ndarray, np.ndarray], na: int, nb: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-regressor ``(lower, upper)`` ``(nz + n_inputs,)`` in the order of ``r_t``.

    ``u_range``, ``y_range``: each channel's ``(min, max)`` on the estimation
    record, ``(n_inputs,)`` and ``(n_outputs,)`` arrays; every lag of a
    channel gets that channel's range.
    """
    (u_lo, u_hi), (y_lo, y_hi) = (np.asarray(r, dtype=np.float64) for r in (u_range, y_range))
    lower = np.concatenate([np.tile(y_lo, na), np.tile(u_lo, nb - 1), u_lo])
    upper = np.concatenate([np.tile(y_hi, na), np.tile(u_hi, nb - 1), u_hi])
    return lower, upper


def check_order(name: str, value: Any, least: int) -> int:
    """``value`` as an int, an integer ``>= least`` (an order, a channel or a layer size)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"`{name}` must be an integer >= {least}; received {value!r}.")
    return int(value)


def check_array(name: str, value: Any, shape: tuple) -> np.ndarray:
    """``value`` as a finite float64 array of ``shape`` (None: zeros), e.g. a starting ``W``."""
    array = np.zeros(shape) if value is None else np.asarray(value, dtype=np.float64)
    if array.shape != shape or not np.all(np.isfinite(array)):
        raise ValueError(f"`{name}` must be a finite array of shape {shape}; got {array.shape}.")
    return array


def check_fade(fade: Any) -> float:
    """``fade``, a positive finite number, as a float."""
    if isinstance(fade, bool) or not isinstance(fade, (int, float)) or not 0 < fade < np.inf:
        raise ValueError(f"`fade` must be a positive number; received {fade!r}.")
    return float(fade)


def check_branch(branch: Any) -> Any:
    """``"mlp"``, ``"polynomial"`` or a recurrent cell (made from its config where one is given)."""
    if isinstance(branch, dict):
        branch = keras.saving.deserialize_keras_object(branch)
    if branch not in ("mlp", "polynomial") and not hasattr(branch, "state_size"):
        raise ValueError(
            "`branch` must be 'mlp', 'polynomial' or a recurrent cell (with `state_size`); "
            f"received {branch!r}."
        )
    return branch


def check_terms(terms: Any, width: int) -> np.ndarray:
    """The ``"polynomial"`` branch's terms ``(n_terms, 3)``, index triples into ``[r_t, 1]``.

    ``width`` is the number of regressors; index ``width`` is the constant one.
    """
    array = np.asarray([] if terms is None else terms, dtype=np.int64).reshape(-1, 3)
    if np.any(array < 0) or np.any(array > width):
        raise ValueError(
            f"`terms` must be index triples in [0, {width}] (index {width} is the "
            f"constant one); received {terms!r}."
        )
    return array


def check_term_outputs(term_outputs: Any, shape: tuple[int, int]) -> np.ndarray:
    """Which output each term is one of, 0/1 ``(n_terms, n_outputs)`` (None: every output)."""
    mask = np.ones(shape) if term_outputs is None else np.asarray(term_outputs, float)
    if mask.shape != shape or not np.all((mask == 0) | (mask == 1)):
        raise ValueError(f"`term_outputs` must be 0/1 of shape {shape}; got {mask.shape}.")
    return mask


def check_range_pair(name: str, value: Any, shape: tuple) -> tuple[np.ndarray, np.ndarray] | None:
    """``value`` as ``(lower, upper)``: finite arrays of ``shape``, ``upper > lower``; or None."""
    if value is None:
        return None
    try:
        lower, upper = (np.asarray(b, dtype=np.float64) for b in value)
    except (TypeError, ValueError):
        lower = upper = None
    if (
        lower is None
        or lower.shape != shape
        or upper.shape != shape
        or not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper)))
        or not np.all(upper > lower)
    ):
        raise ValueError(
            f"`{name}` must be (lower, upper), finite arrays of shape {shape} with upper > lower."
        )
    return lower, upper


def state_sizes(state_size: Any) -> list[int]:
    """A recurrent cell's ``state_size`` (an int or a list) as a list of ints."""
    if isinstance(state_size, (list, tuple)):
        return [int(s) for s in state_size]
    return [int(state_size)]
