"""The simulation model: shapes, the learned initial state, save/load, errors."""

import keras
import numpy as np
import pytest

from keras_mgu import MGU
from keras_mgu.kernels.reference import mgu_sequence
from keras_mgu.sysid import LearnedInitialState, build_simulator


def test_shapes_and_parameter_layout():
    model = build_simulator(2, 3, units=(8, 5), seed=0)
    y = model.predict(np.zeros((4, 7, 2), "float32"), verbose=0)
    assert y.shape == (4, 7, 3)
    names = {w.path.split("/")[0] for w in model.weights}
    assert {"initial_state_0_0", "initial_state_1_0", "mgu_0", "mgu_1", "head", "linear"} <= names


def test_output_is_mgu_from_the_learned_state_plus_linear_path(rng):
    model = build_simulator(2, 1, units=4, seed=1)
    model.get_layer("initial_state_0_0").state.assign(rng.normal(size=4).astype("float32"))
    for layer in ("head", "linear"):
        kernel, bias = model.get_layer(layer).weights
        kernel.assign(rng.normal(size=kernel.shape).astype("float32"))
        bias.assign(rng.normal(size=bias.shape).astype("float32"))
    u = rng.normal(size=(3, 6, 2)).astype("float32")
    mgu = model.get_layer("mgu_0")
    w, uk, b = (keras.ops.convert_to_numpy(v) for v in mgu.weights)
    h0 = np.tile(keras.ops.convert_to_numpy(model.get_layer("initial_state_0_0").state), (3, 1))
    h, _ = mgu_sequence(u, w, uk, b, initial_state=h0)
    hk, hb = (keras.ops.convert_to_numpy(v) for v in model.get_layer("head").weights)
    lk, lb = (keras.ops.convert_to_numpy(v) for v in model.get_layer("linear").weights)
    expected = h @ hk + hb + u @ lk + lb
    np.testing.assert_allclose(model.predict(u, verbose=0), expected, atol=1e-5)


def test_initial_state_layer_broadcasts_and_serializes():
    layer = LearnedInitialState(3, initializer="ones")
    out = keras.ops.convert_to_numpy(layer(np.zeros((5, 2, 1), "float32")))
    np.testing.assert_array_equal(out, np.ones((5, 3)))
    clone = LearnedInitialState.from_config(layer.get_config())
    assert clone.units == 3
    with pytest.raises(ValueError, match="positive integer"):
        LearnedInitialState(0)


def test_lstm_learns_both_states_and_gru_runs():
    lstm = build_simulator(1, 1, units=3, cell="lstm", seed=0)
    assert {"initial_state_0_0", "initial_state_0_1"} <= {
        w.path.split("/")[0] for w in lstm.weights
    }
    gru = build_simulator(1, 1, units=3, cell="gru", seed=0)
    assert gru.predict(np.zeros((1, 4, 1), "float32"), verbose=0).shape == (1, 4, 1)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_keras_layers_keep_their_cudnn_path_eligible(cell):
    """Keras runs its GRU and LSTM on cuDNN on a GPU only with these settings (its conditions)."""
    model = build_simulator(1, 1, units=(3, 2), cell=cell, seed=0)
    layers = [layer for layer in model.layers if layer.name.startswith(f"{cell}_")]
    assert len(layers) == 2
    for layer in layers:
        assert layer.use_cudnn == "auto" and not layer.unroll and layer.cell.use_bias
        assert layer.cell.recurrent_dropout == 0 and layer.cell.dropout == 0
        assert layer.cell.activation is keras.activations.tanh
        assert layer.cell.recurrent_activation is keras.activations.sigmoid
        assert cell == "lstm" or layer.cell.reset_after


def test_save_and_load_give_the_same_simulation(tmp_path, rng):
    model = build_simulator(1, 1, units=4, seed=2)
    model.get_layer("initial_state_0_0").state.assign(np.full(4, 0.3, "float32"))
    u = rng.normal(size=(2, 9, 1)).astype("float32")
    path = str(tmp_path / "sim.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.get_layer("mgu_0"), MGU)
    np.testing.assert_allclose(loaded.predict(u, verbose=0), model.predict(u, verbose=0), atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"units": 0}, "units"),
        ({"units": []}, "units"),
        ({"cell": "rnn"}, "cell"),
        ({"n_inputs": 0}, "n_inputs"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    args = {"n_inputs": 1, "n_outputs": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        build_simulator(**args)
