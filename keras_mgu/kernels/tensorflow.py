"""Fused MGU sequence kernel for the TensorFlow backend.

The input projection ``x W + b`` of all steps is one matmul outside the time
loop; the loop then only carries the two recurrent matmuls per step::

    f_t = recurrent_activation(xw_f[t] + h_{t-1} U_f)
    c_t = activation(xw_c[t] + (f_t * h_{t-1}) U_c)
    h_t = h_{t-1} + m_t f_t (c_t - h_{t-1})

where ``m_t`` is 1 for a real step and 0 for a masked one (the state is then
carried forward unchanged). Both time loops (forward and backward through
time) are XLA-compiled ``tf.while_loop`` s, which removes most of the per-op
overhead of small recurrent steps on CPU.

The backward pass through time is hand-written (``tf.custom_gradient``): it
needs only the emitted states ``h``; the gate values ``f`` and ``c`` of all
steps are recomputed from them with two large matmuls outside the loop, and
the loop carries ``dL/dh`` with two small matmuls per step::

    dz_c = dh m f act'(c)                   dfh = dz_c U_c^T
    dz_f = (dh m (c - h_{t-1}) + dfh h_{t-1}) ract'(f)
    dh_{t-1} = dh (1 - m f) + dfh f + dz_f U_f^T

The weight gradients are then single matmuls over all steps. The backward
function is written in differentiable TensorFlow ops and reads the states
from the op's own output, so gradients of gradients are exact too.

A graph traced with no gradient tape watching (an export to SavedModel, ONNX
or TFLite, or ``predict``) gets the forward loop inline instead, without XLA
and without the custom gradient, which converters cannot read; inside
:func:`native_inference` (predictions that are never exported, such as the
validation of a training run) it gets the compiled loops, the same numbers
in a fraction of the time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import tensorflow as tf
from tensorflow.python.eager import record

from keras_mgu import checks
from keras_mgu.native import tensorflow as native_tf

#: name -> (function, derivative expressed through the function's output y).
_ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "tanh": (tf.tanh, lambda y: 1.0 - y * y),
    "sigmoid": (tf.sigmoid, lambda y: y * (1.0 - y)),
}

_LOW_PRECISION = (tf.float16, tf.bfloat16)


def mgu_sequence(
    inputs: tf.Tensor,
    initial_state: tf.Tensor,
    kernel: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    bias: tf.Tensor | None,
    mask: tf.Tensor | None,
    *,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
    go_backwards: bool = False,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Run the MGU over ``(B, T, D)`` sequences with a fused loop and backward.

    Args:
        inputs: ``(B, T, D)`` floating tensor.
        initial_state: ``(B, H)``, or None for zeros.
        kernel: ``W``, ``(D, 2H)``; recurrent_kernel: ``U``, ``(H, 2H)``;
            bias: ``b``, ``(2H,)`` or None. Forget-gate columns first.
        mask: ``(B, T)`` booleans (True where a step is real) or None.
        activation: Candidate activation, ``"tanh"`` or ``"sigmoid"``.
        recurrent_activation: Forget-gate activation, ``"tanh"`` or ``"sigmoid"``.
        go_backwards: Process the steps from last to first.

    Returns:
        ``(outputs, final_state)``: ``(B, T, H)`` in processing order (reversed
        time when ``go_backwards``) and ``(B, H)``, in the dtype of ``inputs``;
        float16/bfloat16 inputs are computed in float32.
    """
    checks.check_kernel_activations(activation, recurrent_activation)
    activations = (_ACTIVATIONS[activation], _ACTIVATIONS[recurrent_activation])
    inputs = tf.convert_to_tensor(inputs)
    dtype = inputs.dtype
    checks.check_floating(dtype.name)
    compute_dtype = tf.float32 if dtype in _LOW_PRECISION else dtype
    x, h0, w, u, b = (
        None if t is None else tf.cast(tf.convert_to_tensor(t), compute_dtype)
        for t in (inputs, initial_state, kernel, recurrent_kernel, bias)
    )
    if mask is not None:
        mask = tf.convert_to_tensor(mask)
        checks.check_mask_dtype(mask.dtype.name)
    checks.check_sequence_shapes(
        _static(x) or (), _static(u) or (), initial_state=_static(h0), kernel=_static(w),
        bias=_static(b), mask=_static(mask),
    )  # fmt: skip
    if h0 is None:
        h0 = tf.zeros(tf.stack([tf.shape(x)[0], u.shape[0]]), compute_dtype)

    # Time-major input projection of all steps in one matmul: (T, B, 2H).
    xw = tf.tensordot(tf.transpose(x, [1, 0, 2]), w, axes=1)
    if b is not None:
        xw = xw + b
    m = None
    if mask is not None:
        m = tf.cast(tf.transpose(mask), compute_dtype)[..., None]  # (T, B, 1)
    if go_backwards:
        xw = tf.reverse(xw, [0])
        m = None if m is None else tf.reverse(m, [0])

    h_seq = _recurrence(xw, h0, u, m, activations, (activation, recurrent_activation))
    outputs = tf.cast(tf.transpose(h_seq, [1, 0, 2]), dtype)
    return outputs, outputs[:, -1]


def _static(t: tf.Tensor | None) -> tuple | None:
    """The static shape of ``t`` for :mod:`keras_mgu.checks`; None if none or of unknown rank."""
    if t is None or t.shape.rank is None:
        return None
    return checks.static_shape(t.shape.as_list())


_traced_for_inference = threading.local()


@contextlib.contextmanager
def native_inference() -> Iterator[None]:
    """Graphs traced inside, in this thread, run the compiled loops also without a gradient tape.

    By default an inference graph (``predict``, ``evaluate``, an export) gets
    the portable inline loop (see :func:`_inference_graph`). A function
    traced inside this context keeps the compiled loops it was traced with:
    use it for predictions that are not exported.
    """
    depth = getattr(_traced_for_inference, "depth", 0)
    _traced_for_inference.depth = depth + 1
    try:
        yield
    finally:
        _traced_for_inference.depth = depth


def _inference_graph() -> bool:
    """Whether a graph no gradient tape watches is traced, outside :func:`native_inference`.

    That is the case when a model is traced for export (SavedModel, ONNX,
    TFLite) or for inference. Such graphs get the plain time loop, inline and
    without the XLA-compiled function and the custom gradient, which
    converters cannot read; it computes the same numbers.
    """
    return (
        not tf.executing_eagerly()
        and not record.could_possibly_record()
        and not getattr(_traced_for_inference, "depth", 0)
    )


def _recurrence(xw, h0, u, m, activations, names) -> tf.Tensor:
    """The MGU time loop ``(T, B, 2H) -> (T, B, H)`` with the hand-written backward.

    The loops are the compiled ones of :mod:`keras_mgu.native` where they serve
    (see :func:`keras_mgu.native.enabled`), else XLA-compiled ``tf.while_loop`` s.
    """
    if _inference_graph():
        return _forward(xw, h0, u, m, activations=activations)
    own_output = []
    use_native = native_tf.usable(xw.dtype, u.shape[0], xw.shape[1])
    mask = native_tf.as_bool_mask(m) if use_native else None
    saved = []

    @tf.custom_gradient
    def recurrence(xw, h0, u):
        args = [tf.stop_gradient(t) for t in (xw, h0, u)]
        if use_native:
            h_seq, saved_t = native_tf.forward(*args, mask, *names)
            saved.append(saved_t)
        else:
            forward = _loop_function(_forward, activations, m is not None, jit_compile=True)
            h_seq = forward(*args, m)

        def grad(dh_seq):
            # The states are read from the op's own output so that a second
            # differentiation of this function goes through this op again.
            if use_native:

                def fast(dh_seq, h_seq, xw, h0, u, m):
                    return native_tf.backward(dh_seq, saved[0], u, mask, *names)

            else:
                fast = _loop_function(_backward, activations, m is not None, jit_compile=True)
            return _backward_through_time(fast, dh_seq, own_output[0], xw, h0, u, m, activations)

        return h_seq, grad

    h_seq = recurrence(xw, h0, u)
    own_output.append(h_seq)
    return h_seq


def _backward_through_time(fast, dh_seq, h_seq, xw, h0, u, m, activations):
    """``(dxw, dh0, du)``: the compiled backward ``fast``, differentiable via its plain twin.

    Neither the native loop nor XLA functions holding a ``tf.while_loop`` can
    be differentiated from outside (the latter's loop accumulators cannot
    leave the compiled cluster), so gradients of this function are taken
    through the same loop run as plain TensorFlow ops.
    """
    masked = m is not None

    @tf.custom_gradient
    def backward(dh_seq, h_seq, xw, h0, u):
        grads = fast(*(tf.stop_gradient(t) for t in (dh_seq, h_seq, xw, h0, u)), m)

        def grad(*cotangents):
            args = (dh_seq, h_seq, xw, h0, u)
            with tf.GradientTape() as tape:
                tape.watch(args)
                if tf.executing_eagerly():
                    plain = _loop_function(_backward, activations, masked, jit_compile=False)
                    out = plain(*args, m)
                else:
                    # Built inline so that the loop's gradient is built for the
                    # enclosing (possibly XLA) context.
                    out = _backward(*args, m, activations=activations)
            cotangents = [tf.zeros_like(o) if c is None else c for o, c in zip(out, cotangents)]
            return tape.gradient(out, args, output_gradients=cotangents)

        return grads, grad

    return backward(dh_seq, h_seq, xw, h0, u)


_LOOP_FUNCTIONS: dict = {}


def _loop_function(body: Callable, activations, masked: bool, jit_compile: bool) -> Callable:
    """``body`` specialised to the activations, as a cached ``tf.function``."""
    key = (body, activations, masked, jit_compile)
    if key not in _LOOP_FUNCTIONS:

        def loop(*args):
            return body(*args, activations=activations)

        # No shape relaxation: the loops rely on static numbers of units (and
        # of steps under XLA when the gradient of the loop is taken).
        _LOOP_FUNCTIONS[key] = tf.function(loop, jit_compile=jit_compile, autograph=False)
    return _LOOP_FUNCTIONS[key]


def _forward(xw, h0, u, m, *, activations):
    """States ``(T, B, H)`` of the recurrence over the projected inputs ``xw``."""
    (act, _), (ract, _) = activations
    units = u.shape[0]
    u_f, u_c = u[:, :units], u[:, units:]
    xw_f, xw_c = _unstack(xw[..., :units]), _unstack(xw[..., units:])
    m = None if m is None else _unstack(m)
    steps = _steps(xw)
    out = tf.TensorArray(h0.dtype, size=steps, element_shape=h0.shape)

    def body(t, h, out):
        f = ract(xw_f.read(t) + tf.matmul(h, u_f))
        c = act(xw_c.read(t) + tf.matmul(f * h, u_c))
        g = f if m is None else f * m.read(t)
        h = h + g * (c - h)
        return t + 1, h, out.write(t, h)

    _, _, out = tf.while_loop(lambda t, *_: t < steps, body, (0, h0, out), maximum_iterations=steps)
    return out.stack()


def _backward(dh_seq, h_seq, xw, h0, u, m, *, activations):
    """Gradients ``(dxw, dh0, du)`` of the recurrence for output gradients ``dh_seq``."""
    (act, act_grad), (ract, ract_grad) = activations
    units = u.shape[0]
    u_f, u_c = u[:, :units], u[:, units:]
    h_prev = tf.concat([h0[None], h_seq[:-1]], axis=0)
    # Gates of all steps, recomputed in parallel from the states.
    f = ract(xw[..., :units] + tf.tensordot(h_prev, u_f, axes=1))
    fh = f * h_prev
    c = act(xw[..., units:] + tf.tensordot(fh, u_c, axes=1))
    dh_ta, h_ta, f_ta, c_ta = (_unstack(t) for t in (dh_seq, h_prev, f, c))
    m_ta = None if m is None else _unstack(m)
    u_f_t, u_c_t = tf.transpose(u_f), tf.transpose(u_c)
    steps = _steps(xw)
    dz_f_ta = tf.TensorArray(xw.dtype, size=steps, element_shape=h0.shape)
    dz_c_ta = tf.TensorArray(xw.dtype, size=steps, element_shape=h0.shape)

    def body(t, dh, dz_f_ta, dz_c_ta):
        h_t, f_t, c_t = h_ta.read(t), f_ta.read(t), c_ta.read(t)
        dh = dh + dh_ta.read(t)
        dh_m = dh if m_ta is None else dh * m_ta.read(t)
        dz_c = dh_m * f_t * act_grad(c_t)
        dfh = tf.matmul(dz_c, u_c_t)
        dz_f = (dh_m * (c_t - h_t) + dfh * h_t) * ract_grad(f_t)
        dh = dh - dh_m * f_t + dfh * f_t + tf.matmul(dz_f, u_f_t)
        return t - 1, dh, dz_f_ta.write(t, dz_f), dz_c_ta.write(t, dz_c)

    _, dh0, dz_f_ta, dz_c_ta = tf.while_loop(
        lambda t, *_: t >= 0,
        body,
        (steps - 1, tf.zeros_like(h0), dz_f_ta, dz_c_ta),
        maximum_iterations=steps,
    )
    dz_f, dz_c = dz_f_ta.stack(), dz_c_ta.stack()
    du_f = tf.matmul(tf.reshape(h_prev, [-1, units]), tf.reshape(dz_f, [-1, units]), True)
    du_c = tf.matmul(tf.reshape(fh, [-1, units]), tf.reshape(dz_c, [-1, units]), True)
    return tf.concat([dz_f, dz_c], axis=-1), dh0, tf.concat([du_f, du_c], axis=-1)


def _unstack(seq: tf.Tensor) -> tf.TensorArray:
    """A TensorArray over the leading (time) axis of ``seq``."""
    return tf.TensorArray(seq.dtype, size=_steps(seq), element_shape=seq.shape[1:]).unstack(seq)


def _steps(seq: tf.Tensor):
    """The length of the leading axis: a Python int when static (XLA needs it), else a tensor."""
    return seq.shape[0] if seq.shape[0] is not None else tf.shape(seq)[0]


def native_serves(dtype: str, units: int, batch: int | None = None) -> bool:
    """Whether calls in ``dtype`` with ``units`` units (and ``batch``) run the native loops.

    Outside XLA-compiled functions, which run the XLA loops.
    """
    dtype = tf.float32 if dtype in ("float16", "bfloat16") else tf.as_dtype(dtype)
    return native_tf.usable(dtype, units, batch)


def grouped_native(
    xw: tf.Tensor, h0: tf.Tensor, u: tf.Tensor, *, activation: str, recurrent_activation: str
) -> tf.Tensor | None:
    """States ``(B, T, H)`` of one native loop with a recurrent kernel per group, or None.

    ``xw`` ``(B, T, 2H)`` and ``h0`` ``(B, H)`` hold ``G`` groups of rows, in
    order; ``u`` ``(G, H, 2H)``: rows ``[g B/G, (g + 1) B/G)`` use ``u[g]``.
    Differentiable once (the native backward loop). None where the native
    loops do not serve (see :func:`keras_mgu.native.enabled`); the caller then runs the groups
    one by one (:func:`keras_mgu.kernels.grouped_sequence`).
    """
    checks.check_kernel_activations(activation, recurrent_activation)
    names = (activation, recurrent_activation)
    groups, units = u.shape[0], u.shape[-2]
    rows = None if xw.shape[0] is None else xw.shape[0] // groups
    if not (native_tf.usable(xw.dtype, units, rows)):
        return None

    @tf.custom_gradient
    def recurrence(xw_t, h0, u):
        hs, saved = native_tf.forward(xw_t, h0, u, None, *names)

        def grad(d_hs):
            return native_tf.backward(d_hs, saved, u, None, *names)

        return hs, grad

    # identity: a variable read inside would ask the gradient for its own
    return tf.transpose(recurrence(tf.transpose(xw, [1, 0, 2]), h0, tf.identity(u)), [1, 0, 2])
