"""How the choice among K runs behaves as K grows: validation score against the held-out test score.

For each seed S it runs ``sysid.identify(data, config, restarts=K_max,
seed=S)`` once (no time budget by default, so no run is shortened). Runs
are deterministic in their seed, so the first ``K + probes - 1`` runs are
exactly the runs of ``identify(..., restarts=K)``; for each K of
``--ks`` it reports, over those runs:

* ``chosen``: the test score of the run with the lowest validation RMSE
  (the library's rule);
* ``top3``: the test score of the mean simulation of the three runs with
  the lowest validation RMSE (an alternative rule, also chosen on
  validation only), and its validation RMSE;
* ``ensemble``: the test score of the library's ``selection="ensemble"``
  rule (:func:`keras_mgu.sysid.greedy_ensemble` on the validation errors),
  and its validation RMSE;
* ``half_best`` / ``half_ensemble``: each rule chosen on the first half of
  the validation record, scored on the second half (no test data);
* ``top_half``: the test score of the mean simulation of the better half of
  the runs by validation RMSE; ``all``: of every run's mean; with
  ``half_top_half`` / ``half_all``, the same rules chosen on the first half
  of the validation record and scored on the second;
* ``median``: the median test score of the runs; ``oracle``: the best test
  score among them (what no rule can know).

The test record is scored for this report only. Medians over the seeds are
printed as a markdown table; ``--json`` writes every figure.

Usage::

    python benchmarks/choice_study.py --backend jax --benchmark cascaded_tanks --seeds 0 1 2 \\
        --ks 1 2 4 8 16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ROOT = os.path.join(HERE, "..", "..", "shared", "data")
sys.path.insert(0, os.path.dirname(HERE))
from benchmarks.fresh_process import run_child  # noqa: E402

CHILD = """
import dataclasses, json, sys
import numpy as np
from keras_mgu import datasets, sysid
from keras_mgu.sysid.choice.selection import select
name, root, seed, ks, config = sys.argv[1:6]
ks = json.loads(ks)
data = datasets.load_benchmark(name, root)
scale = data.protocol.scale if data.protocol else 1.0
found = sysid.identify(data, sysid.RecipeConfig(**json.loads(config)), restarts=max(ks),
                       seed=int(seed))
probes = len(found.runs) - max(ks) + 1  # one run per structure tried
def test(members):
    return scale * dataclasses.replace(found, members=tuple(members)).score(data.test, "benchmark")
val = [r.validation_rmse for r in found.runs]
tests = [test([i]) for i in range(len(found.runs))]
errors = [r.validation_error for r in found.runs]
half = len(errors[0]) // 2
def half_rmse(picked):
    return float(np.sqrt(np.mean(np.mean([errors[i][half:] for i in picked], axis=0) ** 2)))
def second_half(rule, idx):
    return half_rmse([idx[j] for j in select([errors[i][:half] for i in idx], rule)])
def first_half_order(idx):
    return sorted(idx, key=lambda i: float(np.sqrt(np.mean(errors[i][:half] ** 2))))
rows = []
for k in ks:
    idx = list(range(k + probes - 1))
    order = sorted(idx, key=lambda i: val[i])
    top = order[:3]
    ensemble = dataclasses.replace(found, members=tuple(top))
    greedy = [idx[j] for j in select([errors[i] for i in idx], "ensemble")]
    greedy_val = dataclasses.replace(found, members=tuple(greedy)).validation_rmse(data)
    rows.append({"k": k, "runs": len(idx), "chosen": tests[order[0]],
                 "chosen_validation": val[order[0]], "top3": test(top),
                 "top3_validation": ensemble.validation_rmse(data),
                 "ensemble": test(greedy), "ensemble_validation": greedy_val,
                 "half_best": second_half("best", idx),
                 "half_ensemble": second_half("ensemble", idx),
                 "top_half": test(order[:(len(idx) + 1) // 2]),
                 "half_top_half": half_rmse(first_half_order(idx)[:(len(idx) + 1) // 2]),
                 "all": test(idx), "half_all": half_rmse(idx),
                 "median": float(np.median([tests[i] for i in idx])),
                 "oracle": min(tests[i] for i in idx)})
print("RESULT " + json.dumps(rows))
"""


def run_seed(args: argparse.Namespace, seed: int) -> list[dict]:
    root = os.path.join(args.data_root, args.benchmark)
    argv = [args.benchmark, root, str(seed), json.dumps(args.ks), args.config]
    rows = run_child(CHILD, argv, args.backend, f"seed {seed}")
    return [{"seed": seed, **row} for row in rows]


def table(rows: list[dict], args: argparse.Namespace) -> str:
    keys = ("chosen_validation", "chosen", "top3_validation", "top3", "ensemble_validation",
            "ensemble", "half_best", "half_ensemble", "top_half", "half_top_half", "all",
            "half_all", "median", "oracle")  # fmt: skip
    out = [
        f"{args.benchmark}, {args.backend}, seeds {args.seeds}, config {args.config}: "
        "medians over the seeds (test RMSE in the protocol's unit; validation RMSE standardised)",
        "",
        "| K | runs | validation of chosen | test of chosen | validation of top-3 mean | "
        "test of top-3 mean | validation of ensemble rule | test of ensemble rule | "
        "2nd half of validation, chosen on 1st: best run | same, ensemble rule | "
        "test of the better half's mean | same, 2nd half of validation | test of all runs' mean | "
        "same, 2nd half of validation | median test | best test (oracle) |",
        "|---:|---:|" + "---:|" * 14,
    ]
    for k in args.ks:
        sel = [r for r in rows if r["k"] == k]
        med = {key: statistics.median(r[key] for r in sel) for key in keys}
        out.append(f"| {k} | {sel[0]['runs']} | " + " | ".join(f"{med[key]:.4g}" for key in keys)
                   + " |")  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"), default="jax")
    parser.add_argument("--benchmark", default="cascaded_tanks")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--config", default="{}",
                        help="RecipeConfig settings as a JSON object")  # fmt: skip
    parser.add_argument("--data-root", default=DEFAULT_ROOT)
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args(argv)
    rows = []
    for seed in args.seeds:
        rows += run_seed(args, seed)
        print(f"seed {seed}: {rows[-len(args.ks) :]}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    print(table(rows, args))


if __name__ == "__main__":
    main()
