"""Fused engine for the torch backend: compiled loops over a traced step and its derived backward.

Every time step of the Keras cell loop on torch goes through ``Layer.__call__``
and the ``keras.ops`` wrappers, which costs far more than the arithmetic of a
small step. This engine removes that overhead in three layers, each falling
back to the next when it cannot be built:

1. **Scripted loops with a derived backward** (:data:`SCRIPT_LOOPS`). The
   cell's pure ``step`` and its vector-Jacobian product (``torch.func.vjp``)
   are traced once per input signature into graphs of ATen operations
   (``make_fx``), and a forward and a reverse loop over them run as
   TorchScript, without Python per step. The forward loop records nothing for
   autodiff and keeps the carry entering each step; the reverse loop runs::

       dp_t, dcarry_{t-1}, dw_t = vjp(step at (p_t, carry_{t-1}, w))(dy_t, dcarry_t)

   carrying only ``dcarry`` and summing ``dw`` (inside a
   ``torch.autograd.Function``). Second order (``create_graph=True``)
   differentiates a recorded re-run of layer 2 instead.
2. **A Python loop over the traced step** (:data:`TRACE_STEPS`), over the
   ``unbind``-ed time steps; autograd records it and its C++ engine replays it.
3. **A Python loop over ``step`` as written**, for steps that cannot be traced
   (and on meta tensors, which Keras uses for shape inference).

TorchScript is deprecated in torch; layer 2 needs only public APIs
(``make_fx`` from ``torch.fx.experimental``), layer 3 none, and the tests run
all three. Small steps run on one intra-op thread, by the MGU kernel's rule
(:data:`keras_mgu.kernels.torch.SINGLE_THREAD_MACS`, ``width`` the summed carry sizes).
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from keras_mgu.fused.step import StepFn
from keras_mgu.kernels.torch import _loop_threads as mgu_loop_threads

#: Run the forward and backward loops as TorchScript over traced graphs (layer 1).
SCRIPT_LOOPS = True
#: Trace ``step`` into an ATen graph (layer 2) or call it as written (layer 3).
TRACE_STEPS = True

_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def run(
    step: StepFn,
    projected: Tensor,
    carry: list,
    weights: list,
    mask: Any,
    *,
    go_backwards: bool = False,
) -> tuple[Tensor, list]:
    """Run ``step`` over ``(B, T, P)`` projected inputs; see :mod:`keras_mgu.fused.engines`."""
    p = projected.transpose(0, 1)
    m = None if mask is None else mask.to(torch.bool).t()
    if go_backwards:
        p = p.flip(0)
        m = None if m is None else m.flip(0)
    # The caller may assign the final states to the initial state variables in place
    # (stateful layers) before the backward pass runs: the loops keep private copies.
    carry = [c.clone() for c in carry]
    program = _program(step, p, m, carry, weights)
    with _loop_threads(carry):
        if program is not None and program.scripted is not None:
            outputs, final = _ScriptedSequence.run(program, p, m, carry, weights)
        else:
            fn = step if program is None else program.traced_step
            outputs, final = _python_loop(fn, p, m, carry, weights)
    return outputs.transpose(0, 1), final


def _python_loop(fn: StepFn, p: Tensor, m: Any, carry: list, weights: list):
    """Layers 2 and 3: a Python loop over the ``unbind``-ed steps, recorded by autograd."""
    steps_m = [None] * p.shape[0] if m is None else m.unbind(0)
    outputs = []
    for p_t, m_t in zip(p.unbind(0), steps_m):
        output, carry = fn(p_t, m_t, carry, weights)
        outputs.append(output)
    return torch.stack(outputs), list(carry)


# -------------------------------------------------------------------- programs
class _Program:
    """The traced step (layer 2) and, when they build, the scripted loops (layer 1)."""

    def __init__(self, step: StepFn, p: Tensor, m: Any, carry: list, weights: list) -> None:
        from torch.fx.experimental.proxy_tensor import make_fx

        self.masked = m is not None
        self.n_c = len(carry)
        self.float_w = [i for i, w in enumerate(weights) if w.is_floating_point()]
        # Distinct example tensors: the tracers tell inputs apart by identity.
        p_t, m_t = p[0].detach().clone(), self._mask_arg(m, 0, p).clone()
        c0 = [c.detach().clone() for c in carry]
        w0 = [w.detach().clone() for w in weights]
        with torch.no_grad():
            self.graph = make_fx(self._flat_step(step))(p_t, m_t, c0, w0)
        self.scripted = None
        if SCRIPT_LOOPS:
            try:
                self.scripted = self._script(step, p_t, m_t, c0, w0)
            except Exception:  # noqa: BLE001 - anything unscriptable runs layer 2
                self.scripted = None

    def _flat_step(self, step: StepFn) -> Callable:
        masked = self.masked

        def flat(p_t, m_t, carry, weights):
            return step(p_t, m_t if masked else None, list(carry), list(weights))

        return flat

    def _mask_arg(self, m: Any, t: int, p: Tensor) -> Tensor:
        """The mask of step ``t``, or a placeholder (ignored) when unmasked."""
        return m[t] if m is not None else p.new_ones(p.shape[1], dtype=torch.bool)

    def traced_step(self, p_t, m_t, carry, weights):
        if m_t is None:
            m_t = p_t.new_ones(p_t.shape[0], dtype=torch.bool)
        return self.graph(p_t, m_t, list(carry), list(weights))

    def _script(self, step, p_t, m_t, c0, w0):
        from torch.fx.experimental.proxy_tensor import make_fx

        flat, float_w = self._flat_step(step), self.float_w

        def vjp(p_t, m_t, carry, weights, d_out, d_carry):
            def f(p_t, carry, fw):
                ws = list(weights)
                for i, w in zip(float_w, fw):
                    ws[i] = w
                return flat(p_t, m_t, carry, ws)

            fw = [weights[i] for i in float_w]
            _, pullback = torch.func.vjp(f, p_t, list(carry), fw)
            return pullback((d_out, list(d_carry)))

        with torch.no_grad():
            out0, _ = self.graph(p_t, m_t, c0, w0)
            vjp_args = (p_t, m_t, c0, w0, torch.zeros_like(out0), [c.clone() for c in c0])
            # Functionalized: autograd's backward formulas may write into their inputs.
            vjp_graph = make_fx(torch.func.functionalize(vjp, remove="mutations_and_views"))(
                *vjp_args
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.no_grad():
                step_ts = torch.jit.trace(self.graph, (p_t, m_t, c0, w0), strict=False)
                vjp_ts = torch.jit.trace(vjp_graph, vjp_args, strict=False)
            return torch.jit.script(_Loops(step_ts, vjp_ts))


def _program(step: StepFn, p: Tensor, m: Any, carry: list, weights: list) -> _Program | None:
    """The cached program of ``step`` for these shapes, or None (layer 3)."""
    if not TRACE_STEPS or p.device.type == "meta":
        return None
    key = (m is not None, SCRIPT_LOOPS) + tuple(_signature(t) for t in (p[0], *carry, *weights))
    cache = _PROGRAMS.setdefault(step, {})
    if key not in cache:
        try:
            cache[key] = _Program(step, p, m, carry, weights)
        except Exception:  # noqa: BLE001 - anything untraceable runs as written
            cache[key] = None
    return cache[key]


def _signature(t: Tensor) -> tuple:
    return (tuple(t.shape), t.dtype, t.device.type)


class _Loops(torch.nn.Module):
    """The forward and reverse time loops over a traced step and its traced VJP."""

    def __init__(self, step: torch.nn.Module, vjp: torch.nn.Module) -> None:
        super().__init__()
        self.step = step
        self.vjp = vjp

    def forward(
        self, p: Tensor, m: Tensor, carry: list[Tensor], weights: list[Tensor]
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Outputs ``(T, B, O)``, the final carry and the carries entering every step."""
        outputs: list[Tensor] = []
        entering: list[list[Tensor]] = [[] for _ in carry]
        for t in range(p.size(0)):
            for i in range(len(carry)):
                entering[i].append(carry[i])
            output, carry = self.step(p[t], m[t], carry, weights)
            outputs.append(output)
        return torch.stack(outputs), carry, [torch.stack(e) for e in entering]

    @torch.jit.export
    def backward(
        self,
        p: Tensor,
        m: Tensor,
        entering: list[Tensor],
        weights: list[Tensor],
        d_outputs: Tensor,
        d_carry: list[Tensor],
        d_weights: list[Tensor],
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """``(dp, dcarry_0, dweights)`` from per-step VJPs in reverse order."""
        d_p: list[Tensor] = []
        for i in range(p.size(0)):
            t = p.size(0) - 1 - i
            carry = [e[t] for e in entering]
            dp_t, d_carry, dw = self.vjp(p[t], m[t], carry, weights, d_outputs[t], d_carry)
            d_weights = [a + b for a, b in zip(d_weights, dw)]
            d_p.append(dp_t)
        d_p.reverse()
        return torch.stack(d_p), d_carry, d_weights


class _ScriptedSequence(torch.autograd.Function):
    """Layer 1 as an autograd function of ``(p, *carry, *weights)``."""

    @staticmethod
    def run(program: _Program, p: Tensor, m: Any, carry: list, weights: list):
        n_c = len(carry)
        m = program._mask_arg(m, 0, p) if m is None else m
        if m.dim() == 1:
            m = m.expand(p.shape[0], -1)
        result = _ScriptedSequence.apply(program, m, p, *carry, *weights)
        return result[0], list(result[1 : 1 + n_c])

    @staticmethod
    def forward(ctx, program, m, p, *rest):
        n_c = program.n_c
        carry, weights = list(rest[:n_c]), list(rest[n_c:])
        outputs, final, entering = program.scripted(p, m, carry, weights)
        ctx.program, ctx.m = program, m
        ctx.save_for_backward(p, *carry, *weights, *entering)
        return (outputs, *final)

    @staticmethod
    def backward(ctx, d_outputs, *d_final):
        program = ctx.program
        n_c, n_w = program.n_c, len(ctx.saved_tensors) - 1 - 2 * program.n_c
        saved = ctx.saved_tensors
        p, carry = saved[0], list(saved[1 : 1 + n_c])
        weights, entering = list(saved[1 + n_c : 1 + n_c + n_w]), list(saved[1 + n_c + n_w :])
        if torch.is_grad_enabled():
            return (
                None,
                None,
                *_recorded_vjp(program, ctx.m, p, carry, weights, d_outputs, d_final),
            )
        d_final = [torch.zeros_like(c) if d is None else d for d, c in zip(d_final, carry)]
        if d_outputs is None:
            d_outputs = torch.zeros_like(program.scripted(p, ctx.m, carry, weights)[0])
        d_w0 = [torch.zeros_like(weights[i]) for i in program.float_w]
        with _loop_threads(carry):
            d_p, d_carry, d_w = program.scripted.backward(
                p, ctx.m, entering, weights, d_outputs.contiguous(), d_final, d_w0
            )
        grads_w: list = [None] * n_w
        for i, g in zip(program.float_w, d_w):
            grads_w[i] = g
        return (None, None, d_p, *d_carry, *grads_w)


def _recorded_vjp(program, m, p, carry, weights, d_outputs, d_final) -> list:
    """Gradients of ``(p, *carry, *weights)`` through a recorded re-run (differentiable)."""
    inputs = [p, *carry, *weights]
    wanted = [i for i, t in enumerate(inputs) if t.requires_grad]
    outputs, final = _python_loop(program.traced_step, p, m, carry, weights)
    pairs = [(o, d) for o, d in zip([outputs, *final], [d_outputs, *d_final]) if d is not None]
    grads = torch.autograd.grad(
        [o for o, _ in pairs],
        [inputs[i] for i in wanted],
        [d for _, d in pairs],
        create_graph=True,
        allow_unused=True,
        materialize_grads=True,
    )
    result: list = [None] * len(inputs)
    for i, g in zip(wanted, grads):
        result[i] = g
    return result


def _loop_threads(carry: list) -> contextlib.AbstractContextManager:
    """The MGU kernel's thread rule, with the carry's total width as the unit count."""
    width = sum(int(c[0].numel()) for c in carry) if carry else 0
    batch = int(carry[0].shape[0]) if carry else 0
    return mgu_loop_threads(batch, width)
