"""Native start-up lines kept off stderr: :func:`stderr_aside` and :func:`import_quietly`.

TensorFlow's native libraries (which tf2onnx, and Keras's serialisation on
any backend, import) write their start-up lines (oneDNN, CUDA drivers, CPU
features) straight to file descriptor 2, before any log level applies. Here
that descriptor is sent to a temporary file for the duration, and what was
written there is shown only when the block fails. Nothing here imports Keras
or a backend.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator

__all__ = ["CapturedStderr", "import_quietly", "set_random_seed", "stderr_aside"]


class CapturedStderr:
    """What a failed :func:`stderr_aside` block wrote to file descriptor 2 (``text``)."""

    def __init__(self) -> None:
        self.text = ""


@contextlib.contextmanager
def stderr_aside(*, replay: bool = True) -> Iterator[CapturedStderr]:
    """Run the block with file descriptor 2 sent to a temporary file.

    What the block writes to descriptor 2 (native libraries, and Python's
    ``sys.stderr``, which writes there) is dropped when the block succeeds.
    When it raises, the text is kept in the yielded :class:`CapturedStderr`
    and, with ``replay``, written to ``sys.stderr`` before the exception goes
    on. Blocks may nest.
    """
    captured = CapturedStderr()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        except BaseException:
            _restore(saved)
            sink.seek(0)
            captured.text = sink.read().decode(errors="replace")
            if replay:
                sys.stderr.write(captured.text)
                sys.stderr.flush()
            raise
        _restore(saved)


def import_quietly(*names: str) -> list[str]:
    """Import the installed modules of ``names`` inside :func:`stderr_aside`.

    Modules not installed are skipped, and so is one whose import fails
    (what it wrote is dropped with the error): whoever imports it next
    reports the failure as it would have. Returns the names that are loaded.
    """
    loaded = []
    for name in names:
        if name not in sys.modules:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):  # an import hook that refuses it: not there
                spec = None
            if spec is None:
                continue
            try:
                with stderr_aside(replay=False):
                    importlib.import_module(name)
            except Exception:  # noqa: BLE001 - left for the module's next importer to report
                continue
        loaded.append(name)
    return loaded


def set_random_seed(seed: int) -> None:
    """``keras.utils.set_random_seed(seed)``, TensorFlow's start-up lines kept off stderr.

    Keras seeds TensorFlow too wherever it is installed, whatever the
    backend, and so imports it: on JAX and PyTorch its native libraries
    would print their start-up lines in the middle of a run's output.
    """
    import keras

    import_quietly("tensorflow")
    keras.utils.set_random_seed(seed)


def _restore(saved: int) -> None:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
