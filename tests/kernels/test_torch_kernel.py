"""The fused torch MGU kernel against the NumPy reference, finite differences
(gradcheck / gradgradcheck) and a plain autodiff implementation."""

import keras
import numpy as np
import pytest

if keras.backend.backend() != "torch":
    pytest.skip("torch kernel tests need KERAS_BACKEND=torch", allow_module_level=True)

import torch  # noqa: E402

from keras_mgu.kernels import reference  # noqa: E402
from keras_mgu.kernels import torch as torch_kernel  # noqa: E402
from tests.helpers import central_differences  # noqa: E402
from tests.kernels.common import autodiff_mgu, make_problem, run_reference  # noqa: E402

ARG_NAMES = ("inputs", "initial_state", "kernel", "recurrent_kernel", "bias")


def tensors(p, dtype=torch.float64, requires_grad=False):
    return [torch.tensor(p[name], dtype=dtype, requires_grad=requires_grad) for name in ARG_NAMES]


def fused(x, h0, w, u, b, mask=None, go_backwards=False, act="tanh", ract="sigmoid"):
    return torch_kernel.mgu_sequence(
        x, h0, w, u, b, mask, activation=act, recurrent_activation=ract, go_backwards=go_backwards
    )


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("use_bias", [False, True])
def test_forward_matches_reference(rng, go_backwards, use_mask, use_bias):
    p = make_problem(rng)
    x, h0, w, u, b = tensors(p)
    mask = torch.tensor(p["mask"]) if use_mask else None
    outputs, state = fused(x, h0, w, u, b if use_bias else None, mask, go_backwards)
    ref_out, ref_state = run_reference(p, bias=use_bias, mask=use_mask, go_backwards=go_backwards)
    np.testing.assert_allclose(outputs.numpy(), ref_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.numpy(), ref_state, rtol=1e-12, atol=1e-12)
    if use_mask:  # the fully masked row keeps its initial state throughout
        kept = np.broadcast_to(p["initial_state"][0], (5, 4))
        np.testing.assert_allclose(outputs[0].numpy(), kept)


@pytest.mark.parametrize("act", ["tanh", "sigmoid"])
@pytest.mark.parametrize("ract", ["tanh", "sigmoid"])
def test_activations_match_reference(rng, act, ract):
    p = make_problem(rng)
    p["initial_state"] = np.zeros_like(p["initial_state"])
    x, h0, w, u, b = tensors(p, dtype=torch.float32)
    outputs, state = fused(x, h0, w, u, b, torch.tensor(p["mask"]), act=act, ract=ract)
    ref_out, ref_state = run_reference(p, act=act, ract=ract)
    assert outputs.dtype == torch.float32 and outputs.shape == (3, 5, 4)
    np.testing.assert_allclose(outputs.numpy(), ref_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.numpy(), ref_state, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("act, ract", [("tanh", "sigmoid"), ("sigmoid", "tanh")])
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
def test_gradcheck_and_gradgradcheck(rng, act, ract, go_backwards, use_mask):
    p = make_problem(rng, batch=2, steps=4, features=2, units=3)
    args = tensors(p, requires_grad=True)
    mask = torch.tensor(p["mask"]) if use_mask else None

    def fn(*a):
        return fused(*a, mask, go_backwards, act, ract)

    assert torch.autograd.gradcheck(fn, args, fast_mode=True)
    assert torch.autograd.gradgradcheck(fn, args, fast_mode=True)


@pytest.mark.parametrize("use_mask", [False, True])
def test_gradients_match_finite_differences_of_reference(rng, use_mask):
    """Hand-written backward against central differences of the NumPy reference."""
    p = make_problem(rng, batch=2, steps=4, features=2, units=3)
    weights = np.linspace(-1.0, 1.0, 2 * 4 * 3).reshape(2, 4, 3)
    mask = p["mask"] if use_mask else None

    def loss_np(x, h0, w, u, b):
        out, state = reference.mgu_sequence(x, w, u, b, h0, mask)
        return float(np.sum(out * weights) + np.sum(state**2))

    args = tensors(p, requires_grad=True)
    out, state = fused(*args, None if mask is None else torch.tensor(mask))
    loss = (out * torch.tensor(weights)).sum() + (state**2).sum()
    grads = torch.autograd.grad(loss, args)
    expected = central_differences(loss_np, [p[name] for name in ARG_NAMES], eps=1e-5)
    for name, g, e in zip(ARG_NAMES, grads, expected):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("use_mask", [False, True])
def test_first_order_matches_autodiff_float32(rng, use_mask):
    """A longer float32 sequence: fused backward against autograd of the plain loop."""
    p = make_problem(rng, batch=4, steps=60, features=3, units=8)
    mask = torch.tensor(p["mask"]) if use_mask else None
    target = torch.tensor(rng.normal(size=(4, 60, 8)), dtype=torch.float32)
    results = []
    for impl in (fused, autodiff_mgu):
        args = tensors(p, dtype=torch.float32, requires_grad=True)
        out, state = impl(*args, mask)
        loss = ((out - target) ** 2).mean() + state.sum()
        results.append(torch.autograd.grad(loss, args))
    for name, g, e in zip(ARG_NAMES, *results):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=2e-4, atol=2e-6, err_msg=name)


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("use_mask", [False, True])
def test_second_order_matches_autodiff(rng, go_backwards, use_mask):
    """d/dW of a loss on d(sum outputs)/d(inputs), fused against the plain autodiff loop."""
    p = make_problem(rng, batch=3, steps=6, features=2, units=4)
    mask = torch.tensor(p["mask"]) if use_mask else None
    results = []
    for impl in (fused, autodiff_mgu):
        x, h0, w, u, b = tensors(p)
        x.requires_grad_(True)
        w.requires_grad_(True)
        u.requires_grad_(True)
        out, _ = impl(x, h0, w, u, b, mask, go_backwards)
        (d_x,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        penalty = (d_x**2).sum()
        results.append((d_x.detach(), *torch.autograd.grad(penalty, (w, u))))
    for name, g, e in zip(("d_inputs", "kernel", "recurrent_kernel"), *results):
        assert float(g.abs().max()) > 1e-3, name  # a real, non-vanishing signal
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_precision_inputs(rng, dtype):
    p = make_problem(rng)
    args = [a.to(dtype) for a in tensors(p)]
    mask = torch.tensor(p["mask"])
    outputs, state = fused(*args, mask)
    assert outputs.dtype == dtype and state.dtype == dtype
    rounded = {name: a.double().numpy() for name, a in zip(ARG_NAMES, args)}
    ref_out, ref_state = run_reference({**p, **rounded})
    tol = 2e-2 if dtype == torch.bfloat16 else 3e-3
    np.testing.assert_allclose(outputs.double().numpy(), ref_out, rtol=tol, atol=tol)
    np.testing.assert_allclose(state.double().numpy(), ref_state, rtol=tol, atol=tol)
    args = [a.requires_grad_(True) for a in args]
    grads = torch.autograd.grad(fused(*args, mask)[0].float().sum(), args)
    assert all(g.dtype == dtype and torch.isfinite(g.float()).all() for g in grads)


@pytest.mark.parametrize("go_backwards", [False, True])
def test_single_step(rng, go_backwards):
    p = make_problem(rng, steps=1)
    args = tensors(p, requires_grad=True)
    outputs, state = fused(*args, None, go_backwards)
    ref_out, ref_state = run_reference(p, mask=False, go_backwards=go_backwards)
    np.testing.assert_allclose(outputs.detach().numpy(), ref_out, rtol=1e-12)
    np.testing.assert_allclose(state.detach().numpy(), ref_state, rtol=1e-12)
    assert torch.autograd.gradcheck(lambda *a: fused(*a, None, go_backwards), args)


def test_python_loops_match_compiled_loops(rng):
    """The plain-Python loops (the fallback) and their TorchScript versions agree."""
    steps, batch, units = 7, 3, 4
    shape = (steps, batch, units)
    xf, xc, q, om, f, d_out = (torch.tensor(rng.normal(size=shape)) for _ in range(6))
    pa = torch.tensor(rng.normal(size=(steps, 2, batch, units)))
    h0 = torch.tensor(rng.normal(size=(batch, units)))
    u_f, u_c = (torch.tensor(rng.normal(size=(units, units))) for _ in "ab")
    mask = torch.tensor(rng.random((steps, batch, 1)) > 0.5, dtype=torch.float64)
    for flags in [(True, True), (False, False)]:
        expected = torch_kernel._forward_loop(xf, xc, h0, u_f, u_c, mask, *flags)
        actual = torch_kernel._compiled("forward")(xf, xc, h0, u_f, u_c, mask, *flags)
        torch.testing.assert_close(actual, expected)
    expected = torch_kernel._backward_loop(d_out, pa, q, om, f, u_f, u_c)
    actual = torch_kernel._compiled("backward")(d_out, pa, q, om, f, u_f, u_c)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)


def test_thread_count_is_restored(rng):
    threads = torch.get_num_threads()
    args = tensors(make_problem(rng), requires_grad=True)
    out, _ = fused(*args)
    out.sum().backward()
    assert torch.get_num_threads() == threads


def test_arguments_must_be_torch_tensors(rng):
    """Shapes, dtypes and activations: one check for every backend (tests/test_checks.py)."""
    x, h0, w, u, b = tensors(make_problem(rng))
    with pytest.raises(TypeError, match="`inputs` must be a torch.Tensor; received ndarray"):
        fused(x.numpy(), h0, w, u, b)


def test_meta_tensors_give_shapes_without_running_the_loop():
    """Keras infers output shapes with meta tensors; the kernel answers them directly."""
    meta = {"device": "meta"}
    out, state = torch_kernel.mgu_sequence(
        torch.empty(2, 100_000, 3, **meta),
        torch.empty(2, 5, **meta),
        torch.empty(3, 10, **meta),
        torch.empty(5, 10, **meta),
        torch.empty(10, **meta),
        None,
    )
    assert out.shape == (2, 100_000, 5) and state.shape == (2, 5)
    assert out.device.type == "meta" and out.dtype == torch.float32
