"""Each Keras backend's recurrent code, in one registry.

A row per backend names its modules: ``"mgu_kernel"``, the fused MGU sequence
kernel (:mod:`keras_mgu.kernels`, which calls the native loops of
:mod:`keras_mgu.native` where they serve), and ``"engine"``, the generic fused
engine for any :class:`keras_mgu.FusedCell` (:mod:`keras_mgu.fused.engines`).
A new backend is one row here plus those two modules (and, for the native
loops, a front-end in :mod:`keras_mgu.native`).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import keras

#: backend -> part -> module.
BACKENDS: dict[str, dict[str, str]] = {
    "tensorflow": {
        "mgu_kernel": "keras_mgu.kernels.tensorflow",
        "engine": "keras_mgu.fused.engines.tensorflow",
    },
    "jax": {"mgu_kernel": "keras_mgu.kernels.jax", "engine": "keras_mgu.fused.engines.jax"},
    "torch": {"mgu_kernel": "keras_mgu.kernels.torch", "engine": "keras_mgu.fused.engines.torch"},
}

_WHAT = {"mgu_kernel": "fused MGU kernel", "engine": "fused engine"}


def has(part: str, backend: str | None = None) -> bool:
    """Whether ``backend`` (default: the active Keras backend) has a module for ``part``."""
    return part in BACKENDS.get(backend or keras.backend.backend(), {})


def backend_module(part: str, backend: str | None = None) -> ModuleType:
    """The module of ``part`` (``"mgu_kernel"`` or ``"engine"``) for ``backend``.

    Raises ``NotImplementedError`` (the layers' "cannot serve" signal) for a
    backend without one.
    """
    backend = backend or keras.backend.backend()
    if not has(part, backend):
        raise NotImplementedError(
            f"keras-mgu has no {_WHAT.get(part, part)} for the {backend!r} backend; "
            f"available: {sorted(BACKENDS)}. Use implementation='cell'."
        )
    return importlib.import_module(BACKENDS[backend][part])
