"""keras-mgu: Minimal Gated Unit recurrent layers for Keras 3.

``MGUCell`` is the per-step cell, ``MGU`` the sequence layer with a fused
fast path per backend (TensorFlow, JAX, PyTorch), ``Ensemble`` ``K``
independent copies of a layer trained at once. The submodules
``callbacks``, ``derivatives``, ``datasets``, ``sysid``, ``plotting`` and
``native`` hold the training callbacks, derivative-target training,
system-identification data, the identification recipe, training plots and the
MGU's time loop in compiled C++.

The names are loaded on first use (PEP 562), so ``import keras_mgu`` (and the
``keras-mgu`` command line) does not import Keras or a backend. The classes
that ``keras.saving.load_model`` looks up by their registered name
(``keras_mgu>MGU``, ...) are registered as soon as Keras is imported: at once
when it already is, else right after its import.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

from keras_mgu._version import __version__

#: Public names defined in submodules: name -> module.
_ATTRIBUTES = {
    "MGU": "keras_mgu.layer",
    "DerivativeTargetModel": "keras_mgu.derivatives",
    "Ensemble": "keras_mgu.ensemble",
    "FusedCell": "keras_mgu.fused",
    "FusedRNN": "keras_mgu.fused",
    "MGUCell": "keras_mgu.cell",
    "input_gradient": "keras_mgu.derivatives",
}
_SUBMODULES = ("callbacks", "datasets", "derivatives", "native", "plotting", "sysid")
#: Modules that register Keras-serializable classes (imported once Keras is).
_SERIALIZABLE_MODULES = (
    "keras_mgu.cell",
    "keras_mgu.layer",
    "keras_mgu.fused",
    "keras_mgu.ensemble",
    "keras_mgu.derivatives",
    "keras_mgu.callbacks",
    "keras_mgu.datasets.preprocessing",
    "keras_mgu.sysid",
)

__all__ = [
    "MGU",
    "DerivativeTargetModel",
    "Ensemble",
    "FusedCell",
    "FusedRNN",
    "MGUCell",
    "__version__",
    "callbacks",
    "datasets",
    "derivatives",
    "input_gradient",
    "native",
    "plotting",
    "sysid",
]


def __getattr__(name: str) -> Any:
    """Import a submodule or a public name on first access (PEP 562)."""
    if name in _SUBMODULES:
        value = importlib.import_module(f"keras_mgu.{name}")
    elif name in _ATTRIBUTES:
        value = getattr(importlib.import_module(_ATTRIBUTES[name]), name)
    else:
        raise AttributeError(f"module 'keras_mgu' has no attribute {name!r}")
    globals()[name] = value
    if "keras" in sys.modules:
        _register_serializables()
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _importing_keras_mgu() -> bool:
    """Whether a ``keras_mgu`` submodule is being imported (it may have imported Keras)."""
    return any(
        getattr(getattr(module, "__spec__", None), "_initializing", False)
        for name, module in list(sys.modules.items())
        if name.startswith("keras_mgu.")
    )


def _register_serializables() -> None:
    """Import the modules that register classes, unless one of ours is mid-import.

    When Keras was imported by a ``keras_mgu`` submodule, importing the others
    now could meet that half-initialised module; ``__getattr__`` registers
    after it instead.
    """
    if _importing_keras_mgu():
        return
    for module in _SERIALIZABLE_MODULES:
        importlib.import_module(module)


class _AfterKerasImport(importlib.abc.MetaPathFinder):
    """Registers keras_mgu's serializable classes right after ``keras`` is imported.

    It finds ``keras`` with the other finders and wraps its loader; it leaves
    ``sys.meta_path`` once Keras has been imported.
    """

    def __init__(self) -> None:
        self.finding = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras" or self.finding:
            return None
        self.finding = True  # importlib.util.find_spec below asks this finder too
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.finding = False
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisteringLoader(spec.loader, self)
        return spec


class _RegisteringLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, finder: _AfterKerasImport) -> None:
        self.loader, self.finder = loader, finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        _register_serializables()

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self.loader, name)


if "keras" in sys.modules:
    _register_serializables()
else:
    sys.meta_path.insert(0, _AfterKerasImport())
