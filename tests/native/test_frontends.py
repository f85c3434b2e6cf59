"""The native loops behind each backend's MGU layer, against the backend's own fused kernel."""

import keras
import numpy as np
import pytest

from keras_mgu import MGU, native
from tests.helpers import (
    BACKEND,
    input_gradient_penalty_grads,
    random_mgu_weights,
    to_numpy,
    value_and_grad,
)


def _layer(units, weights, **kwargs):
    layer = MGU(units, return_sequences=True, return_state=True, **kwargs)
    layer.build((None, None, weights[0].shape[0]))
    layer.set_weights(weights)
    return layer


def _run_both(monkeypatch, fn):
    """``fn()`` with the native loops on, then turned off (:func:`keras_mgu.native.turned_off`)."""
    on = fn()
    with native.turned_off():
        off = fn()
    return on, off


def _assert_trains_alike(monkeypatch, train):
    """``train()`` returns a model's weights: the same on the native loops and off them."""
    native_weights, fused_weights = _run_both(monkeypatch, train)
    for a, b in zip(native_weights, fused_weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("units", [1, 7, 8, 33])
@pytest.mark.parametrize("go_backwards", [False, True])
def test_outputs_states_and_gradients_match_the_fused_kernel(rng, monkeypatch, units, go_backwards):
    weights = random_mgu_weights(rng, 3, units)
    x = rng.standard_normal((4, 11, 3)).astype("float32")
    h0 = (0.5 * rng.standard_normal((4, units))).astype("float32")
    mask = rng.random((4, 11)) > 0.3
    mask[0] = False
    probe = rng.standard_normal((4, 11, units)).astype("float32")

    def run():
        layer = _layer(units, weights, go_backwards=go_backwards)
        assert layer.kernel_in_use == ("native" if native.enabled() else "fused")

        def loss(x, h0):
            out, state = layer(x, initial_state=h0, mask=keras.ops.convert_to_tensor(mask))
            return keras.ops.sum(out * keras.ops.convert_to_tensor(probe)) + keras.ops.sum(state**2)

        return value_and_grad(loss, [x, h0])

    (v1, g1), (v0, g0) = _run_both(monkeypatch, run)
    assert v1 == pytest.approx(v0, rel=1e-5)
    for a, b in zip(g1, g0):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_weight_gradients_in_training_match(rng, monkeypatch):
    x = rng.standard_normal((16, 30, 2)).astype("float32")
    y = rng.standard_normal((16, 30, 1)).astype("float32")

    def train():
        keras.utils.set_random_seed(3)
        model = keras.Sequential(
            [keras.Input((30, 2)), MGU(8, return_sequences=True), keras.layers.Dense(1)]
        )
        model.compile(keras.optimizers.SGD(0.1), "mse")
        model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
        return [to_numpy(w) for w in model.weights]

    _assert_trains_alike(monkeypatch, train)


def test_training_on_several_threads_matches(rng, monkeypatch):
    """A batch large enough to be split: 3 threads, chunks of 5, 5 and 6 sequences."""
    monkeypatch.setenv(native.THREADS_ENV_VAR, "3")
    assert native.threads(300, 16, 8) == 3
    x = rng.standard_normal((16, 300, 2)).astype("float32")
    y = rng.standard_normal((16, 300, 1)).astype("float32")
    mask = np.ones((16, 300), bool)
    mask[3, 250:] = mask[9, :40] = False

    def train():
        keras.utils.set_random_seed(4)
        inputs = keras.Input((300, 2))
        hidden = MGU(8, return_sequences=True)(inputs, mask=keras.ops.convert_to_tensor(mask))
        model = keras.Model(inputs, keras.layers.Dense(1)(hidden))
        model.compile(keras.optimizers.SGD(0.05), "mse")
        model.fit(x, y, batch_size=16, epochs=3, verbose=0, shuffle=False)
        return [to_numpy(w) for w in model.weights]

    _assert_trains_alike(monkeypatch, train)


@pytest.fixture
def float64():
    """float64 computations (JAX needs x64 switched on for them)."""
    keras.config.set_floatx("float64")
    if BACKEND == "jax":
        import jax

        with jax.enable_x64(True):
            yield
    else:
        yield
    keras.config.set_floatx("float32")


def test_float64_agrees_to_double_precision(rng, monkeypatch, float64):
    weights = [w.astype("float64") for w in random_mgu_weights(rng, 2, 5)]
    x = rng.standard_normal((3, 9, 2))

    def run():
        layer = _layer(5, weights, dtype="float64")
        assert layer.kernel_in_use == ("native" if native.enabled() else "fused")
        return value_and_grad(lambda x: keras.ops.sum(keras.ops.sin(layer(x)[0])), [x])

    (v1, g1), (v0, g0) = _run_both(monkeypatch, run)
    assert v1 == pytest.approx(v0, rel=1e-12)
    np.testing.assert_allclose(g1[0], g0[0], rtol=1e-10, atol=1e-12)


def test_second_order_gradients_match(rng, monkeypatch):
    weights = random_mgu_weights(rng, 2, 4)
    x = rng.standard_normal((3, 8, 2)).astype("float32")

    assert _layer(4, weights).kernel_in_use == "native"
    grads_native, grads_fused = _run_both(monkeypatch, lambda: _penalty_grads(weights, x))
    for a, b in zip(grads_native, grads_fused):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _penalty_grads(weights, x):
    """d/dW of sum((d sum(MGU(x)) / dx)^2), a derivative-target training loss."""
    from keras_mgu.kernels import mgu_sequence

    units = weights[1].shape[0]
    h0 = np.zeros((x.shape[0], units), "float32")

    def fn(x, w, u, b):
        return mgu_sequence(x, keras.ops.convert_to_tensor(h0), w, u, b, None)[0]

    return input_gradient_penalty_grads(fn, x, weights)


def test_mixed_precision_runs_native(rng, monkeypatch):
    keras.config.set_dtype_policy("mixed_float16")
    layer = MGU(6, return_sequences=True)
    x = rng.standard_normal((2, 7, 3)).astype("float32")
    out = layer(x)
    assert layer.kernel_in_use == "native"
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    keras.config.set_dtype_policy("float32")
    ref = MGU(6, return_sequences=True, implementation="cell")
    ref.build(x.shape)
    ref.set_weights(layer.get_weights())
    np.testing.assert_allclose(to_numpy(out).astype("float32"), to_numpy(ref(x)), atol=2e-3)


def test_stateful_halves_match_one_call(rng):
    weights = random_mgu_weights(rng, 2, 5)
    x = rng.standard_normal((2, 12, 2)).astype("float32")
    layer = MGU(5, return_sequences=True, stateful=True)
    layer.build((2, None, 2))
    layer.set_weights(weights)
    assert layer.kernel_in_use == "native"
    halves = np.concatenate([to_numpy(layer(x[:, :6])), to_numpy(layer(x[:, 6:]))], axis=1)
    whole = _layer(5, weights)(x)[0]
    np.testing.assert_allclose(halves, to_numpy(whole), rtol=1e-6, atol=1e-6)


def test_kernel_in_use_reports_each_path(monkeypatch):
    assert MGU(8).kernel_in_use == "native"
    assert MGU(8, implementation="cell").kernel_in_use == "cell"
    front_end = __import__(f"keras_mgu.native.{BACKEND}", fromlist=["MAX_STEP_MACS"])
    limit = int((front_end.MAX_STEP_MACS / native.DEFAULT_BATCH) ** 0.5)
    assert MGU(limit).kernel_in_use == "native"
    assert MGU(limit + 1).kernel_in_use == "fused"
    big_batch = MGU(limit)
    big_batch(np.zeros((4 * native.DEFAULT_BATCH, 3, 2), "float32"))
    assert big_batch.kernel_in_use == "fused"
    with native.turned_off():
        assert MGU(8).kernel_in_use == "fused"
    monkeypatch.setenv(native.ENV_VAR, "0")
    assert MGU(8).kernel_in_use == "fused"


@pytest.mark.skipif(BACKEND != "tensorflow", reason="jit_compile=False is the default elsewhere")
def test_xla_compiled_training_uses_the_fused_kernel(rng):
    x = rng.standard_normal((8, 10, 2)).astype("float32")
    model = keras.Sequential([keras.Input((10, 2)), MGU(4), keras.layers.Dense(1)])
    model.compile("adam", "mse", jit_compile=True)
    history = model.fit(x, x[:, -1, :1], epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.skipif(BACKEND != "torch", reason="the torch.library operators")
@pytest.mark.parametrize("masked", [False, True])
def test_torch_operators_pass_opcheck_and_trace_like_eager(rng, masked):
    """The registered operators (what traced code calls) against the eager route."""
    import torch

    from keras_mgu.native import torch as native_torch

    steps, batch, units = 7, 5, 3
    mask = torch.tensor(rng.random((steps, batch)) > 0.3) if masked else None
    xw = torch.tensor(rng.standard_normal((steps, batch, 2 * units)), requires_grad=True)
    h0 = torch.tensor(rng.standard_normal((batch, units)), requires_grad=True)
    u = torch.tensor(0.5 * rng.standard_normal((units, 2 * units)), requires_grad=True)
    codes = (native.ACTIVATION_CODES["tanh"], native.ACTIVATION_CODES["sigmoid"])
    d_hs = torch.tensor(rng.standard_normal((steps, batch, units)))
    for batch_major in (False, True):
        xw_in = xw.transpose(0, 1).contiguous() if batch_major else xw
        torch.library.opcheck(native_torch.mgu_forward, (xw_in, h0, u, mask, *codes, batch_major))
        _, saved = native_torch.mgu_forward(xw_in, h0, u, mask, *codes, batch_major)
        d_in = d_hs.transpose(0, 1).contiguous() if batch_major else d_hs
        # Not differentiable itself: second order goes through differentiable ops.
        args = (d_in, saved, u.detach(), mask, *codes, batch_major)
        torch.library.opcheck(native_torch.mgu_backward, args)

    def loss(xw, h0, u):
        time_major = native_torch.recurrence(xw, h0, u, mask, "tanh", "sigmoid")
        batch_major = native_torch.recurrence(
            xw.transpose(0, 1), h0, u, mask, "tanh", "sigmoid", batch_major=True
        )
        return (time_major * d_hs).sum() + (batch_major.transpose(0, 1) * d_hs**2).sum()

    traced = torch.compile(loss, backend="aot_eager", fullgraph=True)
    eager_value = loss(xw, h0, u)
    eager_grads = torch.autograd.grad(eager_value, (xw, h0, u))
    traced_value = traced(xw, h0, u)
    traced_grads = torch.autograd.grad(traced_value, (xw, h0, u))
    torch.testing.assert_close(traced_value, eager_value)
    for got, want in zip(traced_grads, eager_grads):
        torch.testing.assert_close(got, want)
