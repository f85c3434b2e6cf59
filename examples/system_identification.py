"""System identification with an MGU network: simulate a plant's output from its input.

By default the data come from the built-in simulated cascaded-tanks plant
(``keras_mgu.datasets.simulate_cascaded_tanks``), so the example runs with no
download. The network maps the measured input u(t) to the output y(t); it is
trained on windows of the estimation record with the learning-rate decay points
and weighted early stopping on the free-run validation RMSE, and judged by the
benchmark metric: the RMS of y - y_sim over the test record, where y_sim is the
model's free-run simulation from u alone (zero initial state).

Examples::

    python examples/system_identification.py                 # simulated tanks, MGU
    python examples/system_identification.py --compare       # MGU vs GRU vs LSTM
    python examples/system_identification.py --dataset cascaded-tanks \\
        --data-path ../shared/data/cascaded_tanks/dataBenchmark.csv
    python examples/system_identification.py --train-csv train.csv --test-csv test.csv \\
        --inputs u --outputs y --units 32 16

It writes PNGs (measured vs simulated test output, residual, training curves)
into ``--out`` and prints a line ``test RMSE: <value>`` for each model.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Identify a dynamical system with an MGU network.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--dataset", choices=("simulated-tanks", "cascaded-tanks"), default="simulated-tanks"
    )
    parser.add_argument("--data-path", help="dataBenchmark.csv for --dataset cascaded-tanks")
    parser.add_argument("--train-csv", help="your own estimation record (one row per sample)")
    parser.add_argument("--test-csv", help="your own test record (same columns)")
    parser.add_argument("--inputs", nargs="+", default=["u"], help="input column names")
    parser.add_argument("--outputs", nargs="+", default=["y"], help="output column names")
    parser.add_argument("--ts", type=float, default=1.0, help="sample time of CSV records")
    parser.add_argument("--units", type=int, nargs="+", default=[16], help="stacked layer sizes")
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--window", type=int, default=256, help="training window length")
    parser.add_argument("--washout", type=int, default=32, help="unweighted leading steps")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--compare", action="store_true", help="also train GRU and LSTM")
    parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join("outputs", "system_identification"))
    parser.add_argument("--quick", action="store_true", help="tiny run, for smoke tests")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs = min(args.epochs, 3)
        args.window = min(args.window, 64)
        args.washout = min(args.washout, 8)
    if (args.train_csv is None) != (args.test_csv is None):
        parser.error("--train-csv and --test-csv go together")
    if args.dataset == "cascaded-tanks" and not args.data_path:
        parser.error("--dataset cascaded-tanks needs --data-path FILE")
    return args


def load_data(args: argparse.Namespace):
    """The estimation, validation and test records the run uses (physical units)."""
    from keras_mgu import datasets

    if args.train_csv:
        train = datasets.load_csv_records(args.train_csv, args.inputs, args.outputs, ts=args.ts)
        test = datasets.load_csv_records(args.test_csv, args.inputs, args.outputs, ts=args.ts)
        estimation, validation = train.split(0.2)
        return datasets.SysIdData(estimation, validation, test)
    if args.dataset == "cascaded-tanks":
        return datasets.load_cascaded_tanks(args.data_path)
    n_samples = 256 if args.quick else 1024
    return datasets.simulate_cascaded_tanks(n_samples=n_samples, seed=args.seed)


def build_model(kind: str, units: list[int], n_in: int, n_out: int, seed: int):
    """``kind`` in ("MGU", "GRU", "LSTM"): stacked recurrent layers and a linear head."""
    import keras

    from keras_mgu import MGU

    layer_cls = {"MGU": MGU, "GRU": keras.layers.GRU, "LSTM": keras.layers.LSTM}[kind]
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((None, n_in))]
    # Plants like the tanks are slow next to the sample time: a forget gate that starts
    # half open (bias 0) learns them more reliably than the default forget bias of one.
    extra = {"unit_forget_bias": False} if kind == "MGU" else {}
    layers += [layer_cls(n, return_sequences=True, **extra) for n in units]
    layers.append(keras.layers.Dense(n_out))
    return keras.Sequential(layers, name=kind.lower())


def training_windows(record, args):
    """Overlapping windows of the estimation record and washout sample weights."""
    import numpy as np

    from keras_mgu.datasets import make_windows

    window = min(args.window, record.n_samples)
    u, y = make_windows(record.u, record.y, window, stride=max(1, window // 16))
    weights = np.ones(u.shape[:2], dtype="float32")
    weights[:, : min(args.washout, window - 1)] = 0.0
    return u.astype("float32"), y.astype("float32"), weights


def whole(record):
    """A record as one (1, N, channels) sequence."""
    return record.u[None].astype("float32"), record.y[None].astype("float32")


def epoch_timer():
    """A callback recording the wall time of every epoch (in ``.seconds``)."""
    import keras

    class EpochTimer(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self._start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self._start)

    return EpochTimer()


def progress_lines(epochs: int, stopper):
    """A callback printing one line at every tenth of the run (long runs stay readable)."""
    import keras

    every = max(1, epochs // 10)

    def report(epoch, logs):
        if (epoch + 1) % every == 0 or epoch + 1 == epochs:
            print(
                f"  epoch {epoch + 1:4d}/{epochs}  loss {logs['loss']:.4f}  "
                f"learning rate {logs.get('learning_rate', float('nan')):.2e}  "
                f"best score {stopper.best_score:.4f}",
                flush=True,
            )

    return keras.callbacks.LambdaCallback(on_epoch_end=report)


def train(kind: str, data, args):
    """Train one model; returns (model, early stopping callback, seconds per epoch)."""
    import keras
    import numpy as np

    from keras_mgu.callbacks import LearningRateDecayPoints, WeightedEarlyStopping

    est, val = data.estimation, data.validation
    u, y, weights = training_windows(est, args)
    model = build_model(kind, args.units, est.n_inputs, est.n_outputs, args.seed)
    model.compile(
        keras.optimizers.Adam(args.learning_rate),
        "mse",
        metrics=[keras.metrics.RootMeanSquaredError(name="rmse")],
    )
    steps_per_epoch = -(-len(u) // args.batch_size)
    stopper = WeightedEarlyStopping(
        {"val_rmse": 1.0, "loss": 0.1},
        validation_data=whole(val),
        validation_frequency=max(1, (args.epochs * steps_per_epoch) // 60),
        restore_best_weights=True,
    )
    timer = epoch_timer()
    callbacks = [LearningRateDecayPoints((0.5, 0.8), decay_rate=0.3), stopper, timer]
    if args.epochs > 20:
        callbacks.append(progress_lines(args.epochs, stopper))
    print(f"\n== {kind} {args.units}: {model.count_params()} parameters, {len(u)} windows")
    history = model.fit(
        u,
        y,
        sample_weight=weights,
        epochs=args.epochs,
        batch_size=args.batch_size,
        callbacks=callbacks,
        verbose=2 if args.epochs <= 20 else 0,
        shuffle=True,
    )
    # The first epoch includes tracing and compilation; the median is the steady rate.
    seconds = float(np.median(timer.seconds[1:] or timer.seconds))
    print(
        f"{kind}: {len(history.epoch)} epochs, {seconds:.2f} s/epoch, best check at "
        f"epoch {stopper.best_epoch} (iteration {stopper.best_iteration}), "
        f"score {stopper.best_score:.4f}"
    )
    return model, stopper, seconds


def simulate(model, record, normalizer):
    """Free-run simulation from u alone, back in physical units: (N, n_out)."""
    u = normalizer.transform_u(record.u)[None].astype("float32")
    y_sim = model.predict(u, verbose=0)[0]
    return normalizer.inverse_transform_y(y_sim)


def rmse(a, b) -> float:
    import numpy as np

    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def plot_results(kind: str, record, y_sim, stopper, out: str) -> list[str]:
    """PNGs of measured vs simulated output, the residual, and the training curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from keras_mgu.plotting import plot_training

    t = record.time
    paths = []
    for name, series in (("simulation", None), ("residual", record.y - y_sim)):
        fig, ax = plt.subplots(figsize=(9, 3.5), layout="constrained")
        if series is None:
            ax.plot(t, record.y[:, 0], label="measured", lw=1.2)
            ax.plot(t, y_sim[:, 0], label=f"{kind} free-run simulation", lw=1.2)
            ax.legend()
        else:
            ax.plot(t, series[:, 0], color="tab:red", lw=1)
            ax.axhline(0.0, color="k", lw=0.5)
        ax.set_xlabel("time [s]")
        ax.set_ylabel(record.output_names[0])
        ax.set_title(f"{kind}: {name} on the test record (RMSE {rmse(record.y, y_sim):.3f})")
        path = os.path.join(out, f"{kind.lower()}_test_{name}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    paths.append(plot_training(stopper, os.path.join(out, f"{kind.lower()}_training.png")))
    return paths


def run(args: argparse.Namespace) -> dict[str, dict]:
    """Train each model, report test RMSE, write plots. Returns the results table."""
    import keras

    from keras_mgu.datasets import Normalizer

    data = load_data(args)
    normalizer = Normalizer.fit(data.estimation)
    normed = normalizer.transform(data)
    test = data.test
    os.makedirs(args.out, exist_ok=True)
    print(f"backend: {keras.backend.backend()}")
    print(
        f"data: estimation {data.estimation.n_samples}, validation {data.validation.n_samples}, "
        f"test {test.n_samples} samples; inputs {list(test.input_names)}, "
        f"outputs {list(test.output_names)}"
    )
    results = {}
    for kind in ("MGU", "GRU", "LSTM") if args.compare else ("MGU",):
        model, stopper, seconds = train(kind, normed, args)
        y_sim = simulate(model, test, normalizer)
        score = rmse(test.y, y_sim)
        print(f"{kind} test RMSE: {score:.4f} (std of the test output: {test.y.std():.4f})")
        paths = plot_results(kind, test, y_sim, stopper, args.out)
        results[kind] = {"params": model.count_params(), "s_per_epoch": seconds, "rmse": score}
        print("plots: " + ", ".join(paths))
    print_summary(results, test)
    return results


def print_summary(results: dict[str, dict], test) -> None:
    print("\n| model | parameters | s/epoch | test RMSE |")
    print("|---|---|---|---|")
    for kind, r in results.items():
        print(f"| {kind} | {r['params']} | {r['s_per_epoch']:.2f} | {r['rmse']:.4f} |")
    print(f"std of the test output: {test.y.std():.4f}")
    print(f"test RMSE: {results['MGU']['rmse']:.4f}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.backend:
        os.environ["KERAS_BACKEND"] = args.backend
        if "keras" in sys.modules and sys.modules["keras"].backend.backend() != args.backend:
            raise SystemExit("--backend must be chosen before keras is imported")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
