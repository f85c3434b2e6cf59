"""Train a recurrent model through its derivative: targets are dF/dX1, not F.

Setting: two input sequences X1 and X2 (N sequences of T steps, one feature
each), a model::

    Z = MGU(concat(X1, X2))                  (per-step recurrent features)
    F = Dense(Dense(concat(Z, X1)))          (per-step output, the "head")

and data Y that should equal the derivative of F with respect to X1. The data
come from a known system whose derivative is analytic::

    s_t = 0.9 s_{t-1} + 0.3 x2_t             (a state driven by X2 only)
    F_t = 0.5 x1_t + tanh(x1_t) s_t
    Y_t = dF_t/dx1_t = 0.5 + (1 - tanh(x1_t)^2) s_t

Because s does not depend on X1, the total derivative d(sum_s F_s)/dx1_t equals
the per-step one, Y_t. ``DerivativeTargetModel(F, wrt="x1")`` returns that total
derivative, so ``fit(inputs, Y)`` trains F's weights through it.

The script prints the loss falling, the error of the learned derivative on
held-out sequences -- both the total derivative through the recurrence and the
derivative through the head alone (holding Z fixed) -- and saves a plot of
learned vs true derivative for one held-out sequence.

Run::

    python examples/derivative_targets.py            # 1000 sequences of 100 steps
    python examples/derivative_targets.py --quick    # a small version, < 1 minute
"""

from __future__ import annotations

import argparse
import os
import time

import keras
import numpy as np

from keras_mgu import MGU
from keras_mgu.derivatives import DerivativeTargetModel, input_gradient


def make_data(n: int, steps: int, rng: np.random.Generator) -> tuple:
    """Inputs X1, X2 ``(n, steps, 1)`` and the true derivative Y = dF/dX1."""
    t = np.arange(steps)
    omega = rng.uniform(0.05, 0.3, size=(n, 1))
    phase = rng.uniform(0, 2 * np.pi, size=(n, 1))
    x1 = 1.5 * np.sin(omega * t + phase) + 0.3 * rng.normal(size=(n, steps))
    x2 = rng.normal(size=(n, steps))
    s = np.zeros((n, steps))
    state = np.zeros(n)
    for k in range(steps):
        state = 0.9 * state + 0.3 * x2[:, k]
        s[:, k] = state
    y = 0.5 + (1.0 - np.tanh(x1) ** 2) * s
    as_input = [a[..., None].astype("float32") for a in (x1, x2, y)]
    return tuple(as_input)


def build_models(units: int = 16, hidden: int = 32) -> tuple[keras.Model, ...]:
    """``(model, features, head)``: F(X1, X2), Z(X1, X2) and F = head(Z, X1)."""
    x1 = keras.Input((None, 1), name="x1")
    x2 = keras.Input((None, 1), name="x2")
    z = MGU(units, return_sequences=True, name="mgu")(keras.layers.Concatenate()([x1, x2]))
    features = keras.Model([x1, x2], z, name="features")

    z_in = keras.Input((None, units), name="z")
    x1_in = keras.Input((None, 1), name="x1_head")
    joined = keras.layers.Concatenate()([z_in, x1_in])
    # No output bias: a constant offset of F has no derivative, so the data
    # cannot determine it.
    hidden_layer = keras.layers.Dense(hidden, activation="tanh")
    f = keras.layers.Dense(1, use_bias=False)(hidden_layer(joined))
    head = keras.Model([z_in, x1_in], f, name="head")

    model = keras.Model([x1, x2], head([features([x1, x2]), x1]), name="F")
    return model, features, head


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def save_plot(path: str, true: np.ndarray, total: np.ndarray, head_only: np.ndarray) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.plot(true, "k-", lw=2, label="true dF/dX1")
    ax.plot(total, "C1--", label="learned, total (through the recurrence)")
    ax.plot(head_only, "C0:", label="learned, head only (Z held fixed)")
    ax.set_xlabel("time step")
    ax.set_ylabel("dF/dX1")
    ax.set_title("Derivative of F with respect to X1, one held-out sequence")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small data, few epochs")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--out", default=os.path.join("outputs", "derivative_targets"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sequences", type=int, default=None, help="training sequences")
    parser.add_argument("--steps", type=int, default=None, help="time steps per sequence")
    args = parser.parse_args(argv)

    n, steps, epochs = (1000, 100, 40) if not args.quick else (200, 40, 25)
    n = args.sequences or n
    steps = args.steps or steps
    epochs = args.epochs if args.epochs is not None else epochs
    keras.utils.set_random_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    x1, x2, y = make_data(n, steps, rng)
    x1_test, x2_test, y_test = make_data(max(n // 5, 20), steps, rng)
    print(f"backend {keras.backend.backend()}: {n} sequences of {steps} steps, {epochs} epochs")
    print(f"mse of predicting zero: {np.mean(y**2):.4f}, of the mean: {np.var(y):.4f}")

    model, features, head = build_models()
    dmodel = DerivativeTargetModel(model, wrt="x1")
    dmodel.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse")
    report = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: print(
            f"epoch {epoch + 1:3d}  loss {logs['loss']:.5f}  val_loss {logs['val_loss']:.5f}"
        )
    )
    start = time.time()
    history = dmodel.fit(
        {"x1": x1, "x2": x2},
        y,
        validation_data=({"x1": x1_test, "x2": x2_test}, y_test),
        batch_size=32,
        epochs=epochs,
        verbose=0,
        callbacks=[report],
    )
    print(f"training took {time.time() - start:.1f} s")

    # The derivative the model was trained on: total, through the recurrence.
    total = keras.ops.convert_to_numpy(input_gradient(model, [x1_test, x2_test], wrt="x1"))
    # The other derivative: through the head alone, the recurrent features Z fixed.
    z = features.predict([x1_test, x2_test], verbose=0)
    head_only = keras.ops.convert_to_numpy(input_gradient(head, [z, x1_test], wrt="x1_head"))
    results = {
        "loss_first": history.history["loss"][0],
        "loss_last": history.history["loss"][-1],
        "rmse_total": rmse(total, y_test),
        "rmse_head_only": rmse(head_only, y_test),
        "rms_total_minus_head": rmse(total, head_only),
        "rms_true": float(np.sqrt(np.mean(y_test**2))),
    }
    print(f"held-out RMS of the true derivative:             {results['rms_true']:.4f}")
    print(f"held-out RMSE, total derivative d(sum F)/dX1:    {results['rmse_total']:.4f}")
    print(f"held-out RMSE, head-only derivative (Z fixed):   {results['rmse_head_only']:.4f}")
    print(f"RMS difference between the two derivatives:      {results['rms_total_minus_head']:.4f}")

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "derivative_targets.png")
    save_plot(path, y_test[0, :, 0], total[0, :, 0], head_only[0, :, 0])
    print(f"plot saved to {path}")
    return results


if __name__ == "__main__":
    main()
