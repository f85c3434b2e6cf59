"""Fused MGU sequence kernel for the torch backend.

The input projection ``x_t W + b`` of every step is one matmul outside the
time loop. The recurrence runs in a compiled TorchScript loop that writes into
preallocated buffers::

    f_t = recurrent_activation(xf_t + h_{t-1} U_f)
    c_t = activation(xc_t + (f_t * h_{t-1}) U_c)
    h_t = h_{t-1} + m_t f_t (c_t - h_{t-1})        (m_t: 1, or 0 for a masked step)

The backward pass through time is written by hand in a
``torch.autograd.Function``: the forward pass keeps only the outputs, the
backward pass recomputes ``f`` and ``c`` of all steps with two large matmuls,
runs a second compiled loop for the gate gradients and finishes with the
weight gradients as single large matmuls over all steps
(``dU_f = H_prev^T dZ_f``). Second-order gradients (``create_graph=True``)
recompute the sequence with differentiable torch ops and differentiate that.
During ONNX export and ``torch.jit.trace`` the recurrence runs as a TorchScript
loop of plain ops instead (one ONNX ``Loop`` over a run-time number of steps).
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Callable, Iterator

import torch
from torch import Tensor

from keras_mgu import checks
from keras_mgu.native import torch as native_torch

_REDUCED_PRECISION = (torch.float16, torch.bfloat16)

#: Per-step matmuls of at most this many multiply-adds (``B * H * H``) run on
#: one intra-op thread: at that size a thread pool only adds synchronisation.
SINGLE_THREAD_MACS = 1 << 20


# --------------------------------------------------------------- time loops
# These two functions are compiled with TorchScript (see ``_compiled``); they
# must stay within the TorchScript subset of Python.


def _forward_loop(
    xf: Tensor,
    xc: Tensor,
    h0: Tensor,
    u_f: Tensor,
    u_c: Tensor,
    mask: Tensor | None,
    tanh_candidate: bool,
    sigmoid_gate: bool,
) -> Tensor:
    """States ``(T, B, H)`` for time-major projected inputs ``xf``, ``xc`` ``(T, B, H)``."""
    steps = xf.shape[0]
    out = torch.empty((steps, h0.shape[0], h0.shape[1]), dtype=h0.dtype, device=h0.device)
    f = torch.empty_like(h0)
    c = torch.empty_like(h0)
    fh = torch.empty_like(h0)
    h = h0
    for t in range(steps):
        torch.addmm(xf[t], h, u_f, out=f)
        if sigmoid_gate:
            f.sigmoid_()
        else:
            f.tanh_()
        torch.addmm(xc[t], torch.mul(f, h, out=fh), u_c, out=c)
        if tanh_candidate:
            c.tanh_()
        else:
            c.sigmoid_()
        if mask is not None:
            torch.mul(f, mask[t], out=f)
        h = torch.lerp(h, c, f, out=out[t])
    return out


def _backward_loop(
    d_out: Tensor, pa: Tensor, q: Tensor, om: Tensor, f: Tensor, u_ft: Tensor, u_ct: Tensor
) -> tuple[Tensor, Tensor]:
    """Gate gradients ``(T, 2, B, H)`` (``[dz_f, dz_c]``) and the gradient of ``h_0``.

    Per step, with ``dh`` the gradient reaching ``h_t``::

        dz_c = dh * pa[t, 1]                     (pa[t, 1] = m f act'(c))
        d(fh) = dz_c U_c^T
        dz_f = dh * pa[t, 0] + d(fh) * q[t]      (pa[t, 0] = m ract'(f) (c - h_{t-1}),
                                                  q = ract'(f) h_{t-1})
        dh_{t-1} = d_out[t-1] + dh * om[t] + d(fh) * f[t] + dz_f U_f^T   (om = 1 - m f)
    """
    steps = d_out.shape[0]
    grads = torch.empty_like(pa)
    dh = d_out[steps - 1]
    d_fh = torch.empty_like(dh)
    spare = torch.empty_like(dh)
    other = torch.empty_like(dh)
    for i in range(steps):
        t = steps - 1 - i
        g = torch.mul(dh, pa[t], out=grads[t])
        torch.mm(g[1], u_ct, out=d_fh)
        dz_f = g[0].addcmul_(d_fh, q[t])
        if t > 0:
            nxt = torch.addcmul(d_out[t - 1], dh, om[t], out=spare)
        else:
            nxt = torch.mul(dh, om[t], out=spare)
        nxt.addcmul_(d_fh, f[t]).addmm_(dz_f, u_ft)
        spare = other
        other = nxt
        dh = nxt
    return grads, dh.clone()


def _export_loop(
    x2: Tensor,
    h0: Tensor,
    u_f: Tensor,
    u_c: Tensor,
    mask: Tensor,
    tanh_candidate: bool,
    sigmoid_gate: bool,
) -> Tensor:
    """States ``(T, B, H)`` from ``x2`` ``(2, T, B, H)`` and ``mask`` ``(T, B, 1)``, plain ops only.

    The loop exporters read: compiled with TorchScript it becomes one ONNX
    ``Loop`` over a number of steps known only at run time.
    """
    h = h0
    states = []
    for t in range(x2.shape[1]):
        z_f = x2[0, t] + torch.mm(h, u_f)
        f = torch.sigmoid(z_f) if sigmoid_gate else torch.tanh(z_f)
        z_c = x2[1, t] + torch.mm(f * h, u_c)
        c = torch.tanh(z_c) if tanh_candidate else torch.sigmoid(z_c)
        h = h + f * mask[t] * (c - h)
        states.append(h)
    return torch.stack(states)


@functools.cache
def _compiled(name: str) -> Callable:
    """The TorchScript version of a loop (the plain function where scripting fails)."""
    fn = {"forward": _forward_loop, "backward": _backward_loop, "export": _export_loop}[name]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.script(fn)
    except Exception:  # noqa: BLE001 - any TorchScript failure: run the Python loop
        return fn


@contextlib.contextmanager
def _loop_threads(batch: int, units: int) -> Iterator[None]:
    """Run the time loop on one intra-op thread when its per-step matmuls are small."""
    threads = torch.get_num_threads()
    if threads == 1 or batch * units * units > SINGLE_THREAD_MACS:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# ------------------------------------------------------------- activations
def _apply(name: str, x: Tensor) -> Tensor:
    return torch.tanh(x) if name == "tanh" else torch.sigmoid(x)


def _derivative(name: str, y: Tensor) -> Tensor:
    """Derivative of the activation ``name`` expressed through its output ``y``."""
    return 1.0 - y * y if name == "tanh" else y * (1.0 - y)


# ---------------------------------------------------------- autodiff loop
def _autodiff_sequence(
    x2: Tensor,
    h0: Tensor,
    recurrent_kernel: Tensor,
    mask: Tensor | None,
    activation: str,
    recurrent_activation: str,
) -> Tensor:
    """Differentiable plain-op version of the loop (used for second-order gradients)."""
    units = h0.shape[1]
    u_f, u_c = recurrent_kernel[:, :units], recurrent_kernel[:, units:]
    h = h0
    states = []
    for t in range(x2.shape[1]):
        f = _apply(recurrent_activation, x2[0, t] + h @ u_f)
        c = _apply(activation, x2[1, t] + (f * h) @ u_c)
        step = f if mask is None else f * mask[t]
        h = h + step * (c - h)
        states.append(h)
    return torch.stack(states)


def _exporting() -> bool:
    """Whether the call is being traced for export (ONNX or TorchScript tracing).

    Exporters cannot read the compiled loop or the custom autograd function;
    they get the plain-op loop, which computes the same numbers.
    """
    return bool(torch.onnx.is_in_onnx_export() or torch.jit.is_tracing())


def _exported_sequence(
    x2: Tensor,
    h0: Tensor,
    recurrent_kernel: Tensor,
    mask: Tensor | None,
    activation: str,
    recurrent_activation: str,
) -> Tensor:
    """The states ``(T, B, H)`` through the TorchScript loop exporters can read."""
    units = h0.shape[1]
    if mask is None:
        mask = torch.ones_like(x2[0, :, :, :1])
    return _compiled("export")(
        x2,
        h0,
        recurrent_kernel[:, :units],
        recurrent_kernel[:, units:],
        mask,
        activation == "tanh",
        recurrent_activation == "sigmoid",
    )


# ------------------------------------------------------- autograd function
class _MGUSequence(torch.autograd.Function):
    """States ``(T, B, H)`` from ``x2`` ``(2, T, B, H)`` (inputs of f and c), ``h0``, ``U``."""

    @staticmethod
    def forward(ctx, x2, h0, recurrent_kernel, mask, activation, recurrent_activation):
        batch, units = h0.shape
        u_f = recurrent_kernel[:, :units].contiguous()
        u_c = recurrent_kernel[:, units:].contiguous()
        loop = _compiled("forward")
        with _loop_threads(batch, units):
            states = loop(
                x2[0],
                x2[1],
                h0,
                u_f,
                u_c,
                mask,
                activation == "tanh",
                recurrent_activation == "sigmoid",
            )
        ctx.save_for_backward(x2, h0, recurrent_kernel, mask, states)
        ctx.activations = (activation, recurrent_activation)
        return states

    @staticmethod
    def backward(ctx, d_states):
        x2, h0, recurrent_kernel, mask, states = ctx.saved_tensors
        if torch.is_grad_enabled():
            return _differentiable_backward(ctx, d_states)
        activation, recurrent_activation = ctx.activations
        steps, batch, units = states.shape
        u_f, u_c = recurrent_kernel[:, :units], recurrent_kernel[:, units:]
        h_prev = torch.cat([h0.unsqueeze(0), states[:-1]])
        f, c, fh = _recompute_gates(x2, h_prev, u_f, u_c, activation, recurrent_activation)
        step = f if mask is None else f * mask
        r = _derivative(recurrent_activation, f)
        p = r * (c - h_prev)
        if mask is not None:
            p = p * mask
        pa = torch.stack([p, step * _derivative(activation, c)], dim=1)
        args = (d_states.contiguous(), pa, r * h_prev, 1.0 - step, f)
        loop = _compiled("backward")
        with _loop_threads(batch, units):
            grads, d_h0 = loop(*args, u_f.t().contiguous(), u_c.t().contiguous())
        d_u = torch.cat(
            [
                torch.tensordot(h_prev, grads[:, 0], dims=([0, 1], [0, 1])),
                torch.tensordot(fh, grads[:, 1], dims=([0, 1], [0, 1])),
            ],
            dim=1,
        )
        return grads.transpose(0, 1), d_h0, d_u, None, None, None


def _recompute_gates(
    x2: Tensor, h_prev: Tensor, u_f: Tensor, u_c: Tensor, activation: str, recurrent_activation: str
) -> tuple[Tensor, Tensor, Tensor]:
    """``f``, ``c`` and ``f * h_prev`` of all steps at once (two large matmuls), ``(T, B, H)``."""
    shape = h_prev.shape
    flat_prev = h_prev.reshape(-1, shape[-1])
    f = _apply(recurrent_activation, torch.addmm(x2[0].reshape(flat_prev.shape), flat_prev, u_f))
    fh = f * flat_prev
    c = _apply(activation, torch.addmm(x2[1].reshape(flat_prev.shape), fh, u_c))
    return f.view(shape), c.view(shape), fh.view(shape)


def _autodiff_gradients(
    args: tuple, wanted: list[int], d_states: Tensor, mask: Tensor | None, names: tuple, as_x2=None
) -> list:
    """Gradients of :func:`_autodiff_sequence` w.r.t. ``args[i]`` for ``i`` in ``wanted``.

    ``args`` is ``(x, h0, U)``; ``as_x2`` turns ``x`` into the loop's
    ``(2, T, B, H)`` inputs (default: ``x`` is that already). The graph is
    kept (``create_graph=True``), so the gradients can be differentiated
    again; the others are None.
    """
    grads: list = [None] * len(args)
    with torch.enable_grad():
        x2 = args[0] if as_x2 is None else as_x2(args[0])
        states = _autodiff_sequence(x2, args[1], args[2], mask, *names)
        found = torch.autograd.grad(
            states, [args[i] for i in wanted], d_states, create_graph=True, materialize_grads=True
        )
    for i, g in zip(wanted, found):
        grads[i] = g
    return grads


def _differentiable_backward(ctx, d_states: Tensor) -> tuple:
    """Backward pass built from differentiable ops, so it can itself be differentiated."""
    x2, h0, recurrent_kernel, mask, _ = ctx.saved_tensors
    wanted = [i for i in range(3) if ctx.needs_input_grad[i]]
    args = (x2, h0, recurrent_kernel)
    return (*_autodiff_gradients(args, wanted, d_states, mask, ctx.activations), None, None, None)


def _native_differentiable_backward(ctx, xw, h0, u, mask, d_hs, names) -> tuple:
    """Gradients ``(dxw, dh0, du)`` of the native loop from differentiable torch ops."""
    steps, batch, two_units = xw.shape
    step_mask = None if mask is None else mask.unsqueeze(-1).to(xw.dtype)
    args = (xw, h0, u)
    wanted = [i for i, a in enumerate(args) if a.requires_grad]

    def as_x2(xw):
        return xw.view(steps, batch, 2, two_units // 2).permute(2, 0, 1, 3)

    return tuple(_autodiff_gradients(args, wanted, d_hs, step_mask, names, as_x2))


native_torch.set_differentiable_backward(_native_differentiable_backward)


# ------------------------------------------------------------------ public
def mgu_sequence(
    inputs: Tensor,
    initial_state: Tensor,
    kernel: Tensor,
    recurrent_kernel: Tensor,
    bias: Tensor | None,
    mask: Tensor | None,
    *,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
    go_backwards: bool = False,
) -> tuple[Tensor, Tensor]:
    """Run the MGU over a batch of sequences with the fused torch kernel.

    Args:
        inputs: ``(B, T, D)`` floating tensor.
        initial_state: ``(B, H)``.
        kernel: ``W`` ``(D, 2H)``; recurrent_kernel: ``U`` ``(H, 2H)``;
            bias: ``b`` ``(2H,)`` or None (forget-gate half first).
        mask: ``(B, T)`` booleans (True where a step is real) or None.
        activation: Candidate activation, ``"tanh"`` or ``"sigmoid"``.
        recurrent_activation: Forget-gate activation, ``"tanh"`` or ``"sigmoid"``.
        go_backwards: Process the steps from last to first.

    Returns:
        ``(outputs, final_state)``: ``(B, T, H)`` in processing order and
        ``(B, H)``, in the dtype of ``inputs`` (float16 and bfloat16 are
        computed in float32).
    """
    _check_arguments(inputs, initial_state, kernel, recurrent_kernel, bias, mask)
    checks.check_kernel_activations(activation, recurrent_activation)
    out_dtype = inputs.dtype
    if inputs.device.type == "meta":
        # Shape inference (Keras traces layers with meta tensors): no loop to run.
        batch, steps, units = inputs.shape[0], inputs.shape[1], recurrent_kernel.shape[0]
        return (
            inputs.new_empty((batch, steps, units), dtype=out_dtype),
            inputs.new_empty((batch, units), dtype=out_dtype),
        )
    dtype = torch.float32 if out_dtype in _REDUCED_PRECISION else out_dtype
    inputs, initial_state, kernel, recurrent_kernel = (
        v.to(dtype) for v in (inputs, initial_state, kernel, recurrent_kernel)
    )
    # The caller may update the state variable in place (stateful layers) before the
    # backward pass runs: keep a private copy.
    initial_state = initial_state.clone()
    if bias is not None:
        bias = bias.to(dtype)
    if go_backwards:
        inputs = inputs.flip(1)
        mask = None if mask is None else mask.flip(1)
    batch, steps, _ = inputs.shape
    units = recurrent_kernel.shape[0]
    step_mask = None if mask is None else mask.to(torch.bool).t().contiguous()  # (T, B)
    exporting = _exporting()
    if not exporting and native_torch.usable(dtype, units, inputs.device, batch):
        # Batch major throughout: the inputs, outputs and their gradients are not transposed.
        projected = _project(inputs.reshape(batch * steps, inputs.shape[-1]), kernel, bias)
        outputs = native_torch.recurrence(
            projected.view(batch, steps, 2 * units),
            initial_state,
            recurrent_kernel,
            step_mask,
            activation,
            recurrent_activation,
            batch_major=True,
        )
        return outputs.to(out_dtype), outputs[:, -1].to(out_dtype)
    x_time_major = inputs.transpose(0, 1).reshape(steps * batch, inputs.shape[-1])
    projected = _project(x_time_major, kernel, bias)
    x2 = projected.view(steps, batch, 2, units).permute(2, 0, 1, 3).contiguous()
    step_mask = None if step_mask is None else step_mask.unsqueeze(-1).to(dtype)
    loop = _exported_sequence if exporting else _MGUSequence.apply
    states = loop(x2, initial_state, recurrent_kernel, step_mask, activation, recurrent_activation)
    outputs = states.transpose(0, 1).to(out_dtype)
    return outputs, states[-1].to(out_dtype)


def _project(x: Tensor, kernel: Tensor, bias: Tensor | None) -> Tensor:
    """``x W + b`` for rows ``x`` ``(N, D)``: ``(N, 2H)``."""
    return x @ kernel if bias is None else torch.addmm(bias, x, kernel)


def _check_arguments(inputs, initial_state, kernel, recurrent_kernel, bias, mask) -> None:
    """Tensors where tensors are expected, then :mod:`keras_mgu.checks` on shapes and dtypes."""
    tensors = {"inputs": inputs, "initial_state": initial_state, "kernel": kernel}
    tensors.update(recurrent_kernel=recurrent_kernel, bias=bias, mask=mask)
    for name, value in tensors.items():
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"`{name}` must be a torch.Tensor; received {type(value).__name__}.")
    checks.check_floating(_dtype_name(inputs.dtype))
    if mask is not None:
        checks.check_mask_dtype(_dtype_name(mask.dtype))
    shapes = {k: None if t is None else checks.static_shape(t.shape) for k, t in tensors.items()}
    checks.check_sequence_shapes(shapes.pop("inputs"), shapes.pop("recurrent_kernel"), **shapes)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def native_serves(dtype: str, units: int, batch: int | None = None) -> bool:
    """Whether calls in ``dtype`` with ``units`` units (and ``batch``, on the CPU) run native."""
    dtype = "float32" if dtype in ("float16", "bfloat16") else dtype
    cpu = torch.device("cpu")
    return native_torch.usable(getattr(torch, dtype), units, cpu, batch)


def grouped_native(
    xw: Tensor, h0: Tensor, u: Tensor, *, activation: str, recurrent_activation: str
) -> Tensor | None:
    """States ``(B, T, H)`` of one native loop with a recurrent kernel per group, or None.

    ``xw`` ``(B, T, 2H)`` and ``h0`` ``(B, H)`` hold ``G`` groups of rows, in
    order; ``u`` ``(G, H, 2H)``: rows ``[g B/G, (g + 1) B/G)`` use ``u[g]``.
    Differentiable once (the native backward loop). None where the native
    loops do not serve (see :func:`keras_mgu.native.enabled`) or while exporting; the caller then
    runs the groups one by one (:func:`keras_mgu.kernels.grouped_sequence`).
    """
    checks.check_kernel_activations(activation, recurrent_activation)
    rows = xw.shape[0] // u.shape[0]
    if _exporting() or not (native_torch.usable(xw.dtype, u.shape[-2], xw.device, rows)):
        return None
    return native_torch.recurrence(
        xw.contiguous(), h0.contiguous(), u.contiguous(), None, activation, recurrent_activation,
        batch_major=True,
    )  # fmt: skip
