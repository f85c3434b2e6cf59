"""Fused engine for the JAX backend: one :func:`jax.lax.scan` over the projected inputs.

The input projection is already outside the loop (the layer calls
``project_inputs`` once on the whole sequence), so each scan iteration only
runs the cell's ``step``. JAX differentiates the scan itself: its reverse
scan is the per-step vector-Jacobian product of ``step`` carrying the state
gradients, and every transformation (second order, ``jax.jvp``, ``jit``,
``vmap``) works.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from keras_mgu.fused.step import StepFn


def run(
    step: StepFn,
    projected: Any,
    carry: list,
    weights: list,
    mask: Any,
    *,
    go_backwards: bool = False,
) -> tuple[jax.Array, list]:
    """Run ``step`` over ``(B, T, P)`` projected inputs; see :mod:`keras_mgu.fused.engines`."""
    p = jnp.swapaxes(projected, 0, 1)  # (T, B, P), time major
    m = None if mask is None else jnp.swapaxes(jnp.asarray(mask).astype(bool), 0, 1)
    if go_backwards:
        p = p[::-1]
        m = None if m is None else m[::-1]
    dtypes = [c.dtype for c in carry]

    def body(c, xs):
        p_t, m_t = xs
        output, new = step(p_t, m_t, c, weights)
        return [n.astype(d) for n, d in zip(new, dtypes)], output

    final, outputs = jax.lax.scan(body, list(carry), (p, m))
    return jnp.swapaxes(outputs, 0, 1), final
