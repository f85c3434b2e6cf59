"""The Keras backend of a command: installed or not, chosen before Keras loads, quiet.

Nothing here imports Keras or a backend, but :func:`import_keras_quietly`:
the checks use ``importlib.util.find_spec``, and the settings are
environment variables and loggers the backends read when they are first
imported. TensorFlow's native libraries write their start-up lines (oneDNN,
CUDA drivers) straight to file descriptor 2 before its log level applies, so
:func:`import_keras_quietly` imports Keras (and with it the backend) with
that descriptor sent to a temporary file, shown only if the import fails.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import sys
import tempfile

__all__ = [
    "BACKENDS",
    "configured_backend",
    "import_keras_quietly",
    "missing_backend",
    "quiet_backend_logs",
    "use_backend",
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


def import_keras_quietly() -> None:
    """Import Keras and its backend without their start-up lines on stderr.

    What the import writes to file descriptor 2 is kept aside and written to
    ``sys.stderr`` only when the import fails (before the exception goes on).
    """
    if "keras" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            importlib.import_module("keras")
        except BaseException:
            _restore_stderr(saved)
            sink.seek(0)
            sys.stderr.write(sink.read().decode(errors="replace"))
            raise
        _restore_stderr(saved)


def _restore_stderr(saved: int) -> None:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
