"""``keras-mgu simulate``: simulate a saved model on a new experiment's data file.

Reads the model file (.kmgu, written by keras-mgu identify or
Identification.save) and the data file (any file keras-mgu identify reads:
delimited text with or without a header row, .mat or .npz), its input columns
by the model's input names (or --inputs, by name or 0-based index; --columns
names the columns of a file without a header row), and simulates. Both files,
the columns and --n-initial are checked before a backend is imported, so a
bad file is reported at once.

The CSV file written has one row per sample (the rows of the data file) and
one column per output and quantity, named after the output:
  <output>_sim          the free-run simulation from the inputs alone, from the
                        estimation record's start state (always)
  <output>_sim_from<N>  the simulation from the state the first N measured
                        outputs set (its first N rows are those outputs); when
                        the file has the outputs (N: --n-initial, else the
                        model's protocol n, else 50)
  <output>_pred<K>      the K-step-ahead prediction (its first N rows the
                        measured outputs); with --steps-ahead K
and beside each column C its band, C_lo and C_hi (--band, 0.95 by default:
the measured output is inside with about that probability, calibrated on the
validation record; --band 0 for none).

When the file also has the output columns (the model's output names, or
--outputs), prints the RMSE and fit % of each, the simulation from the first
N measured outputs first (what a new experiment is judged by), then the free
run over all samples and the prediction, and the share of the samples inside
each band. Without them it says so, scores nothing and writes the free run
alone. The file is written before the report is printed, so a reader that
stops early (``| head -3``) leaves it whole.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from keras_mgu._atomic import write_atomically
from keras_mgu.cli.backends import BACKENDS
from keras_mgu.cli.errors import DataError, OptionError, UsageError, check_out_file
from keras_mgu.cli.identify import RESIDUAL_LAGS, add_residual_lags, count, positive_int
from keras_mgu.cli.model_file import check_encoder_history, read_model_info

__all__ = [
    "add_arguments",
    "check_arguments",
    "load_model",
    "read_data",
    "read_inputs",
    "read_table",
    "run_command",
    "write_csv",
]

HELP = "simulate a saved model (.kmgu) on a data file of inputs; scores when outputs are given"
DESCRIPTION = (
    __doc__.split("\n\n", 1)[1]
    + """
examples:
  keras-mgu simulate --data new.csv --out sim.csv \\
      --model outputs/system_identification/network_mgu_h32_lr0.01/network_mgu.kmgu
  keras-mgu simulate --model mgu.kmgu --data test.csv --out sim.csv --n-initial 50
  keras-mgu simulate --model mgu.kmgu --data test.mat --out sim.csv --steps-ahead 10
  keras-mgu simulate --model mgu.kmgu --data test.txt --columns u y --out sim.csv
  keras-mgu simulate --model mgu.kmgu --data test.txt --inputs 0 --outputs 1 --out sim.csv
"""
)
#: Suffixes of the columns' names: the free run, the simulation from ``N`` measured
#: outputs and the ``K``-step prediction (``y_sim``, ``y_sim_from50``, ``y_pred10``).
SIM_SUFFIX, FROM_SUFFIX, PRED_SUFFIX = "_sim", "_sim_from", "_pred"
#: Suffixes of a trajectory column's band (``y_sim_from50_lo``, ``y_sim_from50_hi``).
LOWER_SUFFIX, UPPER_SUFFIX = "_lo", "_hi"
#: ``--band``'s default level.
DEFAULT_LEVEL = 0.95


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``simulate``."""
    parser.add_argument("--model", required=True, metavar="FILE",
                        help="model file (.kmgu) from keras-mgu identify")  # fmt: skip
    parser.add_argument("--data", required=True, metavar="FILE",
                        help="the experiment: .csv/.txt/.tsv/.dat/.asc (with or without a header "
                        "row), .mat or .npz; one row per sample")  # fmt: skip
    parser.add_argument("--inputs", nargs="+", metavar="COLUMN",
                        help="input columns: names or 0-based indices (default: the model's "
                        "input names)")  # fmt: skip
    parser.add_argument("--outputs", nargs="+", metavar="COLUMN",
                        help="measured output columns to score: names or 0-based indices "
                        "(default: the model's output names, when the file has them)")  # fmt: skip
    parser.add_argument("--columns", nargs="+", metavar="NAME",
                        help="names of all the columns, in order, of a file without a header "
                        "row (.mat and .npz: instead of their variable names)")  # fmt: skip
    parser.add_argument("--out", required=True, metavar="CSV",
                        help=f"CSV file (its name ending in .csv): <output>{SIM_SUFFIX} the free "
                        f"run; with N measured "
                        f"outputs also <output>{FROM_SUFFIX}<N>, the simulation from them, and "
                        f"with --steps-ahead <output>{PRED_SUFFIX}<K>")  # fmt: skip
    parser.add_argument("--n-initial", type=count, metavar="N",
                        help="also simulate from the state the first N measured outputs set, "
                        "scored from sample N on (needs the output columns; an encoder model "
                        "needs at least the samples its encoder reads; 0: the free run "
                        "alone)")  # fmt: skip
    parser.add_argument("--steps-ahead", type=positive_int, metavar="K",
                        help="also the K-step-ahead prediction: each sample predicted from the "
                        "measured outputs up to K samples before it, the state set from the N "
                        "before that (N: --n-initial, else the model's protocol n, else "
                        "50); needs the output columns")  # fmt: skip
    parser.add_argument("--band", type=band_level, default=DEFAULT_LEVEL, metavar="LEVEL",
                        help="level of the band written beside each trajectory (<column>_lo, "
                        f"<column>_hi); default {DEFAULT_LEVEL:g}, 0 for none")  # fmt: skip
    add_residual_lags(parser)
    parser.add_argument("--backend", choices=tuple(BACKENDS),
                        help="Keras backend (default: $KERAS_BACKEND, else Keras' "
                        "configured one)")  # fmt: skip


def band_level(text: str) -> float:
    """``--band``'s value: a level in ``[0, 1)`` (0: no band)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a level in [0, 1), such as 0.95; got {text!r}")
    return value


def check_arguments(args: argparse.Namespace) -> None:
    """``--out`` must name a ``.csv`` file and the model and data files must exist
    (:class:`OptionError`); ``--outputs`` goes with ``--inputs`` (:class:`UsageError`)."""
    check_out_file("--out", args.out, ".csv", "simulate", "CSV")
    for option, path in (("--model", args.model), ("--data", args.data)):
        if not os.path.isfile(path):
            raise OptionError(f"{option}: no such file: {path!r}")
    if args.outputs is not None and args.inputs is None:
        raise UsageError("--outputs goes with --inputs (the model's names select both otherwise)")


def read_table(args: argparse.Namespace) -> Any:
    """The data file's columns (read and checked before a backend loads); :class:`DataError`.

    With ``--inputs`` given, the columns are selected here too.
    """
    from keras_mgu.datasets.loaders import read_table as read

    try:
        table = read(args.data)
        if args.columns is not None:
            table.rename(args.columns)
        if args.inputs is not None:
            _select(table, args.inputs, args.outputs or ())
    except (OSError, ValueError) as err:
        raise DataError(" ".join(f"cannot read the data: {err}".split())) from err
    return table


def read_inputs(args: argparse.Namespace) -> None:
    """The data and the model file read and checked before the backend loads.

    Sets ``args.table`` (:func:`read_table`), ``args.info`` (the model file's
    :class:`~keras_mgu.cli.model_file.ModelInfo`), ``args.u``, ``args.y``
    (:func:`read_data`) and ``args.n``, ``args.k`` (``--n-initial`` and
    ``--steps-ahead`` checked against them).
    """
    args.table = read_table(args)
    args.info = read_model_info(args.model)
    try:
        args.u, args.y = read_data(args.table, args.info, args)
    except (OSError, ValueError) as err:
        raise DataError(" ".join(f"cannot read the data: {err}".split())) from err
    args.n, args.k = _check_request(args, args.info, args.u, args.y)


def _select(table: Any, inputs: list[str], outputs: list[str] | tuple) -> tuple[Any, Any]:
    import numpy as np

    from keras_mgu.datasets.tables import record_from_table

    if outputs:
        record = record_from_table(table, inputs, outputs)
        return record.u, record.y
    cols = [table.index(str(c)) for c in inputs]
    return np.stack([table.values(i) for i in cols], axis=1), None


def read_data(table: Any, found: Any, args: argparse.Namespace) -> tuple[Any, Any]:
    """``(u (N, n_inputs), y (N, n_outputs) or None)`` from the columns the model or options name.

    ``y`` is None when the file has none of the model's output columns (and
    no ``--outputs``); some but not all of them is an error.
    """
    inputs, outputs = list(found.input_names), list(found.output_names)
    if args.inputs is not None:
        if len(args.inputs) != len(inputs) or len(args.outputs or outputs) != len(outputs):
            raise ValueError(
                f"the model has {len(inputs)} input(s) {inputs} and {len(outputs)} output(s) "
                f"{outputs}; --inputs and --outputs must name as many columns."
            )
        return _select(table, args.inputs, args.outputs or ())
    if not inputs or not outputs:
        raise ValueError(
            "the model file does not name its input and output channels; select the columns "
            "with --inputs (and --outputs)."
        )
    names = table.names or ()
    missing_in = [name for name in inputs if name not in names]
    if missing_in:
        raise ValueError(
            f"{table.path!r} has no input column(s) {missing_in} (the model's input names); "
            f"{table._available()}; or select them with --inputs"
        )
    present = [name for name in outputs if name in names]
    if present and len(present) < len(outputs):
        missing = [name for name in outputs if name not in names]
        raise ValueError(
            f"{table.path!r} has the output column(s) {present} but not {missing}; give all of the "
            "model's outputs (to score) or none (to simulate only)."
        )
    return _select(table, inputs, present)


def write_csv(path: str, names: list[str], values: Any) -> None:
    """``values`` ``(N, len(names))`` under a header of ``names``; written whole or not at all."""
    import numpy as np

    def write(tmp: str) -> None:
        np.savetxt(tmp, values, delimiter=",", header=",".join(names), comments="", fmt="%.9g")

    write_atomically(path, write)


def load_model(path: str) -> Any:
    """``sysid.load(path)``; a file that is not a model file is an :class:`OptionError`."""
    from keras_mgu import sysid

    try:
        return sysid.load(path)
    except ValueError as err:  # ModelFileError
        raise OptionError(f"cannot load the model: {err}") from err


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Simulate, write the CSV file, then print the report (a reader that stops early, as
    ``| head -3``, leaves the file whole); returns the scores (empty without outputs)."""
    if getattr(args, "info", None) is None:  # called without main's reading step
        read_inputs(args)
    found = load_model(args.model)
    report = [f"model: {args.model} ({_describe(found)}); data: {len(args.u)} samples of "
              f"{args.data}"]  # fmt: skip
    level = _level(found, getattr(args, "band", DEFAULT_LEVEL), report)
    scores = _simulate(args, found, level, report)
    report.append(f"simulation: {args.out}")
    print("\n".join(report))
    return scores


def _simulate(args: argparse.Namespace, found: Any, level: float | None, report: list[str]) -> dict:
    """Simulate and write the CSV file; the report's lines go into ``report``; the scores."""
    from keras_mgu import sysid

    u, y, n, k = args.u, args.y, args.n, args.k
    names = found.output_names
    if y is None:
        report.append(f"not scored: {args.data!r} has no output column {list(names)} "
                      "(give them, or --outputs, to score the simulation)")  # fmt: skip
        free = found.simulate(u, band=level) if level else (found.simulate(u), None, None)
        _write(args.out, _banded([f"{name}{SIM_SUFFIX}" for name in names], *free))
        return {}
    lags = getattr(args, "residual_lags", RESIDUAL_LAGS)
    # No ARX reference: simulate prints and writes none (identify does).
    evaluation = sysid.evaluate(found, u, y, n, k, band=level, max_lag=lags, reference=False)
    _write(args.out, _columns(evaluation, names, found, level))
    report.extend(_score_lines(evaluation, len(u)))
    return evaluation.to_dict()


def _level(found: Any, level: float, report: list[str]) -> float | None:
    """The band's level, or None (``--band 0``, or a model file saved without a band: a line
    of ``report`` says so)."""
    if not level:
        return None
    if found.band is None:
        report.append("no band: the model file was saved without one (identify it again to get "
                      "one)")  # fmt: skip
        return None
    return level


def _banded(columns: list[str], y: Any, lower: Any, upper: Any) -> tuple[list[str], list[Any]]:
    """``columns`` and ``y``, each column followed by its band's ``_lo``, ``_hi`` (if any)."""
    import numpy as np

    if lower is None:
        return columns, [y]
    names = [f"{c}{suffix}" for c in columns for suffix in ("", LOWER_SUFFIX, UPPER_SUFFIX)]
    values = np.stack([y, lower, upper], axis=2).reshape(len(y), -1)
    return names, [values]


def _columns(
    evaluation: Any, names: tuple[str, ...], found: Any, level: float | None
) -> tuple[list[str], list[Any]]:
    """The CSV file's column names and arrays: free run, from ``n``, ``k`` steps ahead."""
    free = (evaluation.simulation, None, None)
    if level is not None:
        free = found.band.around(evaluation.simulation, level)
    parts = [_banded([f"{name}{SIM_SUFFIX}" for name in names], *free)]
    for entry, suffix in ((evaluation.from_n, f"{FROM_SUFFIX}{evaluation.n_initial}"),
                          (evaluation.prediction, None)):  # fmt: skip
        if entry is None:
            continue
        if suffix is None:
            suffix = f"{PRED_SUFFIX}{entry['steps_ahead']}"
        y = entry.get("simulation", entry.get("y_pred"))
        parts.append(_banded([f"{name}{suffix}" for name in names], y,
                             entry.get("lower"), entry.get("upper")))  # fmt: skip
    return [c for cols, _ in parts for c in cols], [v for _, vals in parts for v in vals]


def _check_request(args: argparse.Namespace, found: Any, u: Any, y: Any) -> tuple[int, Any]:
    """``(n, k)`` of ``--n-initial``/``--steps-ahead``, checked against the data."""
    n, k = args.n_initial, args.steps_ahead
    for option, value in (("--n-initial", n), ("--steps-ahead", k)):
        if value is not None and y is None:
            raise DataError(
                f"{option} needs the measured outputs: {args.data!r} has no output column "
                f"{list(found.output_names)} (or give --outputs)"
            )
    given = n is not None
    if k is not None or (y is not None and n is None):
        n = found.resolve_n_initial(n)
        if not given and k is None:  # the default n: lead with the simulation from it if it fits
            n = n if n < len(u) and _fits_encoder(found, n) else 0
        if n == 0 and k is not None:
            raise OptionError("--steps-ahead needs --n-initial >= 1 (a prediction starts from "
                             "measured outputs)")  # fmt: skip
    n = 0 if n is None else n
    if n >= len(u):
        raise DataError(f"--n-initial {n} leaves no sample of the {len(u)} in {args.data!r}")
    check_encoder_history(found.initial_state, found.encoder_lag, n, given)
    return n, k


def _fits_encoder(found: Any, n: int) -> bool:
    return found.initial_state != "encoder" or n >= (found.encoder_lag or 0)


def _score_lines(evaluation: Any, n_samples: int) -> list[str]:
    """The report's lines of scores: RMSE and fit % of each trajectory, the bands' shares, the
    extrapolation and the residuals."""
    fit = lambda values: ", ".join(f"{v:.1f}" for v in values) + " %"  # noqa: E731
    n, lines = evaluation.n_initial, []
    if evaluation.from_n is not None:
        r = evaluation.from_n
        lines.append(f"RMSE: {r['rmse']:.6g}, fit {fit(r['fit_percent'])} (from sample {n}, the "
                     f"state set from the first {n} measured outputs)")  # fmt: skip
    lines.append(f"RMSE: {evaluation.rmse:.6g}, fit {fit(evaluation.fit_percent)} (all "
                 f"{n_samples} samples, the free run from the estimation record's start "
                 "state)")  # fmt: skip
    if evaluation.prediction is not None:
        r = evaluation.prediction
        lines.append(f"RMSE: {r['rmse']:.6g}, fit {fit(r['fit_percent'])} ({r['steps_ahead']}-"
                     f"step-ahead prediction, from sample {n})")  # fmt: skip
    if evaluation.band is not None:
        cover = evaluation.band["coverage"]
        shares = ", ".join(f"{v:.3f} ({k if k == 'simulation' else k + '-step'})"
                           for k, v in cover.items())  # fmt: skip
        line = f"band {evaluation.band['level']:g}: share of the samples inside it {shares}"
        by_output = evaluation.band["coverage_by_output"]
        if len(by_output) > 1:
            each = ", ".join(f"{v:.3f}" for v in by_output)
            line += (f"; of the simulation per output {each}, every output at once "
                     f"{evaluation.band['joint_coverage']:.3f}")  # fmt: skip
        lines.append(line)
    if evaluation.extrapolation is not None:
        from keras_mgu.sysid.judging.extrapolation import describe_extrapolation

        lines.append(describe_extrapolation(evaluation.extrapolation, n))
    lines.append(f"residuals: {evaluation.residuals.summary()}")
    return lines


def _write(path: str, table: tuple[list[str], list[Any]]) -> None:
    import numpy as np

    write_csv(path, table[0], np.concatenate(table[1], axis=1))


def _describe(found: Any) -> str:
    """The model as ``identify`` names it (:func:`~keras_mgu.cli.report.model_label`), its
    state and the runs it averages: ``linear+network (MGU 32), learned state, run 1 alone``."""
    from keras_mgu.cli.report import model_label
    from keras_mgu.sysid.choice.selection import describe_members

    state = found.runs[found.best].config.initial_state
    runs = describe_members(found.kept, [run.structure for run in found.runs])
    return f"{model_label(found)}, {state} state, {runs}"


def run_command(args: argparse.Namespace) -> int:
    """The ``simulate`` subcommand's handler: :func:`run`, exit status 0."""
    run(args)
    return 0
