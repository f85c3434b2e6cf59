"""Grouped recurrent kernels in the native loops: ``u`` of shape ``(G, H, 2H)``.

Batch rows ``[g B/G, (g+1) B/G)`` use ``u[g]``. A grouped call must equal G
calls with the 2-D kernels and the NumPy references, through the current
backend's front-end and through the NumPy helpers on the core library.
"""

from __future__ import annotations

import numpy as np
import pytest

from keras_mgu import native
from keras_mgu.kernels import reference
from tests.helpers import BACKEND, BACKEND_INDEPENDENT
from tests.native import numpy_loops

NAMES = ("tanh", "sigmoid")
STEPS = 64
#: The current backend's front-end, and the NumPy helpers on the core C API.
FRONT_ENDS = [BACKEND, pytest.param("numpy", marks=BACKEND_INDEPENDENT)]
#: The front-ends that take batch-major sequences too.
BATCH_MAJOR = ("numpy", "torch")


@pytest.fixture(autouse=True)
def _built():
    assert native.status().available, native.status().reason


@pytest.fixture
def x64():
    """float64 arrays on JAX."""
    if BACKEND != "jax":
        yield
        return
    import jax

    with jax.enable_x64(True):
        yield


# ------------------------------------------------------------- front-ends
def _run(front_end, xw, h0, u, mask, d_hs, d_last, batch_major=False):
    """``(hs, dxw, dh0, du)`` as NumPy arrays from ``front_end``.

    The sequences ``xw``, ``d_hs``, ``hs`` and ``dxw`` are batch major when
    ``batch_major``; ``d_last`` is the gradient of the final state.
    """
    if front_end == "numpy":
        hs, saved = native.forward(xw, h0, u, mask, *NAMES, batch_major=batch_major)
        grads = native.backward(d_hs, d_last, saved, u, mask, *NAMES, batch_major=batch_major)
        return (hs, *grads)
    return {"tensorflow": _run_tensorflow, "jax": _run_jax, "torch": _run_torch}[front_end](
        xw, h0, u, mask, d_hs, d_last, batch_major
    )


def _run_tensorflow(xw, h0, u, mask, d_hs, d_last, batch_major):
    import tensorflow as tf

    from keras_mgu.native import tensorflow as front

    assert not batch_major
    m = None if mask is None else tf.constant(mask)
    hs, saved = front.forward(tf.constant(xw), tf.constant(h0), tf.constant(u), m, *NAMES)
    d = d_hs.copy()
    d[-1] += d_last  # the final state is the last state
    grads = front.backward(tf.constant(d), saved, tf.constant(u), m, *NAMES)
    return tuple(t.numpy() for t in (hs, *grads))


def _run_jax(xw, h0, u, mask, d_hs, d_last, batch_major):
    import jax.numpy as jnp

    from keras_mgu.native import jax as front

    assert not batch_major
    assert front.usable(xw.dtype, xw.shape[-1] // 2, xw.shape)  # registers the FFI targets
    m = None if mask is None else jnp.asarray(mask)
    hs, saved = front.forward(jnp.asarray(xw), jnp.asarray(h0), jnp.asarray(u), m, *NAMES)
    grads = front.backward(jnp.asarray(d_hs), jnp.asarray(d_last), saved, jnp.asarray(u), m, *NAMES)
    return tuple(np.asarray(t) for t in (hs, *grads))


def _run_torch(xw, h0, u, mask, d_hs, d_last, batch_major):
    """Through ``recurrence`` and autograd, as the kernel calls it."""
    import torch

    from keras_mgu.native import torch as front

    args = [torch.tensor(a, requires_grad=True) for a in (xw, h0, u)]
    m = None if mask is None else torch.tensor(mask)
    hs = front.recurrence(*args, m, *NAMES, batch_major=batch_major)
    last = hs[:, -1] if batch_major else hs[-1]
    loss = (hs * torch.tensor(d_hs)).sum() + (last * torch.tensor(d_last)).sum()
    grads = torch.autograd.grad(loss, args)
    return tuple(t.detach().numpy() for t in (hs, *grads))


# --------------------------------------------------------------- problems
def _problem(rng, groups, rows, units, dtype, masked, steps=STEPS):
    """Time-major arrays for a batch of ``groups * rows`` sequences."""
    batch = groups * rows
    mask = None
    if masked:
        mask = rng.random((steps, batch)) > 0.3
        mask[:, 0] = False  # one sequence fully masked
    return {
        "xw": rng.normal(size=(steps, batch, 2 * units)).astype(dtype),
        "h0": (0.5 * rng.normal(size=(batch, units))).astype(dtype),
        "u": (rng.normal(size=(groups, units, 2 * units)) / np.sqrt(units)).astype(dtype),
        "mask": mask,
        "d_hs": rng.normal(size=(steps, batch, units)).astype(dtype),
        "d_last": rng.normal(size=(batch, units)).astype(dtype),
    }


def _layout(p, batch_major):
    """The arguments of :func:`_run` in the layout asked for."""
    seq = (lambda a: np.ascontiguousarray(np.swapaxes(a, 0, 1))) if batch_major else (lambda a: a)
    return seq(p["xw"]), p["h0"], p["u"], p["mask"], seq(p["d_hs"]), p["d_last"]


def _group(p, g, rows):
    """Group g's rows alone, with its 2-D kernel."""
    cols = slice(g * rows, (g + 1) * rows)
    mask = None if p["mask"] is None else np.ascontiguousarray(p["mask"][:, cols])
    picked = {k: np.ascontiguousarray(p[k][:, cols]) for k in ("xw", "d_hs")}
    return {
        **picked,
        "h0": p["h0"][cols],
        "d_last": p["d_last"][cols],
        "u": p["u"][g],
        "mask": mask,
    }


def _as_time_major(result, batch_major):
    hs, dxw, dh0, du = result
    if batch_major:
        hs, dxw = np.swapaxes(hs, 0, 1), np.swapaxes(dxw, 0, 1)
    return hs, dxw, dh0, du


def _references(p, groups, rows):
    """``(hs, dxw, dh0, du)`` of the NumPy loops, the states also from ``reference.py``."""
    hs, saved = numpy_loops.forward(p["xw"], p["h0"], p["u"], p["mask"], *NAMES)
    grads = numpy_loops.backward(p["d_hs"], p["d_last"], saved, p["u"], p["mask"], *NAMES)
    units = p["u"].shape[-1] // 2
    identity = np.eye(2 * units)  # x W = xw
    for g in range(groups):
        q = _group(p, g, rows)
        mask = None if q["mask"] is None else q["mask"].T
        inputs, u, h0 = (
            a.astype(np.float64) for a in (np.swapaxes(q["xw"], 0, 1), q["u"], q["h0"])
        )
        want, _ = reference.mgu_sequence(inputs, identity, u, None, h0, mask)
        got = hs[:, g * rows : (g + 1) * rows]
        np.testing.assert_allclose(got, np.swapaxes(want, 0, 1), rtol=1e-12, atol=1e-12)
    return (hs, *grads)


def _close(got, want, dtype, exact=False):
    """``got`` equals ``want`` (bit for bit when ``exact``), to the dtype's precision."""
    for name, a, b in zip(("hs", "dxw", "dh0", "du"), got, want):
        assert a.shape == b.shape, name
        if exact:
            np.testing.assert_array_equal(a, b, err_msg=name)
            continue
        scale = max(1.0, float(np.abs(b).max(initial=0.0)))
        tol = (2e-4 if dtype == "float32" else 1e-10) * scale
        np.testing.assert_allclose(a, b, rtol=0, atol=tol, err_msg=name)


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("front_end", FRONT_ENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("units", [3, 17, 33])
@pytest.mark.parametrize("groups", [1, 2, 3, 5])
def test_grouped_calls_equal_per_group_calls_and_the_reference(
    rng, monkeypatch, x64, front_end, groups, units, dtype
):
    """Rows per group 1 and 3, with and without a mask, both layouts, 1 and 4 threads."""
    layouts = (False, True) if front_end in BATCH_MAJOR else (False,)
    for rows in (1, 3):
        for masked in (False, True):
            p = _problem(rng, groups, rows, units, dtype, masked)
            want = _references(p, groups, rows)
            for batch_major in layouts:
                for threads in ("1", "4"):
                    monkeypatch.setenv(native.THREADS_ENV_VAR, threads)
                    got = _run(front_end, *_layout(p, batch_major), batch_major=batch_major)
                    got = _as_time_major(got, batch_major)
                    _close(got, want, dtype)
                    alone = [
                        _as_time_major(
                            _run(front_end, *_layout(_group(p, g, rows), batch_major), batch_major),
                            batch_major,
                        )
                        for g in range(groups)
                    ]
                    joined = (
                        *(np.concatenate([a[i] for a in alone], axis=1) for i in (0, 1)),
                        np.concatenate([a[2] for a in alone]),
                        np.stack([a[3] for a in alone]),
                    )
                    # One thread: each group runs as its own call would, bit for bit.
                    _close(got, joined, dtype, exact=threads == "1")


@pytest.mark.parametrize("front_end", FRONT_ENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threads", ["1", "4"])
def test_one_group_in_3d_equals_the_2d_kernel(rng, monkeypatch, x64, front_end, dtype, threads):
    monkeypatch.setenv(native.THREADS_ENV_VAR, threads)
    p = _problem(rng, 1, 13, 9, dtype, masked=True, steps=300)
    if threads == "4":
        assert native.threads(300, 13, 9, dtype, groups=1) == 3  # at least 4 rows a thread
    for batch_major in (False, True) if front_end in BATCH_MAJOR else (False,):
        args = list(_layout(p, batch_major))
        grouped = _run(front_end, *args, batch_major=batch_major)
        args[2] = p["u"][0]
        plain = _run(front_end, *args, batch_major=batch_major)
        assert grouped[3].shape == (1, 9, 18) and plain[3].shape == (9, 18)
        _close(grouped, (*plain[:3], plain[3][None]), dtype, exact=True)


@pytest.mark.parametrize("front_end", FRONT_ENDS)
@pytest.mark.parametrize("groups, rows", [(2, 8), (3, 4), (8, 1)])
def test_groups_split_across_threads(rng, monkeypatch, x64, front_end, groups, rows):
    """Fewer groups than threads (each split in row ranges), as many, and more."""
    steps, units, batch = 300, 17, groups * rows
    monkeypatch.setenv(native.THREADS_ENV_VAR, "4")
    # a thread takes whole groups, however few their rows
    assert native.threads(steps, batch, units, "float64", groups=groups) == min(
        4, max(batch // 4, groups)
    )
    p = _problem(rng, groups, rows, units, "float64", masked=True, steps=steps)
    split = _run(front_end, *_layout(p, False))
    _close(split, _run(front_end, *_layout(p, False)), "float64", exact=True)  # deterministic
    _close(split, _references(p, groups, rows), "float64")
    monkeypatch.setenv(native.THREADS_ENV_VAR, "1")
    _close(split, _run(front_end, *_layout(p, False)), "float64")


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_batch_that_is_not_a_multiple_of_the_groups_is_refused(rng, front_end):
    p = _problem(rng, 3, 2, 4, "float32", masked=False, steps=5)
    xw, h0, u, mask, d_hs, d_last = _layout(p, False)
    with pytest.raises(
        ValueError, match="batch must be a multiple of G = 3; received a batch of 5"
    ):
        _run(front_end, xw[:, :5], h0[:5], u, mask, d_hs[:, :5], d_last[:5])
    with pytest.raises(ValueError, match=r"\(H, 2H\) or \(G, H, 2H\)"):
        _run(front_end, xw, h0, u[None], mask, d_hs, d_last)
    with pytest.raises(ValueError, match="must be a multiple of G = 4"):
        native.threads(5, 6, 4, groups=4)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="the TensorFlow operators")
def test_tensorflow_operators_infer_du_and_check_the_batch_in_graphs(rng):
    import tensorflow as tf

    from keras_mgu.native import tensorflow as front

    p = _problem(rng, 3, 2, 4, "float32", masked=False, steps=5)
    spec = tf.TensorSpec((5, None, 8), tf.float32)

    @tf.function(input_signature=[spec, tf.TensorSpec((None, 4)), tf.TensorSpec((3, 4, 8))])
    def grads(xw, h0, u):
        _, saved = front.forward(xw, h0, u, None, *NAMES)
        dxw, dh0, du = front.backward(tf.ones_like(xw[..., :4]), saved, u, None, *NAMES)
        assert du.shape == (3, 4, 8)  # the shape function gives du the shape of u
        return dxw, dh0, du

    du = grads(p["xw"], p["h0"], p["u"])[2]
    ones = {**p, "d_hs": np.ones_like(p["d_hs"]), "d_last": np.zeros_like(p["d_last"])}
    np.testing.assert_array_equal(du.numpy(), _run("tensorflow", *_layout(ones, False))[3])
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="multiple of G, received a batch of 5"
    ):
        grads(p["xw"][:, :5], p["h0"][:5], p["u"])


@pytest.mark.skipif(BACKEND != "jax", reason="the XLA FFI calls")
def test_jax_calls_under_jit_give_du_the_shape_of_u(rng):
    import jax

    from keras_mgu.native import jax as front

    p = _problem(rng, 3, 2, 5, "float32", masked=True, steps=7)

    @jax.jit
    def grads(xw, h0, u, mask, d_hs, d_last):
        _, saved = front.forward(xw, h0, u, mask, *NAMES)
        return front.backward(d_hs, d_last, saved, u, mask, *NAMES)

    got = grads(*_layout(p, False))
    assert got[2].shape == (3, 5, 10)
    want = _run("jax", *_layout(p, False))
    for a, b in zip(got, want[1:]):
        np.testing.assert_array_equal(np.asarray(a), b)


@pytest.mark.skipif(BACKEND != "torch", reason="the torch.library operators")
def test_torch_operators_take_grouped_kernels(rng):
    import torch

    from keras_mgu.native import torch as front

    p = _problem(rng, 3, 2, 5, "float64", masked=True, steps=7)
    codes = tuple(native.ACTIVATION_CODES[n] for n in NAMES)
    xw, h0, u, d_hs = (torch.tensor(p[k]) for k in ("xw", "h0", "u", "d_hs"))
    mask = torch.tensor(p["mask"])
    for batch_major in (False, True):
        xw_in = xw.transpose(0, 1).contiguous() if batch_major else xw
        d_in = d_hs.transpose(0, 1).contiguous() if batch_major else d_hs
        torch.library.opcheck(front.mgu_forward, (xw_in, h0, u, mask, *codes, batch_major))
        _, saved = front.mgu_forward(xw_in, h0, u, mask, *codes, batch_major)
        args = (d_in, saved, u, mask, *codes, batch_major)
        torch.library.opcheck(front.mgu_backward, args)
        dxw, dh0, du = front.mgu_backward(*args)
        assert du.shape == (3, 5, 10)
        d_last = np.zeros_like(p["d_last"])
        want = _run("torch", *_layout({**p, "d_last": d_last}, batch_major), batch_major)
        for a, b in zip((dxw, dh0, du), want[1:]):
            np.testing.assert_array_equal(a.numpy(), b)
