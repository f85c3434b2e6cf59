"""Fused engine for the JAX backend: one :func:`jax.lax.scan` over the sequence.

JAX's cell loop is already a compiled scan, so there is little to gain; this
engine runs the same scan without the per-step layer machinery at tracing.
Hoisting the input projection out of the loop measured slower here at small
input sizes (XLA fuses the small per-step projection into the step, while a
hoisted ``(T, B, P)`` projection is more memory to stream), so
:data:`HOIST_PROJECTION` is off: the layer passes the raw inputs and each
step applies ``project_inputs`` itself. With :data:`DERIVED_BACKWARD` the backward pass is a
:func:`jax.custom_vjp`: the forward scan keeps only the carry entering each
step, and a reverse scan runs the vector-Jacobian product of ``step`` at every
step (``jax.vjp``, recomputing that step), carrying only the state gradients
and summing the weight gradients. Otherwise JAX differentiates the scan
itself, which stores every intermediate of every step.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from keras_mgu.fused.step import StepFn

#: Project the whole sequence before the loop (True) or inside each step (False).
HOIST_PROJECTION = False
#: Derived backward (``custom_vjp``, True) or JAX's autodiff of the scan (False, measured
#: as fast and it supports every transformation, ``jax.jvp`` included).
DERIVED_BACKWARD = False


def run(
    step: StepFn,
    projected: Any,
    carry: list,
    weights: list,
    mask: Any,
    *,
    go_backwards: bool = False,
) -> tuple[jax.Array, list]:
    """Run ``step`` over ``(B, T, P)`` inputs; see :mod:`keras_mgu.fused.engines`."""
    p = jnp.swapaxes(projected, 0, 1)  # (T, B, P), time major
    m = None if mask is None else jnp.swapaxes(jnp.asarray(mask).astype(bool), 0, 1)
    if go_backwards:
        p = p[::-1]
        m = None if m is None else m[::-1]
    carry, weights = list(carry), list(weights)
    if DERIVED_BACKWARD:
        outputs, final = _derived(step, p, m, carry, weights)
    else:
        outputs, final, _ = _forward(step, p, m, carry, weights, keep=False)
    return jnp.swapaxes(outputs, 0, 1), final


def _forward(step: StepFn, p, m, carry: list, weights: list, keep: bool):
    """Outputs ``(T, B, O)``, the final carry and (if ``keep``) the carries entering each step."""
    dtypes = [c.dtype for c in carry]

    def body(c, xs):
        p_t, m_t = xs
        output, new = step(p_t, m_t, c, weights)
        return [n.astype(d) for n, d in zip(new, dtypes)], (output, c if keep else None)

    final, (outputs, entering) = jax.lax.scan(body, carry, (p, m))
    return outputs, final, entering


def _derived(step: StepFn, p, m, carry: list, weights: list):
    """The forward scan with a backward pass of per-step VJPs (first and higher order)."""
    float_w = [i for i, w in enumerate(weights) if jnp.issubdtype(w.dtype, jnp.inexact)]
    others = [w for i, w in enumerate(weights) if i not in float_w]

    def merge(fw):
        merged, it_f, it_o = [], iter(fw), iter(others)
        for i in range(len(weights)):
            merged.append(next(it_f) if i in float_w else next(it_o))
        return merged

    @jax.custom_vjp
    def sequence(p, carry, fw):
        outputs, final, _ = _forward(step, p, m, carry, merge(fw), keep=False)
        return outputs, final

    def fwd(p, carry, fw):
        outputs, final, entering = _forward(step, p, m, carry, merge(fw), keep=True)
        return (outputs, final), (p, entering, fw)

    def bwd(residuals, cotangents):
        p, entering, fw = residuals
        d_outputs, d_final = cotangents

        def body(acc, xs):
            d_carry, d_fw = acc
            p_t, m_t, c_t, dy_t = xs

            def f(p_t, c_t, fw):
                return step(p_t, m_t, c_t, merge(fw))

            _, pullback = jax.vjp(f, p_t, c_t, fw)
            dp_t, d_prev, dw = pullback((dy_t, d_carry))
            return (d_prev, [a + b for a, b in zip(d_fw, dw)]), dp_t

        zeros = [jnp.zeros_like(w) for w in fw]
        (d_carry, d_fw), dp = jax.lax.scan(
            body, (list(d_final), zeros), (p, m, entering, d_outputs), reverse=True
        )
        return dp, d_carry, d_fw

    sequence.defvjp(fwd, bwd)
    return sequence(p, carry, [weights[i] for i in float_w])
