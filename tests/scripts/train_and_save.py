"""Train a small MGU model for a few steps on the active backend and save it.

Usage: ``python train_and_save.py FOLDER``; writes ``model.keras``, ``x.npy``
(four sequences, the second zero-padded) and ``predictions.npy`` into FOLDER.
"""

import os
import sys

import keras
import numpy as np

from keras_mgu import MGU


def main(folder: str) -> None:
    keras.utils.set_random_seed(5)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 12, 3)).astype("float32")
    x[1, 8:] = 0.0
    inputs = keras.Input((12, 3))
    masked = keras.layers.Masking(0.0)(inputs)
    seq = keras.layers.Bidirectional(MGU(6, return_sequences=True))(masked)
    model = keras.Model(inputs, keras.layers.Dense(1)(MGU(5)(seq)))
    model.compile("adam", "mse")
    model.fit(x, rng.standard_normal((4, 1)).astype("float32"), epochs=2, verbose=0)
    model(x)
    model.save(os.path.join(folder, "model.keras"))
    np.save(os.path.join(folder, "x.npy"), x)
    np.save(os.path.join(folder, "predictions.npy"), model.predict(x, verbose=0))


if __name__ == "__main__":
    main(sys.argv[1])
