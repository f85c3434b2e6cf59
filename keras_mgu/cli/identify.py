"""``keras-mgu identify``: identify a dynamical system with an MGU network.

A command line over :mod:`keras_mgu.sysid`: load the estimation, validation
and test records (:func:`load_data`), build the recipe's
:class:`~keras_mgu.sysid.RecipeConfig` from the options the user gave
(:func:`build_config`; every other setting is derived from the record), train
``--restarts`` runs per model and keep the best on validation
(:func:`identify_model`), then report the test scores, plots and
``results.json`` (:mod:`keras_mgu.cli.report`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any

from keras_mgu.cli import report

__all__ = [
    "DATASETS",
    "UsageError",
    "add_arguments",
    "benchmark_n_initial",
    "build_config",
    "check_arguments",
    "identify_model",
    "load_data",
    "recipe_options",
    "results_row",
    "run",
    "run_command",
    "save_model_file",
]

HELP = "identify a dynamical system with an MGU network (keras_mgu.sysid)"
DESCRIPTION = """\
Identify a dynamical system with an MGU network: train simulation models on the
estimation record (keras_mgu.sysid's recipe), keep the best of --restarts runs on
the validation record, and score the free-run simulation of the test record: RMSE
over all samples, and from sample --n-initial on (the benchmark convention; in the
benchmark's published unit too when the data carry a scoring protocol).

Writes the identified model <model>.kmgu (mgu.kmgu, gru.kmgu, ...: for keras-mgu
simulate and keras-mgu export, or keras_mgu.sysid.load), <model>_test_simulation.png,
<model>_test_residual.png, <model>_training.png and results.json into --out; the
last line printed is 'test RMSE: <value>' (the MGU's score over all test samples,
in the record's units).

examples:
  keras-mgu identify                                  # simulated tanks, MGU
  keras-mgu identify --compare                        # MGU vs GRU vs LSTM
  keras-mgu identify --dataset cascaded-tanks --data-path dataBenchmark.csv
  keras-mgu identify --dataset wh2009 --data-path data/wh2009 --time-budget 600
  keras-mgu identify --train-csv est.csv --test-csv test.csv --inputs u1 u2 --outputs y
"""

#: ``--dataset`` choices and the names ``keras_mgu.datasets.load_benchmark`` knows them by.
DATASETS = {
    "simulated-tanks": None,
    "cascaded-tanks": "cascaded_tanks",
    "wh2009": "wh2009",
    "emps": "emps",
}
#: Models of ``--compare`` (the first alone without it).
MODELS = ("MGU", "GRU", "LSTM")
#: ``--n-initial`` of records without a scoring protocol.
DEFAULT_N_INITIAL = 50
#: ``--quick``: caps on the iterations, restarts and time budget; simulated record length.
QUICK_ITERATIONS = 40
QUICK_RESTARTS = 2
QUICK_TIME_BUDGET = 30.0
QUICK_SAMPLES = 256
DERIVED = "default: derived from the record"


class UsageError(Exception):
    """Bad options or data: reported as ``keras-mgu identify: error: <message>``."""


def _number(kind: type, low: float, strict: bool, what: str) -> Callable[[str], Any]:
    """An argparse ``type`` that parses ``kind`` and checks ``value > low`` (or ``>=``)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        in_range = value is not None and math.isfinite(value) and value >= low
        if not in_range or (strict and value == low):
            raise argparse.ArgumentTypeError(f"expected {what}; got {text!r}")
        return value

    return parse


positive_int = _number(int, 0, True, "a positive integer")
positive_float = _number(float, 0.0, True, "a positive number")
count = _number(int, 0, False, "an integer >= 0")
window_length = _number(int, 2, False, "an integer >= 2")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``identify`` to ``parser``."""
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", choices=tuple(DATASETS), default="simulated-tanks",
                      help="simulated-tanks is built in (no download); the others are the "
                      "measured benchmarks and need --data-path")  # fmt: skip
    data.add_argument("--data-path", metavar="PATH",
                      help="the benchmark's file or its folder (with --dataset other than "
                      "simulated-tanks)")  # fmt: skip
    data.add_argument("--train-csv", metavar="FILE",
                      help="your own estimation record, one row per sample (replaces --dataset; "
                      "its last 20%% validates)")  # fmt: skip
    data.add_argument("--test-csv", metavar="FILE", help="your own test record (same columns)")
    data.add_argument("--inputs", nargs="+", default=["u"], metavar="COLUMN",
                      help="input column names of the CSV records")  # fmt: skip
    data.add_argument("--outputs", nargs="+", default=["y"], metavar="COLUMN",
                      help="output column names of the CSV records")  # fmt: skip
    data.add_argument("--ts", type=positive_float, default=1.0, metavar="SECONDS",
                      help="sample time of the CSV records")  # fmt: skip
    data.add_argument("--n-initial", type=count, metavar="N",
                      help="measured test outputs the model may use before the 'benchmark' "
                      "score starts (default: the benchmark protocol's, else "
                      f"{DEFAULT_N_INITIAL})")  # fmt: skip
    _add_recipe_arguments(parser.add_argument_group("recipe"))
    run = parser.add_argument_group("run")
    run.add_argument("--backend", choices=("tensorflow", "jax", "torch"),
                     help="Keras backend (default: $KERAS_BACKEND, else Keras' "
                     "configured one)")  # fmt: skip
    run.add_argument("--out", default=os.path.join("outputs", "system_identification"),
                     metavar="DIR", help="folder for the model files, plots and "
                     "results.json")  # fmt: skip
    run.add_argument("--quick", action="store_true",
                     help=f"tiny run for smoke tests: at most {QUICK_ITERATIONS} iterations, "
                     f"{QUICK_RESTARTS} restarts, {QUICK_TIME_BUDGET:g} s budget, "
                     f"{QUICK_SAMPLES}-sample simulated record")  # fmt: skip


def _add_recipe_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--units", type=positive_int, nargs="+", metavar="N",
                       help=f"stacked layer sizes ({DERIVED})")  # fmt: skip
    group.add_argument("--iterations", type=positive_int, metavar="N",
                       help=f"gradient steps per run ({DERIVED})")  # fmt: skip
    group.add_argument("--window", type=window_length, metavar="N",
                       help=f"training window length in samples ({DERIVED})")  # fmt: skip
    group.add_argument("--batch-size", type=positive_int, metavar="N",
                       help=f"windows per batch ({DERIVED})")  # fmt: skip
    group.add_argument("--learning-rate", type=positive_float, metavar="LR",
                       help=f"initial learning rate ({DERIVED})")  # fmt: skip
    group.add_argument("--time-budget", type=positive_float, metavar="SECONDS",
                       help="training time budget passed to the recipe (default: the "
                       "recipe's)")  # fmt: skip
    group.add_argument("--restarts", type=positive_int, default=3, metavar="N",
                       help="runs to choose from on the validation record")  # fmt: skip
    group.add_argument("--selection", metavar="RULE",
                       help="'best': keep the run best on validation; 'ensemble': average "
                       "runs chosen greedily on validation (default: the recipe's)")  # fmt: skip
    group.add_argument("--seed", type=int, default=0, help="seed of the first run")
    group.add_argument("--compare", action="store_true",
                       help="also train GRU and LSTM models with the same recipe")  # fmt: skip


def _check_files(args: argparse.Namespace) -> None:
    for option, path in (("--train-csv", args.train_csv), ("--test-csv", args.test_csv)):
        if path is not None and not os.path.isfile(path):
            raise UsageError(f"{option}: no such file: {path!r}")
    if args.data_path is not None and not os.path.exists(args.data_path):
        raise UsageError(f"--data-path: no such file or folder: {args.data_path!r}")


def check_arguments(args: argparse.Namespace) -> None:
    """Reject bad combinations (:class:`UsageError`) and apply ``--quick``'s caps."""
    if (args.train_csv is None) != (args.test_csv is None):
        raise UsageError("--train-csv and --test-csv go together")
    measured = args.dataset != "simulated-tanks"
    if args.train_csv is not None and measured:
        raise UsageError("--train-csv/--test-csv replace --dataset; give one or the other")
    if measured and not args.data_path:
        raise UsageError(
            f"--dataset {args.dataset} needs --data-path (the benchmark's file or its folder)"
        )
    if args.data_path and not measured:
        measured_names = ", ".join(name for name, known in DATASETS.items() if known)
        raise UsageError(f"--data-path goes with --dataset {measured_names}")
    _check_files(args)
    if args.quick:
        args.iterations = min(args.iterations or QUICK_ITERATIONS, QUICK_ITERATIONS)
        args.time_budget = min(args.time_budget or QUICK_TIME_BUDGET, QUICK_TIME_BUDGET)
        args.restarts = min(args.restarts, QUICK_RESTARTS)


def _csv_data(args: argparse.Namespace):
    from keras_mgu import datasets

    def read(path: str):
        return datasets.load_csv_records(path, args.inputs, args.outputs, ts=args.ts)

    estimation, validation = read(args.train_csv).split(0.2)
    return datasets.SysIdData(estimation, validation, read(args.test_csv))


def load_data(args: argparse.Namespace):
    """The estimation, validation and test records (a ``SysIdData``, physical units).

    ``--train-csv``/``--test-csv`` (the estimation record's last 20% validates),
    else the ``--dataset``: the built-in simulated tanks or a measured
    benchmark read from ``--data-path`` by ``keras_mgu.datasets.load_benchmark``.
    """
    from keras_mgu import datasets

    try:
        if args.train_csv:
            return _csv_data(args)
        if args.dataset == "simulated-tanks":
            n_samples = QUICK_SAMPLES if args.quick else 1024
            return datasets.simulate_cascaded_tanks(n_samples=n_samples, seed=args.seed)
        return datasets.load_benchmark(DATASETS[args.dataset], args.data_path)
    except (OSError, ValueError, ImportError) as err:
        raise UsageError(f"cannot load the data: {err}") from err


def benchmark_n_initial(args: argparse.Namespace, data: Any) -> int:
    """Samples the 'benchmark' score leaves out: ``--n-initial``, the protocol's, or 50."""
    protocol = getattr(data, "protocol", None)
    n_initial = args.n_initial
    if n_initial is None and protocol is not None:
        n_initial = getattr(data, "n_initial", None)
        n_initial = protocol.n_initial if n_initial is None else n_initial
    n_initial = DEFAULT_N_INITIAL if n_initial is None else int(n_initial)
    if n_initial >= data.test.n_samples:
        raise UsageError(
            f"--n-initial {n_initial} leaves no sample of the {data.test.n_samples}-sample test "
            "record to score"
        )
    return n_initial


def recipe_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`RecipeConfig` fields the user gave (the rest are derived from the record).

    A run shorter than an epoch (``steps_per_epoch``) also gets that many
    steps per epoch, so ``--iterations`` is exact.
    """
    from keras_mgu.sysid import RecipeConfig

    options = {
        "units": tuple(args.units) if args.units else None,
        "iterations": args.iterations,
        "window": args.window,
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "time_budget": args.time_budget,
        "selection": args.selection,
        "n_initial": args.n_initial or None,  # the encoder reads as many as a test gives
    }
    given = {name: value for name, value in options.items() if value is not None}
    steps = next(f.default for f in dataclasses.fields(RecipeConfig) if f.name == "steps_per_epoch")
    if "iterations" in given and isinstance(steps, int) and given["iterations"] < steps:
        given["steps_per_epoch"] = given["iterations"]
    return given


def build_config(args: argparse.Namespace, cell: str):
    """``RecipeConfig(cell=cell, **recipe_options(args))``."""
    from keras_mgu.sysid import RecipeConfig

    try:
        return RecipeConfig(cell=cell, **recipe_options(args))
    except (TypeError, ValueError) as err:
        raise UsageError(f"bad recipe settings: {err}") from err


def identify_model(kind: str, data: Any, args: argparse.Namespace, n_initial: int) -> dict:
    """Train ``--restarts`` runs of one model, report and plot it; its results row."""
    from keras_mgu import sysid

    config = build_config(args, kind.lower())
    print(f"\n== {kind}: {args.restarts} restart(s) from seed {args.seed}", flush=True)
    given = {name: getattr(config, name) for name in ("cell", *recipe_options(args))}
    print(f"settings: {report.format_settings(given)}; the rest derived from the record")
    try:  # verbose: the recipe prints the settings it resolved, then its progress
        found = sysid.identify(data, config, args.restarts, args.seed, verbose=2)
    except ValueError as err:  # settings that do not fit the record, e.g. a too long --window
        raise UsageError(f"the recipe rejected the settings: {err}") from err
    row = results_row(found, data, n_initial)
    report.print_scores(kind, row, data.test, n_initial, getattr(data, "protocol", None))
    y_sim = found.simulate(data.test.u)
    stopper = found.runs[found.best].stopper
    print(report.plot_results(kind, data.test, y_sim, stopper, args.out), flush=True)
    row["model_file"] = save_model_file(found, kind, args.out)
    print(f"model file: {row['model_file']}", flush=True)
    return row


def save_model_file(found: Any, kind: str, out: str) -> str:
    """Save ``found`` as ``<out>/<kind in lower case>.kmgu``; the path written."""
    from keras_mgu.sysid.saving import SUFFIX

    return found.save(os.path.join(out, f"{kind.lower()}{SUFFIX}"))


def results_row(found: Any, data: Any, n_initial: int) -> dict[str, Any]:
    """One model's entry of results.json: size, time, validation and test scores, settings.

    ``rmse``: the free-run simulation of the test record over all samples;
    ``rmse_benchmark``: from sample ``n_initial`` on, the model given the
    first ``n_initial`` measured outputs; with a protocol, both also in its
    unit (``*_in_unit``).
    """
    row = {
        "params": found.model.count_params(),
        "seconds": sum(run.seconds for run in found.runs),
        "validation_scores": found.validation_scores,
        "validation_rmse": [run.validation_rmse for run in found.runs],
        "structures": [run.structure for run in found.runs],
        "chosen_seed": found.runs[found.best].seed,
        "averaged_seeds": [found.runs[k].seed for k in found.members],
        "config": dataclasses.asdict(found.config),
        "rmse": found.score(data.test, "all"),
        "rmse_benchmark": found.score(data.test, "benchmark", n_initial),
    }
    protocol = getattr(data, "protocol", None)
    if protocol is not None:
        row["rmse_in_unit"] = row["rmse"] * protocol.scale
        row["rmse_benchmark_in_unit"] = row["rmse_benchmark"] * protocol.scale
    return row


def run(args: argparse.Namespace) -> dict[str, dict]:
    """Identify each model on the data, report the scores, write plots and results.json.

    Returns the results table (model name to its row).
    """
    import keras

    data = load_data(args)
    n_initial = benchmark_n_initial(args, data)
    os.makedirs(args.out, exist_ok=True)
    backend = keras.backend.backend()
    report.print_data(backend, _data_name(args), data, n_initial)
    results = {kind: identify_model(kind, data, args, n_initial) for kind in _models(args)}
    summary = {
        "backend": backend,
        "seed": args.seed,
        "restarts": args.restarts,
        "dataset": _data_name(args),
        "n_initial": n_initial,
        "protocol": report.protocol_summary(getattr(data, "protocol", None)),
        "settings": recipe_options(args),
    }
    path = report.write_results(args.out, {**summary, **results})
    print(f"\nresults: {path}")
    report.print_summary(results, data.test, n_initial, getattr(data, "protocol", None))
    return results


def _models(args: argparse.Namespace) -> tuple[str, ...]:
    return MODELS if args.compare else MODELS[:1]


def _data_name(args: argparse.Namespace) -> str:
    return "csv" if args.train_csv else args.dataset


def run_command(args: argparse.Namespace) -> int:
    """The ``identify`` subcommand's handler: :func:`run`, exit status 0."""
    run(args)
    return 0
