"""Would a linear floor chosen on validation help? Read from the suite's committed runs.

The rule studied: keep the linear ARX model alone when no network run validates
better than it (validation RMSE in the estimation record's standardised units,
the number the recipe chooses runs on). For each benchmark the ARX model is
fitted as ``sysid_suite.py --linear`` fits it (order chosen on validation) and
scored on validation and on the test record (from the protocol's ``n``, in its
unit); each committed suite run (``benchmarks/results/suite/BENCHMARK/*.json``)
gives the networks' validation RMSEs and the kept model's test RMSE. Nothing is
trained and the test record chooses nothing: it only scores both outcomes.

::

    python benchmarks/linear_floor.py                       # the shared records that are present
    python benchmarks/linear_floor.py --benchmarks emps --data-root ../shared/data
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from benchmarks.sysid_suite import BENCHMARKS, DEFAULT_OUT, DEFAULT_ROOT, linear_on_test  # noqa: E402


def linear_scores(data) -> dict:
    """The ARX model the suite's ``--linear`` fits: orders, validation RMSE, test RMSE."""
    model, _, table, test_rmse = linear_on_test(data)
    if model is None:
        return {}
    best = min(table, key=lambda row: row["validation_rmse"])
    return {"orders": model.orders, "validation": best["validation_rmse"], "test": test_rmse,
            "unit": data.protocol.unit}  # fmt: skip


def floor_rows(benchmark: str, linear: dict, suite: str) -> list[dict]:
    """One row per committed suite run of ``benchmark``: both outcomes of the floor."""
    rows = []
    for path in sorted(glob.glob(os.path.join(suite, benchmark, "*_seed*.json"))):
        with open(path) as f:
            result = json.load(f)
        network = min(r["validation_rmse"] for r in result["runs"])
        linear_kept = linear["validation"] < network
        rows.append({
            "backend": result["backend"], "seed": result["seed"], "network_validation": network,
            "linear_kept": linear_kept, "test_without": result["test"],
            "test_with": linear["test"] if linear_kept else result["test"],
        })  # fmt: skip
    return rows


def markdown(benchmark: str, linear: dict, rows: list[dict]) -> list[str]:
    unit = linear["unit"]
    lines = [
        f"**{benchmark}**: ARX{linear['orders']}, validation RMSE {linear['validation']:.3f} "
        f"(standardised), test RMSE {linear['test']:.3g} {unit}",
        "",
        "| backend | seed | best network's validation RMSE | floor keeps | test without floor | "
        "test with floor |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        kept = "ARX" if r["linear_kept"] else "network"
        lines.append(
            f"| {r['backend']} | {r['seed']} | {r['network_validation']:.3f} | {kept} | "
            f"{r['test_without']:.3g} {unit} | {r['test_with']:.3g} {unit} |"
        )
    without = statistics.median(r["test_without"] for r in rows)
    with_floor = statistics.median(r["test_with"] for r in rows)
    lines += ["", f"median test RMSE over these runs: without the floor {without:.3g} {unit}, "
              f"with it {with_floor:.3g} {unit}", ""]  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    from keras_mgu import datasets

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmarks", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    parser.add_argument("--data-root", default=DEFAULT_ROOT, help="folder of benchmark folders")
    parser.add_argument("--suite", default=DEFAULT_OUT, help="the suite's results folder")
    args = parser.parse_args(argv)
    lines = []
    for benchmark in args.benchmarks:
        folder = os.path.join(args.data_root, benchmark)
        if not os.path.isdir(folder):
            lines.append(f"{benchmark}: skipped, no data at {folder}\n")
            continue
        linear = linear_scores(datasets.load_benchmark(benchmark, folder))
        rows = floor_rows(benchmark, linear, args.suite) if linear else []
        if not rows:
            lines.append(f"{benchmark}: skipped, no linear model or no suite runs\n")
            continue
        lines += markdown(benchmark, linear, rows)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
