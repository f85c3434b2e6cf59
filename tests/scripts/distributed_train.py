"""Train one small MGU model data-parallel on 2 CPU devices and on 1, and compare.

Used by ``tests/test_distributed.py``. The backend comes from ``KERAS_BACKEND``:

* ``tensorflow``: the CPU is split into 2 logical devices before TensorFlow
  initializes, and the model is built and trained under
  ``tf.distribute.MirroredStrategy`` over them;
* ``jax``: ``XLA_FLAGS=--xla_force_host_platform_device_count=2`` is set before
  JAX is imported, and the model is trained under
  ``keras.distribution.DataParallel`` over the 2 host devices.

Both runs start from the same weights, see the same global batches in the same
order and use ``LearningRateDecayPoints`` and ``WeightedEarlyStopping``. The
script prints one JSON line: the number of devices, the final weights'
largest difference, the learning rate per epoch of both runs, the best scores
and how often the fused MGU kernel was traced in each run.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BACKEND = os.environ.get("KERAS_BACKEND", "tensorflow")
DEVICES = 2

if BACKEND == "jax":
    flag = f"--xla_force_host_platform_device_count={DEVICES}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
elif BACKEND == "tensorflow":
    import tensorflow as tf

    _cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        _cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(DEVICES)]
    )
else:
    raise SystemExit(f"distributed_train.py supports tensorflow and jax, not {BACKEND!r}")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_mgu import MGU, kernels  # noqa: E402
from keras_mgu.callbacks import LearningRateDecayPoints, WeightedEarlyStopping  # noqa: E402

GLOBAL_BATCH, EPOCHS = 8, 4
FUSED_CALLS = {"count": 0}


def count_fused_calls() -> None:
    """Wrap the backend kernel so that every trace/call of it is counted."""
    module = kernels.backend_module()
    original = module.mgu_sequence

    def counted(*args, **kwargs):
        FUSED_CALLS["count"] += 1
        return original(*args, **kwargs)

    module.mgu_sequence = counted


def make_data() -> tuple:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 10, 2)).astype("float32")
    y = (np.tanh(x[:, :, :1].cumsum(axis=1) * 0.3)[:, -1]).astype("float32")
    return (x[:24], y[:24]), (x[24:], y[24:])


def build_model() -> keras.Model:
    model = keras.Sequential([keras.Input((10, 2)), MGU(6), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss="mse")
    return model


def train(model: keras.Model, initial: list) -> dict:
    (x, y), (xv, yv) = make_data()
    model.set_weights(initial)
    stopper = WeightedEarlyStopping(
        {"val_loss": 1.0, "loss": 0.1},
        validation_data=(xv, yv),
        validation_frequency=2,
        validation_batch_size=GLOBAL_BATCH,
    )
    lrs = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda e, logs: lrs.append(
            float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
        )
    )
    before = FUSED_CALLS["count"]
    model.fit(
        x,
        y,
        batch_size=GLOBAL_BATCH,
        epochs=EPOCHS,
        shuffle=False,
        verbose=0,
        callbacks=[LearningRateDecayPoints([0.5, 0.75], 0.5), stopper, record],
    )
    return {
        "weights": [np.asarray(w) for w in model.get_weights()],
        "learning_rates": lrs,
        "best_score": stopper.best_score,
        "checks": len(stopper.history),
        "fused_calls": FUSED_CALLS["count"] - before,
        "uses_fused_path": model.layers[0].uses_fused_path,
    }


def run_distributed(initial: list) -> tuple[dict, int]:
    if BACKEND == "tensorflow":
        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(DEVICES)])
        with strategy.scope():
            model = build_model()
        return train(model, initial), strategy.num_replicas_in_sync
    import jax

    distribution = keras.distribution.DataParallel(devices=jax.devices())
    with distribution.scope():
        model = build_model()
        result = train(model, initial)
    # The variables live on (are replicated over) every device of the mesh.
    return result, len(model.layers[0].cell.kernel.value.sharding.device_set)


def main() -> None:
    count_fused_calls()
    keras.utils.set_random_seed(0)
    initial = build_model().get_weights()
    single = train(build_model(), initial)
    distributed, devices = run_distributed(initial)
    diffs = [float(np.abs(a - b).max()) for a, b in zip(single["weights"], distributed["weights"])]
    moved = max(float(np.abs(a - b).max()) for a, b in zip(single["weights"], initial))
    summary = {
        "backend": BACKEND,
        "devices": devices,
        "max_weight_difference": max(diffs),
        "weights_moved": moved,
        **{
            f"{name}_{key}": run[key]
            for name, run in (("single", single), ("distributed", distributed))
            for key in ("learning_rates", "best_score", "checks", "fused_calls", "uses_fused_path")
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
