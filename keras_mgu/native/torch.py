"""PyTorch front-end of the native MGU loops: ``torch.library`` custom operators.

``keras_mgu::mgu_forward`` and ``keras_mgu::mgu_backward`` call the compiled
loops on the tensors' CPU buffers (through ctypes); both have fake
implementations for shape propagation. The forward operator's autograd
(registered with ``torch.library.register_autograd``) runs the backward
operator; when a gradient of the gradient is wanted (``create_graph=True``),
it computes the backward pass from differentiable torch ops instead
(:func:`set_differentiable_backward`). The batch split runs on PyTorch's
own OpenMP threads, ``torch.get_num_threads()`` of them unless
``KERAS_MGU_NUM_THREADS`` says otherwise. Traced code calls the operators;
eager code calls the same loops and gradients through a
``torch.autograd.Function``, which skips the dispatcher (:func:`recurrence`).

The recurrent kernel ``u`` is ``(H, 2H)``, or ``(G, H, 2H)``: G groups, batch
rows ``[g B/G, (g+1) B/G)`` use ``u[g]`` (B a multiple of G), and its gradient
has the shape of ``u``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from keras_mgu import checks, native

#: The native loops run when a step's recurrent product, ``batch * units**2``
#: multiply-adds, is at most this (batch 32: up to 250 units; batch 256: up to
#: 88); above it the fused kernel is about as fast. Measured with
#: ``benchmarks/native_kernel.py --part crossover`` (docs/native_kernel.md).
MAX_STEP_MACS = 2_000_000
_ACTIVATIONS = {code: name for name, code in native.ACTIVATION_CODES.items()}
_differentiable_backward: list[Callable] = []


def usable(dtype: torch.dtype, units: int, device: torch.device, batch: int | None = None) -> bool:
    """Whether the native loops serve this call (CPU, float32/64, small enough, built)."""
    return (
        device.type == "cpu"
        and dtype in (torch.float32, torch.float64)
        and native.faster(batch, units, MAX_STEP_MACS)
        and native.status("torch").available
    )


def _pointer(t: Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _run_forward(
    xw: Tensor, h0: Tensor, u: Tensor, mask: Tensor | None, activation: int, ract: int,
    batch_major: bool,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    xw, h0, u = (t.contiguous() for t in (xw, h0, u))
    mask = None if mask is None else mask.to(torch.uint8).contiguous()
    (steps, batch), units = native.steps_and_batch(xw.shape, batch_major), xw.shape[-1] // 2
    groups = checks.groups_of(tuple(u.shape), batch, units)
    hs = xw.new_empty((*xw.shape[:2], units))
    saved = xw.new_empty((steps, batch, 3 * units))
    pointers = tuple(_pointer(t) for t in (xw, h0, u, mask, hs, saved))
    names = (_ACTIVATIONS[activation], _ACTIVATIONS[ract])
    settings = (native.max_threads(torch.get_num_threads()), batch_major, groups)
    dtype = _numpy_dtype(xw.dtype)
    native.call_forward((steps, batch, units), dtype, pointers, *names, *settings)
    return hs, saved


def _run_backward(
    d_hs: Tensor, saved: Tensor, u: Tensor, mask: Tensor | None, activation: int, ract: int,
    batch_major: bool,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    d_hs, saved, u = (t.contiguous() for t in (d_hs, saved, u))
    mask = None if mask is None else mask.to(torch.uint8).contiguous()
    (steps, batch), units = native.steps_and_batch(d_hs.shape, batch_major), d_hs.shape[-1]
    groups = checks.groups_of(tuple(u.shape), batch, units)
    dxw = d_hs.new_empty((*d_hs.shape[:2], 2 * units))
    dh0 = d_hs.new_empty((batch, units))
    du = d_hs.new_empty(u.shape)
    pointers = tuple(_pointer(t) for t in (d_hs, None, saved, u, mask, dxw, dh0, du))
    names = (_ACTIVATIONS[activation], _ACTIVATIONS[ract])
    settings = (native.max_threads(torch.get_num_threads()), batch_major, groups)
    dtype = _numpy_dtype(d_hs.dtype)
    native.call_backward((steps, batch, units), dtype, pointers, *names, *settings)
    return dxw, dh0, du


@torch.library.custom_op("keras_mgu::mgu_forward", mutates_args=())
def mgu_forward(
    xw: Tensor, h0: Tensor, u: Tensor, mask: Tensor | None, activation: int, ract: int,
    batch_major: bool,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """``(hs, saved)``, ``(T, B, H)`` and ``(T, B, 3H)``, from ``xw`` ``(T, B, 2H)``.

    With ``batch_major``, ``xw`` and ``hs`` are ``(B, T, ...)``. ``h0`` is
    ``(B, H)``; u: ``(H, 2H)``, or ``(G, H, 2H)``: G groups, rows
    ``[g B/G, (g+1) B/G)`` use ``u[g]``. ``mask`` is ``(T, B)`` booleans or
    None; the activations are given by code.
    """
    return _run_forward(xw, h0, u, mask, activation, ract, batch_major)


@mgu_forward.register_fake
def _(xw, h0, u, mask, activation, ract, batch_major):
    (steps, batch), units = native.steps_and_batch(xw.shape, batch_major), xw.shape[-1] // 2
    _check_groups(u, batch, units)
    return xw.new_empty((*xw.shape[:2], units)), xw.new_empty((steps, batch, 3 * units))


@torch.library.custom_op("keras_mgu::mgu_backward", mutates_args=())
def mgu_backward(
    d_hs: Tensor, saved: Tensor, u: Tensor, mask: Tensor | None, activation: int, ract: int,
    batch_major: bool,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """``(dxw, dh0, du)`` for the state gradients ``d_hs`` ``(T, B, H)`` (or ``(B, T, H)``).

    u: ``(H, 2H)``, or ``(G, H, 2H)``: G groups, rows ``[g B/G, (g+1) B/G)``
    use ``u[g]``; ``du`` has the shape of ``u``, group g's summed over its rows.
    """
    return _run_backward(d_hs, saved, u, mask, activation, ract, batch_major)


@mgu_backward.register_fake
def _(d_hs, saved, u, mask, activation, ract, batch_major):
    (_, batch), units = native.steps_and_batch(d_hs.shape, batch_major), d_hs.shape[-1]
    _check_groups(u, batch, units)
    return (
        d_hs.new_empty((*d_hs.shape[:2], 2 * units)),
        d_hs.new_empty((batch, units)),
        d_hs.new_empty(u.shape),
    )


def _check_groups(u: Tensor, batch: Any, units: Any) -> None:
    """ValueError where the (possibly symbolic) shapes show a ``u`` or batch the loops refuse."""
    batch, units, *u_shape = checks.static_shape((batch, units, *u.shape))
    checks.groups_of(tuple(u_shape), batch, units)


def _numpy_dtype(dtype: torch.dtype) -> str:
    return {torch.float32: "float32", torch.float64: "float64"}[dtype]


def _gradients(ctx: Any, d_hs: Tensor, backward_op: Callable) -> tuple:
    """``(dxw, dh0, du)``: the native backward, or differentiable ops under ``create_graph``."""
    xw, h0, u, mask, saved = ctx.saved_tensors
    activation, ract, batch_major = ctx.settings
    if torch.is_grad_enabled() and _differentiable_backward:
        names = (_ACTIVATIONS[activation], _ACTIVATIONS[ract])
        if not batch_major:
            return _differentiable_backward[0](ctx, xw, h0, u, mask, d_hs, names)
        time_major = (xw.transpose(0, 1), h0, u, mask, d_hs.transpose(0, 1), names)
        dxw, dh0, du = _differentiable_backward[0](ctx, *time_major)
        return dxw.transpose(0, 1), dh0, du
    return backward_op(d_hs, saved, u, mask, activation, ract, batch_major)


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    xw, h0, u, mask, activation, ract, batch_major = inputs
    ctx.save_for_backward(xw, h0, u, mask, output[1])
    ctx.mark_non_differentiable(output[1])  # ``saved`` is for the backward pass only
    ctx.set_materialize_grads(False)
    ctx.settings = (activation, ract, batch_major)


def _backward(ctx: Any, d_hs: Tensor, d_saved: Tensor | None) -> tuple:
    if d_hs is None:
        return (None,) * 7
    return (*_gradients(ctx, d_hs, mgu_backward), None, None, None, None)


torch.library.register_autograd("keras_mgu::mgu_forward", _backward, setup_context=_setup_context)


class _EagerRecurrence(torch.autograd.Function):
    """The operators' loops and gradients without the operator dispatcher.

    Eager calls take this route: it skips the custom operators' per-call
    dispatch, a visible part of a small training step. Traced code
    (``torch.compile``, ``torch.export``) goes through the registered
    operators, which it can see.
    """

    @staticmethod
    def forward(ctx, xw, h0, u, mask, activation, ract, batch_major):  # noqa: D102
        hs, saved = _run_forward(xw, h0, u, mask, activation, ract, batch_major)
        ctx.save_for_backward(xw, h0, u, mask, saved)
        ctx.settings = (activation, ract, batch_major)
        return hs

    @staticmethod
    def backward(ctx, d_hs):  # noqa: D102
        return (*_gradients(ctx, d_hs, _run_backward), None, None, None, None)


def set_differentiable_backward(fn: Callable) -> None:
    """Give the gradient used under ``create_graph=True``.

    ``fn(ctx, xw, h0, u, mask, d_hs, activation_names) -> (dxw, dh0, du)``
    must be built from differentiable torch ops.
    """
    _differentiable_backward[:] = [fn]


def recurrence(
    xw: Tensor, h0: Tensor, u: Tensor, mask: Tensor | None, activation: str, ract: str,
    batch_major: bool = False,
) -> Tensor:  # fmt: skip
    """The states of the native loop, differentiable (see the module docstring).

    ``xw`` ``(T, B, 2H)`` gives states ``(T, B, H)``; with ``batch_major``,
    ``(B, T, 2H)`` gives ``(B, T, H)``. ``h0`` is ``(B, H)``; u: ``(H, 2H)``, or
    ``(G, H, 2H)``: G groups, rows ``[g B/G, (g+1) B/G)`` use ``u[g]`` (B a
    multiple of G; its gradient has the shape of ``u``). ``mask`` is ``(T, B)``
    either way.
    """
    codes = (native.ACTIVATION_CODES[activation], native.ACTIVATION_CODES[ract])
    if torch.compiler.is_compiling():
        return mgu_forward(xw, h0, u, mask, *codes, batch_major)[0]
    return _EagerRecurrence.apply(xw, h0, u, mask, *codes, batch_major)
