"""Exporting models that contain MGU layers: checks for routes that cannot work.

``model.export(path)`` (TF SavedModel), ``model.export(path, format="onnx")``,
``tf.lite.TFLiteConverter.from_keras_model`` and ``torch.export`` work on
models with MGU layers on the fused path: while a graph is traced for export
the fused kernels present a plain time loop that converters can read (see
``docs/deployment.md``). :func:`export` is ``model.export`` preceded by
:func:`check_exportable`, which refuses, with an error that says what to do,
the routes whose file would not behave like the Keras model. An ONNX file
is written without the initializers no node reads
(:func:`prune_unused_initializers`), which onnxruntime would report one line
each as it opens the file.
"""

from __future__ import annotations

import os
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
        exported = model.export(filepath, format=format, **kwargs)
    if format == "onnx":
        prune_unused_initializers(filepath)
    return exported


def prune_unused_initializers(filepath: Any) -> int:
    """Remove the initializers that no node reads from the ONNX file ``filepath``, in place.

    Converters leave constants behind (jax2onnx in the bodies of its loops),
    and onnxruntime prints a warning for each as it opens the file
    ("Removing initializer ... It is not used by any node"). An initializer
    is kept when a node of its graph, or of a graph nested in one of its
    nodes (a ``Loop`` or ``If`` body), reads it, or when it is an input or
    output of its graph. Tensors stored beside the file stay where they are.
    Returns the number removed (the file is rewritten only when it is not 0).
    """
    import onnx

    path = os.fspath(filepath)
    proto = onnx.load(path, load_external_data=False)
    removed = _prune_initializers(proto.graph)
    if removed:
        onnx.save(proto, path)
    return removed


def _prune_initializers(graph: Any) -> int:
    """Drop ``graph``'s and its subgraphs' initializers that nothing reads; how many."""
    read = _read_names(graph) | {value.name for value in graph.input}
    kept = [tensor for tensor in graph.initializer if tensor.name in read]
    removed = len(graph.initializer) - len(kept)
    if removed:
        del graph.initializer[:]
        graph.initializer.extend(kept)
    for node in graph.node:
        for sub in onnx_subgraphs(node):
            removed += _prune_initializers(sub)
    return removed


def _read_names(graph: Any) -> set[str]:
    """The values the nodes of ``graph`` and of its subgraphs read, and its outputs."""
    names = {value.name for value in graph.output}
    for node in graph.node:
        names.update(node.input)
        for sub in onnx_subgraphs(node):
            names |= _read_names(sub)
    return names


def onnx_subgraphs(node: Any) -> list:
    """The graphs in ``node``'s attributes (the bodies of ``Loop``, ``If``, ``Scan``)."""
    graphs = []
    for attribute in node.attribute:
        if attribute.HasField("g"):
            graphs.append(attribute.g)
        graphs.extend(attribute.graphs)
    return graphs
