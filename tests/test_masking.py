"""One masking rule on every path and backend, pinned against references.

The rule: a masked step keeps every state and emits the previous output;
before the first real step, the initial state's output part. The MGU cases
compare with the NumPy MGU of :mod:`keras_mgu.kernels.reference`; the other
cells with a plain Python loop over the cell's own ``step`` that applies the
rule step by step.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from keras_mgu import MGU, FusedRNN, MGUCell, native
from keras_mgu.kernels import reference
from tests.fused_cells import PeepholeLSTMCell, ReadoutCell
from tests.helpers import random_mgu_weights, to_numpy

B, T, D, H = 4, 6, 3, 5


def leading_masked_mask() -> np.ndarray:
    """Row 0 real; row 1 three leading masked steps; row 2 all masked; row 3 holes."""
    mask = np.ones((B, T), bool)
    mask[1, :3] = False
    mask[2, :] = False
    mask[3, [0, 2, 3]] = False
    return mask


def mgu_layer(path: str, **kwargs) -> keras.layers.Layer:
    """An MGU layer whose calls take ``path`` (its own kernel, the engine, the cell loop)."""
    if path == "own_kernel":
        return MGU(H, **kwargs)
    cell = MGUCell(H)
    cell.own_kernel = False
    return FusedRNN(cell, implementation="fused" if path == "engine" else "cell", **kwargs)


@pytest.mark.parametrize("path", ["own_kernel", "engine", "cell"])
@pytest.mark.parametrize("go_backwards", [False, True])
def test_mgu_masked_steps_emit_the_previous_output(rng, path, go_backwards):
    x = rng.standard_normal((B, T, D)).astype("float32")
    h0 = rng.standard_normal((B, H)).astype("float32")
    mask = leading_masked_mask()
    weights = random_mgu_weights(rng, D, H)
    layer = mgu_layer(path, return_sequences=True, return_state=True, go_backwards=go_backwards)
    layer.build((None, T, D))
    layer.set_weights(weights)
    outputs, state = layer(x, initial_state=[h0], mask=mask)
    want, want_state = reference.mgu_sequence(
        x, *weights, initial_state=h0, mask=mask, go_backwards=go_backwards
    )
    np.testing.assert_allclose(to_numpy(outputs), want, atol=1e-5)
    np.testing.assert_allclose(to_numpy(state), want_state, atol=1e-5)
    first = T - 1 if go_backwards else 0
    np.testing.assert_allclose(to_numpy(outputs)[2], np.repeat(h0[2:3], T, 0), atol=1e-6)
    assert np.abs(to_numpy(outputs)[1, first]).min() > 0  # not zeros: the initial state
    assert layer.kernel_in_use in {"own_kernel": ("native", "fused"), "engine": ("engine",),
                                   "cell": ("cell",)}[path]  # fmt: skip


@pytest.mark.parametrize("path", ["own_kernel", "engine", "cell"])
def test_mgu_last_output_of_an_all_masked_row_is_the_initial_state(rng, path):
    x = rng.standard_normal((B, T, D)).astype("float32")
    h0 = rng.standard_normal((B, H)).astype("float32")
    layer = mgu_layer(path)
    last = to_numpy(layer(x, initial_state=[h0], mask=leading_masked_mask()))
    np.testing.assert_allclose(last[2], h0[2], atol=1e-6)


def rule_reference(cell, x, states, mask, go_backwards=False):
    """The masking rule in a Python loop over ``cell.step``: ``(outputs, final_states)``."""
    states = [np.asarray(s) for s in states]
    previous = states[0] if states[0].shape[-1] == cell.output_size else None
    if previous is None:
        previous = np.zeros((x.shape[0], cell.output_size), x.dtype)
    outputs = []
    for t in range(x.shape[1] - 1, -1, -1) if go_backwards else range(x.shape[1]):
        tensors = [keras.ops.convert_to_tensor(s) for s in states]
        output, new_states = cell.step(cell.project_inputs(x[:, t]), tensors)
        real = mask[:, t, None]
        states = [np.where(real, _numpy(n), s) for n, s in zip(new_states, states)]
        previous = np.where(real, _numpy(output), previous)
        outputs.append(previous)
    return np.stack(outputs, 1), states


def _numpy(tensor) -> np.ndarray:
    return to_numpy(keras.ops.stop_gradient(tensor))


CELLS = {"lstm": lambda: PeepholeLSTMCell(H), "readout": lambda: ReadoutCell(H, 2)}


@pytest.mark.parametrize("cell", sorted(CELLS))
@pytest.mark.parametrize("implementation", ["fused", "cell"])
@pytest.mark.parametrize("go_backwards", [False, True])
def test_any_fused_cell_follows_the_rule(rng, cell, implementation, go_backwards):
    layer = FusedRNN(
        CELLS[cell](),
        return_sequences=True,
        return_state=True,
        go_backwards=go_backwards,
        implementation=implementation,
    )
    layer.build((None, T, D))
    layer.set_weights([rng.standard_normal(w.shape) * 0.5 for w in layer.weights])
    x = rng.standard_normal((B, T, D)).astype("float32")
    sizes = layer.cell.state_size if isinstance(layer.cell.state_size, list) else [H]
    states = [rng.standard_normal((B, size)).astype("float32") for size in sizes]
    mask = leading_masked_mask()
    outputs, *final = layer(x, initial_state=states, mask=mask)
    want, want_states = rule_reference(layer.cell, x, states, mask, go_backwards)
    np.testing.assert_allclose(to_numpy(outputs), want, atol=1e-5)
    for got, expected in zip(final, want_states):
        np.testing.assert_allclose(to_numpy(got), expected, atol=1e-5)
    assert layer.kernel_in_use == ("engine" if implementation == "fused" else "cell")


def test_zero_output_for_mask_zeros_masked_steps_on_every_path(rng):
    x = rng.standard_normal((B, T, D)).astype("float32")
    h0 = rng.standard_normal((B, H)).astype("float32")
    mask = leading_masked_mask()
    weights = random_mgu_weights(rng, D, H)
    want, _ = reference.mgu_sequence(
        x, *weights, initial_state=h0, mask=mask, zero_output_for_mask=True
    )
    for path in ("own_kernel", "engine", "cell"):
        layer = mgu_layer(path, return_sequences=True, zero_output_for_mask=True)
        layer.build((None, T, D))
        layer.set_weights(weights)
        got = to_numpy(layer(x, initial_state=[h0], mask=mask))
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=path)


def test_native_switch_turns_the_native_loops_off():
    layer = MGU(8)
    with native.turned_off():
        assert layer.kernel_in_use == "fused"
        assert native.status().reason == "turned off by keras_mgu.native.turned_off()"
    if native.status().available:
        assert MGU(8).kernel_in_use == "native"
