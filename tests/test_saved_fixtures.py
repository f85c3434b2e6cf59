"""Models saved by an earlier release load and predict the same numbers.

The fixtures under ``tests/fixtures/saved_models/<backend>/`` were written by
``tests/fixtures/make_saved_models.py`` on each backend before ``MGU`` became
a ``FusedRNN``; each is loaded on the active backend.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest

import keras_mgu
import tests.fused_cells  # noqa: F401 - registers the fixtures' cell classes
from tests.fixtures.make_saved_models import MODELS

FIXTURES = Path(__file__).parent / "fixtures" / "saved_models"
SAVED_ON = ("tensorflow", "jax", "torch")


@pytest.mark.parametrize("saved_on", SAVED_ON)
@pytest.mark.parametrize("name", MODELS)
def test_saved_model_loads_and_predicts_the_same(saved_on, name):
    folder = FIXTURES / saved_on
    model = keras.saving.load_model(folder / f"{name}.keras")
    data = np.load(folder / f"{name}.npz")
    outputs = model.predict(data["inputs"], verbose=0)
    np.testing.assert_allclose(outputs, data["outputs"], rtol=1e-5, atol=1e-5)


def test_saved_mgu_layers_are_mgu_with_their_old_config():
    model = keras.saving.load_model(FIXTURES / "jax" / "mgu_sequences.keras")
    layer = model.layers[-1]
    assert isinstance(layer, keras_mgu.MGU)
    assert layer.units == 4 and layer.return_sequences
    assert [w.path for w in layer.weights] == [
        f"{layer.name}/{cell}/{weight}"
        for cell, weight in [
            ("mgu_cell", "kernel"),
            ("mgu_cell", "recurrent_kernel"),
            ("mgu_cell", "bias"),
        ]
    ]
