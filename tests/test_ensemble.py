"""``keras_mgu.Ensemble``: K independent copies of a layer, trained at once.

Outputs are checked against the NumPy reference of each member's weights;
training against each member trained on its own with the same start.
"""

import keras
import numpy as np
import pytest

from keras_mgu import MGU, Ensemble
from keras_mgu.kernels import reference
from tests.helpers import random_mgu_weights, to_numpy

B, T, D, H, K = 3, 6, 2, 4, 3


def _ensemble_of_mgus(rng, **kwargs):
    ensemble = Ensemble(MGU(H, return_sequences=True), size=K, **kwargs)
    ensemble.build((None, K, T, D) if kwargs.get("shared_inputs") is False else (None, T, D))
    weights = [random_mgu_weights(rng, D, H) for _ in range(K)]
    for member, w in zip(ensemble.members, weights, strict=True):
        member.set_weights(w)
    return ensemble, weights


def test_shared_inputs_match_the_reference_per_member(rng):
    ensemble, weights = _ensemble_of_mgus(rng)
    x = rng.standard_normal((B, T, D)).astype("float32")
    out = to_numpy(ensemble(x))
    assert out.shape == (B, K, T, H)
    for k, w in enumerate(weights):
        expected, _ = reference.mgu_sequence(x, *w)
        np.testing.assert_allclose(out[:, k], expected, rtol=1e-5, atol=1e-6)


def test_per_member_inputs_go_to_their_member(rng):
    ensemble, weights = _ensemble_of_mgus(rng, shared_inputs=False)
    x = rng.standard_normal((B, K, T, D)).astype("float32")
    out = to_numpy(ensemble(x))
    for k, w in enumerate(weights):
        expected, _ = reference.mgu_sequence(x[:, k], *w)
        np.testing.assert_allclose(out[:, k], expected, rtol=1e-5, atol=1e-6)


def test_a_shared_mask_reaches_every_member(rng):
    ensemble, weights = _ensemble_of_mgus(rng)
    x = rng.standard_normal((B, T, D)).astype("float32")
    mask = np.ones((B, T), bool)
    mask[0, -2:] = False
    mask[2, 1] = False
    out = to_numpy(ensemble(x, mask=mask))
    for k, w in enumerate(weights):
        expected, _ = reference.mgu_sequence(x, *w, mask=mask)
        np.testing.assert_allclose(out[:, k], expected, rtol=1e-5, atol=1e-6)


def test_per_member_masks_reach_their_member_and_come_out_stacked(rng):
    ensemble, weights = _ensemble_of_mgus(rng, shared_inputs=False)
    x = rng.standard_normal((B, K, T, D)).astype("float32")
    mask = rng.random((B, K, T)) > 0.3
    out = to_numpy(ensemble(x, mask=mask))
    for k, w in enumerate(weights):
        expected, _ = reference.mgu_sequence(x[:, k], *w, mask=mask[:, k])
        np.testing.assert_allclose(out[:, k], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(to_numpy(ensemble.compute_mask(x, mask)), mask)


def test_members_start_from_their_own_weights():
    ensemble = Ensemble(MGU(H), size=K)
    ensemble.build((None, T, D))
    kernels = [to_numpy(m.cell.kernel) for m in ensemble.members]
    for a in range(K):
        for b in range(a + 1, K):
            assert not np.allclose(kernels[a], kernels[b])
    assert len({w.path for w in ensemble.weights}) == len(ensemble.weights) == 3 * K


def _sequence_model(layer_factory, size=None):
    x = keras.Input((T, D))
    if size is None:
        y = keras.layers.Dense(1)(layer_factory()(x))
        return keras.Model(x, y)
    mgu = Ensemble(layer_factory(), size=size)
    y = Ensemble(keras.layers.Dense(1), size=size, shared_inputs=False)(mgu(x))
    return keras.Model(x, y)


def test_training_follows_each_member_alone(rng):
    """SGD on mean_k mse_k moves member k as SGD at lr / K on mse_k alone."""
    x = rng.standard_normal((8, T, D)).astype("float32")
    y = rng.standard_normal((8, T, 1)).astype("float32")
    model = _sequence_model(lambda: MGU(H, return_sequences=True), size=K)
    model.compile(keras.optimizers.SGD(0.3), "mse")
    starts = [[w.copy() for w in to_numpy_weights(model, k)] for k in range(K)]
    model.fit(x, np.repeat(y[:, None], K, axis=1), batch_size=4, epochs=2, shuffle=False,
              verbose=0)  # fmt: skip
    for k in range(K):
        alone = _sequence_model(lambda: MGU(H, return_sequences=True))
        alone.set_weights(starts[k])
        alone.compile(keras.optimizers.SGD(0.3 / K), "mse")
        alone.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        for got, want in zip(to_numpy_weights(model, k), alone.get_weights(), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        assert not np.allclose(to_numpy_weights(model, k)[0], starts[k][0])


def to_numpy_weights(model, k):
    """Member ``k``'s weights (MGU, then Dense) of a two-ensemble model."""
    mgu, dense = (layer for layer in model.layers if isinstance(layer, Ensemble))
    return [to_numpy(w) for w in (*mgu.members[k].weights, *dense.members[k].weights)]


def test_saves_and_loads_with_its_weights(rng, tmp_path):
    model = _sequence_model(lambda: MGU(H, return_sequences=True), size=K)
    x = rng.standard_normal((2, T, D)).astype("float32")
    path = str(tmp_path / "ensemble.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(to_numpy(loaded(x)), to_numpy(model(x)), rtol=1e-6, atol=1e-7)
    layer = next(layer for layer in loaded.layers if isinstance(layer, Ensemble))
    assert layer.size == K and layer.members[0].units == H


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"layer": "mgu", "size": 2}, "keras.layers.Layer instance"),
        ({"layer": MGU(H), "size": 0}, "positive integer"),
        ({"layer": MGU(H), "size": True}, "positive integer"),
        ({"layer": MGU(H, return_state=True), "size": 2}, "return_state=False"),
    ],
)
def test_bad_arguments_say_what_was_expected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Ensemble(**kwargs)


def test_per_member_inputs_need_the_member_axis():
    ensemble = Ensemble(MGU(H), size=K, shared_inputs=False)
    with pytest.raises(ValueError, match=rf"\(batch, {K}, \.\.\.\)"):
        ensemble.build((None, K + 1, T, D))
