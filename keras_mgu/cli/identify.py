"""``keras-mgu identify``: identify a dynamical system, every model class tried.

A command line over :mod:`keras_mgu.sysid`: load the estimation, validation
and test records (:func:`load_data`: a benchmark, the simulated tanks, or
your own files read by ``keras_mgu.datasets.load_record``, several
estimation experiments joined with their boundaries), build the recipe's
:class:`~keras_mgu.sysid.RecipeConfig` from the options the user gave
(:func:`build_config`; every other setting is derived from the record), train
every model class (the recurrent network alone or on the ARX model's
residual, NARX, the network inside the ARX model's loop, the ARX model
refined, the polynomial NARX), give the winning class ``--restarts`` runs and
keep the best on validation (:func:`identify_model`), then report the test
scores, plots and ``results.json`` (:mod:`keras_mgu.cli.report`), named after
the class and cell kept (:func:`model_name`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from keras_mgu.cli import report
from keras_mgu.cli.backends import BACKENDS
from keras_mgu.cli.errors import DataError, OptionError, UsageError
from keras_mgu.cli.naming import (
    RECIPE_UNITS,
    UsedNames,
    kept_cell,
    model_name,
    run_name,
    save_model_file,
)

__all__ = [
    "DATASETS",
    "add_arguments",
    "add_residual_lags",
    "benchmark_n_initial",
    "build_config",
    "check_arguments",
    "delay_samples",
    "identify_model",
    "load_data",
    "own_data",
    "parse_score_weights",
    "read_inputs",
    "recipe_options",
    "results_row",
    "run",
    "run_command",
]

HELP = "identify a dynamical system: every model class tried, the best on validation kept"
DESCRIPTION = """\
Identify a dynamical system: train simulation models of every class on the
estimation record (keras_mgu.sysid's recipe: the recurrent network alone and on
the ARX model's residual, NARX, the network inside the ARX model's loop, the ARX
model refined on the simulation error, the polynomial NARX), give the class that
scores best on validation --restarts runs, keep the best, and score the free-run
simulation of the test record: from sample --n-initial on (the benchmark
convention; in the benchmark's published unit too when the data carry a scoring
protocol), and over all samples.

The model kept goes into a folder of --out named after its class and cell, e.g.
network_mgu_h32_lr0.01/ (network class, MGU cell, 32 units, learning rate 0.01),
narx_mlp_h64-64_lr0.01/ or polynomial/: the identified model (network_mgu.kmgu,
narx_mlp.kmgu, polynomial.kmgu; for keras-mgu simulate and keras-mgu export, or
keras_mgu.sysid.load), test_simulation.png, test_residual.png and training.png;
its entry, under the same name, goes into --out/results.json (runs of other
settings into the same --out are kept). The last line printed is
'test RMSE: <value>', the kept model's score in the record's units:
the simulation from the first --n-initial measured test outputs, scored after them
(the free run from the estimation record's start state, all samples, for a benchmark
whose test record starts where estimation did, and for --n-initial 0).

Your own data (--train/--test/--val): .csv, .txt, .tsv, .dat, .asc text, comma-,
semicolon-, tab- or whitespace-separated, with or without a header row (decimal
point only); MATLAB .mat (v7; variable names are the columns; N x k matrices give
columns NAME_0 ... NAME_k-1); NumPy .npz (array names are the columns). Columns of
files without names are known by 0-based index, or name them with --columns.
Without --test the model is identified all the same and the validation record
(--val, or the end of the last --train file) is scored, said so in the report
and in results.json (scored_on). Several --train files are separate experiments:
no training window crosses from one into the next, each starts from its own state.

examples:
  keras-mgu identify                                  # simulated tanks, every class
  keras-mgu identify --compare                        # networks of MGU vs GRU vs LSTM
  keras-mgu identify --dataset cascaded-tanks --data-path dataBenchmark.csv
  keras-mgu identify --dataset wh2009 --data-path data/wh2009 --effort 4
  keras-mgu identify --train est.csv --test test.csv --inputs u1 u2 --outputs y --ts 0.1
  keras-mgu identify --train est.csv --inputs u --outputs y   # no test record yet
  keras-mgu identify --train run1.mat run2.mat --val run3.mat --test run4.mat \\
      --inputs pump --outputs level --ts 4
  keras-mgu identify --train est.txt --test test.txt --columns u y   # writematrix output
  keras-mgu identify --train est.txt --test test.txt --inputs 0 --outputs 1  # by index
  keras-mgu identify --compare --units 16 --learning-rate 0.003 --decay-points 0.5 0.8 \\
      --decay-rate 0.3 --score-weights val_rmse=0.8,loss=0.2 --validation-every 20
"""

#: ``--dataset`` choices and the names ``keras_mgu.datasets.load_benchmark`` knows them by.
DATASETS = {
    "simulated-tanks": None,
    "cascaded-tanks": "cascaded_tanks",
    "wh2009": "wh2009",
    "emps": "emps",
}
#: ``--steps-ahead``'s default: the one-step-ahead prediction.
STEPS_AHEAD = 1
#: ``--residual-lags``'s default: the residual analysis's (``sysid.judging.residuals.MAX_LAG``).
RESIDUAL_LAGS = 25
#: An estimate above this many seconds prints how to bound the training.
LONG_ESTIMATE_S = 600.0
#: Models of ``--compare`` (the first alone without it).
MODELS = ("MGU", "GRU", "LSTM")
#: ``--n-initial`` of records without a scoring protocol: test samples the 'benchmark'
#: score leaves out (the recipe's encoder reads ``RecipeConfig``'s own default, 20).
DEFAULT_N_INITIAL = 50
#: The encoder lag of ``RecipeConfig`` without a protocol (``sysid.config.DEFAULT_N_INITIAL``).
RECIPE_N_INITIAL = 20
RECIPE_LEARNING_RATE = 0.01
#: ``--val-fraction``'s default: the end of the estimation data that validates
#: (equal to ``keras_mgu.datasets.records.VALIDATION_FRACTION``, ``sysid.identify``'s).
VAL_FRACTION = 0.2
#: ``--quick``: caps on the iterations and restarts; simulated record length.
QUICK_ITERATIONS = 40
QUICK_RESTARTS = 2
QUICK_SAMPLES = 256
DERIVED = "default: derived from the record"
#: Names ``--score-weights`` may weigh (``keras_mgu.sysid.config_checks.SCORE_NAMES``).
SCORE_NAMES = ("val_rmse", "loss")


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


def fraction(text: str) -> float:
    """An argparse ``type``: a number strictly between 0 and 1."""
    value = _number(float, 0.0, True, "a number between 0 and 1")(text)
    if value >= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1; got {text!r}")
    return value


def dataset_name(text: str) -> str:
    """An argparse ``type``: ``cascaded_tanks`` and ``cascaded-tanks`` name the same dataset."""
    return text.replace("_", "-")


def run_fraction(text: str) -> float:
    """An argparse ``type``: a fraction of the run, a number in ``(0, 1]``."""
    value = _number(float, 0.0, True, "a fraction of the run in (0, 1]")(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a fraction of the run in (0, 1]; got {text!r}")
    return value


def parse_score_weights(text: str) -> dict[str, float]:
    """``"val_rmse=0.8,loss=0.2"`` -> ``{"val_rmse": 0.8, "loss": 0.2}`` (an argparse ``type``).

    Names are those of :data:`SCORE_NAMES`; weights are numbers ``>= 0``,
    at least one positive.
    """
    weights: dict[str, float] = {}
    for item in text.split(","):
        name, sep, number = (part.strip() for part in item.partition("="))
        if not sep or not name:
            raise argparse.ArgumentTypeError(
                f"expected NAME=WEIGHT pairs separated by commas, e.g. "
                f"val_rmse=0.8,loss=0.2; got {text!r}"
            )
        if name not in SCORE_NAMES:
            raise argparse.ArgumentTypeError(
                f"unknown score name {name!r}; expected one of {', '.join(SCORE_NAMES)}"
            )
        if name in weights:
            raise argparse.ArgumentTypeError(f"{name!r} is weighted twice in {text!r}")
        weights[name] = _number(float, 0.0, False, f"a weight >= 0 for {name}")(number)
    if not any(weights.values()):
        raise argparse.ArgumentTypeError(f"expected at least one positive weight; got {text!r}")
    return weights


def add_arguments(parser: argparse.ArgumentParser, residual_lags: bool = True) -> None:
    """Add the options of ``identify`` to ``parser``; ``--residual-lags`` with ``residual_lags``."""
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", type=dataset_name, choices=tuple(DATASETS),
                      default="simulated-tanks",
                      help="simulated-tanks is built in (no download); the others are the "
                      "measured benchmarks and need --data-path ('_' or '-' alike)")  # fmt: skip
    data.add_argument("--data-path", metavar="PATH",
                      help="the benchmark's file or its folder (with --dataset other than "
                      "simulated-tanks)")  # fmt: skip
    data.add_argument("--train", nargs="+", metavar="FILE",
                      help="your own estimation data (replaces --dataset): one file per "
                      "experiment, .csv/.txt/.tsv/.dat/.asc, .mat or .npz")  # fmt: skip
    data.add_argument("--test", metavar="FILE",
                      help="your own test record (same columns; optional: without it the "
                      "validation record is scored, and it chose the model)")  # fmt: skip
    data.add_argument("--val", metavar="FILE",
                      help="your own validation record (default: the end of the last --train "
                      "experiment, see --val-fraction)")  # fmt: skip
    data.add_argument("--val-fraction", type=fraction, default=VAL_FRACTION, metavar="F",
                      help="without --val: the share of the estimation samples, cut from the "
                      "end of the last experiment, that validates (your files and the measured "
                      "benchmarks; the simulated tanks have a validation record of their "
                      "own)")  # fmt: skip
    data.add_argument("--train-csv", metavar="FILE", help="the same as --train with one file")
    data.add_argument("--test-csv", metavar="FILE", help="the same as --test")
    data.add_argument("--inputs", nargs="+", default=["u"], metavar="COLUMN",
                      help="input columns of your files: names, or 0-based indices")  # fmt: skip
    data.add_argument("--outputs", nargs="+", default=["y"], metavar="COLUMN",
                      help="output columns of your files: names, or 0-based indices")  # fmt: skip
    data.add_argument("--columns", nargs="+", metavar="NAME",
                      help="names of all the columns, in order, of files without a header "
                      "row (.mat and .npz: instead of their variable names)")  # fmt: skip
    data.add_argument("--ts", type=positive_float, default=1.0, metavar="SECONDS",
                      help="sample time of your files")  # fmt: skip
    data.add_argument("--n-initial", type=count, metavar="N",
                      help="measured test outputs the model may use before the 'benchmark' "
                      "score starts, and the samples the encoder of long records reads "
                      "(default: the benchmark protocol's n for both; without a protocol "
                      f"the score starts at sample {DEFAULT_N_INITIAL} and the encoder reads "
                      f"{RECIPE_N_INITIAL}); 0: no measured output, the test is the free run "
                      "alone")  # fmt: skip
    data.add_argument("--steps-ahead", type=positive_int, default=STEPS_AHEAD, metavar="K",
                      help="k of the k-step-ahead prediction scored beside the simulation "
                      "(each test sample predicted from the measured outputs up to k samples "
                      "before it)")  # fmt: skip
    if residual_lags:
        add_residual_lags(data)
    _add_recipe_arguments(parser.add_argument_group("recipe"))
    run = parser.add_argument_group("run")
    run.add_argument("--backend", choices=tuple(BACKENDS),
                     help="Keras backend (default: $KERAS_BACKEND, else Keras' "
                     "configured one)")  # fmt: skip
    run.add_argument("--out", default=os.path.join("outputs", "system_identification"),
                     metavar="DIR", help="folder for the model files, plots and "
                     "results.json")  # fmt: skip
    run.add_argument("--verbose", action="store_true",
                     help="also show Keras's progress lines as each run trains and the "
                     "backends' start-up logging (TensorFlow, CUDA, XLA); hidden by default: "
                     "one line per run")  # fmt: skip
    run.add_argument("--quick", action="store_true",
                     help=f"tiny run for smoke tests: at most {QUICK_ITERATIONS} iterations, "
                     f"{QUICK_RESTARTS} restarts, "
                     f"{QUICK_SAMPLES}-sample simulated record")  # fmt: skip


def add_residual_lags(group: Any) -> None:
    """``--residual-lags N``: the residual analysis's lags (``sysid.evaluate``'s ``max_lag``)."""
    group.add_argument("--residual-lags", type=positive_int, default=RESIDUAL_LAGS, metavar="N",
                       help="lags of the residual analysis: the residual's autocorrelation at "
                       "lags 0 to N and its cross-correlation with each input at -N to N "
                       "(fewer where the scored samples are fewer)")  # fmt: skip


def _add_recipe_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--units", type=positive_int, nargs="+", metavar="N",
                       help="stacked layer sizes (default: one layer of "
                       f"{RECIPE_UNITS[0]} units)")  # fmt: skip
    group.add_argument("--iterations", type=positive_int, metavar="N",
                       help=f"gradient steps per run ({DERIVED}: 2000 up to 2048 estimation "
                       "samples, else N/8 within 2000..10000)")  # fmt: skip
    group.add_argument("--window", type=window_length, metavar="N",
                       help=f"training window length in samples ({DERIVED}: the whole record "
                       "up to 2048 samples (several experiments: the shortest), else 8 time "
                       "constants of the linear model, a power of 2 in 128..1024)")  # fmt: skip
    group.add_argument("--batch-size", type=positive_int, metavar="N",
                       help=f"windows per batch ({DERIVED}: 1 with the whole record, else "
                       "8192 / window within 8..64)")  # fmt: skip
    group.add_argument("--learning-rate", type=positive_float, metavar="LR",
                       help="initial learning rate, multiplied by 0.3 at 50%% and 80%% of the run "
                       f"(default: {RECIPE_LEARNING_RATE:g})")  # fmt: skip
    _add_schedule_arguments(group)
    group.add_argument("--effort", type=positive_int, metavar="K",
                       help="multiply the derived iterations by K: more work, usually a better "
                       "model, in about K times the time (default: 1)")  # fmt: skip
    group.add_argument("--capacity", choices=("fixed", "search"),
                       help="'fixed' (default): the units and learning rate as given; 'search': "
                       "choose the units (16, 32, 64) and learning rate (0.003, 0.01, 0.03) on "
                       "the validation record, with short screening runs before the "
                       "restarts")  # fmt: skip
    group.add_argument("--time-budget", type=positive_float, metavar="SECONDS",
                       help="cap the wall time of all runs of a model together (default: no "
                       "cap, every run does its iterations); a run the cap shortens depends on "
                       "the machine's speed and load, so results are no longer "
                       "reproducible")  # fmt: skip
    group.add_argument("--model-classes", nargs="+", metavar="CLASS",
                       choices=("network", "linear+network", "narx", "loop", "linear",
                                "polynomial", "all"),
                       help="the model classes to try and choose among: network (the "
                       "recurrent network alone), linear+network (on the linear model's "
                       "residual), narx (ARX plus an MLP on the lags), loop (the cell inside "
                       "the ARX model's loop), linear (the ARX model refined on the "
                       "simulation error), polynomial (monomials of the lags chosen by FROLS), "
                       "or all (default: all)")  # fmt: skip
    group.add_argument("--input-delay", nargs="+", type=delay_samples, metavar="N",
                       help="dead time in samples: how long an input takes to reach the output "
                       "(one N for every input, or one per input); every class then sees "
                       "u(k - N) in place of u(k). Default: estimated on the estimation record "
                       "and checked on validation (where the response visibly starts; 0 where "
                       "the data show no delay); the report, describe() and results.json say "
                       "which delay was used and whether it was estimated or given")  # fmt: skip
    group.add_argument("--cell", metavar="CELL",
                       help="the recurrent cell: mgu (default), gru, lstm, or a user's cell as "
                       "package.module:Class, called as Class(units) (in the loop class "
                       "only)")  # fmt: skip
    group.add_argument("--restarts", type=positive_int, default=3, metavar="N",
                       help="runs to choose from on the validation record")  # fmt: skip
    group.add_argument("--selection", metavar="RULE",
                       help="'ensemble' (default): average runs chosen greedily on validation; "
                       "'best': keep the run best on validation")  # fmt: skip
    group.add_argument("--seed", type=int, default=0, help="seed of the first run")
    group.add_argument("--compare", action="store_true",
                       help="also train Keras's GRU and LSTM with the same recipe (their runs "
                       "side by side as one population, as the MGU's); prints each model's "
                       "estimated training time first, from a few timed steps")  # fmt: skip


def _merge_csv_options(args: argparse.Namespace) -> None:
    """``--train-csv``/``--test-csv``: the one-file forms of ``--train``/``--test``."""
    for old, new in (("train_csv", "train"), ("test_csv", "test")):
        value = getattr(args, old)
        if value is None:
            continue
        if getattr(args, new) is not None:
            raise UsageError(f"--{old.replace('_', '-')} and --{new} name the same data; give one")
        setattr(args, new, [value] if new == "train" else value)


def _add_schedule_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--decay-points", type=run_fraction, nargs="+", metavar="P",
                       help="fractions of the run, each in (0, 1], at which the learning rate "
                       "is multiplied by --decay-rate; a decay falls on the start of an "
                       "epoch of --steps-per-epoch iterations (default: the recipe's, "
                       "0.5 0.8)")  # fmt: skip
    group.add_argument("--decay-rate", type=positive_float, metavar="R",
                       help="factor applied to the learning rate at each decay point (default: "
                       "the recipe's, 0.3)")  # fmt: skip
    group.add_argument("--steps-per-epoch", type=positive_int, metavar="N",
                       help="iterations per epoch: one progress line each, and the decays fall "
                       "on epoch starts (default: 100, or --iterations when fewer)")  # fmt: skip
    group.add_argument("--score-weights", type=parse_score_weights, metavar="NAME=W,...",
                       help="the early-stopping score, lower is better: a weighted sum of "
                       "val_rmse (validation RMSE) and loss (training MSE), e.g. "
                       "val_rmse=0.8,loss=0.2; the network with the best score is kept "
                       "(default: the recipe's, val_rmse=1)")  # fmt: skip
    checks = group.add_mutually_exclusive_group()
    checks.add_argument("--validation-checks", type=positive_int, metavar="N",
                        help="score the validation record N times a run, every "
                        "iterations/N iterations and at the first (default: the recipe's, "
                        "100)")  # fmt: skip
    checks.add_argument("--validation-every", type=positive_int, metavar="ITERATIONS",
                        help="score the validation record every ITERATIONS iterations and at "
                        "the first (instead of --validation-checks)")  # fmt: skip


def _check_files(args: argparse.Namespace) -> None:
    files = [("--train", path) for path in args.train or ()]
    files += [("--test", args.test), ("--val", args.val)]
    for option, path in files:
        if path is not None and not os.path.isfile(path):
            raise OptionError(f"{option}: no such file: {path!r}")
    if args.data_path is not None and not os.path.exists(args.data_path):
        raise OptionError(f"--data-path: no such file or folder: {args.data_path!r}")


def check_arguments(args: argparse.Namespace) -> None:
    """Reject bad combinations (:class:`UsageError`) and missing files (:class:`OptionError`);
    apply ``--quick``'s caps."""
    _merge_csv_options(args)
    own = args.train is not None
    if not own and (args.test is not None or args.val is not None or args.columns is not None):
        raise UsageError("--test, --val and --columns go with --train (your own files)")
    measured = args.dataset != "simulated-tanks"
    if own and measured:
        raise UsageError("--train/--test replace --dataset; give one or the other")
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
        args.restarts = min(args.restarts, QUICK_RESTARTS)


def own_data(args: argparse.Namespace):
    """``--train`` (one experiment per file), ``--val`` or the end of the last, and ``--test``.

    Raises ``ValueError`` or ``OSError`` (from the loaders) for a file that is
    not a record.
    """
    from keras_mgu import datasets

    def read(path: str):
        return datasets.load_record(
            path, args.inputs, args.outputs, ts=args.ts, columns=args.columns
        )

    experiments = [read(path) for path in args.train]
    validation = None if args.val is None else read(args.val)
    test = None if args.test is None else read(args.test)
    return datasets.SysIdData.from_experiments(experiments, test, validation, args.val_fraction)


def load_data(args: argparse.Namespace):
    """The estimation, validation and test records (a ``SysIdData``, physical units).

    Your own files (:func:`own_data`), else the ``--dataset``: the built-in
    simulated tanks or a measured benchmark read from ``--data-path`` by
    ``keras_mgu.datasets.load_benchmark``. A file that cannot be read is a
    :class:`DataError` (one line: file, line, column).
    """
    from keras_mgu import datasets

    try:
        if args.train:
            return own_data(args)
        if args.dataset == "simulated-tanks":
            n_samples = QUICK_SAMPLES if args.quick else 1024
            return datasets.simulate_cascaded_tanks(n_samples=n_samples, seed=args.seed)
        return datasets.load_benchmark(
            DATASETS[args.dataset], args.data_path, validation_fraction=args.val_fraction
        )
    except (OSError, ValueError, ImportError) as err:
        raise DataError(" ".join(f"cannot load the data: {err}".split())) from err


def read_inputs(args: argparse.Namespace) -> None:
    """``args.data`` and ``args.scored_from``: the data read and checked before a backend loads."""
    args.data = load_data(args)
    args.scored_from = benchmark_n_initial(args, args.data)
    args.scored_record = scored_record(args)


def scored_record(args: argparse.Namespace) -> str:
    """Which record the scores are of: ``"test"``, or ``"validation"`` where ``--train``
    came without ``--test`` (the validation record stands in; it chose the model)."""
    return "validation" if args.train and args.test is None else "test"


def benchmark_n_initial(args: argparse.Namespace, data: Any) -> int:
    """Samples the 'benchmark' score leaves out: ``--n-initial``, the protocol's, or 50."""
    protocol = getattr(data, "protocol", None)
    n_initial = args.n_initial
    if n_initial is None and protocol is not None:
        n_initial = getattr(data, "n_initial", None)
        n_initial = protocol.n_initial if n_initial is None else n_initial
    n_initial = DEFAULT_N_INITIAL if n_initial is None else int(n_initial)
    if n_initial >= data.test.n_samples:
        raise OptionError(
            f"--n-initial {n_initial} leaves no sample of the {data.test.n_samples}-sample "
            f"{scored_record(args)} record to score"
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
        "effort": args.effort,
        "capacity": args.capacity,
        "selection": args.selection,
        "n_initial": args.n_initial or None,  # the encoder reads as many as a test gives
        "decay_points": tuple(args.decay_points) if args.decay_points else None,
        "decay_rate": args.decay_rate,
        "steps_per_epoch": args.steps_per_epoch,
        "score_weights": args.score_weights,
        "validation_checks": args.validation_checks,
        "validation_every": args.validation_every,
        "model_classes": _model_classes(args.model_classes),
        "input_delay": tuple(args.input_delay) if getattr(args, "input_delay", None) else None,
    }
    given = {name: value for name, value in options.items() if value is not None}
    steps = next(f.default for f in dataclasses.fields(RecipeConfig) if f.name == "steps_per_epoch")
    if "steps_per_epoch" not in given and "iterations" in given and given["iterations"] < steps:
        given["steps_per_epoch"] = given["iterations"]
    return given


def delay_samples(text: str) -> int:
    """``--input-delay``'s value: a whole number of samples ``>= 0``."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of samples >= 0 (the dead time); got {text!r}"
        )
    return value


def _model_classes(names: list[str] | None) -> Any:
    if not names:
        return None
    return "all" if "all" in names else tuple(dict.fromkeys(names))


def build_config(args: argparse.Namespace, cell: str):
    """``RecipeConfig(cell=cell, **recipe_options(args))``."""
    from keras_mgu.sysid import RecipeConfig

    try:
        return RecipeConfig(cell=cell, **recipe_options(args))
    except (TypeError, ValueError) as err:
        raise OptionError(f"bad recipe settings: {err}") from err


def _cell(args: argparse.Namespace, kind: str) -> str:
    """The cell of ``kind``'s model: ``--cell`` for the first model, the model's own otherwise."""
    cell = getattr(args, "cell", None)
    if not cell or kind != MODELS[0]:
        return kind.lower()
    if ":" in cell:
        classes = set(args.model_classes or ())
        if not classes or "all" in classes or classes - {"narx", "loop", "linear", "polynomial"}:
            raise UsageError(
                f"--cell {cell}: a user's cell runs inside the loop class only; give "
                "--model-classes loop (and narx, if wanted)"
            )
    elif cell not in ("mgu", "gru", "lstm"):
        raise OptionError(f"--cell must be mgu, gru, lstm or package.module:Class; got {cell!r}")
    return cell


def identify_model(
    kind: str, data: Any, args: argparse.Namespace, n_initial: int, used: UsedNames | None = None
) -> dict:
    """Identify with the cell ``kind`` asks for, report and plot the model kept; its row.

    The plots and the model file go into ``<--out>/<model_name>/``; the row's
    ``name`` is that name (the caller makes it unique among the models of one
    call, :func:`unique_names`).
    """
    from keras_mgu import sysid
    from keras_mgu.cli.model_file import check_encoder_history

    used = used or UsedNames()
    config = build_config(args, _cell(args, kind))
    print(f"\n== {kind}: {args.restarts} restart(s) from seed {args.seed}", flush=True)
    given = {name: getattr(config, name) for name in ("cell", *recipe_options(args))}
    print(f"settings: {report.format_settings(given)}; the rest derived from the record")
    wall, cpu = time.perf_counter(), time.process_time()
    verbose = 2 if getattr(args, "verbose", False) else 1  # 2: Keras's lines too
    try:  # verbose: the recipe prints the settings it resolved, then a line per run
        found = sysid.identify(data, config, args.restarts, args.seed, verbose=verbose)
    except ValueError as err:  # settings that do not fit the record, e.g. a too long --window
        raise OptionError(f"the recipe rejected the settings: {err}") from err
    seconds = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}
    test, protocol = data.test, getattr(data, "protocol", None)
    lag, given = found.config.n_initial, args.n_initial is not None
    check_encoder_history(found.config.initial_state, lag, n_initial, given)
    evaluation = sysid.evaluate(
        found, test.u, test.y, n_initial, args.steps_ahead, test.input_names, test.output_names,
        same_start=getattr(protocol, "same_initial_state", False),
        max_lag=getattr(args, "residual_lags", RESIDUAL_LAGS),
    )  # fmt: skip
    label = report.model_label(found)
    row = {
        "model": label, "class": found.runs[found.best].structure,
        "cell": kept_cell(found), "requested": run_name(config), "requested_cell": kind,
        "name": used.unique(model_name(found), kind),
    }  # fmt: skip
    row.update(results_row(found, evaluation, seconds, getattr(data, "protocol", None)))
    role = getattr(args, "scored_record", "test")
    row["scored_on"] = role
    report.print_scores(label, row, test, n_initial, getattr(data, "protocol", None), role)
    print(report.describe_selection(found))
    if row["terms"]:
        print(found.describe())
    folder = os.path.join(args.out, row["name"])
    plots = report.plot_results(label, test, evaluation, found, folder, role)
    print(plots, flush=True)
    row["model_file"] = save_model_file(found, folder)
    print(f"model file: {row['model_file']}", flush=True)
    return row


def results_row(
    found: Any, evaluation: Any, seconds: Mapping[str, float], protocol: Any = None
) -> dict[str, Any]:
    """One model's entry of results.json: size, time, validation and test scores, settings.

    ``rmse``, ``fit_percent``: the free-run simulation of the test record
    over all samples; ``rmse_benchmark``, ``fit_percent_benchmark``: from
    sample ``n_initial`` on, the model given the first ``n_initial``
    measured outputs (for ``n_initial = 0`` the same numbers as ``rmse``);
    ``prediction``: the k-step-ahead prediction scored from there;
    ``headline``: the score to quote and where its simulation starts,
    ``outputs``: each output's scores by name, ``band``: the band's level and
    coverage, ``reference``: the ARX model's and the last-sample predictor's
    RMSE (:class:`~keras_mgu.sysid.Evaluation`), ``warning``: the line that
    says no network beats the ARX model on the choice, or None;
    ``outside_range``: the chosen class, what it does outside its estimation
    range and its error at the record's edges beside the ARX model's
    (:func:`~keras_mgu.sysid.choice.outside_range.outside_range`);
    ``input_delay``: ``samples`` per input and whether ``estimated`` (else
    given with ``--input-delay``); ``arx_orders``: the ARX reference's ``na``,
    ``nb`` on the delayed inputs (None without one); ``terms``:
    a polynomial model's terms, coefficients and error reduction ratios
    (:meth:`~keras_mgu.sysid.Identification.polynomial_terms`; empty for the
    other classes);
    with a protocol, the RMSEs also in its unit (``*_in_unit``).
    ``validation_rmse``: each run's validation RMSE (standardised units), what
    the runs are chosen on; ``stopping_scores``: each run's best early-stopping
    score (the network's units); ``wall_seconds``: the training's wall time,
    ``cpu_seconds``: the CPU time of this process over it.
    """
    from keras_mgu.sysid.choice.outside_range import outside_range
    from keras_mgu.sysid.choice.report import linear_not_beaten
    from keras_mgu.sysid.choice.selection import member_weights

    scores = evaluation.to_dict()
    benchmark = scores["from_n"] or {"rmse": evaluation.rmse, "fit_percent": evaluation.fit_percent}
    row = {
        "params": found.model.count_params(),
        "wall_seconds": seconds["wall"],
        "cpu_seconds": seconds["cpu"],
        "validation_rmse": [run.validation_rmse for run in found.runs],
        "stopping_scores": found.stopping_scores,
        "structures": [run.structure for run in found.runs],
        "chosen_seed": found.runs[found.best].seed,
        "averaged_seeds": [found.runs[k].seed for k in found.members],
        "ensemble": [
            {
                "run": k + 1,
                "class": found.runs[k].structure,
                "seed": found.runs[k].seed,
                "weight": w,
            }
            for k, w in member_weights(found.kept).items()
        ],
        "ran_off": [
            {"run": k + 1, "class": run.structure, "seed": run.seed, "where": run.ran_off}
            for k, run in enumerate(found.runs)
            if getattr(run, "ran_off", None) is not None
        ],
        "not_kept": [
            {"run": k + 1, "class": run.structure, "seed": run.seed, "why": run.not_kept}
            for k, run in enumerate(found.runs)
            if getattr(run, "not_kept", None) is not None
        ],
        "stopped": [
            {"run": k + 1, "class": run.structure, "seed": run.seed, **_finite(run.stopped)}
            for k, run in enumerate(found.runs)
            if getattr(run, "stopped", None)
        ],
        "config": dataclasses.asdict(found.config),
        "rmse": evaluation.rmse,
        "fit_percent": evaluation.fit_percent,
        "rmse_benchmark": benchmark["rmse"],
        "fit_percent_benchmark": benchmark["fit_percent"],
        "prediction": scores["prediction"],
        "residuals": scores["residuals"],
        "headline": scores["headline"],
        "outputs": scores["outputs"],
        "band": scores["band"],
        "reference": scores["reference"],
        "extrapolation": scores["extrapolation"],
        "input_delay": {
            "samples": [int(nk) for nk in found.path.input_delay],
            "estimated": found.config.input_delay is None,
        },
        "arx_orders": _arx_orders(found),
        "warning": linear_not_beaten(found.class_table),
        "outside_range": outside_range(found),
        "terms": found.polynomial_terms(),
    }
    if protocol is not None:
        row["rmse_in_unit"] = row["rmse"] * protocol.scale
        row["rmse_benchmark_in_unit"] = row["rmse_benchmark"] * protocol.scale
        row["headline"]["rmse_in_unit"] = row["headline"]["rmse"] * protocol.scale
        if row["prediction"] is not None:
            row["prediction"]["rmse_in_unit"] = row["prediction"]["rmse"] * protocol.scale
    return row


def _finite(row: Mapping) -> dict:
    """``row`` for JSON: a float that is not finite as its string (``"inf"``)."""
    return {
        k: str(v) if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()
    }


def _arx_orders(found: Any) -> dict[str, int] | None:
    """The ARX reference's ``na`` and ``nb`` (on the delayed inputs), or None without one."""
    if found.arx is None:
        return None
    na = int(found.arx.config.n_initial)
    return {"na": na, "nb": na + 1}


def run(args: argparse.Namespace) -> dict[str, dict]:
    """Identify each model on the data, report the scores, write plots and results.json.

    ``<--out>/results.json`` maps each model's :func:`model_name` to its entry
    (the run's summary and the model's row); entries of earlier runs into the
    same folder under other names are kept. Returns the results table (model
    to its row).
    """
    import keras

    if getattr(args, "data", None) is None:  # called without main's reading step
        read_inputs(args)
    data, n_initial = args.data, args.scored_from
    earlier = report.read_results(args.out)  # refuses a results.json it cannot extend
    backend = keras.backend.backend()
    role = getattr(args, "scored_record", None) or scored_record(args)
    report.print_data(backend, _data_name(args), data, n_initial, role)
    if args.compare:
        print_estimates(data, args)
    used = UsedNames()
    results = {kind: identify_model(kind, data, args, n_initial, used) for kind in _models(args)}
    summary = {
        "backend": backend,
        "seed": args.seed,
        "restarts": args.restarts,
        "dataset": _data_name(args),
        "n_initial": n_initial,
        "protocol": report.protocol_summary(getattr(data, "protocol", None)),
        "settings": recipe_options(args),
    }
    runs = {row["name"]: {**summary, **row} for row in results.values()}
    path = report.write_results(args.out, earlier, runs)
    print(f"\nresults: {path}")
    report.print_summary(results, data.test, n_initial, getattr(data, "protocol", None), role)
    return results


#: Steps of each model timed for ``--compare``'s estimate (after one untimed step).
ESTIMATE_STEPS = 3


def print_estimates(data: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Print how long each model of ``--compare`` will train here, before any trains.

    Each estimate times :data:`ESTIMATE_STEPS` training steps of the model's
    first run (:func:`keras_mgu.sysid.estimate_training`). Returns the
    estimates by model.
    """
    from keras_mgu.sysid.timing import describe_seconds, estimate_training

    print(f"\nestimated training time on this machine ({ESTIMATE_STEPS} timed steps of each "
          "model's first run, times its iterations and runs):", flush=True)  # fmt: skip
    estimates = {}
    for kind in _models(args):
        found = estimate_training(data, build_config(args, kind.lower()), args.restarts,
                                  ESTIMATE_STEPS, args.seed)  # fmt: skip
        estimates[kind] = found
        print(f"  {kind}: {1000 * found.step_seconds:.1f} ms per step, {found.iterations} "
              f"iterations, {found.runs} runs: about {describe_seconds(found.seconds)}",
              flush=True)  # fmt: skip
    if args.time_budget is not None:
        print(f"  --time-budget caps each model at {describe_seconds(args.time_budget)}")
    elif max(e.seconds for e in estimates.values()) > LONG_ESTIMATE_S:
        print("  bound the slow ones with --iterations N or --time-budget SECONDS")
    return estimates


def _models(args: argparse.Namespace) -> tuple[str, ...]:
    return MODELS if args.compare else MODELS[:1]


def _data_name(args: argparse.Namespace) -> str:
    return "own files" if args.train else args.dataset


def run_command(args: argparse.Namespace) -> int:
    """The ``identify`` subcommand's handler: :func:`run`, exit status 0."""
    run(args)
    return 0
