"""TensorFlow front-end of the native MGU loops: TensorFlow operators.

``KerasMguForward`` and ``KerasMguBackward`` (:file:`mgu_tf_op.cc`, loaded
with ``tf.load_op_library``) run the loops on the tensors' buffers, in eager
code and in ``tf.function`` graphs, with static shape inference. XLA cannot
compile them, so under ``jit_compile=True`` :func:`usable` is False and the
XLA kernel of :mod:`keras_mgu.kernels.tensorflow` runs instead; that kernel
also gives these calls their gradients of gradients.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from keras_mgu import checks, native

#: The native loops run when a step's recurrent product, ``batch * units**2``
#: multiply-adds, is at most this (batch 32: up to 176 units; batch 256: up to
#: 62); above it the XLA loops are about as fast. Measured with
#: ``benchmarks/native_kernel.py --part crossover`` (docs/native_kernel.md).
MAX_STEP_MACS = 1_000_000


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


def _settings(mask: Any, activation: str, ract: str) -> dict:
    """The operators' attributes; the thread setting is read when the call is traced."""
    return {
        "activation": native.ACTIVATION_CODES[activation],
        "recurrent_activation": native.ACTIVATION_CODES[ract],
        "masked": mask is not None,
        "threads": native.max_threads(),
    }


def _mask_or_placeholder(mask: Any) -> tf.Tensor:
    return tf.zeros((1, 1), tf.bool) if mask is None else mask


def _check_groups(u: tf.Tensor, batch: int | None, units: int | None) -> None:
    """ValueError where the static shapes show a ``u`` or batch the operators refuse."""
    if u.shape.rank is not None:
        checks.groups_of(tuple(u.shape), batch, units)


def forward(
    xw: tf.Tensor, h0: tf.Tensor, u: tf.Tensor, mask: Any, activation: str, ract: str
) -> tuple[tf.Tensor, tf.Tensor]:
    """``(hs, saved)``, ``(T, B, H)`` and ``(T, B, 3H)``, from ``xw`` ``(T, B, 2H)``.

    ``h0`` is ``(B, H)``; u: ``(H, 2H)``, or ``(G, H, 2H)``: G groups, rows
    ``[g B/G, (g+1) B/G)`` use ``u[g]`` (B a multiple of G). ``mask`` is a
    ``(T, B)`` boolean tensor or None.
    """
    two_units = xw.shape[-1]
    _check_groups(u, xw.shape[1], None if two_units is None else two_units // 2)
    ops = native._load("tf")
    m = _mask_or_placeholder(mask)
    return tuple(ops.keras_mgu_forward(xw, h0, u, m, **_settings(mask, activation, ract)))


def backward(
    d_hs: tf.Tensor, saved: tf.Tensor, u: tf.Tensor, mask: Any, activation: str, ract: str
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """``(dxw, dh0, du)`` for the state gradients ``d_hs`` ``(T, B, H)``.

    ``saved`` comes from :func:`forward`; u: ``(H, 2H)``, or ``(G, H, 2H)``: G
    groups, rows ``[g B/G, (g+1) B/G)`` use ``u[g]``; ``du`` has the shape of
    ``u``, group g's summed over its own rows.
    """
    _check_groups(u, d_hs.shape[1], d_hs.shape[-1])
    ops = native._load("tf")
    m = _mask_or_placeholder(mask)
    return tuple(ops.keras_mgu_backward(d_hs, saved, u, m, **_settings(mask, activation, ract)))


def as_bool_mask(m: tf.Tensor | None) -> tf.Tensor | None:
    """The TensorFlow kernel's ``(T, B, 1)`` float mask as ``(T, B)`` booleans."""
    return None if m is None else tf.greater(m[..., 0], 0)
