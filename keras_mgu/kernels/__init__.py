"""Fused MGU sequence kernels, one module per Keras backend.

Every backend module exposes the same function::

    mgu_sequence(inputs, initial_state, kernel, recurrent_kernel, bias, mask,
                 activation, recurrent_activation, go_backwards)
        -> (outputs, final_state)

with ``inputs`` ``(B, T, D)``, ``initial_state`` ``(B, H)``, ``kernel``
``(D, 2H)``, ``recurrent_kernel`` ``(H, 2H)``, ``bias`` ``(2H,)`` or None,
``mask`` ``(B, T)`` boolean or None, activations given by name, and returns
``outputs`` ``(B, T, H)`` (in processing order, reversed in time when
``go_backwards``) and ``final_state`` ``(B, H)``. A masked step carries the
state forward and emits it, as the Keras cell loop does. The module
:mod:`keras_mgu.kernels.reference` is the NumPy reference all of them are
tested against.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import keras

#: Activations the fused kernels implement (forward and hand-written backward).
FUSED_ACTIVATIONS = ("tanh", "sigmoid")

_BACKEND_MODULES = {
    "tensorflow": "keras_mgu.kernels.tensorflow",
    "jax": "keras_mgu.kernels.jax",
    "torch": "keras_mgu.kernels.torch",
}


def backend_module(backend: str | None = None) -> ModuleType:
    """The kernel module of ``backend`` (default: the active Keras backend)."""
    backend = backend or keras.backend.backend()
    if backend not in _BACKEND_MODULES:
        raise NotImplementedError(
            f"keras-mgu has no fused MGU kernel for the {backend!r} backend; "
            f"available: {sorted(_BACKEND_MODULES)}. Use implementation='cell'."
        )
    return importlib.import_module(_BACKEND_MODULES[backend])


def mgu_sequence(*args: Any, **kwargs: Any) -> tuple:
    """Run the active backend's fused kernel; see the module docstring."""
    return backend_module().mgu_sequence(*args, **kwargs)
