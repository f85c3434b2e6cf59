"""Exporting models that contain MGU layers: checks for routes that cannot work.

``model.export(path)`` (TF SavedModel), ``model.export(path, format="onnx")``,
``tf.lite.TFLiteConverter.from_keras_model`` and ``torch.export`` work on
models with MGU layers on the fused path: while a graph is traced for export
the fused kernels present a plain time loop that converters can read (see
``docs/deployment.md``). :func:`export` is ``model.export`` preceded by
:func:`check_exportable`, which refuses, with an error that says what to do,
the routes whose file would not behave like the Keras model.
"""

from __future__ import annotations

import warnings
from typing import Any

import keras

from keras_mgu import native
from keras_mgu._onnx_extras import ONNX_EXTRAS as ONNX_EXTRAS  # the tables, named here too
from keras_mgu._onnx_extras import ONNX_PACKAGES as ONNX_PACKAGES
from keras_mgu._onnx_extras import install_command, missing_onnx_packages
from keras_mgu.layer import MGU

#: NumPy 2's warning for ``np.object``, which Keras's ONNX route probes (see :func:`export`).
_NP_OBJECT_WARNING = r"In the future `np\.object` will be defined"
#: Formats whose file has no variables to update between calls.
_FROZEN_STATE_FORMATS = ("onnx", "litert")


def mgu_layers(model: keras.Model) -> list[MGU]:
    """Every MGU layer of ``model``, nested models and wrappers included."""
    found = []
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if isinstance(layer, MGU):
            found.append(layer)
    return found


def check_exportable(model: keras.Model, format: str = "tf_saved_model") -> None:
    """Raise if exporting ``model`` to ``format`` cannot give a faithful file.

    Args:
        model: A built Keras model.
        format: A ``model.export`` format (``"tf_saved_model"``, ``"onnx"``, ...).

    Raises:
        ValueError: a stateful MGU and a format with no variables (ONNX,
            LiteRT): the exported graph would freeze the state at its value
            at export time instead of carrying it from call to call.
        ImportError: the packages of the ONNX route are missing (the
            message names the backend's extra, e.g. ``export-jax``).
    """
    stateful = [layer.name for layer in mgu_layers(model) if layer.stateful]
    if stateful and format in _FROZEN_STATE_FORMATS:
        raise ValueError(
            f"Cannot export stateful MGU layers {stateful} to format={format!r}: the file would "
            "freeze the state at its value at export time. Rebuild the model with "
            "stateful=False, load the weights, and pass the state in as `initial_state` and out "
            "with `return_state=True`; or export to format='tf_saved_model', which keeps the "
            "state variable."
        )
    if format == "onnx":
        backend = keras.backend.backend()
        missing = missing_onnx_packages(backend)
        if missing:
            command, note = install_command(backend, missing)
            raise ImportError(
                f"ONNX export on the {backend} backend needs {missing}; install them with "
                f"`{command}`{note}."
            )


def export(model: keras.Model, filepath: Any, format: str = "tf_saved_model", **kwargs: Any):
    """``model.export(filepath, format, **kwargs)`` after :func:`check_exportable`.

    The model is traced with the native loops turned off
    (:func:`keras_mgu.native.turned_off`), so the file holds the backend's own
    loop even where the shapes are fixed.
    """
    check_exportable(model, format)
    with native.turned_off(), warnings.catch_warnings():  # a native call cannot go into the file
        # Keras's tf2onnx route asks ``hasattr(np, "object")``, which NumPy 2 answers with
        # a FutureWarning about the attribute's future meaning; nothing here uses it.
        warnings.filterwarnings("ignore", message=_NP_OBJECT_WARNING, category=FutureWarning)
        return model.export(filepath, format=format, **kwargs)
