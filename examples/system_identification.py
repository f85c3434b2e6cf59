"""System identification with an MGU network: simulate a plant's output from its input.

A thin wrapper over the installed command line ``keras-mgu identify``
(:mod:`keras_mgu.cli`): every option is the same, so after ``pip install
keras-mgu`` the job runs without this checkout as ``keras-mgu identify ...``
(``keras-mgu identify --help`` lists the options). By default the data come from
the built-in simulated cascaded-tanks plant
(``keras_mgu.datasets.simulate_cascaded_tanks``), so the example runs with no
download. The recipe trains an MGU simulation model (learned initial state,
linear path) on the estimation record with ``model.fit``, scores the
validation record free-run to keep the best weights and to choose among
``--restarts`` runs, and finally reports the test record's free-run RMSE under
both conventions (all samples; ``nonlinear-benchmarks`` rule, samples
``--n-initial`` on: the benchmark protocol's, else 50). Recipe settings left
out (``--iterations``, ``--window``, ``--batch-size``) are derived from the
record; ``--units`` defaults to one layer of 32 units and ``--learning-rate``
to 0.01.

Examples::

    python examples/system_identification.py                 # simulated tanks, MGU
    python examples/system_identification.py --compare       # MGU vs GRU vs LSTM
    python examples/system_identification.py --dataset cascaded-tanks \\
        --data-path ../shared/data/cascaded_tanks/dataBenchmark.csv --restarts 5
    python examples/system_identification.py --dataset wh2009 \\
        --data-path ../shared/data/wh2009 --time-budget 600
    python examples/system_identification.py --train train.csv --test test.csv \\
        --inputs u1 u2 --outputs y1 y2 --units 32
    python examples/system_identification.py --train run1.mat run2.mat --test run3.mat

It writes PNGs (measured vs simulated test output, residual, training curves)
into a folder of ``--out`` per model, named after the class and cell kept
(``network_mgu_h32_lr0.01/``),
records each model in ``<--out>/results.json`` and prints ``test RMSE: <value>``.
"""

from __future__ import annotations

import sys

from keras_mgu.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    """``keras-mgu identify`` with ``argv`` (default ``sys.argv[1:]``); the exit status."""
    return cli_main(["identify", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
