"""Fused MGU sequence kernel for the JAX backend.

The input projection ``[x_t | 1] [W ; b]`` of every step is one matmul outside
the time loop; the recurrence runs in :func:`jax.lax.scan` over the projected
inputs ``xw_t``::

    f_t = recurrent_activation(xw_t[:, :H] + h_{t-1} U[:, :H])
    c_t = activation(xw_t[:, H:] + (f_t * h_{t-1}) U[:, H:])
    h_t = h_{t-1} + f_t (c_t - h_{t-1})      (h_t = h_{t-1} on a masked step)

The backward pass through time is hand written (:func:`jax.custom_vjp`). The
forward loop saves ``[h_{t-1} | f_t | c_t]`` per step; the reverse loop
propagates ``dL/dh`` with two small matmuls per step and emits the
pre-activation gradients ``dz_t``, from which ``dW``, ``db`` and ``dx`` follow
as single matmuls over all steps. ``dU = sum_t [h_{t-1} | f_t h_{t-1}]^T dz_t``
is one contraction after the loop for small states and is accumulated inside
the loop for larger ones (see :data:`LOOP_WEIGHT_GRAD_UNITS`). The backward
pass is itself written with differentiable JAX operations, so
reverse-over-reverse and forward-over-reverse second-order derivatives work.
Forward mode applied directly to the kernel (``jax.jvp``) is not supported by
``custom_vjp`` and raises a ``TypeError``; set :data:`CUSTOM_VJP` to False to
differentiate the scan with JAX's own autodiff, which supports every
transformation (and is slower to train).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from keras_mgu import checks
from keras_mgu.native import jax as native_jax

#: Time steps per iteration of the forward ``lax.scan`` loop (1 measured fastest
#: on CPU; larger unrolls were slower at every tested size).
UNROLL = 1
#: Time steps per iteration of the backward (reverse) ``lax.scan`` loop.
BACKWARD_UNROLL = 1
#: Use the hand-written backward pass (True) or autodiff of the scan (False).
CUSTOM_VJP = True
#: Up to this many units the forward loop's recurrent matmuls are written as
#: broadcast-multiply-sum, which XLA fuses with the gate activations.
SMALL_MATMUL_UNITS = 8
#: From this many units on, the backward loop accumulates ``dU`` step by step;
#: below it ``dU`` is one contraction over all steps after the loop.
LOOP_WEIGHT_GRAD_UNITS = 32

# name -> (function, derivative expressed through the function's output y)
_ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "tanh": (jnp.tanh, lambda y: 1.0 - y * y),
    "sigmoid": (jax.nn.sigmoid, lambda y: y * (1.0 - y)),
}
_LOW_PRECISION = (jnp.float16, jnp.bfloat16)


def mgu_sequence(
    inputs: Any,
    initial_state: Any,
    kernel: Any,
    recurrent_kernel: Any,
    bias: Any,
    mask: Any,
    *,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
    go_backwards: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """Run the MGU over a batch of sequences.

    Args:
        inputs: ``(B, T, D)`` floating array.
        initial_state: ``(B, H)``.
        kernel: ``(D, 2H)``; recurrent_kernel: ``(H, 2H)``; bias: ``(2H,)`` or None.
        mask: ``(B, T)`` booleans (True where a step is real) or None.
        activation: Name of the candidate activation, ``"tanh"`` or ``"sigmoid"``.
        recurrent_activation: Name of the forget-gate activation, same choices.
        go_backwards: Process the steps from last to first; outputs are then
            in processing order (reversed time).

    Returns:
        ``(outputs, final_state)``: ``(B, T, H)`` and ``(B, H)`` in the dtype of
        ``inputs``. float16/bfloat16 inputs are computed in float32.
    """
    checks.check_kernel_activations(activation, recurrent_activation)
    inputs = jnp.asarray(inputs)
    checks.check_floating(inputs.dtype.name)
    out_dtype = inputs.dtype
    dtype = jnp.float32 if out_dtype in _LOW_PRECISION else out_dtype
    x, h0, w, u, b, m = _prepare(inputs, initial_state, kernel, recurrent_kernel, bias, mask, dtype)

    x = jnp.swapaxes(x, 0, 1)  # (T, B, D), time major
    if go_backwards:
        x = x[::-1]
        m = None if m is None else m[::-1]
    if b is not None:  # fold the bias into the projection: [x | 1] @ [W ; b]
        x = jnp.concatenate([x, jnp.ones(x.shape[:-1] + (1,), dtype)], axis=-1)
        w = jnp.concatenate([w, b[None]], axis=0)
    xw = x @ w
    recurrence = _recurrence_vjp if CUSTOM_VJP else _recurrence_autodiff
    hs, h_last = recurrence(xw, h0, u, m, activation, recurrent_activation)
    return jnp.swapaxes(hs, 0, 1).astype(out_dtype), h_last.astype(out_dtype)


def _prepare(inputs, initial_state, kernel, recurrent_kernel, bias, mask, dtype) -> tuple:
    """Check shapes and cast; the mask becomes time major ``(T, B, 1)`` booleans."""
    h0, w, u = (jnp.asarray(t, dtype) for t in (initial_state, kernel, recurrent_kernel))
    b = None if bias is None else jnp.asarray(bias, dtype)
    mask = None if mask is None else jnp.asarray(mask)
    if mask is not None:
        checks.check_mask_dtype(mask.dtype.name)
    checks.check_sequence_shapes(
        inputs.shape, u.shape, initial_state=h0.shape, kernel=w.shape,
        bias=None if b is None else b.shape, mask=None if mask is None else mask.shape,
    )  # fmt: skip
    m = None if mask is None else jnp.swapaxes(mask, 0, 1)[..., None]
    return inputs.astype(dtype), h0, w, u, b, m


def _step_matmul(a, b):
    """``a (B, K) @ b (K, N)`` inside the forward loop."""
    if b.shape[0] <= SMALL_MATMUL_UNITS:
        return jnp.sum(a[:, :, None] * b[None], axis=1)
    return a @ b


# ---------------------------------------------------------------- forward loop
def _forward_loop(xw, h0, u, m, activation: str, recurrent_activation: str):
    """Run the recurrence over ``(T, B, 2H)`` projected inputs.

    Returns ``(hs, h_last, saved)``: the ``(T, B, H)`` states, the final state
    and ``(T, B, 3H)`` ``[h_{t-1} | f_t | c_t]`` for the backward pass.
    """
    act = _ACTIVATIONS[activation][0]
    ract = _ACTIVATIONS[recurrent_activation][0]
    units = h0.shape[-1]
    u_f, u_c = u[:, :units], u[:, units:]

    def step(h, xs):
        xw_t = xs[0]
        f = ract(xw_t[:, :units] + _step_matmul(h, u_f))
        c = act(xw_t[:, units:] + _step_matmul(f * h, u_c))
        h_new = h + f * (c - h)
        if m is not None:
            h_new = jnp.where(xs[1], h_new, h)
        return h_new, (h_new, jnp.concatenate([h, f, c], axis=-1))

    xs = (xw,) if m is None else (xw, m)
    # The states are emitted by the scan itself (no slicing over the time axis
    # afterwards), so that the loop also exports with a symbolic number of steps.
    h_last, (hs, saved) = jax.lax.scan(step, h0, xs, unroll=max(1, min(UNROLL, xw.shape[0])))
    return hs, h_last, saved


def _recurrence_autodiff(xw, h0, u, m, activation, recurrent_activation):
    """Forward loop differentiated by JAX's autodiff of ``lax.scan``."""
    return _forward_loop(xw, h0, u, m, activation, recurrent_activation)[:2]


# ------------------------------------------------------ hand-written backward
@partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _recurrence_vjp(xw, h0, u, m, activation, recurrent_activation):
    """Forward loop with the hand-written backward pass through time."""
    return _any_forward_loop(xw, h0, u, m, activation, recurrent_activation)[:2]


def _recurrence_fwd(xw, h0, u, m, activation, recurrent_activation):
    hs, h_last, saved = _any_forward_loop(xw, h0, u, m, activation, recurrent_activation)
    return (hs, h_last), (saved, u, m)


def _recurrence_bwd(activation, recurrent_activation, residuals, cotangents):
    """The backward pass: the native loop where it serves, else :func:`_scan_backward`."""
    saved, u, m = residuals
    if _use_native(saved.dtype, u.shape[0], saved.shape):
        d_hs, d_last = cotangents
        dxw, dh0, du = _native_backward(saved, u, m, d_hs, d_last, activation, recurrent_activation)
        return dxw, dh0, du, None
    return _scan_backward(activation, recurrent_activation, residuals, cotangents)


# ---------------------------------------------------------------- native loops
def _use_native(dtype, units: int, shape: tuple = ()) -> bool:
    """Whether the compiled loops of :mod:`keras_mgu.native` run this call."""
    return native_jax.usable(dtype, units, shape)


def _any_forward_loop(xw, h0, u, m, activation, recurrent_activation):
    """:func:`_forward_loop`, or its native twin where that serves."""
    if _use_native(xw.dtype, u.shape[0], xw.shape):
        hs, saved = _native_forward(xw, h0, u, m, activation, recurrent_activation)
        return hs, hs[-1], saved
    return _forward_loop(xw, h0, u, m, activation, recurrent_activation)


@partial(jax.custom_jvp, nondiff_argnums=(4, 5))
def _native_forward(xw, h0, u, m, activation, recurrent_activation):
    """``(hs, saved)`` from the native loop; differentiated through :func:`_forward_loop`."""
    return native_jax.forward(xw, h0, u, m, activation, recurrent_activation)


@_native_forward.defjvp
def _native_forward_jvp(activation, recurrent_activation, primals, tangents):
    xw, h0, u, m = primals

    def twin(xw, h0, u):
        hs, _, saved = _forward_loop(xw, h0, u, m, activation, recurrent_activation)
        return hs, saved

    return jax.jvp(twin, (xw, h0, u), tuple(tangents[:3]))


@partial(jax.custom_jvp, nondiff_argnums=(5, 6))
def _native_backward(saved, u, m, d_hs, d_last, activation, recurrent_activation):
    """``(dxw, dh0, du)`` from the native loop; differentiated through :func:`_scan_backward`."""
    return native_jax.backward(d_hs, d_last, saved, u, m, activation, recurrent_activation)


@_native_backward.defjvp
def _native_backward_jvp(activation, recurrent_activation, primals, tangents):
    saved, u, m, d_hs, d_last = primals

    def twin(saved, u, d_hs, d_last):
        residuals, cotangents = (saved, u, m), (d_hs, d_last)
        return _scan_backward(activation, recurrent_activation, residuals, cotangents)[:3]

    tangents = (tangents[0], tangents[1], tangents[3], tangents[4])
    return jax.jvp(twin, (saved, u, d_hs, d_last), tangents)


def _scan_backward(activation, recurrent_activation, residuals, cotangents):
    """Reverse loop over ``dL/dh`` emitting ``dz_t = [dz_f | dz_c]`` per step.

    Per step, with ``g = dL/dh_t`` and ``f, c, h = f_t, c_t, h_{t-1}``::

        dz_c = g f act'(c),   d(fh) = dz_c U_c^T,   dz_f = (g (c - h) + d(fh) h) ract'(f)
        dL/dh_{t-1} = g (1 - f) + d(fh) f + dz_f U_f^T

    (a masked step passes ``g`` through and has ``dz = 0``), and
    ``dU_f = sum_t h^T dz_f``, ``dU_c = sum_t (f h)^T dz_c``.
    """
    saved, u, m = residuals
    d_hs, d_last = cotangents
    act_grad = _ACTIVATIONS[activation][1]
    ract_grad = _ACTIVATIONS[recurrent_activation][1]
    units = u.shape[0]
    u_f_t, u_c_t = u[:, :units].T, u[:, units:].T

    in_loop = units >= LOOP_WEIGHT_GRAD_UNITS

    def step(carry, xs):
        g, du = carry
        g = g + xs[0]
        saved_t = xs[1]
        h, f, c = saved_t[:, :units], saved_t[:, units : 2 * units], saved_t[:, 2 * units :]
        if m is not None:
            g_in, g = g, jnp.where(xs[2], g, 0.0)
        dzc = g * f * act_grad(c)
        dfh = dzc @ u_c_t
        dzf = (g * (c - h) + dfh * h) * ract_grad(f)
        g_prev = g * (1.0 - f) + dfh * f + dzf @ u_f_t
        if m is not None:
            g_prev = jnp.where(xs[2], g_prev, g_in)
        if in_loop:
            du = du + jnp.concatenate([h.T @ dzf, (f * h).T @ dzc], axis=-1)
        return (g_prev, du), jnp.concatenate([dzf, dzc], axis=-1)

    xs = (d_hs, saved) if m is None else (d_hs, saved, m)
    steps = saved.shape[0]
    du0 = jnp.zeros_like(u) if in_loop else None
    (dh0, du), dxw = jax.lax.scan(
        step, (d_last, du0), xs, reverse=True, unroll=max(1, min(BACKWARD_UNROLL, steps))
    )
    if not in_loop:
        h_prev, f = saved[..., :units], saved[..., units : 2 * units]
        du = jnp.concatenate(
            [
                jnp.einsum("tbi,tbj->ij", h_prev, dxw[..., :units]),
                jnp.einsum("tbi,tbj->ij", f * h_prev, dxw[..., units:]),
            ],
            axis=-1,
        )
    return dxw, dh0, du, None


_recurrence_vjp.defvjp(_recurrence_fwd, _recurrence_bwd)


def native_serves(dtype: str, units: int, batch: int | None = None) -> bool:
    """Whether calls in ``dtype`` with ``units`` units (and ``batch``) run the native loops."""
    dtype = "float32" if dtype in ("float16", "bfloat16") else dtype
    return native_jax.usable(dtype, units, batch=batch)


# ------------------------------------------------------------- grouped loops
def grouped_native(xw, h0, u, *, activation: str, recurrent_activation: str):
    """States ``(B, T, H)`` of one native loop with a recurrent kernel per group, or None.

    ``xw`` ``(B, T, 2H)`` and ``h0`` ``(B, H)`` hold ``G`` groups of rows, in
    order; ``u`` ``(G, H, 2H)``: rows ``[g B/G, (g + 1) B/G)`` use ``u[g]``.
    Differentiable once (the native backward loop). None where the native
    loops do not serve; the caller then runs the groups one by one
    (:func:`keras_mgu.kernels.grouped_sequence`).
    """
    checks.check_kernel_activations(activation, recurrent_activation)
    xw_t = jnp.swapaxes(xw, 0, 1)
    rows = xw_t.shape[1] // u.shape[0]
    if not _use_native(xw.dtype, u.shape[-2], (xw_t.shape[0], rows)):
        return None
    return jnp.swapaxes(_grouped(xw_t, h0, u, activation, recurrent_activation), 0, 1)


@partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _grouped(xw, h0, u, activation, recurrent_activation):
    return native_jax.forward(xw, h0, u, None, activation, recurrent_activation)[0]


def _grouped_fwd(xw, h0, u, activation, recurrent_activation):
    hs, saved = native_jax.forward(xw, h0, u, None, activation, recurrent_activation)
    return hs, (saved, u, jnp.zeros_like(h0))


def _grouped_bwd(activation, recurrent_activation, residuals, d_hs):
    saved, u, d_last = residuals
    return native_jax.backward(d_hs, d_last, saved, u, None, activation, recurrent_activation)


_grouped.defvjp(_grouped_fwd, _grouped_bwd)
