"""``FusedRNN``'s fused engine equals its Keras cell loop on the same user-written cell and weights.

Each comparison runs one cell through ``keras_mgu.FusedRNN`` on the fused
engine and through ``FusedRNN(implementation="cell")`` (Keras's cell loop,
with the package's masking rule: ``tests/test_masking.py`` pins the rule
itself), with the same random weights, on the active backend; gradients are
also checked against central finite differences.
"""

import keras
import numpy as np
import pytest

import keras_mgu
from keras_mgu import FusedRNN
from tests.fused_cells import PeepholeLSTMCell, ReadoutCell, UserGRUCell
from tests.helpers import (
    BACKEND,
    input_gradient_penalty_grads,
    to_numpy,
    value_and_grad,
)

B, T, D, H = 3, 7, 2, 3

pytestmark = pytest.mark.skipif(
    not FusedRNN(UserGRUCell(2)).uses_fused_path, reason="no fused engine on this backend"
)

CELLS = {
    "lstm": lambda dtype=None: PeepholeLSTMCell(H, dtype=dtype),
    "gru": lambda dtype=None: UserGRUCell(H, dtype=dtype),
    "readout": lambda dtype=None: ReadoutCell(H, 2, dtype=dtype),
}


def twins(rng, cell, dtype=None, **kwargs):
    """A fused ``FusedRNN`` and its cell-loop twin with the same random weights."""
    fused = FusedRNN(CELLS[cell](dtype), implementation="fused", dtype=dtype, **kwargs)
    plain = FusedRNN(CELLS[cell](dtype), implementation="cell", dtype=dtype, **kwargs)
    weights = None
    for layer in (fused, plain):
        layer.build((None, T, D))
        if weights is None:
            weights = [rng.standard_normal(w.shape) * 0.5 for w in layer.weights]
        layer.set_weights(weights)
    return fused, plain, [w.astype(fused.weights[0].dtype) for w in weights]


def random_mask(rng):
    mask = rng.random((B, T)) > 0.4
    mask[0] = True
    mask[1, :3] = False  # masked leading steps: the output repeats the initial state's
    mask[-1, -2:] = False
    return mask


def random_states(rng, layer):
    sizes = layer.cell.state_size
    sizes = sizes if isinstance(sizes, list) else [sizes]
    return [rng.standard_normal((B, s)).astype("float32") for s in sizes]


def assert_all_close(got, want, atol=1e-5, rtol=1e-5):
    got = got if isinstance(got, (list, tuple)) else [got]
    want = want if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(to_numpy(g), to_numpy(w), atol=atol, rtol=rtol)


@pytest.mark.parametrize("cell", sorted(CELLS))
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
def test_outputs_and_states_match(rng, cell, go_backwards, with_mask):
    fused, plain, _ = twins(
        rng, cell, return_sequences=True, return_state=True, go_backwards=go_backwards
    )
    assert fused.uses_fused_path
    x = rng.standard_normal((B, T, D)).astype("float32")
    kwargs = {"initial_state": random_states(rng, fused)}
    if with_mask:
        kwargs["mask"] = random_mask(rng)
    assert_all_close(fused(x, **kwargs), plain(x, **kwargs))


@pytest.mark.parametrize("zero_output_for_mask", [False, True])
def test_last_output_with_mask_matches(rng, zero_output_for_mask):
    fused, plain, _ = twins(rng, "readout", zero_output_for_mask=zero_output_for_mask)
    x = rng.standard_normal((B, T, D)).astype("float32")
    mask = random_mask(rng)
    assert_all_close(fused(x, mask=mask), plain(x, mask=mask))


def loss_of(layer, mask, probe):
    frozen = [v.value for v in layer.non_trainable_variables]
    mask = None if mask is None else keras.ops.convert_to_tensor(mask)

    def loss(x, *args):
        n = len(args) - len(layer.trainable_weights)
        states, weights = list(args[:n]), list(args[n:])
        seq, *final = layer.stateless_call(weights, frozen, x, initial_state=states, mask=mask)[0]
        value = keras.ops.sum(seq * keras.ops.convert_to_tensor(probe, seq.dtype))
        return value + sum(keras.ops.sum(s**2) for s in final)

    return loss


@pytest.mark.parametrize("cell", sorted(CELLS))
@pytest.mark.parametrize("with_mask", [False, True])
def test_gradients_match(rng, cell, with_mask):
    fused, plain, weights = twins(
        rng, cell, return_sequences=True, return_state=True, go_backwards=with_mask
    )
    x = rng.standard_normal((B, T, D)).astype("float32")
    states = random_states(rng, fused)
    mask = random_mask(rng) if with_mask else None
    probe = rng.standard_normal((B, T, fused.cell.output_size)).astype("float32")
    got = value_and_grad(loss_of(fused, mask, probe), [x, *states, *weights])
    want = value_and_grad(loss_of(plain, mask, probe), [x, *states, *weights])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1], want[1]):
        assert np.any(w != 0)
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)


def test_gradients_match_finite_differences(rng):
    """Directional derivatives along random directions against central differences."""
    fused, _, weights = twins(rng, "lstm", return_sequences=True)
    x = rng.standard_normal((2, T, D)).astype("float32")
    probe = rng.standard_normal((2, T, H)).astype("float32")
    frozen = [v.value for v in fused.non_trainable_variables]

    def loss(*ws):
        seq = fused.stateless_call(list(ws), frozen, x)[0]
        return keras.ops.sum(seq * keras.ops.convert_to_tensor(probe))

    _, grads = value_and_grad(loss, weights)
    for _ in range(3):
        direction = [rng.standard_normal(w.shape).astype("float32") for w in weights]
        shifted = [[w + e * d for w, d in zip(weights, direction)] for e in (1e-2, -1e-2)]
        want = (float(to_numpy(loss(*shifted[0]))) - float(to_numpy(loss(*shifted[1])))) / 2e-2
        got = sum(float(np.sum(g * d)) for g, d in zip(grads, direction))
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("cell", ["lstm", "readout"])
def test_second_order_gradients_match(rng, cell):
    fused, plain, weights = twins(rng, cell, return_sequences=True)
    x = rng.standard_normal((B, T, D)).astype("float32")

    def forward_of(layer):
        frozen = [v.value for v in layer.non_trainable_variables]
        return lambda x_, *ws: layer.stateless_call(list(ws), frozen, x_)[0]

    got = input_gradient_penalty_grads(forward_of(fused), x, weights)
    want = input_gradient_penalty_grads(forward_of(plain), x, weights)
    for g, w in zip(got, want):
        assert np.any(w != 0)
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)


def test_input_gradient_of_a_model_matches(rng):
    fused, plain, _ = twins(rng, "gru", return_sequences=True)
    x = rng.standard_normal((B, T, D)).astype("float32")
    got = keras_mgu.input_gradient(keras.Sequential([fused]), x)
    want = keras_mgu.input_gradient(keras.Sequential([plain]), x)
    assert_all_close(got, want)


def test_stateful_halves_match_one_call(rng):
    _, plain, weights = twins(rng, "lstm", return_sequences=True)
    x = rng.standard_normal((B, 2 * T, D)).astype("float32")
    stateful = FusedRNN(PeepholeLSTMCell(H), return_sequences=True, stateful=True)
    stateful.build((B, T, D))
    stateful.set_weights(weights)
    halves = [to_numpy(stateful(x[:, :T])), to_numpy(stateful(x[:, T:]))]
    np.testing.assert_allclose(np.concatenate(halves, axis=1), to_numpy(plain(x)), atol=1e-5)
    stateful.reset_state()
    assert_all_close(stateful(x[:, :T]), halves[0])


def test_bidirectional_matches(rng):
    fused, plain, weights = twins(rng, "gru", return_sequences=True)
    pair_f = keras.layers.Bidirectional(fused)
    pair_p = keras.layers.Bidirectional(plain)
    for pair in (pair_f, pair_p):
        pair.build((None, T, D))
        pair.set_weights(weights * 2)
    x = rng.standard_normal((B, T, D)).astype("float32")
    mask = random_mask(rng)
    assert_all_close(pair_f(x, mask=mask), pair_p(x, mask=mask))


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_matches(rng, policy):
    fused, plain, _ = twins(rng, "lstm", dtype=policy, return_sequences=True)
    x = rng.standard_normal((B, T, D)).astype("float32")
    got, want = fused(x), plain(x)
    assert keras.backend.standardize_dtype(got.dtype) == policy.split("_")[1]
    assert_all_close(
        to_numpy(got).astype("float32"), to_numpy(want).astype("float32"), atol=0.03, rtol=0
    )
    model = keras.Sequential([keras.Input((T, D)), fused, keras.layers.Dense(1, dtype="float32")])
    model.compile("adam", "mse")
    history = model.fit(x, np.ones((B, T, 1)), epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))


def test_save_and_load_in_safe_mode(rng, tmp_path):
    fused, _, _ = twins(rng, "lstm", return_sequences=True)
    model = keras.Sequential([keras.Input((T, D)), fused, keras.layers.Dense(1)])
    x = rng.standard_normal((B, T, D)).astype("float32")
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    layer = loaded.layers[0]
    assert isinstance(layer, FusedRNN) and isinstance(layer.cell, PeepholeLSTMCell)
    assert layer.implementation == "fused" and layer.uses_fused_path
    assert_all_close(loaded(x), model(x))


@pytest.mark.parametrize(
    "jit", [False, pytest.param(True, marks=pytest.mark.skipif(BACKEND == "torch", reason="XLA"))]
)
def test_fit_reduces_the_loss(rng, jit):
    x = rng.standard_normal((16, T, D)).astype("float32")
    y = np.cumsum(x[..., :1], axis=1) * 0.3
    model = keras.Sequential(
        [
            keras.Input((T, D)),
            FusedRNN(PeepholeLSTMCell(4), return_sequences=True),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.Adam(0.03), "mse", jit_compile=jit)
    history = model.fit(x, y, batch_size=8, epochs=4, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_mgu_cell_on_the_generic_engine_matches_the_mgu_kernel(rng):
    cell = keras_mgu.MGUCell(H)
    cell.own_kernel = False
    layer = FusedRNN(cell, return_sequences=True, implementation="fused")
    mgu = keras_mgu.MGU(H, return_sequences=True)
    for lay in (layer, mgu):
        lay.build((None, T, D))
    mgu.set_weights(layer.get_weights())
    x = rng.standard_normal((B, T, D)).astype("float32")
    h0 = rng.standard_normal((B, H)).astype("float32")
    mask = random_mask(rng)
    got = layer(x, initial_state=[h0], mask=mask)
    assert layer.kernel_in_use == "engine"
    assert_all_close(got, mgu(x, initial_state=[h0], mask=mask))
    assert mgu.kernel_in_use in ("native", "fused")


# ----------------------------------------------------------------- fallback
class OverridingCell(UserGRUCell):
    def call(self, inputs, states, training=False):
        output, new = super().call(inputs, states)
        return output * 2.0, new


class DropoutGRUCell(UserGRUCell):
    dropout = 0.2


@pytest.mark.parametrize(
    "make_cell, reason",
    [
        (lambda: keras.layers.SimpleRNNCell(H), "not a keras_mgu.FusedCell"),
        (lambda: OverridingCell(H), "overrides `call`"),
        (lambda: DropoutGRUCell(H), "dropout > 0"),
    ],
)
def test_unsupported_cells_fall_back_or_raise(rng, make_cell, reason):
    auto = FusedRNN(make_cell(), return_sequences=True)
    assert not auto.uses_fused_path
    assert reason in auto.fused_unsupported_reason()
    plain = keras.layers.RNN(make_cell(), return_sequences=True)
    x = rng.standard_normal((B, T, D)).astype("float32")
    auto.build(x.shape)
    plain.build(x.shape)
    plain.set_weights(auto.get_weights())
    assert_all_close(auto(x), plain(x))
    with pytest.raises(ValueError, match="implementation='fused' cannot serve"):
        FusedRNN(make_cell(), implementation="fused")


def test_unroll_falls_back_and_cell_implementation_is_the_loop():
    assert not FusedRNN(UserGRUCell(H), unroll=True).uses_fused_path
    with pytest.raises(ValueError, match="unroll=True"):
        FusedRNN(UserGRUCell(H), unroll=True, implementation="fused")
    assert not FusedRNN(UserGRUCell(H), implementation="cell").uses_fused_path
    assert FusedRNN(UserGRUCell(H)).uses_fused_path


def test_bad_implementation_is_refused():
    with pytest.raises(ValueError, match="must be one of"):
        FusedRNN(UserGRUCell(H), implementation="scan")


def test_a_cell_without_step_says_so():
    cell = keras_mgu.FusedCell()
    with pytest.raises(NotImplementedError, match="must implement `step"):
        cell.step(None, [])


TORCH_LAYERS = {"scripted": (True, True), "traced": (False, True), "as written": (False, False)}


@pytest.mark.skipif(BACKEND != "torch", reason="the torch engine's three loop layers")
@pytest.mark.parametrize("layer", sorted(TORCH_LAYERS))
@pytest.mark.parametrize("with_mask", [False, True])
def test_torch_loop_layers_match_the_cell_loop(rng, monkeypatch, layer, with_mask):
    from keras_mgu.fused.engines import torch as engine

    script, trace = TORCH_LAYERS[layer]
    monkeypatch.setattr(engine, "SCRIPT_LOOPS", script)
    monkeypatch.setattr(engine, "TRACE_STEPS", trace)
    fused, plain, weights = twins(rng, "lstm", return_sequences=True, return_state=True)
    x = rng.standard_normal((B, T, D)).astype("float32")
    mask = keras.ops.convert_to_tensor(random_mask(rng)) if with_mask else None
    probe = rng.standard_normal((B, T, H)).astype("float32")
    states = random_states(rng, fused)
    got = value_and_grad(loss_of(fused, mask, probe), [x, *states, *weights])
    want = value_and_grad(loss_of(plain, mask, probe), [x, *states, *weights])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)
    programs = list(engine._PROGRAMS.get(fused._step_function(with_mask), {}).values())
    if trace:
        assert programs and all(p is not None for p in programs)
        assert all((p.scripted is not None) == script for p in programs)
    else:
        assert not programs
    second = input_gradient_penalty_grads(
        lambda x_, *ws: fused.stateless_call(list(ws), [], x_)[0][0], x, weights
    )
    reference = input_gradient_penalty_grads(
        lambda x_, *ws: plain.stateless_call(list(ws), [], x_)[0][0], x, weights
    )
    for g, w in zip(second, reference):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)


@pytest.mark.skipif(BACKEND != "torch", reason="the torch engine's step tracing")
def test_torch_untraceable_step_runs_as_written(rng):
    from keras_mgu.fused.engines import torch as engine

    def step(p_t, m_t, carry, weights):
        if float(p_t.sum()) > 1e9:  # a Python branch on a tensor value cannot be traced
            raise AssertionError
        return p_t, [carry[0] + p_t]

    p = keras.ops.convert_to_tensor(rng.standard_normal((B, T, 2)).astype("float32"))
    h0 = keras.ops.zeros((B, 2))
    outputs, (h,) = engine.run(step, p, [h0], [], None)
    assert engine._PROGRAMS[step] and all(p is None for p in engine._PROGRAMS[step].values())
    np.testing.assert_allclose(to_numpy(h), to_numpy(p).sum(axis=1), atol=1e-5)
    np.testing.assert_allclose(to_numpy(outputs), to_numpy(p))


ENGINE_SETTINGS = [
    {
        "HOIST_PROJECTION": True,
        "UNROLL": 3,
        "LOOP_WEIGHT_GRADIENTS": False,
        "DERIVED_BACKWARD": True,
    },
    {"HOIST_PROJECTION": False, "LOOP_WEIGHT_GRADIENTS": True},
]


@pytest.mark.skipif(BACKEND not in ("tensorflow", "jax"), reason="engine settings of TF and JAX")
@pytest.mark.parametrize("settings", ENGINE_SETTINGS, ids=["hoisted-unrolled-rows", "in-step"])
def test_engine_settings_give_the_same_gradients(rng, monkeypatch, settings):
    """Hoisted or in-step projection, unrolled loops and the weight gradients in the
    reverse loop or after it (TF), and the derived backward (JAX) change no number."""
    engine = keras_mgu.fused.engines.engine_module()
    for name, value in settings.items():
        monkeypatch.setattr(engine, name, value, raising=name == "HOIST_PROJECTION")
    fused, plain, weights = twins(rng, "lstm", return_sequences=True, return_state=True)
    x = rng.standard_normal((B, T, D)).astype("float32")
    mask = keras.ops.convert_to_tensor(random_mask(rng))
    probe = rng.standard_normal((B, T, H)).astype("float32")
    states = random_states(rng, fused)
    got = value_and_grad(loss_of(fused, mask, probe), [x, *states, *weights])
    want = value_and_grad(loss_of(plain, mask, probe), [x, *states, *weights])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)
    second = input_gradient_penalty_grads(
        lambda x_, *ws: fused.stateless_call(list(ws), [], x_)[0][0], x, weights
    )
    reference = input_gradient_penalty_grads(
        lambda x_, *ws: plain.stateless_call(list(ws), [], x_)[0][0], x, weights
    )
    for g, w in zip(second, reference):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-4)
