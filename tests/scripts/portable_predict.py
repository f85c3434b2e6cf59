"""Load a saved ``.keras`` model on this process's backend and save its predictions.

Used by ``tests/test_portability.py``, which runs it once per other backend
(``KERAS_BACKEND`` set in the environment)::

    python tests/scripts/portable_predict.py MODEL.keras INPUTS.npy OUT.npy

The model is loaded with ``safe_mode=True``; the predictions of ``INPUTS`` are
written to ``OUT.npy`` and a JSON line with the backend and whether the MGU
layer runs its fused kernel is printed.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_mgu  # noqa: E402, F401  (registers the serializable classes)


def main(model_path: str, inputs_path: str, out_path: str) -> None:
    model = keras.saving.load_model(model_path, safe_mode=True)
    inputs = np.load(inputs_path)
    np.save(out_path, np.asarray(model.predict(inputs, verbose=0)))
    layer = next(lay for lay in model.layers if isinstance(lay, keras_mgu.MGU))
    info = {"backend": keras.backend.backend(), "uses_fused_path": layer.uses_fused_path}
    print(json.dumps(info))


if __name__ == "__main__":
    main(*sys.argv[1:4])
