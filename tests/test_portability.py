"""A model saved on one backend loads on the other two (safe_mode=True) and predicts the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_mgu
from keras_mgu import MGU
from tests.helpers import BACKEND, requires, to_numpy

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "portable_predict.py")
#: The other backends, each skipped where it is not installed.
OTHER_BACKENDS = [
    pytest.param(b, marks=requires(b)) for b in ("tensorflow", "jax", "torch") if b != BACKEND
]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """An MGU + Dense model with non-default arguments, saved on this backend."""
    keras.utils.set_random_seed(7)
    inputs = keras.Input((None, 3))
    masked = keras.layers.Masking(0.0)(inputs)
    seq = MGU(
        5,
        return_sequences=True,
        go_backwards=True,
        unit_forget_bias=False,
        bias_initializer="random_normal",
    )(masked)
    out = keras.layers.Dense(2)(MGU(4)(seq))
    model = keras.Model(inputs, out)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 6, 3)).astype("float32")
    x[1, 4:] = 0.0  # padded steps, masked by the Masking layer
    folder = tmp_path_factory.mktemp("portable")
    path = str(folder / "model.keras")
    model.save(path)
    np.save(folder / "x.npy", x)
    return path, folder, x, to_numpy(model.predict(x, verbose=0))


def test_reloads_on_this_backend_with_safe_mode(saved_model):
    path, _, x, expected = saved_model
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded.layers[2], keras_mgu.MGU)
    assert loaded.layers[2].get_config() == keras.saving.load_model(path).layers[2].get_config()
    np.testing.assert_allclose(to_numpy(loaded.predict(x, verbose=0)), expected, atol=1e-6)


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_loads_and_predicts_the_same_on_other_backend(saved_model, backend):
    path, folder, _, expected = saved_model
    out_path = str(folder / f"pred_{backend}.npy")
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, SCRIPT, path, str(folder / "x.npy"), out_path],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["backend"] == backend
    predictions = np.load(out_path)
    assert predictions.shape == expected.shape
    np.testing.assert_allclose(predictions, expected, atol=1e-5)
