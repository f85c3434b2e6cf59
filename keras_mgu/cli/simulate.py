"""``keras-mgu simulate``: simulate a saved model on a new experiment's data file.

Reads the model file (``.kmgu``, written by ``keras-mgu identify`` or
``Identification.save``) and the data file's columns named as the model's
inputs (delimited text with a header row, ``.mat`` or ``.npz``, as
``keras-mgu identify --train`` reads them), simulates, and writes one column
``<output>_sim`` per output (one row per sample, the rows of the data file).
When the file also has the output columns, prints the RMSE of the
simulation: over all samples (simulated from the inputs alone, from the state
the model learned or its estimation record's start), and with
``--n-initial N`` from sample N on, the state set from the first N measured
outputs (then the file written is that simulation, its first N rows the
measured outputs).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from keras_mgu._atomic import write_atomically
from keras_mgu.cli.backends import BACKENDS
from keras_mgu.cli.errors import UsageError
from keras_mgu.cli.identify import positive_int

__all__ = [
    "add_arguments",
    "check_arguments",
    "load_model",
    "read_data",
    "run_command",
    "write_csv",
]

HELP = "simulate a saved model (.kmgu) on a CSV file of inputs; scores when outputs are given"
DESCRIPTION = (
    __doc__.split("\n\n", 1)[1]
    + """
examples:
  keras-mgu simulate --model outputs/system_identification/mgu_h32_lr0.01/mgu.kmgu \\
      --data new.csv --out sim.csv
  keras-mgu simulate --model mgu.kmgu --data test.csv --out sim.csv --n-initial 50
"""
)
#: Suffix of the simulated columns' names.
SIM_SUFFIX = "_sim"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``simulate``."""
    parser.add_argument("--model", required=True, metavar="FILE",
                        help="model file (.kmgu) from keras-mgu identify")  # fmt: skip
    parser.add_argument("--data", required=True, metavar="FILE",
                        help="the experiment (.csv/.txt/.tsv/.dat/.asc with a header row, .mat "
                        "or .npz): one row per sample, the model's input columns by name (and "
                        "its output columns to score)")  # fmt: skip
    parser.add_argument(
        "--out",
        required=True,
        metavar="CSV",
        help=f"CSV file for the simulated outputs (<output>{SIM_SUFFIX})",
    )
    parser.add_argument("--n-initial", type=positive_int, metavar="N",
                        help="set the state from the first N measured outputs and score from "
                        "sample N on (needs the output columns)")  # fmt: skip
    parser.add_argument("--backend", choices=tuple(BACKENDS),
                        help="Keras backend (default: $KERAS_BACKEND, else Keras' "
                        "configured one)")  # fmt: skip


def check_arguments(args: argparse.Namespace) -> None:
    """The model and data files must exist (:class:`UsageError` otherwise)."""
    for option, path in (("--model", args.model), ("--data", args.data)):
        if not os.path.isfile(path):
            raise UsageError(f"{option}: no such file: {path!r}")


def read_data(path: str, found: Any) -> tuple[Any, Any]:
    """``(u (N, n_inputs), y (N, n_outputs) or None)`` from the columns the model names.

    The file is any that :func:`keras_mgu.datasets.load_record` reads (delimited
    text with a header row, ``.mat``, ``.npz``). ``y`` is None when the file
    has none of the output columns; some but not all of them is an error.
    """
    import numpy as np

    from keras_mgu.datasets.loaders import read_table

    inputs, outputs = list(found.input_names), list(found.output_names)
    if not inputs or not outputs:
        raise ValueError(
            "the model file does not name its input and output channels (an Identification "
            "saved without them); name them (input_names, output_names) and save it again."
        )
    table = read_table(path)
    names = table.names or ()
    present = [name for name in outputs if name in names]
    if present and len(present) < len(outputs):
        missing = [name for name in outputs if name not in names]
        raise ValueError(
            f"{path!r} has the output column(s) {present} but not {missing}; give all of the "
            "model's outputs (to score) or none (to simulate only)."
        )
    values = np.stack([table.values(table.index(name)) for name in inputs + present], axis=1)
    return values[:, : len(inputs)], (values[:, len(inputs) :] if present else None)


def write_csv(path: str, names: list[str], values: Any) -> None:
    """``values`` ``(N, len(names))`` under a header of ``names``; written whole or not at all."""
    import numpy as np

    def write(tmp: str) -> None:
        np.savetxt(tmp, values, delimiter=",", header=",".join(names), comments="", fmt="%.9g")

    write_atomically(path, write)


def load_model(path: str) -> Any:
    """``sysid.load(path)``; a file that is not a model file is a :class:`UsageError`."""
    from keras_mgu import sysid

    try:
        return sysid.load(path)
    except ValueError as err:  # ModelFileError
        raise UsageError(f"cannot load the model: {err}") from err


def run(args: argparse.Namespace) -> dict[str, float]:
    """Simulate, write the CSV file, print the scores; returns them (empty without outputs)."""
    from keras_mgu.sysid import score

    found = load_model(args.model)
    try:
        u, y = read_data(args.data, found)
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot read the data: {err}") from err
    n = args.n_initial
    if n is not None and y is None:
        raise UsageError(
            f"--n-initial needs the measured outputs: {args.data!r} has no output column "
            f"{list(found.output_names)}"
        )
    if n is not None and n >= len(u):
        raise UsageError(f"--n-initial {n} leaves no sample of the {len(u)} in {args.data!r}")
    print(f"model: {args.model} ({_describe(found)}); data: {len(u)} samples of {args.data}")
    y_free = found.simulate(u)
    y_sim = y_free if n is None else found.simulate(u, y[:n])
    names = [f"{name}{SIM_SUFFIX}" for name in found.output_names]
    write_csv(args.out, names, y_sim)
    scores = {}
    if y is not None:
        scores["rmse"] = score(y, y_free, "all")
        print(f"RMSE: {scores['rmse']:.6g} (all {len(u)} samples, from the model's start state)")
    if n is not None:
        scores["rmse_from_n"] = score(y, y_sim, "benchmark", n)
        print(f"RMSE: {scores['rmse_from_n']:.6g} (from sample {n}, the state set from the first "
              f"{n} measured outputs)")  # fmt: skip
    print(f"simulation: {args.out}")
    return scores


def _describe(found: Any) -> str:
    config = found.config
    runs = f"average of {len(set(found.members))} runs" if found.members else "one run"
    return f"{config.cell.upper()} {list(config.units)}, {config.initial_state} state, {runs}"


def run_command(args: argparse.Namespace) -> int:
    """The ``simulate`` subcommand's handler: :func:`run`, exit status 0."""
    run(args)
    return 0
