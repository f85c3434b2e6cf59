"""Models with MGU layers (fused path) exported and run outside Keras give Keras's predictions.

Every test builds a small model, exports it through one route, runs the file in
that route's runtime (TensorFlow's SavedModel loader, onnxruntime, the TFLite
interpreter, ``torch.export``) on a batch of several sequences and compares
with ``model.predict`` on the same batch. The ONNX tests skip only when the
``export`` extra is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_mgu import MGU
from keras_mgu import export as mgu_export
from keras_mgu.kernels import reference
from tests.helpers import (
    BACKEND,
    BACKEND_INDEPENDENT,
    NETWORK_CLASSES,
    other_backend,
    requires,
    to_numpy,
)

T, D, H = 12, 3, 6
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "train_and_save.py")

HAS_ONNX_EXTRA = all(
    importlib.util.find_spec(name) is not None
    for name in ("onnxruntime", *mgu_export.ONNX_PACKAGES[BACKEND])
)
needs_onnx = pytest.mark.skipif(not HAS_ONNX_EXTRA, reason="the `export` extra is not installed")
tensorflow_only = pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow backend only")
torch_only = pytest.mark.skipif(BACKEND != "torch", reason="PyTorch backend only")
#: Keras exports a TF SavedModel from the TensorFlow and JAX backends, with TensorFlow installed.
needs_saved_model = pytest.mark.skipif(
    BACKEND == "torch", reason="Keras exports TF SavedModels from TensorFlow and JAX only"
)
needs_tensorflow = requires("tensorflow", subject="a TF SavedModel")
#: What the backend's own exporter cannot convert is converted on JAX (``sysid.export_simulator``).
converts_on_jax = requires("jax", "jax2onnx", subject="the ONNX conversion on JAX")


def batch(steps: int = T, seed: int = 0) -> np.ndarray:
    """Four sequences; the second is zero-padded after 8 steps (masked where a Masking layer is)."""
    x = np.random.default_rng(seed).standard_normal((4, steps, D)).astype("float32")
    x[1, 8:] = 0.0
    return x


def build(kind: str, batch_size: int | None = None) -> keras.Model:
    """A small model of one of the exported shapes (weights random, seed fixed)."""
    keras.utils.set_random_seed(3)
    inputs = keras.Input((None if kind == "varlen" else T, D), batch_size=batch_size)
    if kind in ("last", "varlen"):
        outputs = keras.layers.Dense(1)(MGU(H)(inputs))
    elif kind == "masked":
        masked = keras.layers.Masking(0.0)(inputs)
        outputs = keras.layers.Dense(1)(MGU(H, return_sequences=True)(masked))
    elif kind == "state":
        seq, state = MGU(H, return_sequences=True, return_state=True)(inputs)
        outputs = [keras.layers.Dense(1)(seq), state]
    elif kind == "bidirectional":
        masked = keras.layers.Masking(0.0)(inputs)
        bi = keras.layers.Bidirectional(MGU(H, return_sequences=True))(masked)
        outputs = keras.layers.Dense(1)(bi)
    else:
        raise ValueError(kind)
    model = keras.Model(inputs, outputs)
    assert all(layer.uses_fused_path for layer in mgu_export.mgu_layers(model))
    model(batch())  # Keras exports only called models (predict does not count on JAX)
    return model


def keras_outputs(model: keras.Model, x: np.ndarray) -> list[np.ndarray]:
    return [to_numpy(o) for o in keras.tree.flatten(model.predict(x, verbose=0))]


def assert_same(got, want) -> None:
    got = [np.asarray(g) for g in got]
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5)


def test_keras_predictions_match_the_reference():
    """The predictions the exports are compared with are themselves right."""
    model = build("last")
    x = batch()
    mgu, dense = model.layers[1], model.layers[2]
    _, state = reference.mgu_sequence(x, *[to_numpy(w) for w in mgu.weights])
    kernel, bias = (to_numpy(w) for w in dense.weights)
    assert_same(keras_outputs(model, x), [state @ kernel + bias])


# ----------------------------------------------------------------- SavedModel
@needs_saved_model
@needs_tensorflow
@pytest.mark.parametrize("kind", ["masked", "state", "varlen"])
def test_saved_model_loads_and_predicts(tmp_path, kind):
    import tensorflow as tf

    model = build(kind)
    model.export(str(tmp_path / "saved"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    for x in [batch()] + ([batch(steps=17, seed=1)] if kind == "varlen" else []):
        got = [t.numpy() for t in keras.tree.flatten(loaded.serve(x))]
        assert_same(got, keras_outputs(model, x))


# ----------------------------------------------------------------------- ONNX
def run_onnx(path: str, x: np.ndarray) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})


@needs_onnx
@pytest.mark.parametrize("kind", ["masked", "state", "varlen", "bidirectional"])
def test_onnx_runs_in_onnxruntime(tmp_path, kind):
    model = build(kind)
    path = str(tmp_path / "model.onnx")
    mgu_export.export(model, path, format="onnx", verbose=False)
    for x in [batch()] + ([batch(steps=17, seed=1)] if kind == "varlen" else []):
        assert_same(run_onnx(path, x), keras_outputs(model, x))


@needs_onnx
def test_onnx_runs_a_model_trained_and_saved_on_another_backend(tmp_path):
    """Train and save on another backend (subprocess), load here, export, run."""
    other = other_backend("tensorflow", "jax")
    if other is None:
        pytest.skip("needs a second Keras backend (tensorflow or jax) installed to train on")
    env = dict(os.environ, KERAS_BACKEND=other, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    model = keras.saving.load_model(str(tmp_path / "model.keras"))
    x = np.load(tmp_path / "x.npy")
    model(x)
    assert_same(keras_outputs(model, x), [np.load(tmp_path / "predictions.npy")])
    path = str(tmp_path / "model.onnx")
    mgu_export.export(model, path, format="onnx", verbose=False)
    assert_same(run_onnx(path, x), keras_outputs(model, x))


# --------------------------------------------------------------------- TFLite
@tensorflow_only
@pytest.mark.parametrize("kind", ["masked", "state", "bidirectional"])
def test_tflite_runs_in_the_interpreter(kind):
    import tensorflow as tf

    x = batch()
    model = build(kind, batch_size=len(x))
    flatbuffer = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    got = [interpreter.get_tensor(o["index"]) for o in interpreter.get_output_details()]
    want = keras_outputs(model, x)
    # The interpreter does not keep Keras's output order; the shapes tell them apart here.
    assert_same(sorted(got, key=np.shape), sorted(want, key=np.shape))


# --------------------------------------------------------------- torch.export
@torch_only
@pytest.mark.parametrize("kind", ["masked", "state", "bidirectional"])
def test_torch_export_runs(tmp_path, kind):
    import torch

    model = build(kind)
    x = batch()
    program = torch.export.export(model, (torch.tensor(x),))
    torch.export.save(program, str(tmp_path / "model.pt2"))
    loaded = torch.export.load(str(tmp_path / "model.pt2")).module()
    got = [t.detach().numpy() for t in keras.tree.flatten(loaded(torch.tensor(x)))]
    assert_same(got, keras_outputs(model, x))


# ----------------------------------------------------------------- bad routes
@pytest.mark.parametrize("format", ["onnx", "litert"])
def test_stateful_model_to_a_stateless_format_is_refused(format, tmp_path):
    inputs = keras.Input((T, D), batch_size=2)
    model = keras.Model(inputs, MGU(H, stateful=True)(inputs))
    with pytest.raises(ValueError, match="stateful=False"):
        mgu_export.export(model, str(tmp_path / "model"), format=format)


def test_check_passes_a_stateless_model():
    mgu_export.check_exportable(build("last"), "tf_saved_model")


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("backend", sorted(mgu_export.ONNX_PACKAGES))
@pytest.mark.parametrize("python", [(3, 10), (3, 12)])
def test_missing_onnx_converter_names_the_backends_extra(backend, python, monkeypatch):
    """No converter for the backend: the error names its own extra, not the one of all three."""
    model = keras.Sequential([keras.Input((D,)), keras.layers.Dense(1)])
    converter = mgu_export.ONNX_PACKAGES[backend][1]
    real = importlib.util.find_spec
    absent = lambda name, *args: None if name == converter else real(name, *args)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", absent)
    monkeypatch.setattr(mgu_export.keras.backend, "backend", lambda: backend)
    monkeypatch.setattr(sys, "version_info", python)
    with pytest.raises(ImportError) as raised:
        mgu_export.check_exportable(model, "onnx")
    message = str(raised.value)
    assert f"on the {backend} backend needs [{converter!r}]" in message
    assert f'`pip install "keras-mgu[export-{backend}]"`' in message
    assert ("Python 3.11" in message) == (backend == "jax" and python < (3, 11))


# ---------------------------------------------------------------------- docs
DOC = os.path.join(ROOT, "docs", "deployment.md")
#: The snippets of docs/deployment.md by position, and the marks that skip them where they do not
#: apply.
DOC_SNIPPETS = {
    "tf_saved_model": (1, [needs_saved_model, needs_tensorflow]),
    "onnx": (2, [needs_onnx]),
    "tflite": (3, [tensorflow_only]),
    "torch.export": (4, [torch_only]),
}


def doc_snippets() -> list[str]:
    text = open(DOC).read()
    return [block.split("\n", 1)[1] for block in text.split("```python")[1:]]


@pytest.mark.parametrize(
    "route", [pytest.param(route, marks=DOC_SNIPPETS[route][1]) for route in sorted(DOC_SNIPPETS)]
)
def test_deployment_doc_snippets_run(route, tmp_path, monkeypatch):
    index = DOC_SNIPPETS[route][0]
    monkeypatch.chdir(tmp_path)
    snippets = [s.split("```", 1)[0] for s in doc_snippets()]
    namespace: dict = {}
    exec(snippets[0] + "\n" + snippets[index], namespace)  # noqa: S102 - the docs' own code
    assert "y" in namespace or "loaded" in namespace


# ------------------------------------------------- identified models: the standalone simulator


def random_arx(rng, n_in: int, n_out: int, na: int, nb: int):
    """A stable random ARX model: poles inside radius 0.9."""
    from keras_mgu.sysid import LinearModel

    a = np.stack([np.poly(0.9 * rng.uniform(-1, 1, na))[1:] for _ in range(n_out)])
    return LinearModel(a, rng.standard_normal((n_out, n_in, nb)), rng.standard_normal(n_out))


@pytest.mark.parametrize("n_in, n_out, na, nb", [(2, 2, 2, 3), (1, 1, 3, 1), (3, 1, 1, 2)])
def test_linear_simulation_layer_matches_the_arx_recursion(n_in, n_out, na, nb):
    """The ARX loop as a Keras layer against LinearModel.simulate (SciPy's lfilter, float64)."""
    from keras_mgu.sysid.files.standalone_layers import LinearSimulation

    rng = np.random.default_rng(na * 10 + nb)
    linear = random_arx(rng, n_in, n_out, na, nb)
    u, y0 = rng.standard_normal((2, 50, n_in)), rng.standard_normal((2, n_out))
    want = np.stack([linear.simulate(u[i], y0[i]) for i in range(2)])
    layer = LinearSimulation(linear.a, linear.b, linear.c)
    got = to_numpy(layer(u.astype("float32"), y0=y0.astype("float32")))
    np.testing.assert_allclose(got, want, atol=1e-4 * np.abs(want).max())
    # Cut in two: the state after the first 20 samples carries the rest on.
    first = LinearSimulation(linear.a, linear.b, linear.c, return_state=True)
    head, *states = first(u[:, :20].astype("float32"), y0=y0.astype("float32"))
    tail = to_numpy(layer(u[:, 20:].astype("float32"), initial_state=states))
    np.testing.assert_allclose(np.concatenate([to_numpy(head), tail], 1), got, atol=1e-5)


@pytest.fixture(scope="module")
def identified():
    """Tiny identifications of this backend: learned state and encoder, two restarts each."""
    from keras_mgu import datasets, sysid

    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    tiny = sysid.RecipeConfig(
        units=(4,), iterations=4, steps_per_epoch=2, validation_checks=2,
        model_classes=NETWORK_CLASSES,
    )  # fmt: skip
    encoder = sysid.RecipeConfig(
        units=(4,), iterations=4, steps_per_epoch=2, validation_checks=2,
        initial_state="encoder", n_initial=5, window=40, batch_size=4,
        model_classes=NETWORK_CLASSES,
    )  # fmt: skip
    found = {
        "learned": sysid.identify(data, tiny, restarts=2),
        "encoder": sysid.identify(data, encoder, restarts=2),
    }
    return data, found


def simulator_feeds(found, u, y, n: int = 5):
    """The exported file's inputs for ``u``, ``y``, and what ``found.simulate`` gives for them."""
    if found.config.initial_state == "learned":
        return {"u": u[None].astype("float32")}, found.simulate(u)
    as32 = lambda a: a[None].astype("float32")  # noqa: E731
    feeds = {"u_initial": as32(u[:n]), "y_initial": as32(y[:n]), "u": as32(u[n:])}
    return feeds, found.simulate(u, y[:n])[n:]


def run_simulator(path: str, feeds: dict, output: str = "y") -> np.ndarray:
    """The simulation of the file's one output, named ``output`` (the tanks' output is ``y``)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    assert sorted(i.name for i in session.get_inputs()) == sorted(feeds)
    assert [o.name for o in session.get_outputs()] == [output]
    return session.run([output], feeds)[0][0]


def assert_same_simulation(path: str, found, u, y) -> None:
    """The file simulates as ``found.simulate``, float32 rounding apart, at two lengths."""
    import onnx

    onnx.checker.check_model(path, full_check=True)  # valid after the output's renaming
    assert found.output_names == ("y",)
    for steps in (len(u), 60):
        feeds, want = simulator_feeds(found, u[:steps], y[:steps])
        got = run_simulator(path, feeds)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-4 * np.abs(want).max())


@needs_onnx
@pytest.mark.parametrize("kind", ["learned", "encoder"])
@pytest.mark.parametrize("members", [(), (2, 2, 0)], ids=["chosen", "averaged"])
def test_identified_model_exports_as_an_onnx_simulator(identified, kind, members, tmp_path):
    import dataclasses

    from keras_mgu.sysid.files.onnx_export import export_simulator

    data, found = identified
    found = dataclasses.replace(found[kind], members=members)
    if members:  # both structures averaged: with and without the linear model in the file
        assert {found.runs[k].structure for k in members} == {"network", "linear+network"}
    path = str(tmp_path / "simulator.onnx")
    export_simulator(found, path)
    assert_same_simulation(path, found, data.test.u, data.test.y)
    assert_band_in_metadata(path, found)


@needs_onnx
@converts_on_jax
def test_the_polynomial_class_exports_as_an_onnx_simulator(tmp_path):
    """Its monomials and clamp in the file, from every backend (the conversion on JAX where the
    backend's own cannot); the file simulates as ``found.simulate``."""
    from keras_mgu import datasets, sysid
    from keras_mgu.sysid.files.onnx_export import export_simulator

    data = datasets.simulate_cascaded_tanks(n_samples=400, seed=0)
    config = sysid.RecipeConfig(model_classes="polynomial", iterations=20, validation_checks=2)
    found = sysid.identify(data, config, restarts=1)
    assert found.runs[0].polynomial.degree >= 1 and len(found.runs[0].polynomial.terms) > 1
    path = str(tmp_path / "polynomial.onnx")
    export_simulator(found, path)  # converted on JAX where this backend's exporter cannot
    u, y, n = data.test.u, data.test.y, found.config.n_initial
    as32 = lambda a: a[None].astype("float32")  # noqa: E731
    feeds = {"u_initial": as32(u[:n]), "y_initial": as32(y[:n]), "u": as32(u[n:])}
    want = found.simulate(u, y[:n])[n:]
    got = run_simulator(path, feeds)
    np.testing.assert_allclose(got, want, atol=1e-4 * np.abs(want).max())
    assert_band_in_metadata(path, found)


def assert_band_in_metadata(path, found):
    """The file's metadata carries the simulation's band half-widths, as the model file's."""
    import json

    import onnx

    props = {p.key: p.value for p in onnx.load(path, load_external_data=False).metadata_props}
    for level in (0.9, 0.95, 0.99):
        widths = json.loads(props[f"keras_mgu.band_half_width.{level:g}"])
        np.testing.assert_allclose(widths, found.band.half_width(level), rtol=1e-12)


@needs_onnx
def test_models_saved_on_another_backend_export_here(saved_on_another_backend, tmp_path):
    """Identified and saved in a subprocess on another backend; load, export and run here."""
    from keras_mgu import datasets, sysid
    from keras_mgu.sysid.files.onnx_export import export_simulator

    models, _ = saved_on_another_backend
    test = datasets.simulate_cascaded_tanks(n_samples=160, seed=0).test
    for kind in ("learned", "encoder"):
        found = sysid.load(models / f"{kind}.kmgu")
        path = str(tmp_path / f"{kind}.onnx")
        export_simulator(found, path)
        assert_same_simulation(path, found, test.u, test.y)
        if kind == "encoder":  # and as simulated where it was saved
            saved = np.load(models / "encoder.npz")["given"][5:]
            got = run_simulator(path, simulator_feeds(found, test.u, test.y)[0])
            np.testing.assert_allclose(got, saved, atol=1e-4 * np.abs(saved).max())


@converts_on_jax
def test_what_a_backend_cannot_convert_is_converted_on_jax_or_refused(identified, monkeypatch):
    """TensorFlow cannot convert a lag class's loop, PyTorch neither that nor GRU/LSTM layers."""
    import dataclasses
    import importlib.util

    from keras_mgu.sysid.files.onnx_export import conversion_backend

    _, found = identified
    learned = found["learned"]
    run = learned.runs[learned.best]
    gru = dataclasses.replace(run, config=dataclasses.replace(run.config, cell="gru"))
    only_gru = dataclasses.replace(learned, runs=[gru], best=0, members=())
    narx = dataclasses.replace(run, structure="narx")
    loop = dataclasses.replace(learned, runs=[narx], best=0, members=())
    backend = keras.backend.backend()
    expected = {"jax": (None, None), "tensorflow": (None, "jax"), "torch": ("jax", "jax")}[backend]
    assert (conversion_backend(only_gru), conversion_backend(loop)) == expected
    assert conversion_backend(loop, format="litert") is None
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "jax2onnx" else real(name, *a)
    )
    if backend != "jax":
        with pytest.raises(
            ValueError, match=r'on JAX needs jax2onnx: pip install "keras-mgu\[export-jax,jax\]"'
        ):
            conversion_backend(loop)


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "names, want",
    [
        (("y",), "y"),
        (("y1", "y2"), "y1_y2"),
        (("level [m]", "flow-rate"), "level_m_flow_rate"),
        ((), "y"),
        (("%",), "y"),
        (("0",), "y_0"),
        (("u",), "u_sim"),
        (("y_initial",), "y_initial_sim"),
    ],
)
def test_onnx_output_is_named_after_the_output_channels(names, want):
    import types

    from keras_mgu.sysid.files.onnx_export import onnx_output_name

    assert onnx_output_name(types.SimpleNamespace(output_names=names)) == want


@BACKEND_INDEPENDENT
def test_renaming_the_onnx_output_keeps_the_graph(tmp_path):
    """The output renamed where it is made; a value that had its name (read in a Loop) renamed."""
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from keras_mgu.sysid.files.onnx_export import _rename_onnx_output

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Add", ["v", "y"], ["v_out"]),  # "y" from the outer graph
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", TensorProto.FLOAT, [None, 2]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [None, 2]),
        ],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "x"], ["y"]),
            helper.make_node("Loop", ["three", "", "x"], ["looped"], body=body),
            helper.make_node("Mul", ["looped", "x"], ["Identity:0"]),
        ],
        "g",
        [x],
        [helper.make_tensor_value_info("Identity:0", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor("three", TensorProto.INT64, [], [3])],
    )
    path = str(tmp_path / "g.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    feeds = {"x": np.array([[1.0, -2.0], [0.5, 3.0]], "float32")}

    def run() -> tuple[list[str], np.ndarray]:
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        return [o.name for o in session.get_outputs()], session.run(None, feeds)[0]

    _, before = run()
    np.testing.assert_allclose(before, 7 * feeds["x"] ** 2)  # (x + 3 * 2x) * x
    _rename_onnx_output(path, "y")
    onnx.checker.check_model(path, full_check=True)
    names, after = run()
    assert names == ["y"]
    np.testing.assert_array_equal(after, before)
    # A graph whose output is its input gets an Identity to carry the new name.
    passed = helper.make_graph([], "p", [x], [helper.make_tensor_value_info("x", 1, [None, 2])])
    onnx.save(helper.make_model(passed, opset_imports=[helper.make_opsetid("", 17)]), path)
    _rename_onnx_output(path, "y")
    names, after = run()
    assert names == ["y"]
    np.testing.assert_array_equal(after, feeds["x"])
