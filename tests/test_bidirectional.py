"""``zero_output_for_mask`` and ``keras.layers.Bidirectional`` on both paths.

Expected values come from the NumPy reference (:mod:`keras_mgu.kernels.reference`);
the fused path is compared with the cell loop for outputs and gradients.
"""

import keras
import numpy as np
import pytest

from keras_mgu import MGU
from keras_mgu.kernels import reference
from tests.helpers import CELL_AND_FUSED, FUSED_LIVE, random_mgu_weights, to_numpy, value_and_grad

B, T, D, H = 3, 7, 2, 4


def masks(rng):
    """Leading, trailing and inner masked steps, plus one fully real row."""
    mask = np.ones((B, T), bool)
    mask[0, :2] = False  # leading masked steps
    mask[1, -3:] = False  # trailing (padding)
    mask[2, [1, 4]] = False  # inner gaps
    return mask


def mgu_layer(implementation, weights, **kwargs):
    layer = MGU(H, implementation=implementation, **kwargs)
    layer.build((None, T, D))
    layer.set_weights(weights)
    return layer


@pytest.mark.parametrize("implementation", CELL_AND_FUSED)
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("return_sequences", [False, True])
def test_zero_output_for_mask_matches_reference(
    rng, implementation, go_backwards, return_sequences
):
    weights = random_mgu_weights(rng, D, H)
    layer = mgu_layer(
        implementation,
        weights,
        return_sequences=return_sequences,
        return_state=True,
        go_backwards=go_backwards,
        zero_output_for_mask=True,
    )
    x = rng.standard_normal((B, T, D)).astype("float32")
    h0 = rng.standard_normal((B, H)).astype("float32")
    mask = masks(rng)
    if go_backwards:
        mask[0, -2:] = False  # leading in processing order
    out, state = layer(x, initial_state=h0, mask=mask)
    want_seq, want_state = reference.mgu_sequence(
        x,
        *weights,
        initial_state=h0,
        mask=mask,
        go_backwards=go_backwards,
        zero_output_for_mask=True,
    )
    want = want_seq if return_sequences else want_seq[:, -1]
    np.testing.assert_allclose(to_numpy(out), want, atol=1e-5)
    np.testing.assert_allclose(to_numpy(state), want_state, atol=1e-5)
    if return_sequences:
        assert np.all(to_numpy(out)[0, -2 if go_backwards else 0] == 0.0)


@pytest.mark.parametrize("implementation", CELL_AND_FUSED)
def test_leading_masked_step_with_initial_state_is_zero_like_gru(implementation):
    x = np.ones((1, 3, 1), "float32")
    mask = np.array([[False, True, True]])
    h0 = np.full((1, 1), 5.0, "float32")
    layer = MGU(1, implementation=implementation, return_sequences=True, zero_output_for_mask=True)
    gru = keras.layers.GRU(1, return_sequences=True, zero_output_for_mask=True)
    assert to_numpy(layer(x, initial_state=h0, mask=mask))[0, 0, 0] == 0.0
    assert to_numpy(gru(x, initial_state=h0, mask=mask))[0, 0, 0] == 0.0


def bidirectional_twins(rng, **kwargs):
    """Bidirectional MGUs on the fused and on the cell path, with the same weights."""
    x = rng.standard_normal((B, T, D)).astype("float32")
    twins = []
    for implementation in ("fused", "cell"):
        layer = keras.layers.Bidirectional(MGU(H, implementation=implementation, **kwargs))
        layer.build((None, T, D))
        twins.append(layer)
    weights = [
        rng.standard_normal(w.shape).astype("float32") * 0.6 for w in twins[0].trainable_weights
    ]
    for layer in twins:
        for variable, value in zip(layer.trainable_weights, weights):
            variable.assign(value)
    return twins, weights, x


needs_fused = pytest.mark.skipif(not FUSED_LIVE, reason="no fused kernel on this backend")


@needs_fused
@pytest.mark.parametrize("return_sequences", [False, True])
def test_bidirectional_runs_the_fused_kernel(rng, return_sequences):
    (fused, cell), _, x = bidirectional_twins(rng, return_sequences=return_sequences)
    assert fused.forward_layer.zero_output_for_mask is return_sequences
    assert fused.forward_layer.uses_fused_path and fused.backward_layer.uses_fused_path
    assert not cell.forward_layer.uses_fused_path
    mask = masks(rng)
    got, want = fused(x, mask=mask), cell(x, mask=mask)
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), atol=1e-5)


def test_bidirectional_matches_reference(rng):
    layer = keras.layers.Bidirectional(MGU(H, return_sequences=True))
    layer.build((None, T, D))
    fw, bw = random_mgu_weights(rng, D, H), random_mgu_weights(rng, D, H)
    layer.set_weights(fw + bw)
    x = rng.standard_normal((B, T, D)).astype("float32")
    mask = masks(rng)
    got = to_numpy(layer(x, mask=mask))
    seq_f, _ = reference.mgu_sequence(x, *fw, mask=mask, zero_output_for_mask=True)
    seq_b, _ = reference.mgu_sequence(
        x, *bw, mask=mask, go_backwards=True, zero_output_for_mask=True
    )
    want = np.concatenate([seq_f, seq_b[:, ::-1]], axis=-1)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.all(got[0, :2] == 0.0) and np.all(got[1, -3:] == 0.0)


@needs_fused
def test_bidirectional_gradients_match_cell_path(rng):
    (fused, cell), weights, x = bidirectional_twins(rng, return_sequences=True)
    mask = masks(rng)
    h0 = [rng.standard_normal((B, H)).astype("float32") for _ in range(2)]
    probe = keras.ops.convert_to_tensor(rng.standard_normal((B, T, 2 * H)).astype("float32"))

    def loss_of(layer):
        frozen = [v.value for v in layer.non_trainable_variables]

        def loss(x_, hf, hb, *ws):
            out = layer.stateless_call(list(ws), frozen, x_, initial_state=[hf, hb], mask=mask)[0]
            return keras.ops.sum(out * probe)

        return loss

    got = value_and_grad(loss_of(fused), [x, *h0, *weights])
    want = value_and_grad(loss_of(cell), [x, *h0, *weights])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5)
    assert np.any(got[1][1] != 0)  # the forward initial state reaches the loss


@needs_fused
def test_fused_refuses_an_unservable_setting_made_after_construction():
    layer = keras.layers.Bidirectional(MGU(H, implementation="fused", return_sequences=True))
    layer.build((None, T, D))
    layer.forward_layer.unroll = True
    with pytest.raises(ValueError, match="implementation='fused' cannot serve"):
        layer(np.zeros((B, T, D), "float32"))
