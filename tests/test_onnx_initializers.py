"""ONNX files are written without initializers that no node reads.

onnxruntime prints one warning line per such initializer as it opens a file
("Removing initializer ... It is not used by any node"); jax2onnx leaves
some in the bodies of its loops. :func:`keras_mgu.export.export` removes
them (:func:`keras_mgu.export.prune_unused_initializers`).
"""

from __future__ import annotations

import importlib.util

import keras
import numpy as np
import pytest

from keras_mgu import MGU
from keras_mgu import export as mgu_export
from tests.helpers import BACKEND, BACKEND_INDEPENDENT

HAS_ONNX = all(importlib.util.find_spec(name) for name in ("onnx", "onnxruntime"))
HAS_ONNX_EXTRA = HAS_ONNX and all(
    importlib.util.find_spec(name) for name in mgu_export.ONNX_PACKAGES[BACKEND]
)
needs_onnx = pytest.mark.skipif(not HAS_ONNX, reason="onnx and onnxruntime are not installed")


def unused_initializers(graph) -> list[str]:
    """The initializers of ``graph`` and its subgraphs that no node reads (nor an output)."""

    def read(g) -> set[str]:
        names = {value.name for value in g.output}
        for node in g.node:
            names.update(node.input)
            for sub in subgraphs(node):
                names |= read(sub)
        return names

    def subgraphs(node) -> list:
        return [a.g for a in node.attribute if a.HasField("g")] + [
            g for a in node.attribute for g in a.graphs
        ]

    found = [t.name for t in graph.initializer if t.name not in read(graph)]
    for node in graph.node:
        for sub in subgraphs(node):
            found += unused_initializers(sub)
    return found


def run(path: str, feeds: dict) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def loop_model():
    """``y = x + 3 w``: a ``Loop`` whose body reads ``w`` from the main graph.

    Unused: ``spare`` in the main graph and ``body_spare`` in the body.
    """
    from onnx import TensorProto, helper, numpy_helper

    f32 = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])  # noqa: E731
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Add", ["v", "w"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            f32("v"),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), f32("v_out")],
        [numpy_helper.from_array(np.ones(5, "float32"), "body_spare")],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "go", "x"], ["y"], body=body)],
        "main",
        [f32("x")],
        [f32("y")],
        [
            numpy_helper.from_array(np.array(3, "int64"), "trips"),
            numpy_helper.from_array(np.array(True), "go"),
            numpy_helper.from_array(np.array([0.5, -1.0], "float32"), "w"),
            numpy_helper.from_array(np.zeros(7, "float32"), "spare"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@BACKEND_INDEPENDENT
@needs_onnx
def test_pruning_keeps_what_nodes_and_loop_bodies_read(tmp_path, capfd):
    import onnx

    path = str(tmp_path / "loop.onnx")
    onnx.save(loop_model(), path)
    assert sorted(unused_initializers(onnx.load(path).graph)) == ["body_spare", "spare"]
    assert mgu_export.prune_unused_initializers(path) == 2
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    assert unused_initializers(proto.graph) == []
    assert [t.name for t in proto.graph.initializer] == ["trips", "go", "w"]  # w: the body's
    capfd.readouterr()
    x = np.array([1.0, 2.0], "float32")
    (y,) = run(path, {"x": x})
    np.testing.assert_allclose(y, x + 3 * np.array([0.5, -1.0]), rtol=1e-6)
    assert "Removing initializer" not in capfd.readouterr().err
    assert mgu_export.prune_unused_initializers(path) == 0  # nothing left to remove


@pytest.mark.skipif(not HAS_ONNX_EXTRA, reason="the backend's `export` extra is not installed")
def test_exported_mgu_file_has_no_unused_initializer(tmp_path):
    import onnx

    keras.utils.set_random_seed(3)
    inputs = keras.Input((None, 2))
    model = keras.Model(inputs, keras.layers.Dense(1)(MGU(4, return_sequences=True)(inputs)))
    x = np.random.default_rng(0).standard_normal((2, 9, 2)).astype("float32")
    want = keras.ops.convert_to_numpy(model(x))  # Keras exports only models that were called
    path = str(tmp_path / "mgu.onnx")
    mgu_export.export(model, path, format="onnx", verbose=False)
    assert unused_initializers(onnx.load(path).graph) == []
    (y,) = run(path, {onnx.load(path).graph.input[0].name: x})
    np.testing.assert_allclose(y, want, atol=1e-5)
