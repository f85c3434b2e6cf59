"""The compiled MGU loops against the NumPy reference and finite differences."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from keras_mgu import native
from keras_mgu.kernels import reference
from tests.helpers import BACKEND_INDEPENDENT, central_differences

pytestmark = BACKEND_INDEPENDENT

SIZES = [1, 3, 7, 8, 9, 16, 33, 64, 65]
ACTS = {"tanh": np.tanh, "sigmoid": reference.sigmoid}


@pytest.fixture(autouse=True)
def _built():
    """The core library :func:`native.forward` and :func:`native.backward` call (no backend)."""
    native.core()  # builds it if needed; raises BuildError or OSError where it cannot


def _problem(rng, units, dtype, batch=4, steps=9, features=2):
    mask = rng.random((batch, steps)) > 0.3
    mask[0] = False  # one sequence fully masked
    return {
        "x": rng.normal(size=(batch, steps, features)).astype(dtype),
        "w": (0.6 * rng.normal(size=(features, 2 * units))).astype(dtype),
        "u": (rng.normal(size=(units, 2 * units)) / np.sqrt(units)).astype(dtype),
        "b": (0.3 * rng.normal(size=2 * units)).astype(dtype),
        "h0": (0.5 * rng.normal(size=(batch, units))).astype(dtype),
        "mask": mask,
    }


def _projected(p):
    """Time-major ``x W + b``, ``(T, B, 2H)``."""
    return np.ascontiguousarray(np.swapaxes(p["x"] @ p["w"] + p["b"], 0, 1))


@pytest.mark.parametrize("dtype, tol", [("float32", 2e-6), ("float64", 1e-13)])
@pytest.mark.parametrize("units", SIZES)
@pytest.mark.parametrize("masked", [True, False])
def test_forward_matches_the_reference(rng, units, dtype, tol, masked):
    p = _problem(rng, units, dtype)
    mask = p["mask"] if masked else None
    want, _ = reference.mgu_sequence(p["x"], p["w"], p["u"], p["b"], p["h0"], mask)
    hs, saved = native.forward(_projected(p), p["h0"], p["u"], None if mask is None else mask.T)
    np.testing.assert_allclose(np.swapaxes(hs, 0, 1), want, rtol=tol, atol=tol)
    assert hs.dtype == np.dtype(dtype)
    # saved = [h_{t-1} | f_t | c_t]: its first block is the previous state.
    np.testing.assert_allclose(saved[1:, :, :units], hs[:-1], rtol=0, atol=0)
    np.testing.assert_allclose(saved[0, :, :units], p["h0"], rtol=0, atol=0)


@pytest.mark.parametrize("act, ract", [("tanh", "sigmoid"), ("sigmoid", "tanh")])
def test_forward_with_swapped_activations(rng, act, ract):
    p = _problem(rng, 5, "float64")
    want, _ = reference.mgu_sequence(
        p["x"], p["w"], p["u"], p["b"], p["h0"], p["mask"],
        activation=ACTS[act], recurrent_activation=ACTS[ract],
    )  # fmt: skip
    hs, _ = native.forward(_projected(p), p["h0"], p["u"], p["mask"].T, act, ract)
    np.testing.assert_allclose(np.swapaxes(hs, 0, 1), want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("units", [1, 7, 8, 9, 33])
@pytest.mark.parametrize("masked", [True, False])
def test_backward_matches_finite_differences(rng, units, masked):
    p = _problem(rng, units, "float64", batch=3, steps=6)
    mask = p["mask"].T if masked else None
    xw, h0, u = _projected(p), p["h0"], p["u"]
    d_hs = rng.normal(size=(xw.shape[0], xw.shape[1], units))
    d_last = rng.normal(size=h0.shape)

    def loss(xw, h0, u):
        hs, _ = native.forward(xw, h0, u, mask)
        return float(np.sum(hs * d_hs) + np.sum(hs[-1] * d_last))

    _, saved = native.forward(xw, h0, u, mask)
    grads = native.backward(d_hs, d_last, saved, u, mask)
    for got, want in zip(grads, central_differences(loss, [xw, h0, u], eps=1e-6)):
        np.testing.assert_allclose(got, want, atol=1e-7)


def test_float32_backward_agrees_with_float64(rng):
    p = _problem(rng, 8, "float64", batch=32, steps=200)
    xw, h0, u = _projected(p), p["h0"], p["u"]
    d_hs = rng.normal(size=(xw.shape[0], xw.shape[1], 8))
    want = native.backward(d_hs, None, native.forward(xw, h0, u, None)[1], u, None)
    f32 = [a.astype("float32") for a in (xw, h0, u, d_hs)]
    got = native.backward(f32[3], None, native.forward(*f32[:3], None)[1], f32[2], None)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4 * np.abs(w).max())


def test_float32_activations_are_accurate():
    """With U = 0 and h0 = 0 the saved gates are sigmoid(xw_f) and tanh(xw_c) themselves."""
    z = np.concatenate([np.linspace(-30, 30, 120001), [0.0, -0.0, 1e-30, -1e-8, 5e-4]])
    z = z.astype("float32")
    xw = np.stack([z, z], axis=-1)[:, None, :]  # (T, 1, 2), H = 1
    _, saved = native.forward(xw, np.zeros((1, 1), "float32"), np.zeros((1, 2), "float32"), None)
    f, c = saved[:, 0, 1], saved[:, 0, 2]
    z64 = z.astype(np.float64)
    eps = np.finfo(np.float32).eps

    def relative_error(got, want):
        return np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30))

    assert relative_error(f, reference.sigmoid(z64)) < 8 * eps
    assert np.max(np.abs(c - np.tanh(z64))) < 4 * eps
    tiny = np.abs(z64) < 0.5
    assert relative_error(c[tiny], np.tanh(z64[tiny])) < 4 * eps
    assert c[np.argmax(z == 30)] == 1.0 and c[0] == -1.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_and_infinity_propagate(dtype):
    xw = np.zeros((4, 3, 4), dtype)  # T = 4, B = 3, H = 2
    xw[1, 0, 0] = np.nan  # row 0: NaN gate input at step 1
    xw[1, 1, 2] = np.inf  # row 1: candidate input +inf -> tanh = 1
    xw[1, 2, 0] = -np.inf  # row 2: gate input -inf -> f = 0, state kept
    u = np.zeros((2, 4), dtype)
    hs, _ = native.forward(xw, np.full((3, 2), 0.5, dtype), u, None)
    assert np.isnan(hs[0, 0]).sum() == 0 and np.isnan(hs[1:, 0, 0]).all()
    assert np.isfinite(hs[:, 1:]).all()
    # h_0 = 0.5 + 0.5 (tanh 0 - 0.5) = 0.25; then f = 0.5, c = tanh(inf) = 1
    assert hs[1, 1, 0] == pytest.approx(0.25 + 0.5 * (1.0 - 0.25))
    np.testing.assert_allclose(hs[1, 2, 0], hs[0, 2, 0])


def test_masked_steps_pass_gradients_through(rng):
    p = _problem(rng, 4, "float64", batch=2, steps=5)
    mask = np.ones((5, 2), bool)
    mask[2:, 1] = False  # row 1 ends after two steps
    xw, h0, u = _projected(p), p["h0"], p["u"]
    _, saved = native.forward(xw, h0, u, mask)
    d_hs = np.zeros((5, 2, 4))
    d_last = np.ones((2, 4))
    dxw, dh0, _ = native.backward(d_hs, d_last, saved, u, mask)
    assert np.all(dxw[2:, 1] == 0.0) and np.any(dxw[:2, 1] != 0.0)
    # Row 1 only: as if the sequence had two steps.
    _, saved2 = native.forward(xw[:2, 1:], h0[1:], u, None)
    dxw2, dh02, _ = native.backward(d_hs[:2, 1:], d_last[1:], saved2, u, None)
    np.testing.assert_allclose(dxw[:2, 1:], dxw2, rtol=1e-14, atol=0)
    np.testing.assert_allclose(dh0[1:], dh02, rtol=1e-14, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_split_across_threads_matches_one_thread(rng, monkeypatch, dtype):
    """Uneven chunks of 13 sequences on 3 threads, masks with holes and a final-state gradient."""
    p = _problem(rng, 9, dtype, batch=13, steps=400)
    mask = p["mask"].T
    xw, h0, u = _projected(p), p["h0"], p["u"]
    d_hs = rng.normal(size=(400, 13, 9)).astype(dtype)
    d_last = rng.normal(size=h0.shape).astype(dtype)

    def run(threads):
        monkeypatch.setenv(native.THREADS_ENV_VAR, str(threads))
        assert native.threads(400, 13, 9, dtype) == threads
        hs, saved = native.forward(xw, h0, u, mask)
        return (hs, saved, *native.backward(d_hs, d_last, saved, u, mask))

    split, whole = run(3), run(1)
    for got, want in zip(split[:-1], whole[:-1]):  # per sequence: the same operations
        np.testing.assert_array_equal(got, want)
    # dU: each chunk sums its own rows in float before the chunks meet in double.
    atol = (1e-13 if dtype == "float64" else 1e-6) * np.abs(whole[-1]).max()
    np.testing.assert_allclose(split[-1], whole[-1], rtol=0, atol=atol)
    want, _ = reference.mgu_sequence(p["x"], p["w"], p["u"], p["b"], p["h0"], p["mask"])
    tol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(np.swapaxes(split[0], 0, 1), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("threads", ["1", "3"])
def test_batch_major_sequences_match_time_major(rng, monkeypatch, threads):
    """xw, hs, d_hs and dxw as (B, T, ...): the same numbers, on one thread and on three."""
    monkeypatch.setenv(native.THREADS_ENV_VAR, threads)
    p = _problem(rng, 7, "float64", batch=13, steps=400)
    mask = p["mask"].T
    xw, h0, u = _projected(p), p["h0"], p["u"]
    d_hs = rng.normal(size=(400, 13, 7))
    d_last = rng.normal(size=h0.shape)
    hs, saved = native.forward(xw, h0, u, mask)
    want = native.backward(d_hs, d_last, saved, u, mask)
    hs_b, saved_b = native.forward(np.swapaxes(xw, 0, 1), h0, u, mask, batch_major=True)
    np.testing.assert_array_equal(hs_b, np.swapaxes(hs, 0, 1))
    np.testing.assert_array_equal(saved_b, saved)  # saved stays time major
    got = native.backward(np.swapaxes(d_hs, 0, 1), d_last, saved_b, u, mask, batch_major=True)
    np.testing.assert_array_equal(got[0], np.swapaxes(want[0], 0, 1))
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=1e-13)


def test_a_forked_child_runs_the_loops_after_its_parent_did():
    """GNU OpenMP's pool does not survive fork(): the child must not hang, and gets one thread."""
    code = textwrap.dedent("""
        import os, numpy as np
        from keras_mgu import native
        rng = np.random.default_rng(0)
        xw, u = rng.normal(size=(400, 32, 16)), 0.3 * rng.normal(size=(8, 16))
        h0 = np.zeros((32, 8))
        os.environ[native.THREADS_ENV_VAR] = "2"
        assert native.threads(400, 32, 8, "float64") == 2
        hs, _ = native.forward(xw, h0, u, None)  # the parent's pool starts
        pid = os.fork()
        if pid == 0:
            again, _ = native.forward(xw, h0, u, None)
            threads = native.threads(400, 32, 8, "float64")
            print("CHILD", threads, np.array_equal(hs, again), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
    """)
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "CHILD 1 True" in result.stdout


def test_thread_counts_follow_the_size_and_the_setting(monkeypatch):
    monkeypatch.setenv(native.THREADS_ENV_VAR, "8")
    assert native.threads(1000, 32, 8) == 8
    assert native.threads(1000, 9, 8) == 2  # at least 4 sequences a thread
    assert native.threads(10, 32, 8) == 1  # too little work to gain from a thread
    assert native.max_threads(default=3) == 8  # the setting wins over a front-end's default
    monkeypatch.delenv(native.THREADS_ENV_VAR)
    assert native.max_threads() == 0 and native.max_threads(default=3) == 3
    assert native.threads(1000, 32, 8) == min(8, len(os.sched_getaffinity(0)))  # 0: every CPU
    assert native.threads(1000, 32, 8, limit=1) == 1
    for bad in ("0", "-2", "two"):
        monkeypatch.setenv(native.THREADS_ENV_VAR, bad)
        with pytest.raises(ValueError, match="positive integer"):
            native.max_threads()


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="float32"):
        native.forward(np.zeros((2, 1, 2), "int32"), np.zeros((1, 1)), np.zeros((1, 2)), None)
    with pytest.raises(ValueError, match="tanh"):
        native.forward(np.zeros((2, 1, 2)), np.zeros((1, 1)), np.zeros((1, 2)), None, "relu")
