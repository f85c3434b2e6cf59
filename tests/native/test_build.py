"""Building, caching and falling back: the native library's life cycle."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from keras_mgu import native
from keras_mgu.native import build
from tests.helpers import BACKEND_INDEPENDENT, requires

ROOT = Path(__file__).resolve().parents[2]

#: The build flags at -O0, for tests of caching, locking and fallbacks: the same
#: sources and paths compile in seconds instead of minutes.
QUICK_FLAGS = tuple("-O0" if flag == "-O3" else flag for flag in build.FLAGS)
#: The same, for the code of a child process (before its first build).
QUICK_BUILD = f"from keras_mgu.native import build; build.FLAGS = {QUICK_FLAGS!r}"


def _run(code: str, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3", **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=full_env, timeout=timeout, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.parametrize(
    "backend", [pytest.param(b, marks=requires(b)) for b in ("tensorflow", "torch", "jax")]
)
def test_the_library_builds_on_this_machine(backend):
    """CI machines have a C++ compiler: the native loops must be live on each installed backend."""
    build.compiler()  # raises BuildError if there is none
    assert native.status(backend).available, native.status(backend).reason


@BACKEND_INDEPENDENT
def test_cached_library_is_reused_and_keyed_by_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_MGU_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "FLAGS", QUICK_FLAGS)
    first = build.library_path("core")
    assert first.parent == tmp_path and first.exists()
    stamp = first.stat().st_mtime_ns
    assert build.library_path("core") == first and first.stat().st_mtime_ns == stamp
    monkeypatch.setattr(build, "FLAGS", (*QUICK_FLAGS, "-DKERAS_MGU_OTHER_FLAGS"))
    other = build.library_path("core")
    assert other != first and other.exists()
    assert not list(tmp_path.glob("*.tmp"))


@BACKEND_INDEPENDENT
def test_a_build_says_so_in_one_line_before_and_one_after(tmp_path, monkeypatch, capsys):
    """Minutes of compiling are never silent; a cached library says nothing."""
    monkeypatch.setenv("KERAS_MGU_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "FLAGS", QUICK_FLAGS)
    build.library_path("core")
    before, after = capsys.readouterr().err.strip().splitlines()
    assert before == (
        "keras-mgu: compiling the native core library for this machine, once "
        f"({build.TYPICAL_BUILD}; cached in {tmp_path})"
    )
    assert re.fullmatch(r"keras-mgu: native core library built in \d+ s", after)
    build.library_path("core")
    assert capsys.readouterr().err == ""


@BACKEND_INDEPENDENT
def test_the_tensorflow_op_builds_without_half_precision_packet_math(monkeypatch):
    """With AVX512-FP16, TensorFlow's Eigen headers need it off (not every compiler builds it)."""
    pytest.importorskip("tensorflow")
    monkeypatch.setattr(build, "_cpu_flags", lambda: "flags : fpu sse2 avx512f avx512_fp16 avx2")
    assert "-mno-avx512fp16" in build._extra_flags("tf")
    monkeypatch.setattr(build, "_cpu_flags", lambda: "flags : fpu sse2 avx512f avx2")
    assert "-mno-avx512fp16" not in build._extra_flags("tf")
    assert build._extra_flags("core") == []


@BACKEND_INDEPENDENT
def test_a_failed_build_says_why_and_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_MGU_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "FLAGS", (*QUICK_FLAGS, "-fno-such-option-for-keras-mgu"))
    with pytest.raises(build.BuildError, match="failed"):
        build.library_path("core")
    assert not list(tmp_path.glob("*.so")) and not list(tmp_path.glob("*.tmp"))


@BACKEND_INDEPENDENT
def test_without_openmp_the_batch_split_runs_on_std_threads(tmp_path):
    """A compiler that rejects the OpenMP flags builds the std::thread version of the split."""
    code = f"""
        import numpy as np
        from keras_mgu import native
        {QUICK_BUILD}
        build.OPENMP_FLAGS = ("-fno-such-openmp-flag-for-keras-mgu",)
        rng = np.random.default_rng(0)
        xw, h0 = rng.normal(size=(400, 12, 16)), np.zeros((12, 8))
        u = 0.3 * rng.normal(size=(8, 16))
        print("THREADS", native.threads(400, 12, 8, "float64"))
        hs, saved = native.forward(xw, h0, u, None)
        grads = native.backward(np.ones_like(hs), None, saved, u, None)
        np.save("split.npy", np.concatenate([hs.ravel(), *(g.ravel() for g in grads)]))
    """
    env = {"KERAS_MGU_CACHE_DIR": str(tmp_path / "cache"), "KERAS_MGU_NUM_THREADS": "3"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env}, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "THREADS 3" in result.stdout
    (library,) = (tmp_path / "cache").glob("*.so")
    assert b"libgomp" not in library.read_bytes()  # built without OpenMP
    split = np.load(tmp_path / "split.npy")
    rng = np.random.default_rng(0)
    xw, h0 = rng.normal(size=(400, 12, 16)), np.zeros((12, 8))
    u = 0.3 * rng.normal(size=(8, 16))
    hs, saved = native.forward(xw, h0, u, None)  # this process's (OpenMP) library
    grads = native.backward(np.ones_like(hs), None, saved, u, None)
    want = np.concatenate([hs.ravel(), *(g.ravel() for g in grads)])
    np.testing.assert_allclose(split, want, rtol=1e-12, atol=1e-12)


def test_no_compiler_is_a_clear_build_error(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(build.BuildError, match="no C\\+\\+ compiler"):
        build.compiler()


TRAIN_ONE_STEP = """
    import logging, numpy as np, keras
    logging.basicConfig(level=logging.WARNING)
    from keras_mgu import MGU, native
    layers = [keras.Input((20, 2)), MGU(4, return_sequences=True), keras.layers.Dense(1)]
    model = keras.Sequential(layers)
    model.compile("adam", "mse")
    x = np.random.default_rng(0).normal(size=(8, 20, 2)).astype("float32")
    loss = model.fit(x, x[..., :1], epochs=1, verbose=0).history["loss"][0]
    print("KERNEL", model.layers[0].kernel_in_use, np.isfinite(loss))
    print("REASON", native.status().reason)
"""


def test_without_a_compiler_layers_fall_back_with_one_log_line(tmp_path):
    result = _run(TRAIN_ONE_STEP, {"KERAS_MGU_CACHE_DIR": str(tmp_path), "CXX": "/nonexistent/c++"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "KERNEL fused True" in result.stdout
    assert "no C++ compiler" in result.stdout
    assert result.stderr.count("native MGU library could not be built") == 1
    assert not list(tmp_path.iterdir())


def test_environment_variable_turns_the_native_loops_off(tmp_path):
    result = _run(TRAIN_ONE_STEP, {"KERAS_MGU_CACHE_DIR": str(tmp_path), "KERAS_MGU_NATIVE": "0"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "KERNEL fused True" in result.stdout
    assert "KERAS_MGU_NATIVE=0" in result.stdout
    assert not list(tmp_path.iterdir())  # nothing was built


@BACKEND_INDEPENDENT
def test_concurrent_first_use_builds_once(tmp_path):
    code = f"""
        import numpy as np
        from keras_mgu import native
        {QUICK_BUILD}
        path = build.library_path("core")
        rng = np.random.default_rng(0)
        hs, _ = native.forward(rng.normal(size=(50, 4, 16)), np.zeros((4, 8)),
                               0.3 * rng.normal(size=(8, 16)), None)
        print("RESULT", path, repr(float(hs.sum())))
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERAS_MGU_CACHE_DIR": str(tmp_path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )  # fmt: skip
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outputs]
    results = {line for out, _ in outputs for line in out.splitlines() if line.startswith("RESULT")}
    assert len(results) == 1  # same library file, same numbers
    assert len(list(tmp_path.glob("*.so"))) == 1
    assert not list(tmp_path.glob("*.tmp"))
