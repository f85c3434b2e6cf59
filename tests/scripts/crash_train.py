"""A tiny MGU training run that can be killed and resumed.

Used by ``tests/test_reliability.py``: the run uses
``keras.callbacks.BackupAndRestore`` (backup in ``<workdir>/backup``),
``keras_mgu.callbacks.LearningRateDecayPoints`` and
``keras_mgu.callbacks.WeightedEarlyStopping`` checkpointing the best model to
``<workdir>/best.keras`` (with ``best.keras.json``). It prints one JSON line
per finished epoch (``{"event": "epoch", "epoch": e, "learning_rate": lr}``,
epochs counted from 1) and, with ``--hang-at EPOCH:BATCH``, prints
``{"event": "hang", ...}`` after that batch and then sleeps, so that a test
can kill it at a known point in the middle of an epoch. At the end it writes
``<workdir>/result.json`` (learning rate per epoch, best score) and
``<workdir>/final.weights.npz``.

Run: ``python tests/scripts/crash_train.py WORKDIR [--epochs 8] [--hang-at 4:2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_mgu import MGU  # noqa: E402
from keras_mgu.callbacks import LearningRateDecayPoints, WeightedEarlyStopping  # noqa: E402

STEPS, FEATURES, UNITS, BATCH = 12, 2, 4, 8
DECAY_POINTS, DECAY_RATE, BASE_LR = (0.25, 0.5, 0.75), 0.5, 0.05
CHECK_EVERY = 2  # batches between WeightedEarlyStopping checks


def make_data() -> tuple:
    """Training and validation sequences of a fixed first-order system."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, STEPS, FEATURES)).astype("float32")
    y = np.zeros((40, STEPS, 1), "float32")
    for t in range(1, STEPS):
        y[:, t, 0] = 0.7 * y[:, t - 1, 0] + 0.5 * x[:, t, 0] - 0.2 * x[:, t, 1]
    return (x[:32], y[:32]), (x[32:], y[32:])


def build_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((STEPS, FEATURES)),
            MGU(UNITS, return_sequences=True),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(BASE_LR), loss="mse")
    return model


class Progress(keras.callbacks.Callback):
    """Prints the epoch's learning rate; optionally hangs after one batch."""

    def __init__(self, hang_at: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.hang_at = hang_at
        self.epoch = 0
        self.learning_rates: dict[int, float] = {}

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch = epoch + 1

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.hang_at == (self.epoch, batch + 1):
            print(
                json.dumps({"event": "hang", "epoch": self.epoch, "batch": batch + 1}), flush=True
            )
            time.sleep(600)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        lr = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        self.learning_rates[epoch + 1] = lr
        print(json.dumps({"event": "epoch", "epoch": epoch + 1, "learning_rate": lr}), flush=True)


def train(workdir: str, epochs: int = 8, hang_at: tuple[int, int] | None = None) -> dict:
    """Train (or resume training) in ``workdir``; returns the result dict."""
    (x, y), (xv, yv) = make_data()
    model = build_model()
    progress = Progress(hang_at)
    stopper = WeightedEarlyStopping(
        {"val_loss": 1.0},
        validation_data=(xv, yv),
        validation_frequency=CHECK_EVERY,
        filepath=os.path.join(workdir, "best.keras"),
    )
    callbacks = [
        keras.callbacks.BackupAndRestore(os.path.join(workdir, "backup"), double_checkpoint=True),
        LearningRateDecayPoints(DECAY_POINTS, DECAY_RATE),
        stopper,
        progress,
    ]
    model.fit(x, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0, callbacks=callbacks)
    result = {
        "learning_rates": progress.learning_rates,
        "best_score": stopper.best_score,
        "best_iteration": stopper.best_iteration,
        "uses_fused_path": model.layers[0].uses_fused_path,
    }
    np.savez(os.path.join(workdir, "final.weights.npz"), *model.get_weights())
    with open(os.path.join(workdir, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--hang-at", default=None, help="EPOCH:BATCH, both counted from 1")
    args = parser.parse_args()
    hang_at = tuple(int(v) for v in args.hang_at.split(":")) if args.hang_at else None
    train(args.workdir, args.epochs, hang_at)
    print(json.dumps({"event": "done"}), flush=True)


if __name__ == "__main__":
    main()
