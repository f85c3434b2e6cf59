"""JAX front-end of the native MGU loops: XLA FFI custom calls.

:func:`forward` and :func:`backward` are ``jax.ffi.ffi_call`` s of the handlers
in :file:`mgu_xla_ffi.cc` and work under ``jax.jit``. They have no derivative
rules of their own: :mod:`keras_mgu.kernels.jax` gives them one (through its
differentiable ``lax.scan`` twins), so that second-order gradients work.

The recurrent kernel ``u`` is ``(H, 2H)``, or ``(G, H, 2H)``: G groups, batch
rows ``[g B/G, (g+1) B/G)`` use ``u[g]`` (B a multiple of G); ``du`` has the
shape of ``u``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from keras_mgu import checks, native

#: The native loops run when a step's recurrent product, ``batch * units**2``
#: multiply-adds, is at most this; above it the ``lax.scan`` kernel is as fast
#: or faster (batch 32: up to 176 units; batch 256: up to 62). Measured with
#: ``benchmarks/native_kernel.py --part crossover`` (docs/native_kernel.md).
MAX_STEP_MACS = 1_000_000

_TARGETS = {
    ("forward", "float32"): "KerasMguForwardF32",
    ("forward", "float64"): "KerasMguForwardF64",
    ("backward", "float32"): "KerasMguBackwardF32",
    ("backward", "float64"): "KerasMguBackwardF64",
}


@functools.cache
def _registered() -> bool:
    """Register the FFI targets once; False when the library is unavailable."""
    if not native.status("jax").available:
        return False
    lib = native._load("xla")
    for symbol in _TARGETS.values():
        jax.ffi.register_ffi_target(
            f"keras_mgu_{symbol}", jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu"
        )
    return True


def usable(dtype: Any, units: int, shape: tuple = (), batch: int | None = None) -> bool:
    """Whether the native loops serve this call.

    They do on the CPU, in float32/64, for sizes within
    :data:`MAX_STEP_MACS`, for arrays of known ``shape`` (time major, so the
    batch is ``shape[1]``): a symbolic dimension means that the function is
    being exported (``jax2tf``, ``jax2onnx``), and a custom call cannot go
    into the exported file, so the ``lax.scan`` kernel runs there.
    """
    if len(shape) > 1:
        batch = shape[1]
    return (
        np.dtype(dtype).name in native.DTYPES
        and all(isinstance(d, int) for d in shape)
        and native.faster(batch, units, MAX_STEP_MACS)
        and jax.default_backend() == "cpu"
        and native.enabled()
        and _registered()
    )


def _attributes(m: Any, activation: str, recurrent_activation: str) -> dict:
    return {
        "activation": np.int32(native.ACTIVATION_CODES[activation]),
        "recurrent_activation": np.int32(native.ACTIVATION_CODES[recurrent_activation]),
        "masked": np.int32(m is not None),
        "threads": np.int32(native.max_threads()),  # read when the call is traced
    }


def _mask_buffer(m: Any) -> jax.Array:
    """The ``(T, B)`` mask, or a one-element placeholder when there is none."""
    if m is None:
        return jnp.ones((1, 1), bool)
    return jnp.reshape(m, m.shape[:2]).astype(bool)


def forward(
    xw: jax.Array, h0: jax.Array, u: jax.Array, m: Any, activation: str, recurrent_activation: str
) -> tuple[jax.Array, jax.Array]:
    """``(hs, saved)``, ``(T, B, H)`` and ``(T, B, 3H)``, from ``xw`` ``(T, B, 2H)``.

    ``h0`` is ``(B, H)``; u: ``(H, 2H)``, or ``(G, H, 2H)``: G groups, rows
    ``[g B/G, (g+1) B/G)`` use ``u[g]``. ``m`` is the time-major mask ``(T, B)``
    or ``(T, B, 1)`` of booleans, or None.
    """
    steps, batch, two_units = xw.shape
    units = two_units // 2
    checks.groups_of(tuple(u.shape), batch, units)
    name = _TARGETS[("forward", np.dtype(xw.dtype).name)]
    call = jax.ffi.ffi_call(
        f"keras_mgu_{name}",
        (
            jax.ShapeDtypeStruct((steps, batch, units), xw.dtype),
            jax.ShapeDtypeStruct((steps, batch, 3 * units), xw.dtype),
        ),
        vmap_method="sequential",
    )
    return call(xw, h0, u, _mask_buffer(m), **_attributes(m, activation, recurrent_activation))


def backward(
    d_hs: jax.Array,
    d_last: jax.Array,
    saved: jax.Array,
    u: jax.Array,
    m: Any,
    activation: str,
    recurrent_activation: str,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(dxw, dh0, du)`` for state gradients ``d_hs`` ``(T, B, H)`` and ``d_last`` ``(B, H)``.

    u: ``(H, 2H)``, or ``(G, H, 2H)``: G groups, rows ``[g B/G, (g+1) B/G)``
    use ``u[g]``; ``du`` has the shape of ``u``, group g's summed over its rows.
    """
    steps, batch, units = d_hs.shape
    checks.groups_of(tuple(u.shape), batch, units)
    name = _TARGETS[("backward", np.dtype(d_hs.dtype).name)]
    call = jax.ffi.ffi_call(
        f"keras_mgu_{name}",
        (
            jax.ShapeDtypeStruct((steps, batch, 2 * units), d_hs.dtype),
            jax.ShapeDtypeStruct((batch, units), d_hs.dtype),
            jax.ShapeDtypeStruct(tuple(u.shape), d_hs.dtype),
        ),
        vmap_method="sequential",
    )
    args = (d_hs, d_last, saved, u, _mask_buffer(m))
    return call(*args, **_attributes(m, activation, recurrent_activation))
