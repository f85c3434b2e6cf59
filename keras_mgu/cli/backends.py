"""The Keras backend of a command: installed or not, chosen before Keras loads, quiet.

Nothing here imports Keras or a backend, but :func:`import_keras`: the
checks use ``importlib.util.find_spec``, and the settings are environment
variables and loggers the backends read when they are first imported.
TensorFlow's native libraries write their start-up lines (oneDNN, CUDA
drivers) straight to file descriptor 2 before its log level applies, so
:func:`import_keras` can import the backend and Keras with that descriptor
sent to a temporary file. A backend that is installed but fails to import
(JAX without a working ``jaxlib``, PyTorch missing a shared library) raises
:class:`BackendImportError`, whose message is one line naming the backend,
the error and the reinstall command.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import re
import sys
import tempfile

__all__ = [
    "BACKENDS",
    "BackendImportError",
    "configured_backend",
    "error_summary",
    "import_keras",
    "missing_backend",
    "prepare_environment",
    "quiet_backend_logs",
    "use_backend",
    "use_compilation_cache",
]

#: ``--backend`` choices: the module each needs and how to install it.
BACKENDS = {
    "tensorflow": ("tensorflow", 'pip install "keras-mgu[tensorflow]"'),
    "jax": ("jax", 'pip install "keras-mgu[jax]"'),
    "torch": ("torch", 'pip install "keras-mgu[torch]"'),
}
#: Environment variables that silence the backends' start-up lines (TensorFlow's C++
#: logging, oneDNN notice, gRPC) and their values.
QUIET_ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR"}
#: Python loggers of the backends that report, e.g., a GPU they cannot use.
QUIET_LOGGERS = ("jax._src.xla_bridge", "tensorflow")
#: Environment set before PyTorch loads, unless the user set it. ``PASSIVE``: OpenMP
#: threads sleep while they wait for work instead of spinning, which keeps a small
#: recurrent step from fighting other busy processes for the cores (see
#: ``benchmarks/omp_wait_policy.py``).
TORCH_ENVIRONMENT = {"OMP_WAIT_POLICY": "PASSIVE"}
#: The most disk JAX's compiled programs may take in the command line's cache (bytes); the
#: least recently used go first. A quick-start run writes about 1.5 MB.
JAX_CACHE_BYTES = 256 * 2**20
#: Longest error text kept in a :class:`BackendImportError` message.
_MAX_REASON = 300


class BackendImportError(ImportError):
    """An installed backend (or Keras) that fails to import; ``str()`` is one line.

    ``output`` is what the import wrote to file descriptor 2 when it was
    captured (:func:`import_keras` with ``quiet=True``), else ``""``; the
    original exception is ``__cause__``.
    """

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


def configured_backend() -> str:
    """The backend Keras loads when none is asked for, found without importing Keras.

    ``$KERAS_BACKEND``, else the ``"backend"`` of ``keras.json`` in
    ``$KERAS_HOME`` (default ``~/.keras``), else Keras's default, ``tensorflow``.
    """
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json")) as f:
            backend = json.load(f).get("backend")
    except (OSError, ValueError, AttributeError):
        backend = None
    return backend if isinstance(backend, str) and backend else "tensorflow"


def missing_backend(backend: str) -> str | None:
    """``None`` when ``backend`` is installed, else a one-line message saying what to install."""
    if backend not in BACKENDS:
        return f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}"
    module, install = BACKENDS[backend]
    if importlib.util.find_spec(module) is None:
        return f"the {backend} backend is not installed; install it with: {install}"
    return None


def use_backend(backend: str) -> bool:
    """Make Keras load ``backend`` if it is not loaded yet; whether that was still possible."""
    if "keras" in sys.modules:
        return False
    os.environ["KERAS_BACKEND"] = backend
    return True


def prepare_environment(backend: str) -> None:
    """Set what ``backend`` reads when it loads (call before it is imported).

    For ``torch``: :data:`TORCH_ENVIRONMENT` (``OMP_WAIT_POLICY=PASSIVE``).
    Variables the user set are kept; other backends get nothing.
    """
    if backend == "torch":
        for name, value in TORCH_ENVIRONMENT.items():
            os.environ.setdefault(name, value)


def use_compilation_cache() -> str | None:
    """Where Keras runs on JAX, keep JAX's compiled programs on disk; the folder, or None.

    Every compiled program (a run's training step, its scoring simulations)
    is kept in ``jax`` inside the native libraries' folder
    (:func:`~keras_mgu.native.build.cache_dir`, ``$KERAS_MGU_CACHE_DIR``), at
    most :data:`JAX_CACHE_BYTES`. Runs of one structure compile the same
    programs (their weights are arguments), so a later run, in this process
    or the next, loads them instead of compiling them again: the same
    executable, the same numbers. A cache folder the user gave JAX
    (``JAX_COMPILATION_CACHE_DIR``, or ``jax.config``) is left as it is.
    """
    import keras

    if keras.backend.backend() != "jax" or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    import jax

    from keras_mgu.native.build import cache_dir

    if jax.config.jax_compilation_cache_dir:
        return None
    folder = str(cache_dir() / "jax")
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_compilation_cache_max_size", JAX_CACHE_BYTES)
    return folder


def quiet_backend_logs() -> None:
    """Silence the backends' start-up logging (call before they are imported).

    Variables the user set are kept. Errors are still shown.
    """
    for name, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    if importlib.util.find_spec("absl") is not None:  # TensorFlow's Python logging
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.ERROR)


def import_keras(backend: str | None = None, *, quiet: bool = True) -> None:
    """Import ``backend``'s module, then Keras; :class:`BackendImportError` if either fails.

    ``backend`` is one of :data:`BACKENDS` (others, and ``None``, import Keras
    only). With ``quiet``, what the imports write to file descriptor 2 is kept
    aside: dropped when they succeed, kept in the error's ``output`` when
    they fail. Nothing happens when Keras is already loaded.
    """
    if "keras" in sys.modules:
        return
    modules = ([BACKENDS[backend][0]] if backend in BACKENDS else []) + ["keras"]
    if not quiet:
        _import_modules(modules, backend)
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            _import_modules(modules, backend)
        except BackendImportError as err:
            _restore_stderr(saved)
            sink.seek(0)
            err.output = sink.read().decode(errors="replace")
            raise
        except BaseException:
            _restore_stderr(saved)
            raise
        _restore_stderr(saved)


def _import_modules(modules: list[str], backend: str | None) -> None:
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as err:
            raise BackendImportError(_import_failure(module, backend, err)) from err


def _import_failure(module: str, backend: str | None, err: Exception) -> str:
    """The one-line message for ``module`` failing to import with ``err``."""
    reason = error_summary(err)
    if backend in BACKENDS:
        fix = BACKENDS[backend][1].replace("pip install", "pip install --force-reinstall", 1)
    else:
        fix = "pip install --force-reinstall keras"
    if module != "keras":
        return (
            f"the {backend} backend is installed but failed to import ({reason}); "
            f"reinstall it with: {fix}"
        )
    on = f" with the {backend} backend" if backend else ""
    return f"Keras failed to import{on} ({reason}); reinstall it with: {fix}"


def error_summary(err: BaseException) -> str:
    """``Type: message`` of ``err`` on one line.

    A message of several lines that quotes an inner error (TensorFlow's
    native-runtime failure quotes a traceback) gives that error's last
    ``Type: message`` line; otherwise its first line. Cut to a few hundred
    characters.
    """
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    quoted = [line for line in lines if _QUOTED_ERROR.match(line)]
    if quoted:
        text = quoted[-1]
    else:
        text = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."


#: A line such as ``ImportError: libcudart.so.12: cannot open ...`` inside a message.
_QUOTED_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): ")


def _restore_stderr(saved: int) -> None:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
