"""The packages of each backend's ONNX route and the extra that installs them.

The standard library alone, so the command line can check them before Keras
or a backend is imported (:func:`missing_onnx_packages`).
"""

from __future__ import annotations

import importlib.util
import sys

__all__ = ["ONNX_EXTRAS", "ONNX_PACKAGES", "install_command", "missing_onnx_packages"]

#: The Python packages Keras's ONNX route needs, per backend.
ONNX_PACKAGES = {
    "tensorflow": ("onnx", "tf2onnx"),
    "jax": ("onnx", "jax2onnx"),
    "torch": ("onnx", "onnxscript"),
}
#: The extra that installs a backend's ONNX route (with onnxruntime), per backend.
ONNX_EXTRAS = {backend: f"export-{backend}" for backend in ONNX_PACKAGES}


def missing_onnx_packages(backend: str) -> list[str]:
    """The packages of ``backend``'s ONNX route that are not installed (found, not imported)."""
    return [
        name for name in ONNX_PACKAGES.get(backend, ()) if importlib.util.find_spec(name) is None
    ]


def install_command(backend: str, missing: list[str]) -> tuple[str, str]:
    """``('pip install "keras-mgu[export-<backend>]"', note)``: what installs ``missing``.

    ``note`` is ``""``, or why the extra cannot help on this Python (jax2onnx
    needs Python 3.11 or newer), with a leading space.
    """
    extra = ONNX_EXTRAS.get(backend, "export")
    note = ""
    if "jax2onnx" in missing and sys.version_info < (3, 11):
        note = " (jax2onnx needs Python 3.11 or newer)"
    return f'pip install "keras-mgu[{extra}]"', note
