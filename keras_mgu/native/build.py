"""Compile the native MGU libraries on first use and cache them.

Three shared libraries are built from the sources beside this module with the
machine's C++ compiler (``$CXX``, else ``c++``, ``g++`` or ``clang++``), each
when first needed:

* ``core``: :file:`mgu_c_api.cc`, plain C entry points for ctypes (the
  PyTorch front-end and the NumPy helpers);
* ``xla``: :file:`mgu_xla_ffi.cc`, XLA FFI handlers for the JAX front-end,
  compiled against the headers that ``jax.ffi.include_dir()`` ships;
* ``tf``: :file:`mgu_tf_op.cc`, TensorFlow operators for the TensorFlow
  front-end, compiled and linked with ``tf.sysconfig``'s flags.

A library is cached under ``$KERAS_MGU_CACHE_DIR`` (default
``~/.cache/keras_mgu/native``) in a file whose name carries a hash of
everything that shapes the binary: the package version, the sources, the
compiler's version, the flags, the machine's CPU flags (``-march=native``) and,
for ``xla`` and ``tf``, the jaxlib or TensorFlow version. Several processes may build at once: each
compiles into its own temporary file under an exclusive file lock and moves it
into place atomically, so a reader never sees a half-written library.

A build is never silent: it takes minutes (:data:`TYPICAL_BUILD`), so one line
on standard error says that it starts, why and where the library goes, and one
that it ended and how long it took (:func:`build_notice`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from keras_mgu._version import __version__

SOURCE_DIR = Path(__file__).resolve().parent
#: Compiler flags. No fast-math: NaN and infinities must propagate. The loops
#: never read floating-point exception flags, so ``-fno-trapping-math`` lets
#: the compiler vectorise the activations' selects (the values are the same).
FLAGS = (
    "-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-std=c++17", "-shared",
    "-fPIC", "-pthread",
)  # fmt: skip
#: The batch split runs on OpenMP threads (in a PyTorch process, PyTorch's own
#: pool); a compiler without OpenMP builds the std::thread version instead.
OPENMP_FLAGS = ("-fopenmp", "-DKERAS_MGU_OPENMP")
_SOURCES = {"core": "mgu_c_api.cc", "xla": "mgu_xla_ffi.cc", "tf": "mgu_tf_op.cc"}
_HEADERS = ("mgu_kernel.h", "mgu_math.h", "mgu_threads.h")
#: How long one library takes to compile with :data:`FLAGS` on a 2-core machine (1.5-2.5
#: minutes each; a first identification on one backend builds two: ``core`` and its own).
TYPICAL_BUILD = "about 2 minutes"


class BuildError(RuntimeError):
    """The native library could not be built; the message says why."""


def cache_dir() -> Path:
    """Where compiled libraries are kept (``$KERAS_MGU_CACHE_DIR`` overrides)."""
    configured = os.environ.get("KERAS_MGU_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "keras_mgu" / "native"


def compiler() -> str:
    """The C++ compiler's path; :class:`BuildError` when there is none."""
    configured = os.environ.get("CXX")
    candidates = [configured] if configured else ["c++", "g++", "clang++"]
    for name in candidates:
        path = shutil.which(name)
        if path:
            return path
    raise BuildError(f"no C++ compiler found (looked for {', '.join(candidates)}; set $CXX)")


def library_path(kind: str) -> Path:
    """The compiled library ``kind`` (``"core"``, ``"xla"`` or ``"tf"``), built if not cached."""
    if kind not in _SOURCES:
        raise ValueError(f"`kind` must be one of {tuple(_SOURCES)}; received {kind!r}.")
    cxx = compiler()
    includes, backend_flags = _include_dirs(kind), _extra_flags(kind)
    key = _cache_key(kind, cxx, [*includes, *OPENMP_FLAGS, *backend_flags])
    target = cache_dir() / f"libkeras_mgu_{kind}-{key}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(target.with_suffix(".lock")):
        if not target.exists():  # another process may have built it meanwhile
            with build_notice(kind, target):
                try:
                    _compile(cxx, kind, includes, target, [*OPENMP_FLAGS], backend_flags)
                except BuildError:
                    _compile(cxx, kind, includes, target, [], backend_flags)
    return target


@contextlib.contextmanager
def build_notice(kind: str, target: Path) -> Iterator[None]:
    """Say on standard error that library ``kind`` is compiled now, and then how long it took.

    One line before (what, why, where, how long it usually takes) and one
    after (the seconds it took, or that it failed: the error says why).
    """
    print(
        f"keras-mgu: compiling the native {kind} library for this machine, once "
        f"({TYPICAL_BUILD}; cached in {target.parent})",
        file=sys.stderr, flush=True,
    )  # fmt: skip
    start = time.perf_counter()
    try:
        yield
    except BuildError:
        print(f"keras-mgu: the native {kind} library did not build", file=sys.stderr, flush=True)
        raise
    seconds = time.perf_counter() - start
    print(f"keras-mgu: native {kind} library built in {seconds:.0f} s", file=sys.stderr, flush=True)


def _include_dirs(kind: str) -> list[str]:
    dirs = [str(SOURCE_DIR)]
    if kind == "xla":
        try:
            import jax.ffi
        except ImportError as error:
            raise BuildError(f"jax.ffi is not available ({error})") from error
        dirs.append(str(jax.ffi.include_dir()))
    return dirs


def _extra_flags(kind: str) -> list[str]:
    """TensorFlow's compile and link flags for ``tf`` (headers, ABI, its framework library)."""
    if kind != "tf":
        return []
    try:
        import tensorflow as tf
    except ImportError as error:
        raise BuildError(f"tensorflow is not available ({error})") from error
    compile_flags = [f for f in tf.sysconfig.get_compile_flags() if not f.startswith("--std")]
    if "avx512_fp16" in _cpu_flags().split():
        # ``-march=native`` turns on the half-precision packet math of TensorFlow's
        # Eigen headers, which not every compiler can build; the op uses no halves.
        compile_flags.append("-mno-avx512fp16")
    return [*compile_flags, "-Wno-deprecated-declarations", *tf.sysconfig.get_link_flags()]


def _backend_version(kind: str) -> str:
    if kind == "xla":
        import jaxlib

        return jaxlib.__version__
    if kind == "tf":
        import tensorflow as tf

        return tf.__version__
    return ""


def _cache_key(kind: str, cxx: str, flags: list[str]) -> str:
    digest = hashlib.sha256()
    for part in (__version__, kind, " ".join(FLAGS), platform.machine(), _cpu_flags()):
        digest.update(part.encode() + b"\0")
    digest.update(_compiler_version(cxx).encode())
    for name in (_SOURCES[kind], *_HEADERS):
        digest.update((SOURCE_DIR / name).read_bytes())
    digest.update((_backend_version(kind) + "\0" + " ".join(flags)).encode())
    return digest.hexdigest()[:16]


def _cpu_flags() -> str:
    """The CPU's feature flags (``-march=native`` builds for them)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor()


def _compiler_version(cxx: str) -> str:
    try:
        result = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        raise BuildError(f"the compiler {cxx} does not run ({error})") from error
    return result.stdout


def _compile(
    cxx: str, kind: str, includes: list[str], target: Path, extra: list[str], tail: list[str]
) -> None:
    """Build ``target``; ``extra`` flags go before the source, ``tail`` (link flags) after it."""
    fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    command = [
        cxx,
        *FLAGS,
        *extra,
        *(f"-I{d}" for d in includes),
        str(SOURCE_DIR / _SOURCES[kind]),
        "-o",
        tmp,
        *tail,  # after the source: the link flags name libraries
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            lines = (result.stderr or result.stdout).strip().splitlines()
            errors = [line for line in lines if "error:" in line.lower()] or lines or ["no output"]
            raise BuildError(f"{' '.join(command)} failed: {errors[0].strip()}")
        os.replace(tmp, target)
    except (OSError, subprocess.SubprocessError) as error:
        raise BuildError(f"{' '.join(command)} failed: {error}") from error
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


@contextlib.contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (advisory, between processes)."""
    with open(path, "a") as handle:
        try:
            import fcntl
        except ImportError:  # no fcntl (Windows): the atomic rename alone keeps it safe
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
