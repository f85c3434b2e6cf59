"""The MGU loops of ``keras_mgu/native/mgu_kernel.h`` in NumPy, written from its equations.

Forward and backward through time, time major, with grouped recurrent
kernels: ``u`` is ``(H, 2H)`` or ``(G, H, 2H)``, batch rows
``[g B/G, (g+1) B/G)`` using ``u[g]``. Computed in float64.

Run as a script, ``python -m tests.native.numpy_loops LIBRARY``, it calls the
C API of a core library (``mgu_c_api.cc``) through ctypes on random shapes
and checks every output against these loops; it exits non-zero on a mismatch.
It imports NumPy alone, so that it can run in a process with the sanitizer
runtimes preloaded (``tests/native/test_sanitizers.py``).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import numpy as np


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-x) = inf gives 0, as it should
        return 1.0 / (1.0 + np.exp(-x))


ACTIVATIONS = {"tanh": np.tanh, "sigmoid": _sigmoid}


def _derivative(name: str, y: np.ndarray) -> np.ndarray:
    """The activation's derivative through its output ``y``."""
    return 1.0 - y * y if name == "tanh" else y * (1.0 - y)


def _row_kernels(u: np.ndarray, batch: int) -> np.ndarray:
    """``(B, H, 2H)``: the recurrent kernel each batch row uses."""
    kernels = u if u.ndim == 3 else u[None]
    return np.repeat(np.asarray(kernels, np.float64), batch // kernels.shape[0], axis=0)


def forward(
    xw: np.ndarray,
    h0: np.ndarray,
    u: np.ndarray,
    mask: np.ndarray | None = None,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
) -> tuple[np.ndarray, np.ndarray]:
    """``(hs, saved)``: ``(T, B, H)`` states and ``(T, B, 3H)`` ``[h_{t-1} | f_t | c_t]``.

    ``xw`` ``(T, B, 2H)``, ``h0`` ``(B, H)``, ``u`` ``(H, 2H)`` or ``(G, H, 2H)``,
    ``mask`` ``(T, B)`` booleans or None.
    """
    steps, batch, two = xw.shape
    units = two // 2
    kernels = _row_kernels(u, batch)
    act, ract = ACTIVATIONS[activation], ACTIVATIONS[recurrent_activation]
    h = np.asarray(h0, np.float64).copy()
    hs = np.zeros((steps, batch, units))
    saved = np.zeros((steps, batch, 3 * units))
    for t in range(steps):
        x = np.asarray(xw[t], np.float64)
        f = ract(x[:, :units] + np.einsum("bk,bkj->bj", h, kernels[:, :, :units]))
        c = act(x[:, units:] + np.einsum("bk,bkj->bj", f * h, kernels[:, :, units:]))
        saved[t] = np.concatenate([h, f, c], axis=1)
        h_new = h + f * (c - h)
        h = h_new if mask is None else np.where(mask[t][:, None], h_new, h)
        hs[t] = h
    return hs, saved


def backward(
    d_hs: np.ndarray,
    d_last: np.ndarray | None,
    saved: np.ndarray,
    u: np.ndarray,
    mask: np.ndarray | None = None,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(dxw, dh0, du)``: ``(T, B, 2H)``, ``(B, H)`` and ``du`` of ``u``'s shape.

    ``d_hs`` ``(T, B, H)`` and ``d_last`` ``(B, H)`` (or None) are the
    gradients of the states and of the final state; ``saved`` is
    :func:`forward`'s. Group g's ``du`` sums over its own rows only.
    """
    steps, batch, units = d_hs.shape
    kernels = _row_kernels(u, batch)
    u_f, u_c = kernels[:, :, :units], kernels[:, :, units:]
    g = np.zeros((batch, units)) if d_last is None else np.asarray(d_last, np.float64).copy()
    dxw = np.zeros((steps, batch, 2 * units))
    du_rows = np.zeros(kernels.shape)
    for t in range(steps - 1, -1, -1):
        g = g + d_hs[t]
        h, f, c = np.split(saved[t].astype(np.float64), 3, axis=1)
        live = np.ones(batch, bool) if mask is None else np.asarray(mask[t], bool)
        gm = np.where(live[:, None], g, 0.0)
        dz_c = gm * f * _derivative(activation, c)
        dfh = np.einsum("bj,bkj->bk", dz_c, u_c)
        dz_f = (gm * (c - h) + dfh * h) * _derivative(recurrent_activation, f)
        g_prev = gm * (1.0 - f) + dfh * f + np.einsum("bj,bkj->bk", dz_f, u_f)
        dxw[t] = np.concatenate([dz_f, dz_c], axis=1)
        du_rows[:, :, :units] += h[:, :, None] * dz_f[:, None, :]
        du_rows[:, :, units:] += (f * h)[:, :, None] * dz_c[:, None, :]
        g = np.where(live[:, None], g_prev, g)
    groups = 1 if u.ndim == 2 else u.shape[0]
    du = du_rows.reshape(groups, batch // groups, units, 2 * units).sum(axis=1)
    return dxw, g, du.reshape(u.shape)


# ------------------------------------------------------------------ C API
#: The C API's activation codes.
CODES = {"tanh": 0, "sigmoid": 1}
#: Cases with a batch large enough, and enough work, to run on several threads:
#: (steps, groups, rows per group, units, max_threads); more groups than
#: threads, fewer, and one.
THREADED = [(150, 3, 4, 33, 4), (300, 4, 2, 17, 2), (40, 2, 8, 65, 4), (200, 1, 13, 9, 3)]


def declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """``lib`` with the argument types of its entry points declared."""
    i64, ptr, c_int = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    for suffix in ("f32", "f64"):
        forward_fn = getattr(lib, f"keras_mgu_forward_{suffix}")
        forward_fn.argtypes = [i64] * 4 + [ptr] * 4 + [c_int] * 2 + [ptr] * 2 + [i64, c_int]
        forward_fn.restype = c_int
        backward_fn = getattr(lib, f"keras_mgu_backward_{suffix}")
        backward_fn.argtypes = [i64] * 4 + [ptr] * 5 + [c_int] * 2 + [ptr] * 3 + [i64, c_int]
        backward_fn.restype = c_int
        threads_fn = getattr(lib, f"keras_mgu_threads_{suffix}")
        threads_fn.argtypes = [i64] * 5
        threads_fn.restype = i64
    return lib


def _pointer(array: np.ndarray | None) -> int | None:
    return None if array is None else array.ctypes.data


def random_case(rng: np.random.Generator, index: int) -> dict[str, Any]:
    """The shapes and settings of case ``index``: the threaded ones first, then random ones."""
    if index < len(THREADED):
        steps, groups, rows, units, threads = THREADED[index]
    else:
        steps = int(rng.choice([1, 2, 5, 17, 60]))
        groups = int(rng.integers(1, 5))
        rows = 0 if index % 9 == 0 else int(rng.choice([1, 2, 3, 5]))
        units = int(rng.integers(1, 71)) | (1 if index % 2 else 0)  # odd for odd cases
        threads = int(rng.integers(1, 5))
    return {
        "steps": steps,
        "groups": groups,
        "batch": groups * rows,
        "units": units,
        "threads": threads,
        "dtype": "float32" if index % 2 else "float64",
        "batch_major": bool(rng.integers(2)),
        "masked": bool(rng.integers(2)),
        "with_last": bool(rng.integers(2)),
        "activations": ("tanh", "sigmoid") if rng.integers(3) else ("sigmoid", "tanh"),
    }


def run_case(lib: ctypes.CDLL, rng: np.random.Generator, case: dict[str, Any]) -> dict:
    """The C API's outputs ``(hs, saved, dxw, dh0, du)`` on random arrays, and those arrays."""
    steps, batch, units, groups = (case[k] for k in ("steps", "batch", "units", "groups"))
    dtype, major = case["dtype"], case["batch_major"]
    suffix = "f32" if dtype == "float32" else "f64"
    codes = [CODES[name] for name in case["activations"]]
    seq = (batch, steps) if major else (steps, batch)
    a = {
        "xw": rng.normal(size=(*seq, 2 * units)).astype(dtype),
        "h0": (0.5 * rng.normal(size=(batch, units))).astype(dtype),
        "u": (rng.normal(size=(groups, units, 2 * units)) / np.sqrt(units)).astype(dtype),
        "mask": (rng.random((steps, batch)) > 0.25).astype(np.uint8) if case["masked"] else None,
        "d_hs": rng.normal(size=(*seq, units)).astype(dtype),
        "d_last": rng.normal(size=(batch, units)).astype(dtype) if case["with_last"] else None,
    }
    out = {
        "hs": np.empty((*seq, units), dtype),
        "saved": np.empty((steps, batch, 3 * units), dtype),
        "dxw": np.empty((*seq, 2 * units), dtype),
        "dh0": np.empty((batch, units), dtype),
        "du": np.empty((groups, units, 2 * units), dtype),
    }
    sizes, settings = (steps, batch, units, groups), (case["threads"], int(major))
    inputs = [_pointer(a[k]) for k in ("xw", "h0", "u", "mask")]
    code = getattr(lib, f"keras_mgu_forward_{suffix}")(
        *sizes, *inputs, *codes, _pointer(out["hs"]), _pointer(out["saved"]), *settings
    )
    inputs = [_pointer(a[k]) for k in ("d_hs", "d_last")] + [_pointer(out["saved"])]
    inputs += [_pointer(a["u"]), _pointer(a["mask"])]
    outputs = [_pointer(out[k]) for k in ("dxw", "dh0", "du")]
    code |= getattr(lib, f"keras_mgu_backward_{suffix}")(
        *sizes, *inputs, *codes, *outputs, *settings
    )
    threads = getattr(lib, f"keras_mgu_threads_{suffix}")(*sizes, case["threads"])
    return {"code": code, "threads": threads, "inputs": a, **out}


def mismatches(case: dict[str, Any], got: dict) -> list[str]:
    """What of ``got`` (from :func:`run_case`) differs from the NumPy loops."""
    a, major = got["inputs"], case["batch_major"]
    time_major = (lambda x: np.swapaxes(x, 0, 1)) if major else (lambda x: x)
    mask = None if a["mask"] is None else a["mask"].astype(bool)
    names = case["activations"]
    hs, saved = forward(time_major(a["xw"]), a["h0"], a["u"], mask, *names)
    grads = backward(time_major(a["d_hs"]), a["d_last"], saved, a["u"], mask, *names)
    want = {"hs": hs, "saved": saved, "dxw": grads[0], "dh0": grads[1], "du": grads[2]}
    rel = 2e-4 if case["dtype"] == "float32" else 1e-10
    found = [] if got["code"] == 0 else [f"return code {got['code']}"]
    for name, value in want.items():
        value = time_major(value) if name in ("hs", "dxw") else value
        scale = max(1.0, float(np.abs(value).max(initial=0.0)))
        error = float(np.abs(got[name] - value).max(initial=0.0))
        if not error <= rel * scale:  # NaN fails too
            found.append(f"{name} off by {error:.3g} (scale {scale:.3g})")
    return found


def refusals(lib: ctypes.CDLL) -> list[str]:
    """Invalid group counts must be refused without touching the buffers."""
    found = []
    xw, h0 = np.zeros((2, 6, 4)), np.zeros((6, 2))
    u, hs, saved = np.zeros((4, 2, 4)), np.zeros((2, 6, 2)), np.zeros((2, 6, 6))
    pointers = [_pointer(x) for x in (xw, h0, u)] + [None, 0, 1, _pointer(hs), _pointer(saved)]
    for groups in (0, 4, -1):  # 6 rows: no groups, not a multiple of 4, negative
        if lib.keras_mgu_forward_f64(2, 6, 2, groups, *pointers, 1, 0) != 1:
            found.append(f"forward accepted {groups} groups of a batch of 6")
        if lib.keras_mgu_threads_f64(2, 6, 2, groups, 1) != 0:
            found.append(f"threads accepted {groups} groups of a batch of 6")
    return found


def main(path: str, cases: int = 40, seed: int = 0) -> int:
    """Check ``cases`` random calls of the library at ``path``; the count of failed cases."""
    lib = declare(ctypes.CDLL(path))
    rng = np.random.default_rng(seed)
    failed = 0
    for index in range(cases):
        case = random_case(rng, index)
        got = run_case(lib, rng, case)
        found = mismatches(case, got)
        if index < len(THREADED) and got["threads"] < 2:
            found.append(f"ran on {got['threads']} thread(s), not several")
        if found:
            failed += 1
            print(f"case {index} {case}: {'; '.join(found)}", file=sys.stderr)
    problems = refusals(lib)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"CASES {cases} FAILED {failed + len(problems)}")
    return failed + len(problems)


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1]) else 0)
