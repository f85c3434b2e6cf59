"""The fused TensorFlow MGU kernel against the NumPy reference, finite differences
and a plain autodiff implementation (first and second order)."""

import keras
import numpy as np
import pytest

if keras.backend.backend() != "tensorflow":
    pytest.skip("TensorFlow kernel tests need KERAS_BACKEND=tensorflow", allow_module_level=True)

import tensorflow as tf  # noqa: E402

from keras_mgu import MGU, kernels  # noqa: E402
from keras_mgu.kernels import tensorflow as tf_kernel  # noqa: E402
from tests.helpers import central_differences  # noqa: E402
from tests.kernels.common import autodiff_mgu, make_problem, run_reference  # noqa: E402


def fused(x, h0, w, u, b, mask=None, go_backwards=False, act="tanh", ract="sigmoid"):
    return tf_kernel.mgu_sequence(
        x, h0, w, u, b, mask, activation=act, recurrent_activation=ract, go_backwards=go_backwards
    )


ARG_NAMES = ("inputs", "initial_state", "kernel", "recurrent_kernel", "bias")


def tensors(p, dtype=None):
    return [tf.constant(p[k] if dtype is None else p[k].astype(dtype)) for k in ARG_NAMES]


# ----------------------------------------------------------------------------- forward
@pytest.mark.parametrize("go_backwards", [False, True])
def test_forward_matches_reference(rng, go_backwards):
    p = make_problem(rng)
    x, h0, w, u, b = tensors(p)
    for mask in (False, True):
        for bias in (False, True):
            outputs, final = fused(
                x, h0, w, u, b if bias else None, p["mask"] if mask else None, go_backwards
            )
            ref_outputs, ref_final = run_reference(p, bias, mask, go_backwards)
            assert outputs.shape == ref_outputs.shape and outputs.dtype == tf.float64
            np.testing.assert_allclose(outputs.numpy(), ref_outputs, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(final.numpy(), ref_final, rtol=1e-12, atol=1e-12)
    # The fully masked row carries its initial state through every step.
    np.testing.assert_array_equal(outputs.numpy()[0], np.repeat(p["initial_state"][:1], 5, 0))


def test_forward_other_activations(rng):
    p = make_problem(rng)
    for act, ract in [("sigmoid", "tanh"), ("sigmoid", "sigmoid"), ("tanh", "tanh")]:
        outputs, final = fused(*tensors(p), p["mask"], act=act, ract=ract)
        ref_outputs, ref_final = run_reference(p, act=act, ract=ract)
        np.testing.assert_allclose(outputs.numpy(), ref_outputs, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(final.numpy(), ref_final, rtol=1e-12, atol=1e-12)


def test_float32_and_single_step(rng):
    for steps in (1, 5):
        p = make_problem(rng, steps=steps, dtype="float32")
        args = tensors(p)
        grads, results = [], []
        for fn in (fused, autodiff_mgu):
            with tf.GradientTape() as tape:
                tape.watch(args)
                outputs, final = fn(*args, p["mask"])
                loss = tf.reduce_sum(outputs * outputs) + tf.reduce_sum(final)
            grads.append(tape.gradient(loss, args))
            results.append((outputs, final))
        outputs, final = results[0]
        ref_outputs, ref_final = run_reference(p)
        assert outputs.dtype == tf.float32 and outputs.shape == (3, steps, 4)
        np.testing.assert_allclose(outputs.numpy(), ref_outputs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(final.numpy(), ref_final, rtol=1e-5, atol=1e-5)
        for name, g, e in zip(ARG_NAMES, *grads):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


def test_initial_state_none_means_zeros(rng):
    p = make_problem(rng)
    x, h0, w, u, b = tensors(p)
    outputs, _ = fused(x, None, w, u, b)
    p["initial_state"] = np.zeros_like(p["initial_state"])
    np.testing.assert_allclose(outputs.numpy(), run_reference(p, mask=False)[0], atol=1e-12)


def test_low_precision_inputs_are_computed_in_float32(rng):
    p = make_problem(rng, dtype="float32")
    for dtype, tol in (("float16", 1e-2), ("bfloat16", 2e-2)):
        args = [tf.cast(t, dtype) for t in tensors(p)]
        with tf.GradientTape() as tape:
            tape.watch(args)
            outputs, final = fused(*args, p["mask"], go_backwards=True)
            loss = tf.reduce_sum(tf.cast(outputs, "float32") ** 2)
        grads = tape.gradient(loss, args)
        assert outputs.dtype == dtype and final.dtype == dtype
        assert all(g.dtype == dtype for g in grads)
        # The reference sees the same rounded inputs; only the outputs are rounded.
        rounded = {k: tf.cast(a, "float64").numpy() for k, a in zip(ARG_NAMES, args)}
        ref_outputs, _ = run_reference({**p, **rounded}, go_backwards=True)
        np.testing.assert_allclose(tf.cast(outputs, "float64").numpy(), ref_outputs, atol=tol)
        assert all(np.isfinite(tf.cast(g, "float32").numpy()).all() for g in grads)


# ----------------------------------------------------------------------------- gradients
def _weighted_loss(outputs, final, r_out, r_final):
    return tf.reduce_sum(outputs * r_out) + tf.reduce_sum(final * r_final)


@pytest.mark.parametrize(
    "mask,go_backwards,act,ract",
    [(False, False, "tanh", "sigmoid"), (True, True, "sigmoid", "tanh")],
)
def test_gradients_match_finite_differences(mask, go_backwards, act, ract):
    rng = np.random.default_rng(7)
    p = make_problem(rng)
    r_out, r_final = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 4))
    m = p["mask"] if mask else None

    def numpy_loss(x, h0, w, u, b):
        q = {**p, "inputs": x, "initial_state": h0, "kernel": w, "recurrent_kernel": u, "bias": b}
        outputs, final = run_reference(q, True, mask, go_backwards, act, ract)
        return float(np.sum(outputs * r_out) + np.sum(final * r_final))

    args = tensors(p)
    with tf.GradientTape() as tape:
        tape.watch(args)
        loss = _weighted_loss(*fused(*args, m, go_backwards, act, ract), r_out, r_final)
    grads = tape.gradient(loss, args)
    expected = central_differences(numpy_loss, [p[k] for k in ARG_NAMES], eps=1e-6)
    for name, g, e in zip(ARG_NAMES, grads, expected):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-6, atol=1e-8, err_msg=name)


def test_gradients_match_autodiff(rng):
    p = make_problem(rng)
    for dtype, tol in (("float32", 1e-5), ("float64", 1e-12)):
        r_out = tf.constant(rng.normal(size=(3, 5, 4)), dtype)
        r_final = tf.constant(rng.normal(size=(3, 4)), dtype)
        args = tensors(p, dtype)
        results = []
        for fn in (fused, autodiff_mgu):
            with tf.GradientTape() as tape:
                tape.watch(args)
                loss = _weighted_loss(*fn(*args, p["mask"], True), r_out, r_final)
            results.append(tape.gradient(loss, args))
        for name, g, e in zip(ARG_NAMES, *results):
            assert g.dtype == dtype
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=tol, atol=tol, err_msg=name)


# ----------------------------------------------------------------------- second order
def _input_gradient_norm(fn, x, h0, w, u, b, mask, go_backwards):
    """``sum((d sum(outputs) / d inputs)^2)`` and its gradient w.r.t. every argument."""
    args = [x, h0, w, u, b]
    with tf.GradientTape() as outer:
        outer.watch(args)
        with tf.GradientTape() as inner:
            inner.watch([x, h0])
            outputs, final = fn(x, h0, w, u, b, mask, go_backwards)
            value = tf.reduce_sum(outputs) + tf.reduce_sum(final * final)
        dx, dh0 = inner.gradient(value, [x, h0])
        norm = tf.reduce_sum(dx**2) + tf.reduce_sum(dh0**2)
    return norm, outer.gradient(norm, args)


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_second_order_gradients_match_autodiff(rng, mode):
    p = make_problem(rng)
    args = tensors(p)
    mask = tf.constant(p["mask"])
    expected_norm, expected = _input_gradient_norm(autodiff_mgu, *args, mask, True)

    def run(*a):
        return _input_gradient_norm(fused, *a, mask, True)

    if mode != "eager":
        run = tf.function(run, jit_compile=mode == "xla", autograph=False)
    norm, grads = run(*args)
    np.testing.assert_allclose(norm.numpy(), expected_norm.numpy(), rtol=1e-12)
    for name, g, e in zip(ARG_NAMES, grads, expected):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_second_order_gradient_matches_finite_differences(rng):
    """d/dW of ||d sum(outputs) / d inputs||^2, against differences of the first-order gradient."""
    p = make_problem(rng)
    x, h0, _, u, b = tensors(p)

    def first_order_norm(w):
        with tf.GradientTape() as tape:
            tape.watch([x, h0])
            outputs, final = fused(x, h0, tf.constant(w), u, b, p["mask"])
            value = tf.reduce_sum(outputs) + tf.reduce_sum(final * final)
        dx, dh0 = tape.gradient(value, [x, h0])
        return float(tf.reduce_sum(dx**2) + tf.reduce_sum(dh0**2))

    _, grads = _input_gradient_norm(fused, *tensors(p), p["mask"], False)
    expected = central_differences(first_order_norm, [p["kernel"]], eps=1e-6)[0]
    np.testing.assert_allclose(grads[2].numpy(), expected, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------- graph modes, XLA
@pytest.mark.parametrize("jit_compile", [False, True])
def test_tf_function_and_xla_match_eager(rng, jit_compile):
    p = make_problem(rng, dtype="float32")
    args = tensors(p)

    def value_and_grads(x, h0, w, u, b, mask):
        with tf.GradientTape() as tape:
            tape.watch([x, h0, w, u, b])
            outputs, final = fused(x, h0, w, u, b, mask, True)
            loss = tf.reduce_sum(outputs**2) + tf.reduce_sum(final)
        return outputs, tape.gradient(loss, [x, h0, w, u, b])

    eager_out, eager_grads = value_and_grads(*args, p["mask"])
    compiled = tf.function(value_and_grads, jit_compile=jit_compile, autograph=False)
    out, grads = compiled(*args, p["mask"])
    np.testing.assert_allclose(out.numpy(), eager_out.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.numpy(), run_reference(p, go_backwards=True)[0], atol=1e-5)
    for name, g, e in zip(ARG_NAMES, grads, eager_grads):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


def test_dynamic_batch_size_inside_tf_function(rng):
    units = 4
    spec = [
        tf.TensorSpec([None, None, 2], tf.float32),
        tf.TensorSpec([None, units], tf.float32),
        tf.TensorSpec([None, None], tf.bool),
    ]
    p = make_problem(rng, dtype="float32", units=units)
    w, u, b = (tf.Variable(p[k]) for k in ("kernel", "recurrent_kernel", "bias"))

    @tf.function(input_signature=spec, autograph=False)
    def run(x, h0, mask):
        with tf.GradientTape() as tape:
            outputs, _ = fused(x, h0, w, u, b, mask)
            loss = tf.reduce_sum(outputs)
        return outputs, tape.gradient(loss, w)

    for batch, steps in ((3, 5), (2, 7)):
        q = make_problem(rng, batch=batch, steps=steps, dtype="float32", units=units)
        q.update(kernel=p["kernel"], recurrent_kernel=p["recurrent_kernel"], bias=p["bias"])
        outputs, dw = run(q["inputs"], q["initial_state"], q["mask"])
        np.testing.assert_allclose(outputs.numpy(), run_reference(q)[0], rtol=1e-5, atol=1e-5)
        args = [tf.constant(q[k]) for k in ARG_NAMES]
        with tf.GradientTape() as tape:
            tape.watch(args[2])
            loss = tf.reduce_sum(autodiff_mgu(*args, q["mask"])[0])
        np.testing.assert_allclose(dw.numpy(), tape.gradient(loss, args[2]).numpy(), atol=1e-5)


def _op_types(graph) -> set[str]:
    """The op types of ``graph`` and of the functions it calls."""
    types = {op.type for op in graph.get_operations()}
    for function in getattr(graph, "_functions", {}).values():
        inner = getattr(function, "graph", None)
        if inner is not None:
            types |= _op_types(inner)
    return types


def test_inference_graphs_get_the_compiled_loops_inside_native_inference(rng, kernel_loops):
    p = make_problem(rng, dtype="float32")
    args = tensors(p)

    def forward(x, h0, w, u, b):
        return fused(x, h0, w, u, b, tf.constant(p["mask"]))[0]

    portable = tf.function(forward, autograph=False).get_concrete_function(*args)
    with kernels.native_inference():
        compiled = tf.function(forward, autograph=False).get_concrete_function(*args)
    outside, inside = _op_types(portable.graph), _op_types(compiled.graph)
    # Outside: the inline loop an exporter reads; inside: the native op or the XLA-compiled loop.
    assert "KerasMguForward" not in outside and _has_loop(outside)
    if kernel_loops == "native":
        assert "KerasMguForward" in inside
    else:
        assert not _has_loop(_op_types_top(compiled.graph))  # inside a compiled function
    expected = run_reference(p)[0]
    for function in (portable, compiled):
        np.testing.assert_allclose(function(*args).numpy(), expected, rtol=1e-5, atol=1e-5)
    # The context ends with its block: later traces are portable again.
    again = tf.function(forward, autograph=False).get_concrete_function(*args)
    assert "KerasMguForward" not in _op_types(again.graph)


def _op_types_top(graph) -> set[str]:
    return {op.type for op in graph.get_operations()}


def _has_loop(types: set[str]) -> bool:
    return any(t.endswith("While") for t in types)  # While or StatelessWhile


# ----------------------------------------------------------------------------- layer
def test_layer_fused_path_matches_cell_path(rng):
    x = rng.normal(size=(3, 6, 2)).astype("float32")
    x[1, 4:] = 0.0  # masked away by the Masking layer
    layers = {}
    for implementation in ("fused", "cell"):
        keras.utils.set_random_seed(3)
        layers[implementation] = MGU(
            4, implementation=implementation, return_sequences=True, go_backwards=True
        )
        model = keras.Sequential([keras.Input((6, 2)), keras.layers.Masking(0.0)])
        model.add(layers[implementation])
        layers[implementation] = model
    assert layers["fused"].layers[-1].uses_fused_path
    assert not layers["cell"].layers[-1].uses_fused_path
    np.testing.assert_allclose(
        layers["fused"](x).numpy(), layers["cell"](x).numpy(), rtol=1e-5, atol=1e-6
    )
