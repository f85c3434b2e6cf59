"""TensorFlow front-end of the native MGU loops: ``tf.numpy_function`` over ctypes.

The loops run on the host buffers of the tensors (no copy in, one allocation
out) from eager code and from ``tf.function`` graphs. XLA cannot compile a
Python function, so under ``jit_compile=True`` :func:`usable` is False and the
XLA kernel of :mod:`keras_mgu.kernels.tensorflow` runs instead; it also gives
these calls their gradients of gradients.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from keras_mgu import native

#: The native loops run when a step's recurrent product, ``batch * units**2``
#: multiply-adds, is at most this (batch 32: up to 35 units; batch 256: up to
#: 12); above it the XLA loops, which use every core, win. Measured with
#: ``benchmarks/native_kernel.py --part crossover`` (docs/native_kernel.md).
MAX_STEP_MACS = 40_000


def _in_xla_context() -> bool:
    """Whether the graph being built is compiled by XLA (``jit_compile=True``)."""
    try:
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # the check moved: be safe and assume XLA
        return True
    graph = tf.compat.v1.get_default_graph()
    return bool(control_flow_util.GraphOrParentsInXlaContext(graph))


def usable(dtype: tf.DType, units: int, batch: int | None = None) -> bool:
    """Whether the native loops serve this call (float32/64, small enough, no XLA)."""
    return (
        dtype in (tf.float32, tf.float64)
        and native.faster(batch, units, MAX_STEP_MACS)
        and native.status("tensorflow").available
        and (tf.executing_eagerly() or not _in_xla_context())
    )


def forward(
    xw: tf.Tensor, h0: tf.Tensor, u: tf.Tensor, mask: Any, activation: str, ract: str
) -> tuple[tf.Tensor, tf.Tensor]:
    """``(hs, saved)``, ``(T, B, H)`` and ``(T, B, 3H)``, from ``xw`` ``(T, B, 2H)``.

    ``mask`` is a ``(T, B)`` boolean tensor or None.
    """

    def run(xw, h0, u, *mask):
        return native.forward(xw, h0, u, mask[0] if mask else None, activation, ract)

    args = [xw, h0, u] + ([] if mask is None else [mask])
    hs, saved = tf.numpy_function(run, args, [xw.dtype, xw.dtype], stateful=False)
    steps, batch, two_units = xw.shape
    units = None if two_units is None else two_units // 2
    hs.set_shape([steps, batch, units])
    saved.set_shape([steps, batch, None if units is None else 3 * units])
    return hs, saved


def backward(
    d_hs: tf.Tensor, saved: tf.Tensor, u: tf.Tensor, mask: Any, activation: str, ract: str
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """``(dxw, dh0, du)`` for the state gradients ``d_hs`` ``(T, B, H)``."""

    def run(d_hs, saved, u, *mask):
        m = mask[0] if mask else None
        return native.backward(d_hs, None, saved, u, m, activation, ract)

    args = [d_hs, saved, u] + ([] if mask is None else [mask])
    dxw, dh0, du = tf.numpy_function(run, args, [d_hs.dtype] * 3, stateful=False)
    steps, batch, units = d_hs.shape
    two = None if units is None else 2 * units
    dxw.set_shape([steps, batch, two])
    dh0.set_shape([batch, units])
    du.set_shape(u.shape)
    return dxw, dh0, du


def as_numpy_mask(m: tf.Tensor | None) -> tf.Tensor | None:
    """The TensorFlow kernel's ``(T, B, 1)`` float mask as ``(T, B)`` booleans."""
    return None if m is None else tf.greater(m[..., 0], 0)
