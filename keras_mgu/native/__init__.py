"""The MGU's time loop in compiled C++, behind all three backends.

The loops (:file:`mgu_kernel.h`, with :file:`mgu_math.h` and
:file:`mgu_threads.h`) run the recurrence forward and the backward pass
through time on the CPU, in float32 and float64; the input projection
stays one backend matmul outside them. They are compiled on first use
(:mod:`keras_mgu.native.build`) and reached through thin per-backend
front-ends: an XLA FFI custom call on JAX (:mod:`keras_mgu.native.jax`), a
TensorFlow operator on TensorFlow (:mod:`keras_mgu.native.tensorflow`) and a
``torch.library`` custom operator with its autograd on PyTorch
(:mod:`keras_mgu.native.torch`).

Set ``KERAS_MGU_NATIVE=0`` to turn the native loops off. Where the library
cannot be built (no compiler, a failed build) the fused kernels of
:mod:`keras_mgu.kernels` run instead and one log line on the ``keras_mgu``
logger says why; :func:`status` tells the same.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import logging
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from keras_mgu import checks
from keras_mgu.native.build import BuildError, library_path

__all__ = [
    "ACTIVATION_CODES",
    "ENV_VAR",
    "THREADS_ENV_VAR",
    "NativeStatus",
    "backward",
    "enabled",
    "forward",
    "max_threads",
    "status",
    "threads",
    "turned_off",
]

#: The environment variable that turns the native loops off ("0", "false", "off", "no").
ENV_VAR = "KERAS_MGU_NATIVE"
#: The environment variable that caps the loops' threads (default: the CPUs available).
THREADS_ENV_VAR = "KERAS_MGU_NUM_THREADS"
#: Activation name -> the code the C++ loops take.
ACTIVATION_CODES = {"tanh": 0, "sigmoid": 1}
#: Dtypes the loops compute in.
DTYPES = ("float32", "float64")

#: The batch size assumed where it is not known when the loop is chosen.
DEFAULT_BATCH = 32
#: The version of the core library's C entry points that this module calls.
ABI_VERSION = 4

_logger = logging.getLogger("keras_mgu")
_LIBRARY_OF_BACKEND = {"tensorflow": "tf", "torch": "core", "jax": "xla"}


@dataclasses.dataclass(frozen=True)
class NativeStatus:
    """Whether the native loops serve a backend, and if not, why."""

    available: bool
    reason: str | None = None


_turned_off: list[bool] = []


def enabled() -> bool:
    """False when ``KERAS_MGU_NATIVE`` or :func:`turned_off` turns the native loops off."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    return not _turned_off and value not in ("0", "false", "off", "no")


@contextlib.contextmanager
def turned_off() -> Iterator[None]:
    """Within this context, layers trace the backends' own fused kernels.

    For example while exporting a model with fixed shapes: a native call
    cannot go into an exported file.
    """
    _turned_off.append(True)
    try:
        yield
    finally:
        _turned_off.pop()


def faster(batch: int | None, units: int, max_step_macs: int) -> bool:
    """Whether a step's recurrent product, ``batch * units**2`` multiply-adds, is small enough.

    Above ``max_step_macs`` (measured per backend, see each front-end) the
    backend's own loops are as fast as the native ones or faster.
    ``batch=None`` (not known yet) counts as :data:`DEFAULT_BATCH`.
    """
    return (DEFAULT_BATCH if batch is None else batch) * units * units <= max_step_macs


def status(backend: str | None = None) -> NativeStatus:
    """Whether the native loops serve ``backend`` (default: Keras's), building them if needed."""
    if not enabled():
        how = "keras_mgu.native.turned_off()" if _turned_off else f"{ENV_VAR}={os.environ[ENV_VAR]}"
        return NativeStatus(False, f"turned off by {how}")
    if backend is None:
        import keras

        backend = keras.backend.backend()
    kind = _LIBRARY_OF_BACKEND.get(backend)
    if kind is None:
        return NativeStatus(False, f"no native front-end for the {backend!r} backend")
    return _library_status(kind)


@functools.cache
def _library_status(kind: str) -> NativeStatus:
    try:
        _load(kind)
    except (BuildError, OSError) as error:
        reason = f"the native MGU library could not be built or loaded: {error}"
        _logger.warning("keras-mgu: %s; the fused backend kernels run instead.", reason)
        return NativeStatus(False, reason)
    return NativeStatus(True)


@functools.cache
def _load(kind: str) -> Any:
    """The library ``kind``: a ctypes handle, or for ``"tf"`` the module of its operators."""
    path = str(library_path(kind))
    if kind == "core":
        lib = ctypes.CDLL(path)
        version = lib.keras_mgu_abi_version()
        if version != ABI_VERSION:
            raise OSError(f"{path} has ABI version {version}; expected {ABI_VERSION}")
        return lib
    if kind != "tf":
        return ctypes.CDLL(path)
    import tensorflow as tf

    try:
        return tf.load_op_library(path)
    except Exception as error:  # TensorFlow reports a bad library with its own error types
        raise OSError(f"TensorFlow could not load {path}: {error}") from error


@functools.cache
def core() -> ctypes.CDLL:
    """The ctypes handle of the core library, with its signatures declared."""
    lib = _load("core")
    i64, ptr, c_int = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    for suffix in ("f32", "f64"):
        forward_fn = getattr(lib, f"keras_mgu_forward_{suffix}")
        forward_fn.argtypes = [
            *(i64, i64, i64, i64, ptr, ptr, ptr, ptr, c_int, c_int, ptr, ptr, i64, c_int)
        ]
        forward_fn.restype = c_int
        backward_fn = getattr(lib, f"keras_mgu_backward_{suffix}")
        backward_fn.argtypes = [
            *(i64, i64, i64, i64, ptr, ptr, ptr, ptr, ptr, c_int, c_int, ptr, ptr, ptr, i64, c_int)
        ]
        backward_fn.restype = c_int
        threads_fn = getattr(lib, f"keras_mgu_threads_{suffix}")
        threads_fn.argtypes = [i64, i64, i64, i64, i64]
        threads_fn.restype = i64
    return lib


def _suffix(dtype: Any) -> str:
    name = np.dtype(dtype).name
    checks.check_dtype_among(name, DTYPES, "The native MGU loops")
    return "f32" if name == "float32" else "f64"


def _codes(activation: str, ract: str) -> tuple[int, int]:
    checks.check_kernel_activations(activation, ract)
    return ACTIVATION_CODES[activation], ACTIVATION_CODES[ract]


def _check(code: int, what: str) -> None:
    if code == 2:
        raise MemoryError(f"The native MGU {what} pass ran out of memory.")
    if code != 0:
        raise ValueError(f"The native MGU {what} pass refused its arguments (code {code}).")


def max_threads(default: int = 0) -> int:
    """The most threads one call of the loops may use; 0 means the CPUs available.

    :data:`THREADS_ENV_VAR` when set, else ``default``: 0 on JAX and
    TensorFlow, ``torch.get_num_threads()`` on PyTorch (the loops run on
    PyTorch's own OpenMP threads there).
    """
    value = os.environ.get(THREADS_ENV_VAR, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{THREADS_ENV_VAR} must be a positive integer; received {value!r}.")
    return int(value)


def threads(
    steps: int,
    batch: int,
    units: int,
    dtype: Any = "float32",
    limit: int | None = None,
    groups: int = 1,
) -> int:
    """How many threads the loops run a call of this size on, with at most ``limit``.

    ``limit`` defaults to :func:`max_threads`. The sequences of a batch are
    independent, so a call large enough to gain from it splits the batch into
    one contiguous chunk per thread, each running the whole time loop, with
    at least 4 sequences a chunk. With ``groups`` G > 1 (a ``(G, H, 2H)``
    recurrent kernel; ``batch`` a multiple of G) a thread runs whole groups, or
    when there are fewer groups than threads, a share of one group's rows; the
    count of threads is the same.
    """
    checks.groups_of((groups, units, 2 * units), batch)
    fn = getattr(core(), f"keras_mgu_threads_{_suffix(dtype)}")
    count = int(fn(steps, batch, units, groups, max_threads() if limit is None else limit))
    if count < 1:
        raise ValueError(f"The native loops refuse {steps} steps of {batch} rows of {units} units.")
    return count


def call_forward(
    shape: tuple[int, int, int],
    dtype: Any,
    pointers: tuple,
    activation: str,
    ract: str,
    threads: int = 0,
    batch_major: bool = False,
    groups: int = 1,
) -> None:
    """Run the forward loop on raw pointers ``(xw, h0, u, mask, hs, saved)``; see the header.

    ``shape`` is ``(T, B, H)``; ``threads`` is the most threads the call may
    use (0: the CPUs available); ``batch_major`` means ``xw`` and ``hs`` are
    ``(B, T, ...)``; ``groups`` is G of a ``(G, H, 2H)`` ``u`` (1 for ``(H, 2H)``).
    """
    args = (shape, groups, dtype, pointers, (activation, ract), threads, batch_major)
    _call("forward", 4, *args)


def call_backward(
    shape: tuple[int, int, int],
    dtype: Any,
    pointers: tuple,
    activation: str,
    ract: str,
    threads: int = 0,
    batch_major: bool = False,
    groups: int = 1,
) -> None:
    """Run the backward loop on ``(d_hs, d_last, saved, u, mask, dxw, dh0, du)`` pointers.

    As :func:`call_forward`; ``batch_major`` applies to ``d_hs`` and ``dxw``;
    ``du`` has the shape of ``u``.
    """
    args = (shape, groups, dtype, pointers, (activation, ract), threads, batch_major)
    _call("backward", 5, *args)


def _call(direction, inputs, shape, groups, dtype, pointers, names, threads, batch_major) -> None:
    """The C entry point's arguments: sizes, ``inputs`` input pointers, codes, outputs, settings."""
    fn = getattr(core(), f"keras_mgu_{direction}_{_suffix(dtype)}")
    codes = _codes(*names)
    args = (*pointers[:inputs], *codes, *pointers[inputs:], threads, batch_major)
    _check(fn(*shape, groups, *args), direction)


def steps_and_batch(shape: tuple, batch_major: bool) -> tuple[int, int]:
    """``(T, B)`` of a sequence of ``shape`` ``(T, B, W)``, or ``(B, T, W)`` when batch major."""
    rows, cols = shape[0], shape[1]
    return (cols, rows) if batch_major else (rows, cols)


def _pointer(array: np.ndarray | None) -> int | None:
    return None if array is None else array.ctypes.data


def forward(
    xw: np.ndarray,
    h0: np.ndarray,
    u: np.ndarray,
    mask: np.ndarray | None,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
    batch_major: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The native forward loop on NumPy arrays.

    Args:
        xw: ``(T, B, 2H)`` projected inputs (``(B, T, 2H)`` with ``batch_major``);
            h0: ``(B, H)``; u: ``(H, 2H)``, or ``(G, H, 2H)``: G groups, rows
            ``[g B/G, (g+1) B/G)`` use ``u[g]``; mask: ``(T, B)`` booleans or
            None. One float dtype for all.

    Returns:
        ``(hs, saved)``: ``(T, B, H)`` states (``(B, T, H)`` with ``batch_major``)
        and ``(T, B, 3H)`` ``[h_{t-1} | f_t | c_t]``.
    """
    dtype = np.dtype(xw.dtype)
    xw, h0, u = (np.ascontiguousarray(a, dtype) for a in (xw, h0, u))
    (steps, batch), units = steps_and_batch(xw.shape, batch_major), xw.shape[-1] // 2
    groups = checks.groups_of(u.shape, batch, units)
    m = None if mask is None else np.ascontiguousarray(mask, np.uint8)
    hs = np.empty((*xw.shape[:2], units), dtype)
    saved = np.empty((steps, batch, 3 * units), dtype)
    pointers = tuple(_pointer(a) for a in (xw, h0, u, m, hs, saved))
    names = (activation, recurrent_activation)
    settings = (max_threads(), batch_major, groups)
    call_forward((steps, batch, units), dtype, pointers, *names, *settings)
    return hs, saved


def backward(
    d_hs: np.ndarray,
    d_last: np.ndarray | None,
    saved: np.ndarray,
    u: np.ndarray,
    mask: np.ndarray | None,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
    batch_major: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The native backward loop on NumPy arrays: ``(dxw, dh0, du)``.

    ``d_hs`` ``(T, B, H)`` is the gradient of the states, ``d_last`` ``(B, H)``
    (or None) that of the final state; ``saved`` comes from :func:`forward`.
    With ``batch_major``, ``d_hs`` and ``dxw`` are ``(B, T, ...)``. u: ``(H, 2H)``,
    or ``(G, H, 2H)``: G groups, rows ``[g B/G, (g+1) B/G)`` use ``u[g]``;
    ``du`` has the shape of ``u``, group g's summed over its own rows.
    """
    dtype = np.dtype(saved.dtype)
    d_hs, saved, u = (np.ascontiguousarray(a, dtype) for a in (d_hs, saved, u))
    d_last = None if d_last is None else np.ascontiguousarray(d_last, dtype)
    (steps, batch), units = steps_and_batch(d_hs.shape, batch_major), d_hs.shape[-1]
    groups = checks.groups_of(u.shape, batch, units)
    m = None if mask is None else np.ascontiguousarray(mask, np.uint8)
    dxw = np.empty((*d_hs.shape[:2], 2 * units), dtype)
    dh0 = np.empty((batch, units), dtype)
    du = np.empty(u.shape, dtype)
    pointers = tuple(_pointer(a) for a in (d_hs, d_last, saved, u, m, dxw, dh0, du))
    names = (activation, recurrent_activation)
    settings = (max_threads(), batch_major, groups)
    call_backward((steps, batch, units), dtype, pointers, *names, *settings)
    return dxw, dh0, du
