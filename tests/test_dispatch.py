"""The one dispatch of ``FusedRNN``: the cell's own kernel, else the engine, else the cell loop.

A path that cannot serve raises ``NotImplementedError`` from static facts and
the next one runs; ``kernel_in_use`` names the path that ran.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import ops

from keras_mgu import MGU, FusedRNN, MGUCell, registry
from tests.fused_cells import UserGRUCell
from tests.helpers import to_numpy

B, T, D, H = 3, 5, 2, 4


class UnrolledGRUCell(UserGRUCell):
    """A ``UserGRUCell`` whose own kernel is an unrolled Python loop, serving float32 only."""

    def sequence_kernel_name(self, dtype, batch):
        if dtype != "float32":
            raise NotImplementedError(f"the unrolled kernel computes in float32, not {dtype}")
        return "unrolled"

    def sequence_kernel(self, sequences, states, mask, *, go_backwards, training):
        name = self.sequence_kernel_name(keras.backend.standardize_dtype(sequences.dtype), None)
        if mask is not None or go_backwards:
            raise NotImplementedError("the unrolled kernel has no mask and runs forwards")
        projected = self.project_inputs(sequences)
        outputs = []
        for t in range(sequences.shape[1]):
            output, states = self.step(projected[:, t], states)
            outputs.append(output)
        return ops.stack(outputs, axis=1), states, name


def _layers(rng, dtype="float32", **kwargs):
    """The cell with its own kernel, and the same weights on the cell loop."""
    own = FusedRNN(UnrolledGRUCell(H, dtype=dtype), return_sequences=True, dtype=dtype, **kwargs)
    loop = FusedRNN(UserGRUCell(H, dtype=dtype), implementation="cell", dtype=dtype, **kwargs)
    loop.return_sequences = True
    for layer in (own, loop):
        layer.build((None, T, D))
    weights = [rng.standard_normal(w.shape) * 0.5 for w in own.weights]
    own.set_weights(weights)
    loop.set_weights(weights)
    return own, loop


def test_the_cells_own_kernel_runs_first(rng):
    own, loop = _layers(rng)
    assert own.kernel_in_use == "unrolled"
    x = rng.standard_normal((B, T, D)).astype("float32")
    np.testing.assert_allclose(to_numpy(own(x)), to_numpy(loop(x)), atol=1e-5)
    assert own.kernel_in_use == "unrolled" and loop.kernel_in_use == "cell"


def test_a_kernel_that_cannot_serve_falls_back_on_the_engine(rng):
    own, loop = _layers(rng)
    x = rng.standard_normal((B, T, D)).astype("float32")
    mask = np.ones((B, T), bool)
    mask[1, :2] = False
    np.testing.assert_allclose(
        to_numpy(own(x, mask=mask)), to_numpy(loop(x, mask=mask)), atol=1e-5
    )  # the kernel refused the mask at trace time
    assert own.kernel_in_use == "engine"


def test_static_refusal_and_own_kernel_off(rng):
    own, _ = _layers(rng, dtype="float64")
    assert own.kernel_in_use == "engine"
    assert own.fused_unsupported_reason() is None
    cell = UnrolledGRUCell(H)
    cell.own_kernel = False
    assert FusedRNN(cell).kernel_in_use == "engine"


def test_mgu_paths_and_reasons():
    assert MGU(4).kernel_in_use in ("native", "fused")
    assert MGU(4, activation="relu").kernel_in_use == "engine"
    dropout = MGU(4, recurrent_dropout=0.2)
    assert dropout.kernel_in_use == "cell"
    reasons = dropout.fused_unsupported_reason()
    assert "recurrent_dropout > 0 needs a fresh mask" in reasons  # the MGU kernel's reason
    assert "recurrent_dropout > 0 draws random numbers" in reasons  # the engine's
    assert MGU(4, unroll=True).kernel_in_use == "cell"
    assert MGU(4, implementation="cell").kernel_in_use == "cell"
    cell = MGUCell(4)
    cell.own_kernel = False
    assert FusedRNN(cell).kernel_in_use == "engine"
    with pytest.raises(ValueError, match="implementation='fused' cannot serve this layer"):
        MGU(4, recurrent_dropout=0.2, implementation="fused")


def test_a_backend_without_modules_cannot_serve():
    assert registry.has("engine", "tensorflow") and not registry.has("engine", "numpy")
    for part in ("mgu_kernel", "engine"):
        with pytest.raises(NotImplementedError, match="'numpy' backend"):
            registry.backend_module(part, "numpy")
