"""System identification with an MGU network: simulate a plant's output from its input.

A thin command line over :mod:`keras_mgu.sysid`. By default the data come from
the built-in simulated cascaded-tanks plant
(``keras_mgu.datasets.simulate_cascaded_tanks``), so the example runs with no
download. The recipe trains an MGU simulation model (learned initial state,
linear path) on the estimation record with ``model.fit``, scores the
validation record free-run to keep the best weights and to choose among
``--restarts`` runs, and finally reports the test record's free-run RMSE under
both conventions (all samples; ``nonlinear-benchmarks`` rule, samples 50 on).

Examples::

    python examples/system_identification.py                 # simulated tanks, MGU
    python examples/system_identification.py --compare       # MGU vs GRU vs LSTM
    python examples/system_identification.py --dataset cascaded-tanks \\
        --data-path ../shared/data/cascaded_tanks/dataBenchmark.csv --restarts 5
    python examples/system_identification.py --train-csv train.csv --test-csv test.csv \\
        --inputs u1 u2 --outputs y1 y2 --units 32

It writes PNGs (measured vs simulated test output, residual, training curves)
and ``results.json`` into ``--out`` and prints ``test RMSE: <value>``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


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
    parser.add_argument("--units", type=int, nargs="+", default=[32], help="stacked layer sizes")
    parser.add_argument("--iterations", type=int, default=2000, help="gradient steps per run")
    parser.add_argument(
        "--window", type=int, help="training window (default: whole record up to 2048 samples)"
    )
    parser.add_argument("--batch-size", type=int, default=16, help="windows per batch")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--restarts", type=int, default=3, help="runs to choose from on validation")
    parser.add_argument("--compare", action="store_true", help="also train GRU and LSTM")
    parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join("outputs", "system_identification"))
    parser.add_argument("--quick", action="store_true", help="tiny run, for smoke tests")
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations = min(args.iterations, 40)
        args.restarts = min(args.restarts, 2)
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


def plot_results(kind: str, record, y_sim, stopper, out: str) -> list[str]:
    """PNGs of measured vs simulated output, the residual, and the training curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from keras_mgu.plotting import plot_training
    from keras_mgu.sysid import rmse

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


def config_from(args: argparse.Namespace, cell: str):
    from keras_mgu.sysid import RecipeConfig

    return RecipeConfig(
        cell=cell,
        units=tuple(args.units),
        iterations=args.iterations,
        learning_rate=args.learning_rate,
        window=args.window,
        batch_size=args.batch_size,
        steps_per_epoch=min(100, args.iterations),
    )


def run(args: argparse.Namespace) -> dict[str, dict]:
    """Identify each model, report test RMSE, write plots. Returns the results table."""
    import keras

    from keras_mgu import sysid

    data = load_data(args)
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
        config = config_from(args, kind.lower())
        window = config.resolved(data.estimation.n_samples).window
        print(f"\n== {kind} {args.units}, {args.restarts} restart(s), window {window}")
        found = sysid.identify(data, config, args.restarts, args.seed, verbose=2)
        y_sim = found.simulate(test.u)
        best = found.runs[found.best]
        results[kind] = {
            "params": found.model.count_params(),
            "seconds": sum(r.seconds for r in found.runs),
            "validation_scores": found.validation_scores,
            "chosen_seed": best.seed,
            "rmse": sysid.score(test.y, y_sim),
            "rmse_benchmark": sysid.score(test.y, y_sim, "benchmark"),
        }
        print(f"{kind} test RMSE: {results[kind]['rmse']:.4f} (std of the test output: "
              f"{test.y.std():.4f})")  # fmt: skip
        print("plots: " + ", ".join(plot_results(kind, test, y_sim, best.stopper, args.out)))
    print_summary(results, test)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"backend": keras.backend.backend(), "seed": args.seed, **results}, f, indent=1)
    return results


def print_summary(results: dict[str, dict], test) -> None:
    print("\n| model | parameters | training s | test RMSE (all) | test RMSE (from sample 50) |")
    print("|---|---|---|---|---|")
    for kind, r in results.items():
        print(f"| {kind} | {r['params']} | {r['seconds']:.0f} | {r['rmse']:.4f} | "
              f"{r['rmse_benchmark']:.4f} |")  # fmt: skip
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
