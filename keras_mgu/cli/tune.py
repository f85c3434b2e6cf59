"""``keras-mgu tune``: search the recipe's settings on validation (:func:`keras_mgu.sysid.tune`).

It takes the data and recipe options of ``identify`` (the recipe options
fix the settings the search leaves), runs the trials with KerasTuner (in
``--workers`` local processes at once), prints a table of the trials, and
writes ``trials.json`` (the table, the best settings and the best model's
test scores), ``trials.png`` (validation RMSE per trial) and ``best.kmgu``
(the model of the best trial, for ``keras-mgu simulate`` and ``export`` or
``keras_mgu.sysid.load``) into ``--out``.
The choice is made on validation; the test record is scored once, for the
chosen model. The last line printed is 'test RMSE: <value>'.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
from typing import Any

from keras_mgu.cli import identify as _identify
from keras_mgu.cli.errors import MissingExtra, OptionError, UsageError
from keras_mgu.cli.naming import save_model_file

HELP = "search the recipe's settings on validation with KerasTuner (keras_mgu.sysid.tune)"
DESCRIPTION = __doc__.split("\n\n", 1)[1]
#: ``--quick``'s cap on the trials.
QUICK_TRIALS = 2
#: What installs KerasTuner, which the search needs.
INSTALL_TUNE = 'pip install "keras-mgu[tune]"'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``identify`` (data, recipe, run) and the search's."""
    _identify.add_arguments(parser, residual_lags=False)  # a search scores no residuals
    search = parser.add_argument_group("search")
    search.add_argument("--space", metavar="JSON",
                        help='settings to search, e.g. \'{"units": [[16], [32]], "cell": '
                        '["mgu", "gru"]}\'; RecipeConfig fields, with \'_\' or \'-\' '
                        '(default: keras_mgu.sysid.DEFAULT_SPACE)')  # fmt: skip
    search.add_argument("--max-trials", type=_identify.positive_int, default=16, metavar="N",
                        help="trials to run")  # fmt: skip
    search.add_argument("--search", choices=("random", "grid"), default="random",
                        help="KerasTuner oracle")  # fmt: skip
    search.add_argument("--workers", type=_identify.positive_int, default=1, metavar="N",
                        help="trials run at once, in local worker processes")  # fmt: skip
    search.add_argument("--search-budget", type=_identify.positive_float, metavar="SECONDS",
                        help="seconds for the whole search, from its start: each trial gets the "
                        "time left over the trials its worker still expects; trials that would "
                        "start later are not run (default: no budget, every trial does its "
                        "iterations; not with --time-budget)")  # fmt: skip
    parser.set_defaults(restarts=2, out=os.path.join("outputs", "tune"))


def check_arguments(args: argparse.Namespace) -> None:
    """KerasTuner installed, ``identify``'s checks, ``--space`` parsed, refusals, caps."""
    check_keras_tuner()
    if args.compare:
        raise UsageError("--compare does not apply to tune; search 'cell' in --space instead")
    if args.search_budget is not None and args.time_budget is not None:
        raise UsageError(
            "--search-budget (the whole search) and --time-budget (each trial) exclude each other"
        )
    _identify.check_arguments(args)
    if args.search_budget is not None:  # the trials' budget is the search's share, not --quick's
        args.time_budget = None
    if args.space is not None:
        try:
            args.space = json.loads(args.space)
        except json.JSONDecodeError as err:
            raise OptionError(f"--space is not JSON: {err}") from err
        if isinstance(args.space, dict):  # "batch-size" names the field batch_size too
            args.space = {str(k).replace("-", "_"): v for k, v in args.space.items()}
    if args.quick:
        args.max_trials = min(args.max_trials, QUICK_TRIALS)


def check_keras_tuner() -> None:
    """Raise :class:`MissingExtra` (one line, status 2) when KerasTuner is not installed.

    Looks the module up without importing it (nor Keras, nor a backend).
    """
    if importlib.util.find_spec("keras_tuner") is None:
        raise MissingExtra(f"KerasTuner is not installed; install it with: {INSTALL_TUNE}")


def import_keras_tuner() -> None:
    """Import KerasTuner; :class:`MissingExtra` (one line, status 2) where it is broken.

    ``check_keras_tuner`` finds the package without importing it; an install
    that is there but does not import (a partial or incompatible one) fails
    only here, once the backend has loaded.
    """
    try:
        import keras_tuner  # noqa: F401
    except Exception as err:  # any failure inside the package's own import
        problem = f"{type(err).__name__}: {err}".splitlines()[0]
        raise MissingExtra(
            f"KerasTuner is installed but cannot be imported ({problem}); reinstall it with: "
            f"{INSTALL_TUNE}"
        ) from None


def run_command(args: argparse.Namespace) -> int:
    """Run the sweep, print and write its table; exit status 0."""
    from keras_mgu import plotting, sysid

    import_keras_tuner()

    data = _identify.load_data(args)
    n_initial = _identify.benchmark_n_initial(args, data)
    config = sysid.RecipeConfig(**_identify.recipe_options(args))
    try:
        result = sysid.tune(
            data, args.space, config, max_trials=args.max_trials, restarts=args.restarts,
            seed=args.seed, search=args.search, workers=args.workers,
            search_budget=args.search_budget, directory=os.path.join(args.out, "keras_tuner"),
        )  # fmt: skip
    except ValueError as err:
        raise OptionError(str(err)) from err
    print(format_table(result.table), flush=True)
    test = {
        "all": result.best.score(data.test),
        "benchmark": result.best.score(data.test, "benchmark", n_initial=n_initial),
    }
    os.makedirs(args.out, exist_ok=True)
    model_file = save_model_file(result.best, args.out, "best")
    summary = {"best_settings": _jsonable(result.best_settings), "test_rmse": test,
               "n_initial": n_initial, "model_file": model_file,
               "trials": _jsonable(result.table)}  # fmt: skip
    with open(os.path.join(args.out, "trials.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    print(plotting.plot_trials(result.table, os.path.join(args.out, "trials.png")))
    print(f"best settings (chosen on validation): {result.best_settings}")
    print(f"model file: {model_file}")
    print(f"test RMSE (benchmark, n={n_initial}): {test['benchmark']:.6g}")
    print(f"test RMSE: {test['all']:.6g}", flush=True)
    return 0


def format_table(table: list[dict]) -> str:
    """The trials as a markdown table."""
    if not table:
        return "(no trials)"
    names = [k for k in table[0] if k not in ("trial", "status", "validation_rmse", "seconds")]
    lines = [
        "| trial | " + " | ".join(names) + " | validation RMSE | seconds | status |",
        "|---:|" + "---|" * len(names) + "---:|---:|---|",
    ]
    for row in table:
        values = " | ".join(str(_jsonable(row[n])) for n in names)
        score, seconds = row["validation_rmse"], row["seconds"]
        lines.append(
            f"| {row['trial']} | {values} | {_number(score, '.4f')} | {_number(seconds, '.1f')} "
            f"| {row['status']} |"
        )
    return "\n".join(lines)


def _number(value: float, spec: str) -> str:
    return "-" if not math.isfinite(value) else format(value, spec)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
