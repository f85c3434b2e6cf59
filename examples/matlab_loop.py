"""A custom MATLAB training loop for MGU, GRU and LSTM networks, written with Keras.

The MATLAB ``train_loop`` this mirrors trains a recurrent network with Adam
(``adamupdate``), multiplies the learning rate by ``decay_rate`` at the epochs
``ceil(decay_points * max_epochs)``, checks every few iterations a weighted
sum of validation RMSE and training MSE, and returns the network of the best
check (``min_cond_net``). In Keras each piece is one line:

=======================================  ================================================
custom loop                              here
=======================================  ================================================
``mguLayer`` / ``gruLayer`` / ``lstm``   ``keras_mgu.MGU`` / ``keras.layers.GRU`` / ``LSTM``
``dlfeval`` + ``adamupdate``             ``model.compile(Adam(lr), "mse")``, ``model.fit``
decay at ``ceil(decay_points * E)``      ``keras_mgu.callbacks.LearningRateDecayPoints``
best weighted check, ``min_cond_net``    ``keras_mgu.callbacks.WeightedEarlyStopping``
``randperm`` and mini-batches            ``model.fit(..., batch_size=B, shuffle=True)``
=======================================  ================================================

The loop runs over a grid of models, hidden units and learning rates on the
built-in simulated cascaded tanks (``keras_mgu.datasets.simulate_cascaded_tanks``):
the estimation record cut into overlapping training sequences, the validation
record scored as one sequence at every check, and the test record (never seen
in training or selection) simulated by the kept network. It prints one table
row per network: best iteration, validation RMSE (standardised units, the
number the checks compare) and test RMSE (volts), and the training seconds.

    python examples/matlab_loop.py                                # 3 models x 2 units x 2 rates
    python examples/matlab_loop.py --units 8 16 32 --learning-rates 0.01 0.003
    python examples/matlab_loop.py --quick                        # a tiny run

Runs under any ``KERAS_BACKEND``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence

import keras
import numpy as np

from keras_mgu import MGU
from keras_mgu.callbacks import LearningRateDecayPoints, WeightedEarlyStopping
from keras_mgu.datasets import Normalizer, make_windows, simulate_cascaded_tanks

#: The recurrent layer of each model name.
LAYERS = {"MGU": MGU, "GRU": keras.layers.GRU, "LSTM": keras.layers.LSTM}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=tuple(LAYERS), default=list(LAYERS))
    parser.add_argument("--units", type=int, nargs="+",
                        help="hidden units grid (default: 8 16; --quick: 4)")  # fmt: skip
    parser.add_argument("--learning-rates", type=float, nargs="+",
                        help="Adam's initial learning rates, a grid (default: 0.01 0.003; "
                        "--quick: 0.01)")  # fmt: skip
    parser.add_argument("--iterations", type=int, default=600, help="gradient steps per network")
    parser.add_argument("--decay-points", type=float, nargs="+", default=[0.5, 0.8],
                        help="fractions of the epochs at which the rate decays")  # fmt: skip
    parser.add_argument("--decay-rate", type=float, default=0.3)
    parser.add_argument("--score-weights", type=float, nargs=2, default=[0.8, 0.2],
                        metavar=("W_VAL_RMSE", "W_TRAIN_MSE"),
                        help="the early-stopping score: W_VAL_RMSE * validation RMSE + "
                        "W_TRAIN_MSE * training MSE")  # fmt: skip
    parser.add_argument("--validation-every", type=int, default=None, metavar="ITERATIONS",
                        help="iterations between checks (default: max(0.005, 1 / epochs) of "
                        "the run, as the MATLAB loop)")  # fmt: skip
    parser.add_argument("--window", type=int, default=128, help="training sequence length")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per mini-batch")
    parser.add_argument("--samples", type=int, default=1024, help="length of each record")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="a tiny run: 256-sample records, at most 40 iterations")  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.window, args.batch_size = 256, 64, 8
        args.iterations = min(args.iterations, 40)
    args.units = args.units or ([4] if args.quick else [8, 16])
    args.learning_rates = args.learning_rates or ([1e-2] if args.quick else [1e-2, 3e-3])
    return args


def load_data(samples: int, window: int, seed: int):
    """Training sequences, the validation and test records (standardised) and the normaliser.

    Returns ``(x_train, y_train)`` of shape ``(n_sequences, window, 1)``, the
    validation ``(x_val, y_val)`` and test ``(x_test, y_test)`` as single
    sequences ``(1, samples', 1)``, and the :class:`Normalizer` of the
    estimation record.
    """
    data = simulate_cascaded_tanks(n_samples=samples, seed=seed)
    norm = Normalizer.fit(data.estimation)
    est, val, test = (norm.transform(r) for r in (data.estimation, data.validation, data.test))
    x_train, y_train = make_windows(est.u, est.y, window, stride=max(1, window // 8))
    as_sequence = lambda a: np.asarray(a, "float32")[None]  # noqa: E731
    records = {
        "train": (x_train.astype("float32"), y_train.astype("float32")),
        "validation": (as_sequence(val.u), as_sequence(val.y)),
        "test": (as_sequence(test.u), as_sequence(test.y)),
    }
    return records, norm, data.test


def build_model(kind: str, units: int, n_in: int, n_out: int, seed: int) -> keras.Model:
    """``(batch, steps, n_in) -> (batch, steps, n_out)``: one recurrent layer and a linear head."""
    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.Input((None, n_in)),
            LAYERS[kind](units, return_sequences=True),
            keras.layers.Dense(n_out),
        ],
        name=f"{kind.lower()}_{units}",
    )


def train_loop(kind: str, units: int, learning_rate: float, records: dict, args) -> dict:
    """One network of the grid, trained like the MATLAB ``train_loop``; its table row."""
    x_train, y_train = records["train"]
    model = build_model(kind, units, x_train.shape[-1], y_train.shape[-1], args.seed)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss="mse",  # the training MSE of the score's second term ("loss")
        metrics=[keras.metrics.RootMeanSquaredError(name="rmse")],  # gives "val_rmse"
    )
    steps_per_epoch = math.ceil(len(x_train) / args.batch_size)
    epochs = max(1, math.ceil(args.iterations / steps_per_epoch))
    w_val, w_train = args.score_weights
    best = WeightedEarlyStopping(
        {"val_rmse": w_val, "loss": w_train},
        validation_data=records["validation"],
        validation_frequency=args.validation_every or max(5e-3, 1 / epochs),
    )
    decay = LearningRateDecayPoints(args.decay_points, decay_rate=args.decay_rate)
    start = time.perf_counter()
    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=epochs, shuffle=True,
              callbacks=[decay, best], verbose=0)  # fmt: skip
    seconds = time.perf_counter() - start
    # `model` now holds the weights of the best check (min_cond_net).
    x_val, y_val = records["validation"]
    val_rmse = float(np.sqrt(np.mean((model.predict(x_val, verbose=0) - y_val) ** 2)))
    best_check = next(c for c in best.history if c["iteration"] == best.best_iteration)
    return {
        "model": kind,
        "units": units,
        "learning_rate": learning_rate,
        "best_iteration": best.best_iteration,
        "iterations": epochs * steps_per_epoch,
        "best_score": best.best_score,
        "best_check_val_rmse": best_check["val_rmse"],
        "validation_rmse": val_rmse,
        "final_learning_rate": float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)),
        "seconds": seconds,
        "network": model,
    }


def test_rmse(model: keras.Model, records: dict, norm: Normalizer, test) -> float:
    """RMSE of the free-run simulation of the test record, in the record's units (V)."""
    y_sim = norm.inverse_transform_y(model.predict(records["test"][0], verbose=0)[0])
    return float(np.sqrt(np.mean((y_sim - test.y) ** 2)))


def print_table(rows: list[dict]) -> None:
    print("| model | units | lr | best iteration | validation RMSE | test RMSE [V] | seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['model']} | {r['units']} | {r['learning_rate']:g} | {r['best_iteration']} of "
            f"{r['iterations']} | {r['validation_rmse']:.4f} | {r['test_rmse']:.4f} | "
            f"{r['seconds']:.1f} |"
        )


def main(argv: Sequence[str] | None = None) -> list[dict]:
    """Train the grid, print the table; the rows (with each kept ``network``)."""
    args = parse_args(argv)
    records, norm, test = load_data(args.samples, args.window, args.seed)
    print(f"backend: {keras.backend.backend()}; {len(records['train'][0])} training sequences "
          f"of {args.window} samples, batch {args.batch_size}")  # fmt: skip
    rows = []
    for kind in args.models:
        for units in args.units:
            for learning_rate in args.learning_rates:
                row = train_loop(kind, units, learning_rate, records, args)
                row["test_rmse"] = test_rmse(row["network"], records, norm, test)
                rows.append(row)
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
