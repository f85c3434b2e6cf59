"""input_gradient and DerivativeTargetModel against finite differences, on every backend."""

from __future__ import annotations

from typing import NamedTuple

import keras
import numpy as np
import pytest
from keras import ops

from keras_mgu import MGU
from keras_mgu.derivatives import DerivativeTargetModel, input_gradient
from keras_mgu.kernels import reference
from tests.helpers import BACKEND, central_differences, to_numpy, value_and_grad

IMPLEMENTATIONS = ["cell", "fused"]


def _skip_unavailable(implementation: str) -> None:
    if implementation == "fused" and not MGU(4, implementation="auto").uses_fused_path:
        pytest.skip(f"the fused MGU kernel is not available on {BACKEND} yet")


class Precision(NamedTuple):
    dtype: str
    rtol: float
    atol: float


@pytest.fixture
def precision():
    """float64 models where Keras computes in float64 (TensorFlow); elsewhere Keras
    promotes float64 math to float32, so the models stay float32. The references
    are always float64 NumPy."""
    if BACKEND != "tensorflow":
        yield Precision("float32", 2e-4, 2e-5)
        return
    previous = keras.config.floatx()
    keras.config.set_floatx("float64")
    keras.config.set_dtype_policy("float64")
    try:
        yield Precision("float64", 1e-7, 1e-9)
    finally:
        keras.config.set_floatx(previous)
        keras.config.set_dtype_policy(previous)


# ------------------------------------------------------------------ models
def _dense_model(features: int = 3, outputs: int = 2) -> keras.Model:
    x = keras.Input((features,), name="x")
    h = keras.layers.Dense(5, activation="tanh")(x)
    return keras.Model(x, keras.layers.Dense(outputs)(h))


def _mgu_model(implementation: str, features: int = 2, units: int = 3) -> keras.Model:
    x = keras.Input((4, features), name="x")
    h = MGU(units, return_sequences=True, implementation=implementation)(x)
    return keras.Model(x, keras.layers.Dense(1)(h))


def _two_input_model() -> keras.Model:
    a = keras.Input((4, 2), name="x1")
    b = keras.Input((4, 3), name="x2")
    h = keras.layers.Dense(4, activation="tanh")(keras.layers.Concatenate()([a, b]))
    return keras.Model([a, b], keras.layers.Dense(2)(h))


def _randomize(model: keras.Model, rng: np.random.Generator, scale: float = 0.5) -> list:
    """Random non-zero weights everywhere (biases included); returns them in float64."""
    weights = [scale * rng.normal(size=w.shape) for w in model.get_weights()]
    model.set_weights(weights)
    return [np.asarray(w, dtype=np.float64) for w in model.get_weights()]


# NumPy float64 forward passes of the three models, written from their equations.
def _np_dense(x, w1, b1, w2, b2):
    return np.tanh(x @ w1 + b1) @ w2 + b2


def _np_mgu_model(x, kernel, recurrent_kernel, bias, w, b):
    return reference.mgu_sequence(x, kernel, recurrent_kernel, bias)[0] @ w + b


def _np_two_input(x1, x2, *weights):
    return _np_dense(np.concatenate([x1, x2], axis=-1), *weights)


def _fd_input_gradient(forward, inputs, wrt=0, reduce=np.sum, eps=1e-6):
    """Central differences of ``reduce(forward(*inputs))`` w.r.t. ``inputs[wrt]``."""
    inputs = [np.asarray(x, dtype=np.float64) for x in inputs]

    def total(x):
        args = list(inputs)
        args[wrt] = x
        return float(reduce(forward(*args)))

    return central_differences(total, [inputs[wrt]], eps=eps)[0]


def _sample(rng, shape, dtype):
    return rng.normal(size=shape).astype(dtype)


# ------------------------------------------------------------------ first order
def test_dense_model_matches_finite_differences(precision, rng):
    model = _dense_model()
    weights = _randomize(model, rng)
    x = _sample(rng, (4, 3), precision.dtype)
    tol = {"rtol": precision.rtol, "atol": precision.atol}

    def forward(x):
        return _np_dense(x, *weights)

    got = to_numpy(input_gradient(model, x))
    assert got.shape == x.shape
    np.testing.assert_allclose(got, _fd_input_gradient(forward, [x]), **tol)
    got_1 = to_numpy(input_gradient(model, x, output_index=1))
    want_1 = _fd_input_gradient(forward, [x], reduce=lambda y: y[:, 1].sum())
    np.testing.assert_allclose(got_1, want_1, **tol)
    assert not np.allclose(got_1, got)


def test_samples_are_independent(rng):
    model = _dense_model()
    x = rng.normal(size=(5, 3)).astype("float32")
    batch = to_numpy(input_gradient(model, x))
    alone = to_numpy(input_gradient(model, x[2:3]))
    np.testing.assert_allclose(batch[2:3], alone, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_mgu_model_matches_finite_differences(implementation, precision, rng):
    _skip_unavailable(implementation)
    model = _mgu_model(implementation)
    weights = _randomize(model, rng)
    x = _sample(rng, (2, 4, 2), precision.dtype)

    def forward(x):
        return _np_mgu_model(x, *weights)

    got = to_numpy(input_gradient(model, x, training=False))
    want = _fd_input_gradient(forward, [x])
    np.testing.assert_allclose(got, want, rtol=precision.rtol, atol=precision.atol)
    # The total derivative of sum_s F_s w.r.t. x_0 differs from the same-step one.
    same_step = _fd_input_gradient(forward, [x], reduce=lambda y: y[:, 0].sum())[:, 0]
    assert np.abs(want[:, 0] - same_step).max() > 1e-3


def test_multi_input_by_index_name_and_feature(precision, rng):
    model = _two_input_model()
    weights = _randomize(model, rng)
    a, b = _sample(rng, (2, 4, 2), precision.dtype), _sample(rng, (2, 4, 3), precision.dtype)
    tol = {"rtol": precision.rtol, "atol": precision.atol}

    def forward(a, b):
        return _np_two_input(a, b, *weights)

    want = _fd_input_gradient(forward, [a, b], wrt=1, reduce=lambda y: y[..., 1].sum())
    by_index = to_numpy(input_gradient(model, [a, b], wrt=1, output_index=1))
    by_name = to_numpy(input_gradient(model, [a, b], wrt="x2", output_index=1))
    from_dict = to_numpy(input_gradient(model, {"x1": a, "x2": b}, wrt="x2", output_index=1))
    for got in (by_index, by_name, from_dict):
        np.testing.assert_allclose(got, want, **tol)
    one = to_numpy(input_gradient(model, [a, b], wrt="x2", output_index=1, feature=1))
    assert one.shape == (2, 4, 1)
    np.testing.assert_allclose(one, want[..., 1:2], **tol)
    some = to_numpy(input_gradient(model, [a, b], wrt="x2", output_index=1, feature=[2, 0]))
    np.testing.assert_allclose(some, want[..., [2, 0]], **tol)
    first = to_numpy(input_gradient(model, [a, b], wrt="x1"))
    np.testing.assert_allclose(first, _fd_input_gradient(forward, [a, b], wrt=0), **tol)


# ------------------------------------------------------------------ second order
def _second_order_loss(model, x, r):
    """Weights -> sum(input_gradient(model, x) * r), the weights given as tensors."""
    variables = model.trainable_variables

    def loss(*weights):
        mapping = list(zip(variables, weights, strict=True))
        with keras.StatelessScope(state_mapping=mapping):
            return ops.sum(input_gradient(model, x) * r)

    return loss


def _zeros_for_unconnected(weights, grads):
    """TensorFlow reports a weight the loss does not reach (the output bias) as None."""
    pairs = zip(weights, grads, strict=True)
    return [np.zeros_like(w) if g.dtype == object else g for w, g in pairs]


def _weight_gradients(model, x, r):
    """Value and weight gradients of ``sum(input_gradient(model, x) * r)``."""
    weights = [to_numpy(v) for v in model.trainable_variables]
    loss = _second_order_loss(model, ops.convert_to_tensor(x), ops.convert_to_tensor(r))
    value, grads = value_and_grad(loss, weights)
    return value, _zeros_for_unconnected(weights, grads)


def _np_derivative_loss(weights, x, r, delta=1e-4):
    """``sum(dS/dx * r)`` for ``S = sum(F(x))``: a directional difference along ``r``."""

    def total(x):
        return _np_mgu_model(x, *weights).sum()

    return (total(x + delta * r) - total(x - delta * r)) / (2 * delta)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_weight_gradient_of_derivative_loss_matches_finite_differences(
    implementation, precision, rng
):
    _skip_unavailable(implementation)
    model = _mgu_model(implementation)
    weights = _randomize(model, rng)
    x, r = _sample(rng, (2, 4, 2), precision.dtype), _sample(rng, (2, 4, 2), precision.dtype)
    value, grads = _weight_gradients(model, x, r)
    x64, r64 = x.astype(np.float64), r.astype(np.float64)
    want_value = _np_derivative_loss(weights, x64, r64)
    np.testing.assert_allclose(value, want_value, rtol=precision.rtol, atol=precision.atol)

    def loss(*ws):
        return _np_derivative_loss(ws, x64, r64)

    want = central_differences(loss, weights, eps=1e-4)
    for variable, got, ref in zip(model.trainable_variables, grads, want, strict=True):
        np.testing.assert_allclose(
            got, ref, rtol=10 * precision.rtol, atol=10 * precision.atol, err_msg=variable.path
        )
        # Every MGU weight shapes the derivative; the output bias cannot.
        is_output_bias = variable.path == model.layers[-1].bias.path
        assert (np.abs(ref).max() > 1e-4) != is_output_bias, variable.path


def test_weight_gradient_same_on_fused_and_cell(precision, rng):
    _skip_unavailable("fused")
    cell, fused = _mgu_model("cell"), _mgu_model("fused")
    _randomize(cell, rng)
    fused.set_weights(cell.get_weights())
    x, r = _sample(rng, (3, 4, 2), precision.dtype), _sample(rng, (3, 4, 2), precision.dtype)
    tol = {"rtol": precision.rtol / 10, "atol": precision.atol / 10}
    value_c, grads_c = _weight_gradients(cell, x, r)
    value_f, grads_f = _weight_gradients(fused, x, r)
    np.testing.assert_allclose(value_f, value_c, **tol)
    for got, want in zip(grads_f, grads_c, strict=True):
        np.testing.assert_allclose(got, want, **tol)


# ------------------------------------------------------------------ DerivativeTargetModel
def test_learns_known_derivative():
    """Train F through dF/dx = cos(x) only; the mse must fall at least 100x."""
    keras.utils.set_random_seed(0)
    x = np.linspace(-2.0, 2.0, 64, dtype="float32")[:, None]
    y = np.cos(x)
    inp = keras.Input((1,))
    f = keras.layers.Dense(1)(keras.layers.Dense(16, activation="tanh")(inp))
    dmodel = DerivativeTargetModel(keras.Model(inp, f))
    dmodel.compile(optimizer=keras.optimizers.Adam(0.03), loss="mse")
    before = dmodel.evaluate(x, y, verbose=0)
    repeats = 400  # one epoch of `repeats` full-batch steps
    dmodel.fit(
        np.tile(x, (repeats, 1)), np.tile(y, (repeats, 1)), batch_size=64, verbose=0, shuffle=False
    )
    after = dmodel.evaluate(x, y, verbose=0)
    assert after < before / 100, (before, after)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fit_step_follows_second_order_gradient(jit_compile, rng):
    if jit_compile and BACKEND == "torch":
        pytest.skip("jit_compile applies to the TensorFlow and JAX backends")
    if not jit_compile and BACKEND == "jax":
        pytest.skip("Keras always compiles JAX train steps unless debugging")
    model = _mgu_model("cell")
    _randomize(model, rng)
    x = rng.normal(size=(3, 4, 2)).astype("float32")
    y = rng.normal(size=(3, 4, 2)).astype("float32")
    variables = model.trainable_variables
    weights = [to_numpy(v) for v in variables]

    x_t, y_t = ops.convert_to_tensor(x), ops.convert_to_tensor(y)

    def mse(*ws):
        with keras.StatelessScope(state_mapping=list(zip(variables, ws, strict=True))):
            return ops.mean(ops.square(input_gradient(model, x_t) - y_t))

    _, grads = value_and_grad(mse, weights)
    grads = _zeros_for_unconnected(weights, grads)
    dmodel = DerivativeTargetModel(model)
    rate = 0.1
    dmodel.compile(optimizer=keras.optimizers.SGD(rate), loss="mse", jit_compile=jit_compile)
    dmodel.fit(x, y, batch_size=3, epochs=1, shuffle=False, verbose=0)
    for v, w, g in zip(variables, weights, grads, strict=True):
        np.testing.assert_allclose(to_numpy(v), w - rate * g, rtol=1e-4, atol=1e-6, err_msg=v.path)
    assert any(np.abs(g).max() > 1e-3 for g in grads)


def test_include_outputs_and_save_load(tmp_path, rng):
    a = keras.Input((4, 1), name="x1")
    b = keras.Input((4, 1), name="x2")
    z = MGU(3, return_sequences=True, implementation="cell")(keras.layers.Concatenate()([a, b]))
    f = keras.layers.Dense(1)(keras.layers.Concatenate()([z, a]))
    model = keras.Model([a, b], f)
    _randomize(model, rng)
    dmodel = DerivativeTargetModel(model, wrt="x1", feature=[0], include_outputs=True)
    data = [rng.normal(size=(5, 4, 1)).astype("float32") for _ in range(2)]
    outputs, grads = dmodel.predict(data, verbose=0)
    np.testing.assert_allclose(outputs, to_numpy(model(data)), rtol=1e-5, atol=1e-6)
    want = to_numpy(input_gradient(model, data, wrt="x1"))
    np.testing.assert_allclose(grads, want, rtol=1e-5, atol=1e-6)

    path = str(tmp_path / "derivative.keras")
    dmodel.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, DerivativeTargetModel)
    assert (loaded.wrt, loaded.feature, loaded.include_outputs) == ("x1", [0], True)
    loaded_outputs, loaded_grads = loaded.predict(data, verbose=0)
    np.testing.assert_allclose(loaded_outputs, outputs, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(loaded_grads, grads, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ errors
def test_bad_arguments_are_rejected(rng):
    model = _two_input_model()
    data = [rng.normal(size=(2, 4, 2)), rng.normal(size=(2, 4, 3))]
    with pytest.raises(ValueError, match="out of range"):
        input_gradient(model, data, wrt=2)
    with pytest.raises(ValueError, match=r"\['x1', 'x2'\]"):
        input_gradient(model, data, wrt="x3")
    with pytest.raises(ValueError, match="feature.*out of range"):
        input_gradient(model, data, wrt="x2", feature=3)
    with pytest.raises(ValueError, match="feature.*out of range"):
        input_gradient(model, data, wrt="x2", feature=[0, 5])
    with pytest.raises(ValueError, match="output_index.*out of range"):
        input_gradient(model, data, output_index=2)
    with pytest.raises(ValueError, match=r"\['x1', 'x2'\]"):
        DerivativeTargetModel(model, wrt="x3")
    with pytest.raises(ValueError, match="feature.*out of range"):
        DerivativeTargetModel(model, wrt=0, feature=2)
    with pytest.raises(ValueError, match="output_index.*out of range"):
        DerivativeTargetModel(model, output_index=-1)
    with pytest.raises(TypeError, match="Keras model"):
        DerivativeTargetModel(lambda x: x)


def test_integer_input_and_several_outputs_are_rejected(rng):
    ids = keras.Input((3,), dtype="int32", name="ids")
    x = keras.Input((3,), name="x")
    joined = keras.layers.Concatenate()([ops.cast(ids, "float32"), x])
    dense = keras.layers.Dense(2)
    two_outputs = keras.Model([ids, x], [dense(joined), joined])
    data = [np.arange(6, dtype="int32").reshape(2, 3), rng.normal(size=(2, 3))]
    with pytest.raises(ValueError, match="int32.*floating-point"):
        input_gradient(two_outputs, data, wrt="ids")
    with pytest.raises(ValueError, match="int32.*floating-point"):
        DerivativeTargetModel(two_outputs, wrt=0)
    with pytest.raises(ValueError, match="single output"):
        input_gradient(two_outputs, data, wrt="x", output_index=0)
    # Without output_index every output is summed.
    summed = to_numpy(input_gradient(two_outputs, data, wrt="x"))
    kernel = to_numpy(dense.kernel)
    want = np.broadcast_to(1.0 + kernel[3:].sum(axis=1), (2, 3))
    np.testing.assert_allclose(summed, want, rtol=1e-5)
