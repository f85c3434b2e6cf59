"""Fused engine for the TensorFlow backend: XLA-compiled loops and a derived backward.

The forward pass is one XLA-compiled ``tf.while_loop`` over the inputs ``p_t``
(projected before the loop or inside each step, see :data:`HOIST_PROJECTION`)
that records nothing for autodiff; besides the outputs it keeps the carry
entering every step. The backward pass (``tf.custom_gradient``) is a second
XLA-compiled loop, in reverse, that runs the vector-Jacobian product of the
cell's ``step`` at every step::

    dcarry_{t-1}, dp_t, dw_t = vjp(step at (p_t, carry_{t-1}, w))(dy_t, dcarry_t)

carrying ``dcarry`` and the running sum of ``dw_t`` (:data:`LOOP_WEIGHT_GRADIENTS`;
otherwise the loop takes the VJP with respect to the carry only and the
gradients of ``p`` and of the weights come from one vector-Jacobian product of
``step`` over all ``T * B`` rows at once after it, time folded into the batch).
With a hoisted projection the gradients of ``project_inputs`` follow from
``dp`` by ordinary autodiff outside, once over the whole sequence; the weights
enter the loops as loop-invariant arguments.

Second order: the backward pass is itself a ``tf.custom_gradient`` whose
gradient differentiates a plain (non-XLA) twin, the vector-Jacobian product of
an ordinary differentiable loop, so gradients of gradients are exact.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from keras_mgu.fused.step import StepFn

#: Time steps per iteration of the XLA while loops (2 and 4 measured no faster on CPU).
UNROLL = 1
#: Project the whole sequence before the loop (True), inside each step (False), or
#: ``"auto"``: hoisted for cells whose states total at most :data:`HOIST_MAX_STATE`
#: units (see :func:`hoist_projection`). Measured on a 2-core CPU with 2 input features
#: (``benchmarks/custom_cells_profile.py``): a user GRU of 8 units trained 1.4x to 1.5x
#: faster hoisted, a peephole LSTM of 8 units about as fast either way, and one of 64
#: units 1.15x to 1.3x faster with the projection inside the step, where XLA fuses the small
#: per-step matmul while a hoisted ``(T, B, P)`` projection and its gradient are more
#: memory to stream through the loops.
HOIST_PROJECTION = "auto"
#: The largest total state size (units summed over the states) that ``"auto"`` hoists.
HOIST_MAX_STATE = 32
#: Sum the weight gradients inside the reverse loop (True), take them, with the input
#: gradients, from one VJP over all ``T * B`` rows after it (False), or ``"auto"``: in the
#: loop exactly when the projection is not hoisted (see :func:`loop_weight_gradients`).
#: Measured per training step at S (32, 1000, 2, 8) on a 2-core CPU, True against False
#: (``benchmarks/custom_cells_profile.py --settings hoist=1,loopw=0 engine --cases GRU:S
#: LSTM:S MGU:S``, benchmarks/RESULTS.md): a user GRU 1.3x faster (18.8 against 24.7 ms;
#: XLA runs its carry-only reverse loop at 14.6 ms, the loop with weight gradients at
#: 8.2), a peephole LSTM as fast (19.6 against 20.4) and an MGU cell 1.2x slower (14.5
#: against 12.4). At 64 units the projection runs in the step and ``"auto"`` sums in the
#: loop too (there the rows VJP would run the step's forward again: large matmuls).
LOOP_WEIGHT_GRADIENTS = True

_ZERO = tf.UnconnectedGradients.ZERO
_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def hoist_projection(cell: Any) -> bool:
    """Whether the layer hoists ``cell``'s projection (:data:`HOIST_PROJECTION`)."""
    if HOIST_PROJECTION != "auto":
        return bool(HOIST_PROJECTION)
    sizes = cell.state_size if isinstance(cell.state_size, (list, tuple)) else [cell.state_size]
    return sum(sizes) <= HOIST_MAX_STATE


def loop_weight_gradients(hoisted: bool) -> bool:
    """Whether the reverse loop sums the weight gradients (:data:`LOOP_WEIGHT_GRADIENTS`)."""
    if LOOP_WEIGHT_GRADIENTS != "auto":
        return bool(LOOP_WEIGHT_GRADIENTS)
    return not hoisted


def run(
    step: StepFn,
    projected: tf.Tensor,
    carry: list,
    weights: list,
    mask: Any,
    *,
    go_backwards: bool = False,
) -> tuple[tf.Tensor, list]:
    """Run ``step`` over ``(B, T, P)`` projected inputs; see :mod:`keras_mgu.fused.engines`."""
    p = _time_major(tf.convert_to_tensor(projected))
    m = None if mask is None else tf.transpose(tf.cast(mask, tf.bool))
    if go_backwards:
        p = tf.reverse(p, [0])
        m = None if m is None else tf.reverse(m, [0])
    carry = [tf.convert_to_tensor(c) for c in carry]
    weights = [tf.convert_to_tensor(w) for w in weights]
    outputs, final = _sequence(step, p, carry, weights, m)
    return _time_major(outputs), final


def _time_major(x: tf.Tensor) -> tf.Tensor:
    """Swap the two leading axes."""
    return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))


def _is_float(t: tf.Tensor) -> bool:
    return t.dtype.is_floating or t.dtype.is_complex


def _compiled(step: StepFn) -> dict[str, Callable]:
    """The XLA forward and backward loops of ``step``, built once per step function."""
    if step not in _COMPILED:
        _COMPILED[step] = {
            "forward": tf.function(
                lambda p, m, c, w: _forward(step, p, m, c, w, keep=True),
                jit_compile=True,
                autograph=False,
            ),
            "backward": tf.function(
                lambda *args: _backward(step, *args), jit_compile=True, autograph=False
            ),
        }
    return _COMPILED[step]


def _sequence(step: StepFn, p: tf.Tensor, carry: list, weights: list, m: Any):
    """Outputs ``(T, B, O)`` and final carry, with the derived backward pass."""
    n_c = len(carry)
    compiled = _compiled(step)

    @tf.custom_gradient
    def sequence(p, *rest):
        carry0, w = list(rest[:n_c]), list(rest[n_c:])
        stop = tf.stop_gradient
        outputs, final, prev = compiled["forward"](
            stop(p), m, [stop(c) for c in carry0], [stop(x) for x in w]
        )

        def grad(d_outputs, *d_final):
            d_outputs = _zeros_if_none(d_outputs, outputs)
            d_final = [_zeros_if_none(d, f) for d, f in zip(d_final, final)]
            grads = _backward_op(step, d_outputs, d_final, p, carry0, w, m, prev)
            return _with_nones(grads, [p, *carry0, *w])

        return (outputs, *final), grad

    result = sequence(p, *carry, *weights)
    return result[0], list(result[1:])


def _backward_op(step, d_outputs, d_final, p, carry0, weights, m, prev):
    """Gradients of ``(p, carry0, floating weights)``, itself differentiable."""
    n_c = len(carry0)
    float_w = [i for i, w in enumerate(weights) if _is_float(w)]
    compiled = _compiled(step)

    @tf.custom_gradient
    def backward(d_outputs, *rest):
        d_final = list(rest[:n_c])
        p, carry0 = rest[n_c], list(rest[n_c + 1 : 2 * n_c + 1])
        fw = list(rest[2 * n_c + 1 :])
        stop = tf.stop_gradient
        args = [stop(d_outputs), [stop(d) for d in d_final], stop(p), m, [stop(x) for x in prev]]
        dp, d_carry, dw = compiled["backward"](*args, _merge(weights, float_w, map(stop, fw)))

        def grad(*cotangents):
            primal = [p, *carry0, *fw]
            seeds = [d_outputs, *d_final]
            watched = seeds + primal
            with tf.GradientTape() as outer:
                outer.watch(watched)
                with tf.GradientTape() as inner:
                    inner.watch(primal)
                    w_all = _merge(weights, float_w, fw)
                    outputs, final, _ = _forward(step, p, m, carry0, w_all, keep=False)
                first = inner.gradient(
                    [outputs, *final], primal, output_gradients=seeds, unconnected_gradients=_ZERO
                )
            cotangents = [_zeros_if_none(c, f) for c, f in zip(cotangents, first)]
            return outer.gradient(
                first, watched, output_gradients=cotangents, unconnected_gradients=_ZERO
            )

        return (dp, *d_carry, *dw), grad

    fw = [weights[i] for i in float_w]
    grads = backward(d_outputs, *d_final, p, *carry0, *fw)
    dp, d_carry = grads[0], list(grads[1 : n_c + 1])
    dw = [None] * len(weights)
    for i, g in zip(float_w, grads[n_c + 1 :]):
        dw[i] = g
    return [dp, *d_carry, *dw]


def _forward(step: StepFn, p, m, carry0: list, weights: list, keep: bool):
    """The loop: outputs ``(T, B, O)``, final carry and (if ``keep``) every step's entering carry.

    The first step runs before the loop, which gives the output's dtype and shape.
    """
    steps = p.shape[0] if p.shape[0] is not None else tf.shape(p)[0]
    p_ta = _unstack(p)
    m_ta = None if m is None else _unstack(m)

    def one_step(t, carry):
        m_t = None if m_ta is None else m_ta.read(t)
        output, new = step(p_ta.read(t), m_t, carry, weights)
        return output, [tf.ensure_shape(tf.cast(n, c.dtype), c.shape) for n, c in zip(new, carry)]

    output, carry = one_step(0, list(carry0))
    out_ta = tf.TensorArray(output.dtype, size=steps, element_shape=output.shape).write(0, output)
    prev_tas = []
    if keep:
        prev_tas = [
            tf.TensorArray(c.dtype, size=steps, element_shape=c.shape).write(0, c) for c in carry0
        ]

    def advance(t, carry, out_ta, prev_tas):
        prev_tas = [ta.write(t, c) for ta, c in zip(prev_tas, carry)]
        output, new = one_step(t, carry)
        return t + 1, new, out_ta.write(t, output), prev_tas

    state = _unrolled_loop(advance, (1, carry, out_ta, prev_tas), steps - 1)
    _, final, out_ta, prev_tas = state
    return out_ta.stack(), final, [ta.stack() for ta in prev_tas]


def _unrolled_loop(advance: Callable, state: tuple, count):
    """Apply ``advance`` ``count`` times: :data:`UNROLL` per iteration of a ``tf.while_loop``.

    With a static ``count`` the remainder runs unrolled after the loop; with a
    dynamic one the loop advances one step per iteration.
    """
    unroll = UNROLL if isinstance(count, int) else 1

    def body(i, *state):
        for _ in range(unroll):
            state = advance(*state)
        return (i + 1, *state)

    iterations = count // unroll
    _, *state = tf.while_loop(
        lambda i, *_: i < iterations, body, (0, *state), maximum_iterations=iterations
    )
    for _ in range(count - iterations * unroll if unroll > 1 else 0):
        state = advance(*state)
    return tuple(state)


def _backward(step: StepFn, d_outputs, d_final, p, m, prev, weights):
    """Gradients ``(dp, dcarry_0, dweights)`` in two phases.

    1. A reverse loop of per-step vector-Jacobian products with respect to the
       carry only: ``dcarry_{t-1} = vjp(step at (p_t, carry_{t-1}))(dy_t, dcarry_t)``;
       it records the cotangent ``dcarry_t`` reaching every step.
    2. One vector-Jacobian product of ``step`` run on all ``T * B`` rows at
       once (time folded into the batch: rows of a step are independent), with
       the recorded cotangents: the gradients of ``p`` and of the weights, as
       large matmuls instead of ``T`` small ones inside the loop.
    """
    if loop_weight_gradients(hoisted=not getattr(step, "projects_inputs", False)):
        return _reverse_loop_all(step, d_outputs, d_final, p, m, prev, weights)
    d_carry, cotangents = _reverse_loop(step, d_outputs, d_final, p, m, prev, weights)
    dp, dw = _rows_vjp(step, d_outputs, cotangents, p, m, prev, weights)
    return dp, d_carry, dw


def _reverse_loop_all(step: StepFn, d_outputs, d_final, p, m, prev, weights):
    """The whole backward in one reverse loop: ``(dp, dcarry_0, dweights)``, dweights summed."""
    steps = p.shape[0] if p.shape[0] is not None else tf.shape(p)[0]
    p_ta, dy_ta = _unstack(p), _unstack(d_outputs)
    m_ta = None if m is None else _unstack(m)
    prev_tas = [_unstack(x) for x in prev]
    dp_ta = tf.TensorArray(p.dtype, size=steps, element_shape=p.shape[1:])
    float_w = [i for i, w in enumerate(weights) if _is_float(w)]
    fw = [weights[i] for i in float_w]
    n_c = len(prev)

    def retreat(t, d_carry, dw, dp_ta):
        carry = [ta.read(t) for ta in prev_tas]
        p_t = p_ta.read(t)
        with tf.GradientTape() as tape:
            tape.watch([*carry, p_t, *fw])
            m_t = None if m_ta is None else m_ta.read(t)
            output, new = step(p_t, m_t, carry, _merge(weights, float_w, fw))
        grads = tape.gradient(
            [output, *new],
            [*carry, p_t, *fw],
            output_gradients=[tf.cast(dy_ta.read(t), output.dtype), *d_carry],
            unconnected_gradients=_ZERO,
        )
        d_prev = [tf.cast(g, c.dtype) for g, c in zip(grads[:n_c], carry)]
        dw = [a + tf.cast(g, a.dtype) for a, g in zip(dw, grads[n_c + 1 :])]
        return t - 1, d_prev, dw, dp_ta.write(t, tf.cast(grads[n_c], p.dtype))

    state = (steps - 1, list(d_final), [tf.zeros_like(w) for w in fw], dp_ta)
    _, d_carry, dw, dp_ta = _unrolled_loop(retreat, state, steps)
    return dp_ta.stack(), d_carry, dw


def _reverse_loop(step: StepFn, d_outputs, d_final, p, m, prev, weights):
    """Phase 1 of :func:`_backward`: ``dcarry_0`` and the ``(T, B, ...)`` carry cotangents."""
    steps = p.shape[0] if p.shape[0] is not None else tf.shape(p)[0]
    p_ta, dy_ta = _unstack(p), _unstack(d_outputs)
    m_ta = None if m is None else _unstack(m)
    prev_tas = [_unstack(x) for x in prev]
    cot_tas = [tf.TensorArray(x.dtype, size=steps, element_shape=x.shape[1:]) for x in prev]

    def retreat(t, d_carry, cot_tas):
        cot_tas = [ta.write(t, d) for ta, d in zip(cot_tas, d_carry)]
        carry = [ta.read(t) for ta in prev_tas]
        with tf.GradientTape() as tape:
            tape.watch(carry)
            m_t = None if m_ta is None else m_ta.read(t)
            output, new = step(p_ta.read(t), m_t, carry, weights)
        d_prev = tape.gradient(
            [output, *new],
            carry,
            output_gradients=[tf.cast(dy_ta.read(t), output.dtype), *d_carry],
            unconnected_gradients=_ZERO,
        )
        return t - 1, [tf.cast(g, c.dtype) for g, c in zip(d_prev, carry)], cot_tas

    state = (steps - 1, list(d_final), cot_tas)
    _, d_carry, cot_tas = _unrolled_loop(retreat, state, steps)
    return d_carry, [ta.stack() for ta in cot_tas]


def _rows_vjp(step: StepFn, d_outputs, cotangents, p, m, prev, weights):
    """Phase 2 of :func:`_backward`: ``(dp, dweights)`` from one VJP over all ``T * B`` rows."""

    def rows(x):  # (T, B, ...) -> (T * B, ...)
        return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], axis=0))

    float_w = [i for i, w in enumerate(weights) if _is_float(w)]
    p_rows, fw = rows(p), [weights[i] for i in float_w]
    with tf.GradientTape() as tape:
        tape.watch([p_rows, *fw])
        output, new = step(
            p_rows,
            None if m is None else rows(m),
            [rows(x) for x in prev],
            _merge(weights, float_w, fw),
        )
    grads = tape.gradient(
        [output, *new],
        [p_rows, *fw],
        output_gradients=[tf.cast(rows(d_outputs), output.dtype)] + [rows(c) for c in cotangents],
        unconnected_gradients=_ZERO,
    )
    dp = tf.reshape(tf.cast(grads[0], p.dtype), tf.shape(p))
    dw = [tf.cast(g, w.dtype) for g, w in zip(grads[1:], fw)]
    return dp, dw


def _merge(weights: list, float_idx: list, float_values) -> list:
    """``weights`` with the floating entries (at ``float_idx``) replaced by ``float_values``."""
    merged = list(weights)
    for i, v in zip(float_idx, float_values):
        merged[i] = v
    return merged


def _zeros_if_none(g, like):
    return tf.zeros_like(like) if g is None else g


def _with_nones(grads: list, args: list) -> list:
    """Gradients in argument order; non-floating arguments get None."""
    return [g if _is_float(a) else None for g, a in zip(grads, args)]


def _unstack(seq: tf.Tensor) -> tf.TensorArray:
    """A TensorArray over the leading (time) axis of ``seq``."""
    steps = seq.shape[0] if seq.shape[0] is not None else tf.shape(seq)[0]
    return tf.TensorArray(seq.dtype, size=steps, element_shape=seq.shape[1:]).unstack(seq)
