"""Fused engine for the torch backend: a loop over traced steps.

Every time step of the Keras cell loop on torch goes through ``Layer.__call__``
and the ``keras.ops`` wrappers, which costs far more than the arithmetic of a
small step. This engine removes that overhead:

* the input projection is already outside the loop (the layer calls
  ``project_inputs`` once on the whole sequence), and the loop runs over the
  ``unbind``-ed time steps of the projected inputs;
* the cell's pure ``step`` is traced once per input signature into a graph of
  ATen operations (:func:`torch.fx.experimental.proxy_tensor.make_fx`), which
  the loop then calls directly; where tracing is unavailable or fails, the
  loop calls ``step`` itself (:data:`TRACE_STEPS` off, or automatic fallback);
* small steps run on one intra-op thread (see :data:`SINGLE_THREAD_MACS`).

Autograd records the traced operations and its C++ engine runs the backward
pass through time, so first- and second-order gradients (``create_graph``)
are exact. A derived backward (per-step vector-Jacobian products called from
Python, with a forward that records nothing) was measured slower here: each
step's product costs a Python-level call, while the recorded tape is replayed
without any (see ``docs/custom_cells.md``).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from keras_mgu.fused.step import StepFn

#: Trace ``step`` into an ATen graph (True) or call it as written (False).
TRACE_STEPS = True
#: Per-step work (``batch * sum of carry sizes * sum of carry sizes``) up to which the
#: loop runs on one intra-op thread: at that size a thread pool only adds synchronisation.
SINGLE_THREAD_MACS = 1 << 20

_TRACED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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
    steps_p = projected.unbind(1)
    steps_m = [None] * len(steps_p) if mask is None else mask.to(torch.bool).unbind(1)
    if go_backwards:
        steps_p, steps_m = steps_p[::-1], steps_m[::-1]
    # The caller may assign the final states to the initial state variables in place
    # (stateful layers) before the backward pass runs: the loop keeps private copies.
    carry = [c.clone() for c in carry]
    fn = _step_callable(step, steps_p[0], steps_m[0], carry, weights)
    outputs = []
    with _loop_threads(carry):
        for p_t, m_t in zip(steps_p, steps_m):
            output, carry = fn(p_t, m_t, carry, weights)
            outputs.append(output)
    return torch.stack(outputs, dim=1), list(carry)


def _step_callable(step: StepFn, p_t: Tensor, m_t: Any, carry: list, weights: list) -> StepFn:
    """``step`` itself, or its traced ATen graph for these input shapes and dtypes."""
    if not TRACE_STEPS or p_t.device.type == "meta":
        return step
    key = tuple(_signature(t) for t in (p_t, m_t, *carry, *weights))
    cache = _TRACED.setdefault(step, {})
    if key not in cache:
        cache[key] = _trace(step, p_t, m_t, carry, weights)
    return cache[key] or step


def _trace(step: StepFn, p_t: Tensor, m_t: Any, carry: list, weights: list) -> Callable | None:
    """``step`` traced into an ATen graph module, or None when it cannot be traced."""
    from torch.fx.experimental.proxy_tensor import make_fx

    n_c = len(carry)

    def flat(p_t, m_t, *rest):
        output, new = step(p_t, m_t, list(rest[:n_c]), list(rest[n_c:]))
        return output, *new

    args = [t.detach() if isinstance(t, Tensor) else t for t in (p_t, m_t, *carry, *weights)]
    try:
        with torch.no_grad():
            graph = make_fx(flat)(*args)
    except Exception:  # noqa: BLE001 - anything untraceable runs as written
        return None

    def traced(p_t, m_t, carry, weights):
        output, *new = graph(p_t, m_t, *carry, *weights)
        return output, new

    return traced


def _signature(t: Any) -> Any:
    if not isinstance(t, Tensor):
        return type(t).__name__
    return (tuple(t.shape), t.dtype, t.device.type)


@contextlib.contextmanager
def _loop_threads(carry: list) -> Iterator[None]:
    """Run the time loop on one intra-op thread when its steps are small."""
    threads = torch.get_num_threads()
    width = sum(int(c[0].numel()) for c in carry) if carry else 0
    batch = int(carry[0].shape[0]) if carry else 0
    if threads == 1 or batch * width * width > SINGLE_THREAD_MACS:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
