"""Write your own recurrent cells and train them on the fused path.

Two cells written by hand as :class:`keras_mgu.FusedCell` subclasses, a GRU
and a peephole LSTM, each run by :class:`keras_mgu.FusedRNN` (on the generic
fused engine), are trained side by side with the built-in layers they mirror
(``keras.layers.GRU``, ``keras.layers.LSTM``) and with ``keras_mgu.MGU`` (a
``FusedRNN`` whose cell brings its own kernels), on the same data with the
same optimizer, and a table reports which code ran the time loop, the
parameter count, the median time of one training step inside ``fit`` and the
test RMSE.

The task: predict ``y_t`` of a damped oscillator driven by the two inputs,
``y_t = 1.6 y_{t-1} - 0.8 y_{t-2} + 0.1 u_t[0] - 0.05 u_t[1]`` (a small
dynamical system). Run ``python examples/custom_cells.py`` (``--quick`` for
a tiny run) under any ``KERAS_BACKEND``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import keras
import numpy as np
from keras import ops

import keras_mgu


# ------------------------------------------------------------------- the cells
@keras.saving.register_keras_serializable(package="custom_cells")
class CustomGRUCell(keras_mgu.FusedCell):
    """GRU with the reset gate after the recurrent matmul (as ``keras.layers.GRU``)::

    z = sigmoid(x W_z + h U_z + b_z),  r = sigmoid(x W_r + h U_r + b_r)
    n = tanh(x W_n + r (h U_n + b_n)),  h' = z h + (1 - z) n
    """

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units
        self.output_size = units

    def build(self, input_shape):
        u = self.units
        self.kernel = self.add_weight(shape=(input_shape[-1], 3 * u), name="kernel")
        self.recurrent_kernel = self.add_weight(
            shape=(u, 3 * u), initializer="orthogonal", name="recurrent_kernel"
        )
        self.bias = self.add_weight(shape=(2, 3 * u), initializer="zeros", name="bias")

    def project_inputs(self, inputs):
        return ops.matmul(inputs, self.kernel) + self.bias[0]

    def step(self, projected, states):
        h = states[0]
        xz, xr, xn = ops.split(projected, 3, axis=-1)
        hz, hr, hn = ops.split(ops.matmul(h, self.recurrent_kernel) + self.bias[1], 3, axis=-1)
        z = ops.sigmoid(xz + hz)
        r = ops.sigmoid(xr + hr)
        n = ops.tanh(xn + r * hn)
        h = z * h + (1.0 - z) * n
        return h, [h]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@keras.saving.register_keras_serializable(package="custom_cells")
class PeepholeLSTMCell(keras_mgu.FusedCell):
    """LSTM whose gates also see the cell state (peepholes ``p_i, p_f, p_o``)::

    i = sigmoid(z_i + p_i c),  f = sigmoid(z_f + p_f c),  c' = f c + i tanh(z_c)
    o = sigmoid(z_o + p_o c'),  h' = o tanh(c'),  with z = x W + b + h U
    """

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = [units, units]
        self.output_size = units

    def build(self, input_shape):
        u = self.units
        self.kernel = self.add_weight(shape=(input_shape[-1], 4 * u), name="kernel")
        self.recurrent_kernel = self.add_weight(
            shape=(u, 4 * u), initializer="orthogonal", name="recurrent_kernel"
        )
        self.peephole = self.add_weight(shape=(3 * u,), initializer="zeros", name="peephole")
        self.bias = self.add_weight(shape=(4 * u,), initializer="zeros", name="bias")

    def project_inputs(self, inputs):
        return ops.matmul(inputs, self.kernel) + self.bias

    def step(self, projected, states):
        h, c = states
        z = projected + ops.matmul(h, self.recurrent_kernel)
        zi, zf, zc, zo = ops.split(z, 4, axis=-1)
        pi, pf, po = ops.split(self.peephole, 3)
        i = ops.sigmoid(zi + pi * c)
        f = ops.sigmoid(zf + pf * c)
        c = f * c + i * ops.tanh(zc)
        o = ops.sigmoid(zo + po * c)
        h = o * ops.tanh(c)
        return h, [h, c]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


CUSTOM_CELLS = {"GRU": CustomGRUCell, "LSTM": PeepholeLSTMCell}


def recurrent_layer(name: str, units: int) -> keras.layers.Layer:
    """``"custom GRU"``, ``"custom LSTM"`` (FusedRNN) or a built-in."""
    if name.startswith("custom "):
        return keras_mgu.FusedRNN(CUSTOM_CELLS[name.split()[1]](units), return_sequences=True)
    if name == "MGU":
        return keras_mgu.MGU(units, return_sequences=True)
    return getattr(keras.layers, name)(units, return_sequences=True)


# ----------------------------------------------------------------- experiment
MODELS = ("MGU", "custom GRU", "GRU", "custom LSTM", "LSTM")


def make_data(n: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ``(n, steps, 2)`` and the oscillator's outputs ``(n, steps, 1)``."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1.0, 1.0, (n, steps, 2)).astype("float32")
    y = np.zeros((n, steps + 2), dtype="float32")
    for t in range(steps):
        y[:, t + 2] = 1.6 * y[:, t + 1] - 0.8 * y[:, t] + 0.1 * u[:, t, 0] - 0.05 * u[:, t, 1]
    return u, y[:, 2:, None] * 3.0


class StepTimes(keras.callbacks.Callback):
    """Seconds between the ends of consecutive training steps (the first of each epoch left out)."""

    def on_train_begin(self, logs=None):
        self.times = []

    def on_epoch_begin(self, epoch, logs=None):
        self.last = None

    def on_train_batch_end(self, batch, logs=None):
        float(keras.ops.convert_to_numpy(logs["loss"]))  # waits for asynchronous backends
        now = time.perf_counter()
        if self.last is not None:
            self.times.append(now - self.last)
        self.last = now


def train_one(name: str, data: tuple, units: int, epochs: int, batch_size: int) -> dict:
    """Train one model from a fixed seed; its parameters, median step time and test RMSE."""
    (x, y), (x_test, y_test) = data
    keras.utils.set_random_seed(0)
    rnn = recurrent_layer(name, units)
    model = keras.Sequential([keras.Input(x.shape[1:]), rnn, keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    timer = StepTimes()
    model.fit(x, y, epochs=epochs, batch_size=batch_size, verbose=0, callbacks=[timer])
    rmse = float(np.sqrt(np.mean((model.predict(x_test, verbose=0) - y_test) ** 2)))
    return {
        "model": name,
        "kernel": getattr(rnn, "kernel_in_use", "keras"),
        "params": model.count_params(),
        "ms_per_step": 1000.0 * statistics.median(timer.times) if timer.times else float("nan"),
        "rmse": rmse,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny run (seconds)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--units", type=int, default=16)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    args = parser.parse_args(argv)
    n, steps, epochs = (48, 30, 2) if args.quick else (512, 200, 20)
    epochs = args.epochs or epochs
    data = make_data(n, steps, seed=0), make_data(n // 4, steps, seed=1)
    results = [train_one(name, data, args.units, epochs, batch_size=16) for name in args.models]
    print(f"backend: {keras.backend.backend()}, {n} sequences of {steps} steps, {epochs} epochs")
    print("| model | time loop | parameters | ms per training step | test RMSE |")
    print("|---|---|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['model']} | {r['kernel']} | {r['params']} | "
            f"{r['ms_per_step']:.1f} | {r['rmse']:.4f} |"
        )
    return results


if __name__ == "__main__":
    main()
