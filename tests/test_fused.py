"""The fused sequence path gives the same numbers as the plain cell loop.

Every comparison runs one layer configuration through ``implementation="fused"``
and ``implementation="cell"`` with the same weights, on the active backend.
"""

import keras
import numpy as np
import pytest

from keras_mgu import MGU
from tests.helpers import input_gradient_penalty_grads, to_numpy, value_and_grad

B, T, D, H = 3, 9, 3, 4

pytestmark = pytest.mark.skipif(
    not MGU(2).uses_fused_path, reason="no fused kernel on this backend"
)


def twin_layers(rng, **kwargs):
    """A fused and a cell layer with the same random weights."""
    layers = []
    weights = None
    for implementation in ("fused", "cell"):
        layer = MGU(H, implementation=implementation, **kwargs)
        layer.build((None, T, D))
        if weights is None:
            weights = [rng.standard_normal(w.shape).astype("float32") * 0.6 for w in layer.weights]
        layer.set_weights(weights)
        layers.append(layer)
    return layers, weights


def call_args(rng, with_mask, with_state):
    kwargs = {}
    if with_mask:
        mask = rng.random((B, T)) > 0.3
        mask[0] = True
        mask[-1] = False
        kwargs["mask"] = mask
    if with_state:
        kwargs["initial_state"] = rng.standard_normal((B, H)).astype("float32")
    return kwargs


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_outputs_and_states_match(rng, go_backwards, with_mask, with_state):
    (fused, cell), _ = twin_layers(
        rng, return_sequences=True, return_state=True, go_backwards=go_backwards
    )
    x = rng.standard_normal((B, T, D)).astype("float32")
    kwargs = call_args(rng, with_mask, with_state)
    for got, want in zip(fused(x, **kwargs), cell(x, **kwargs)):
        np.testing.assert_allclose(to_numpy(got), to_numpy(want), atol=1e-5)


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("go_backwards", [False, True])
def test_gradients_match(rng, with_mask, go_backwards):
    (fused, cell), weights = twin_layers(
        rng, return_sequences=True, return_state=True, go_backwards=go_backwards
    )
    x = rng.standard_normal((B, T, D)).astype("float32")
    h0 = rng.standard_normal((B, H)).astype("float32")
    mask = call_args(rng, with_mask, False).get("mask")
    probe = rng.standard_normal((B, T, H)).astype("float32")

    def loss_of(layer):
        frozen = [v.value for v in layer.non_trainable_variables]

        def loss(x_, h0_, *ws):
            seq, last = layer.stateless_call(list(ws), frozen, x_, initial_state=h0_, mask=mask)[0]
            return keras.ops.sum(seq * keras.ops.convert_to_tensor(probe)) + keras.ops.sum(last**2)

        return loss

    got = value_and_grad(loss_of(fused), [x, h0, *weights])
    want = value_and_grad(loss_of(cell), [x, h0, *weights])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5)


def test_second_order_gradients_match(rng):
    (fused, cell), weights = twin_layers(rng, return_sequences=True)
    x = rng.standard_normal((B, T, D)).astype("float32")

    def forward_of(layer):
        frozen = [v.value for v in layer.non_trainable_variables]
        return lambda x_, *ws: layer.stateless_call(list(ws), frozen, x_)[0]

    got = input_gradient_penalty_grads(forward_of(fused), x, weights)
    want = input_gradient_penalty_grads(forward_of(cell), x, weights)
    for g, w in zip(got, want):
        assert np.any(g != 0)
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)


def test_stateful_matches(rng):
    (fused, cell), weights = twin_layers(rng, return_sequences=True)
    x = rng.standard_normal((B, 2 * T, D)).astype("float32")
    stateful = MGU(H, return_sequences=True, stateful=True, implementation="fused")
    stateful.build((B, T, D))
    stateful.set_weights(weights)
    halves = [to_numpy(stateful(x[:, :T])), to_numpy(stateful(x[:, T:]))]
    np.testing.assert_allclose(np.concatenate(halves, axis=1), to_numpy(cell(x)), atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_matches(rng, policy):
    (fused, cell), _ = twin_layers(rng, return_sequences=True, dtype=policy)
    x = rng.standard_normal((B, T, D)).astype("float32")
    got, want = fused(x), cell(x)
    assert keras.backend.standardize_dtype(got.dtype) == policy.split("_")[1]
    np.testing.assert_allclose(
        to_numpy(got).astype("float32"), to_numpy(want).astype("float32"), atol=0.03
    )


def test_training_with_dropout_uses_fused_path(rng):
    (fused, _), _ = twin_layers(rng, dropout=0.3, seed=1)
    x = rng.standard_normal((8, T, D)).astype("float32")
    model = keras.Sequential([keras.Input((T, D)), fused, keras.layers.Dense(1)])
    model.compile("adam", "mse")
    history = model.fit(x, np.ones((8, 1)), epochs=2, verbose=0)
    assert fused.uses_fused_path
    assert np.all(np.isfinite(history.history["loss"]))
