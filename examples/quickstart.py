"""Train a small MGU model on a synthetic sequence task and print its loss.

The task: from a noisy input sequence u, predict the output of a first-order
low-pass filter y_t = 0.9 y_{t-1} + 0.1 u_t (a tiny dynamical system).
"""

import argparse

import keras
import numpy as np

from keras_mgu import MGU


def make_data(n: int, steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1.0, 1.0, (n, steps, 1)).astype("float32")
    y = np.zeros_like(u)
    for t in range(steps):
        y[:, t] = (0.9 * y[:, t - 1] if t else 0.0) + 0.1 * u[:, t]
    return u, y


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args(argv)
    u, y = make_data(256, 50)
    model = keras.Sequential(
        [keras.Input((None, 1)), MGU(16, return_sequences=True), keras.layers.Dense(1)]
    )
    model.compile(keras.optimizers.Adam(0.01), "mse")
    before = model.evaluate(u, y, verbose=0)
    model.fit(u, y, epochs=args.epochs, batch_size=32, verbose=2)
    after = model.evaluate(u, y, verbose=0)
    print(f"backend: {keras.backend.backend()}, fused path: {model.layers[0].uses_fused_path}")
    print(f"loss before training: {before:.5f}, after: {after:.5f}")


if __name__ == "__main__":
    main()
