"""MGU and MGUCell against the NumPy reference, Keras conventions and bad input."""

import os

import keras
import numpy as np
import pytest

from keras_mgu import MGU, MGUCell
from keras_mgu.kernels import reference
from tests.helpers import BACKEND, central_differences, random_mgu_weights, to_numpy, value_and_grad

B, T, D, H = 3, 7, 4, 5
IMPLEMENTATIONS = ["cell", "auto"]


def random_weights(rng, d=D, h=H):
    return random_mgu_weights(rng, d, h)


def built_layer(rng, **kwargs):
    layer = MGU(H, **kwargs)
    layer.build((None, T, D))
    weights = random_weights(rng)
    layer.set_weights(weights)
    return layer, weights


def random_mask(rng, batch=B, steps=T):
    mask = rng.random((batch, steps)) > 0.3
    mask[0, :] = True  # a full row
    mask[1, :2] = False  # leading masked steps
    mask[-1, :] = False  # a fully masked row
    return mask


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
def test_matches_numpy_reference(rng, implementation, go_backwards, with_mask):
    layer, (w, u, b) = built_layer(
        rng,
        return_sequences=True,
        return_state=True,
        go_backwards=go_backwards,
        implementation=implementation,
    )
    x = rng.standard_normal((B, T, D)).astype("float32")
    h0 = rng.standard_normal((B, H)).astype("float32")
    mask = random_mask(rng) if with_mask else None
    seq, state = layer(x, initial_state=h0, mask=mask)
    ref_seq, ref_state = reference.mgu_sequence(
        x, w, u, b, initial_state=h0, mask=mask, go_backwards=go_backwards
    )
    np.testing.assert_allclose(to_numpy(seq), ref_seq, atol=1e-5)
    np.testing.assert_allclose(to_numpy(state), ref_state, atol=1e-5)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_last_output_and_no_bias(rng, implementation):
    layer = MGU(H, use_bias=False, implementation=implementation)
    layer.build((None, T, D))
    w, u, _ = random_weights(rng)
    layer.set_weights([w, u])
    x = rng.standard_normal((B, T, D)).astype("float32")
    _, ref_state = reference.mgu_sequence(x, w, u, None)
    np.testing.assert_allclose(to_numpy(layer(x)), ref_state, atol=1e-5)
    assert len(layer.weights) == 2


def test_stacked_cells_match_reference(rng):
    cells = [MGUCell(H), MGUCell(3)]
    rnn = keras.layers.RNN(cells, return_sequences=True)
    rnn.build((None, T, D))
    w1, u1, b1 = random_weights(rng)
    w2, u2, b2 = random_weights(rng, d=H, h=3)
    rnn.set_weights([w1, u1, b1, w2, u2, b2])
    x = rng.standard_normal((B, T, D)).astype("float32")
    mid, _ = reference.mgu_sequence(x, w1, u1, b1)
    ref, _ = reference.mgu_sequence(mid, w2, u2, b2)
    np.testing.assert_allclose(to_numpy(rnn(x)), ref, atol=1e-5)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_stacked_layers_with_masking_layer(rng, implementation):
    x = rng.standard_normal((B, T, D)).astype("float32")
    x[1, -3:] = 0.0  # padded tail
    model = keras.Sequential(
        [
            keras.Input((T, D)),
            keras.layers.Masking(0.0),
            MGU(H, return_sequences=True, implementation=implementation),
            MGU(2, implementation=implementation),
        ]
    )
    w1 = random_weights(rng)
    w2 = random_weights(rng, d=H, h=2)
    model.set_weights(w1 + w2)
    mask = np.any(x != 0.0, axis=-1)
    mid, _ = reference.mgu_sequence(x, *w1, mask=mask)
    _, ref = reference.mgu_sequence(mid, *w2, mask=mask)
    np.testing.assert_allclose(to_numpy(model(x)), ref, atol=1e-5)


def test_weights_shapes_and_forget_bias():
    layer = MGU(6)
    layer.build((None, None, 3))
    shapes = {w.path.split("/")[-1]: tuple(w.shape) for w in layer.weights}
    assert shapes == {"kernel": (3, 12), "recurrent_kernel": (6, 12), "bias": (12,)}
    bias = to_numpy(layer.cell.bias)
    np.testing.assert_array_equal(bias, np.r_[np.ones(6), np.zeros(6)])
    assert layer.cell.state_size == layer.cell.output_size == 6
    layer = MGU(6, unit_forget_bias=False)
    layer.build((None, None, 3))
    np.testing.assert_array_equal(to_numpy(layer.cell.bias), np.zeros(12))


def test_recurrent_kernel_is_orthogonal_by_default():
    cell = MGUCell(4)
    cell.build((None, 3))
    u = to_numpy(cell.recurrent_kernel)
    np.testing.assert_allclose(u @ u.T, np.eye(4), atol=1e-5)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_gradients_match_finite_differences(rng, implementation):
    """d loss / d (inputs, weights) against central differences of the NumPy reference."""
    layer, weights = built_layer(rng, return_sequences=True, implementation=implementation)
    x = rng.standard_normal((2, 4, D)).astype("float32")
    target = rng.standard_normal((2, 4, H)).astype("float32")

    frozen = [v.value for v in layer.non_trainable_variables]

    def loss(x_, w_, u_, b_):
        out = layer.stateless_call([w_, u_, b_], frozen, x_)[0]
        return keras.ops.sum((out - keras.ops.convert_to_tensor(target)) ** 2)

    _, grads = value_and_grad(loss, [x, *weights])

    def ref_loss(x_, w_, u_, b_):
        out, _ = reference.mgu_sequence(x_, w_, u_, b_)
        return float(np.sum((out - target) ** 2))

    args64 = [a.astype("float64") for a in (x, *weights)]
    for got, want in zip(grads, central_differences(ref_loss, args64, eps=1e-5)):
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_stateful_halves_equal_one_pass(rng, implementation):
    x = rng.standard_normal((B, 2 * T, D)).astype("float32")
    full, weights = built_layer(rng, return_sequences=True, implementation=implementation)
    whole = to_numpy(full(x))
    stateful = MGU(H, return_sequences=True, stateful=True, implementation=implementation)
    stateful.build((B, T, D))
    stateful.set_weights(weights)
    first = to_numpy(stateful(x[:, :T]))
    second = to_numpy(stateful(x[:, T:]))
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), whole, atol=1e-5)
    stateful.reset_state()
    np.testing.assert_allclose(to_numpy(stateful(x[:, :T])), first, atol=1e-6)
    with pytest.raises(ValueError, match="batch size"):
        stateful(x[:2, :T])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_dropout_only_in_training(rng, implementation):
    layer, _ = built_layer(rng, dropout=0.5, seed=3, implementation=implementation)
    x = rng.standard_normal((B, T, D)).astype("float32")
    inference_a = to_numpy(layer(x, training=False))
    inference_b = to_numpy(layer(x))
    np.testing.assert_array_equal(inference_a, inference_b)
    trained = to_numpy(layer(x, training=True))
    assert not np.allclose(trained, inference_a)


def test_recurrent_dropout_only_in_training(rng):
    layer, _ = built_layer(rng, recurrent_dropout=0.5, seed=3)
    assert not layer.uses_fused_path
    x = rng.standard_normal((B, T, D)).astype("float32")
    np.testing.assert_array_equal(to_numpy(layer(x)), to_numpy(layer(x, training=False)))
    assert not np.allclose(to_numpy(layer(x, training=True)), to_numpy(layer(x)))


def test_config_is_flat_and_round_trips():
    layer = MGU(
        7,
        activation="sigmoid",
        dropout=0.25,
        return_sequences=True,
        go_backwards=True,
        kernel_regularizer="l2",
        implementation="cell",
        name="m",
    )
    config = layer.get_config()
    assert "cell" not in config
    assert config["units"] == 7 and config["implementation"] == "cell"
    clone = MGU.from_config(config)
    assert clone.get_config() == config
    assert clone.units == 7 and clone.dropout == 0.25 and clone.go_backwards
    assert keras.saving.get_registered_name(MGU) == "keras_mgu>MGU"
    assert keras.saving.get_registered_name(MGUCell) == "keras_mgu>MGUCell"


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_save_and_load_predict_identically(tmp_path, rng, implementation):
    model = keras.Sequential()
    model.add(keras.Input((T, D)))
    model.add(MGU(H, return_sequences=True, implementation=implementation))
    model.add(keras.layers.RNN(MGUCell(3)))
    model.add(keras.layers.Dense(1))
    x = rng.standard_normal((B, T, D)).astype("float32")
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_array_equal(to_numpy(loaded(x)), to_numpy(model(x)))
    assert loaded.layers[0].implementation == implementation


def test_mixed_precision_policies(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    for policy in ("mixed_float16", "mixed_bfloat16"):
        for implementation in IMPLEMENTATIONS:
            layer, weights = built_layer(
                rng, return_sequences=True, dtype=policy, implementation=implementation
            )
            assert layer.cell.kernel.dtype == "float32"
            out = layer(x)
            assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
            ref, _ = reference.mgu_sequence(x, *weights)
            np.testing.assert_allclose(to_numpy(out).astype("float32"), ref, atol=0.05)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_small_model_learns(rng, implementation):
    """A toy task: output the running mean of the input; loss falls 10x."""
    keras.utils.set_random_seed(0)
    x = rng.uniform(-1, 1, (32, 8, 1)).astype("float32")
    y = np.cumsum(x, axis=1) / np.arange(1, 9)[None, :, None]
    model = keras.Sequential(
        [
            keras.Input((8, 1)),
            MGU(8, return_sequences=True, implementation=implementation),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(0.05), "mse")
    first = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=80, batch_size=32, verbose=0)
    assert model.evaluate(x, y, verbose=0) < first / 10


@pytest.mark.skipif(BACKEND == "torch", reason="jit_compile is a TensorFlow/JAX feature")
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_jit_compiled_training(rng, implementation):
    x = rng.standard_normal((8, T, D)).astype("float32")
    y = rng.standard_normal((8, 1)).astype("float32")
    model = keras.Sequential(
        [keras.Input((T, D)), MGU(H, implementation=implementation), keras.layers.Dense(1)]
    )
    model.compile("adam", "mse", jit_compile=True)
    history = model.fit(x, y, epochs=2, batch_size=4, verbose=0)
    assert model.jit_compile
    assert np.all(np.isfinite(history.history["loss"]))


class TestKerasLayerHarness:
    """Keras's own layer test harness: serialization, training, masking, mixed precision."""

    def _harness(self):
        from keras.src.testing import TestCase

        class Harness(TestCase):
            def runTest(self):  # pragma: no cover - unittest protocol
                pass

        return Harness()

    @pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
    def test_mgu_layer(self, implementation):
        self._harness().run_layer_test(
            MGU,
            init_kwargs={"units": 3, "dropout": 0.5, "implementation": implementation},
            input_shape=(3, 2, 4),
            call_kwargs={"training": True},
            expected_output_shape=(3, 3),
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=1,
            supports_masking=True,
        )
        self._harness().run_layer_test(
            MGU,
            init_kwargs={
                "units": 3,
                "return_sequences": True,
                "kernel_regularizer": "l2",
                "recurrent_regularizer": "l2",
                "bias_regularizer": "l1",
                "implementation": implementation,
            },
            input_shape=(3, 2, 4),
            expected_output_shape=(3, 2, 3),
            expected_num_losses=3,
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=0,
            supports_masking=True,
        )

    def test_rnn_of_cell(self):
        self._harness().run_layer_test(
            keras.layers.RNN,
            init_kwargs={"cell": MGUCell(3, recurrent_dropout=0.2), "return_sequences": True},
            input_shape=(3, 2, 4),
            call_kwargs={"training": True},
            expected_output_shape=(3, 2, 3),
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=0,
            supports_masking=True,
            custom_objects={"MGUCell": MGUCell},
        )


@pytest.mark.parametrize("units", [0, -3, 2.5, "8", True])
def test_bad_units(units):
    with pytest.raises(ValueError, match="units"):
        MGU(units)
    with pytest.raises(ValueError, match="units"):
        MGUCell(units)


@pytest.mark.parametrize("rate", [-0.1, 1.5, "x"])
def test_bad_dropout(rate):
    with pytest.raises(ValueError, match="dropout"):
        MGU(4, dropout=rate)


def test_bad_implementation():
    with pytest.raises(ValueError, match="implementation"):
        MGU(4, implementation="cudnn")


def test_fused_refuses_what_it_cannot_serve():
    for kwargs in ({"unroll": True}, {"recurrent_dropout": 0.2}):
        with pytest.raises(ValueError, match="fused"):
            MGU(4, implementation="fused", **kwargs)
        assert not MGU(4, implementation="auto", **kwargs).uses_fused_path


def test_activations_without_an_mgu_kernel_run_the_generic_engine(rng):
    layer = MGU(H, activation="relu", return_sequences=True, implementation="fused")
    assert layer.kernel_in_use == "engine"
    assert "activation='relu'" in str(_own_kernel_refusal(layer))
    reference = MGU(H, activation="relu", return_sequences=True, implementation="cell")
    x = rng.standard_normal((B, T, D)).astype("float32")
    reference.build(x.shape)
    layer.build(x.shape)
    layer.set_weights(reference.get_weights())
    np.testing.assert_allclose(to_numpy(layer(x)), to_numpy(reference(x)), atol=1e-5)
    assert layer.kernel_in_use == "engine" and reference.kernel_in_use == "cell"


def test_activations_are_named_as_keras_serializes_them():
    """Keras's own activations by their function's name (not by serialising them, which imports
    TensorFlow on any backend where it is installed); other callables by Keras, or None."""
    from keras_mgu.cell import _BUILT_IN_ACTIVATIONS, activation_name

    assert {"sigmoid", "tanh", "relu", "hard_sigmoid", "silu"} <= set(_BUILT_IN_ACTIVATIONS)
    for name in _BUILT_IN_ACTIVATIONS:
        fn = keras.activations.get(name)
        assert activation_name(fn) == keras.activations.serialize(fn) == name
    assert activation_name(keras.activations.get("swish")) == "silu"
    assert activation_name(lambda x: x) is None


def _own_kernel_refusal(layer):
    try:
        layer.cell.sequence_kernel_name("float32", None)
    except NotImplementedError as error:
        return error
    return None


@pytest.mark.parametrize("shape", [(B, D), (B, T, D, 1), (D,)])
def test_input_of_wrong_rank(rng, shape):
    layer = MGU(H)
    with pytest.raises(ValueError, match="rank"):
        layer(rng.standard_normal(shape).astype("float32"))


def test_feature_size_differs_from_build(rng):
    layer, _ = built_layer(rng)
    with pytest.raises(ValueError, match=f"{D}"):
        layer(rng.standard_normal((B, T, D + 1)).astype("float32"))


def test_zero_time_steps(rng):
    with pytest.raises(ValueError, match="time step"):
        MGU(H)(np.zeros((B, 0, D), "float32"))
