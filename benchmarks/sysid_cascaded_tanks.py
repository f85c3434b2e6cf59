"""Cascaded Tanks test RMSE of the identification recipe, per backend and seed.

For each seed S it trains the recipe's runs with seeds S, S+1000, ...,
S+1000*(R-1) (R = ``--restarts``, default 5) on the estimation record and
scores every run on the test record. From the same runs it reports:

* the default recipe (``examples/system_identification.py``'s defaults,
  three restarts): the run with the best validation score among the first
  three;
* ``--restarts 5``: the run with the best validation score among all five.

Selection uses the validation score only; test scores are computed for the
report. Each seed's runs go to ``--out/BACKEND_seedS.json`` as they finish,
and ``--report`` turns those files into the markdown tables of RESULTS.md.

``--config`` changes settings of :class:`keras_mgu.sysid.RecipeConfig` (a JSON
object, e.g. ``'{"weight_decay": 0}'``) to measure a variant of the recipe;
give such runs their own ``--out`` folder. ``--summary`` prints one line per
backend for a folder: the median validation score over all runs and over the
runs the default keeps (what variants are chosen by), and the test medians.

Usage::

    python benchmarks/sysid_cascaded_tanks.py --backend jax --seeds 0 1 2 3 4 \\
        --data-path ../shared/data/cascaded_tanks/dataBenchmark.csv
    python benchmarks/sysid_cascaded_tanks.py --report
    python benchmarks/sysid_cascaded_tanks.py --backend jax --config '{"weight_decay": 0}' \\
        --out benchmarks/results/sysid_variants/no_weight_decay --data-path ...
    python benchmarks/sysid_cascaded_tanks.py --summary --out benchmarks/results/sysid_variants/*
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results", "sysid")
DEFAULT_RESTARTS = 3


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument(
        "--data-path",
        default=os.path.join(HERE, "..", "..", "shared", "data", "cascaded_tanks"),
        help="dataBenchmark.csv or its folder",
    )
    parser.add_argument("--out", nargs="+", default=[DEFAULT_OUT], help="results folder(s)")
    parser.add_argument("--config", default="{}", help="RecipeConfig settings as a JSON object")
    parser.add_argument("--report", action="store_true", help="print the tables and exit")
    parser.add_argument("--summary", action="store_true", help="one line per folder and backend")
    return parser.parse_args(argv)


def recipe_config(overrides: dict):
    """The recipe's default settings with ``overrides`` (lists become tuples)."""
    from keras_mgu import sysid

    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    return sysid.RecipeConfig(**fields)


def run_seed(data, seed: int, restarts: int, overrides: dict) -> dict:
    import keras

    from keras_mgu import sysid

    config = recipe_config(overrides)
    found = sysid.identify(data, config, restarts=restarts, seed=seed, verbose=0)
    runs = []
    for run in found.runs:
        chosen_run = dataclasses.replace(found, model=run.model)
        runs.append(
            {
                "seed": run.seed,
                "validation": run.validation_score,
                "best_iteration": run.best_iteration,
                "seconds": round(run.seconds, 1),
                "test": chosen_run.score(data.test),
                "test_benchmark": chosen_run.score(data.test, "benchmark"),
            }
        )
        print(f"  {runs[-1]}", file=sys.stderr, flush=True)
    return {"backend": keras.backend.backend(), "seed": seed, "config": overrides, "runs": runs}


def chosen(runs: list[dict], count: int) -> dict:
    return min(runs[:count], key=lambda r: r["validation"])


def load_results(out: str) -> dict[str, list[dict]]:
    """The per-seed result files of folder ``out``, grouped by backend."""
    rows: dict[str, list[dict]] = {}
    for path in sorted(glob.glob(os.path.join(out, "*_seed*.json"))):
        with open(path) as f:
            result = json.load(f)
        rows.setdefault(result["backend"], []).append(result)
    return rows


def report(out: str) -> str:
    rows = load_results(out)
    lines = []
    for label, count in (("default (3 restarts)", DEFAULT_RESTARTS), ("--restarts 5", 5)):
        lines += [f"\n{label}: test RMSE [V], all 1024 samples / samples 50 on", ""]
        lines += [
            "| backend | seeds | per seed (all) | median | worst | per seed (from 50) | median |"
        ]
        lines += ["|---|---|---|---:|---:|---|---:|"]
        for backend, results in sorted(rows.items()):
            results = [
                r for r in sorted(results, key=lambda r: r["seed"]) if len(r["runs"]) >= count
            ]
            if not results:
                continue
            picks = [chosen(r["runs"], count) for r in results]
            all_, late = [p["test"] for p in picks], [p["test_benchmark"] for p in picks]
            lines.append(
                f"| {backend} | {' '.join(str(r['seed']) for r in results)} | "
                f"{' / '.join(f'{v:.3f}' for v in all_)} | {statistics.median(all_):.3f} | "
                f"{max(all_):.3f} | {' / '.join(f'{v:.3f}' for v in late)} | "
                f"{statistics.median(late):.3f} |"
            )
    return "\n".join(lines)


def summary(out: str) -> list[str]:
    """Per backend: validation medians (all runs / default's picks) and test medians / worst."""
    rows = load_results(out)
    lines = []
    for backend, results in sorted(rows.items()):
        runs = [run for r in results for run in r["runs"]]
        picks = [chosen(r["runs"], DEFAULT_RESTARTS) for r in results]
        line = (
            f"| {os.path.basename(os.path.normpath(out))} | {backend} | {len(results)} "
            f"| {statistics.median(r['validation'] for r in runs):.4f} "
            f"| {statistics.median(p['validation'] for p in picks):.4f} "
            f"| {statistics.median(p['test'] for p in picks):.3f} "
            f"| {max(p['test'] for p in picks):.3f} "
        )
        picks5 = [chosen(r["runs"], 5) for r in results if len(r["runs"]) >= 5]
        if picks5:
            line += f"| {statistics.median(p['test'] for p in picks5):.3f} "
            line += f"| {max(p['test'] for p in picks5):.3f} |"
        else:
            line += "| | |"
        lines.append(line)
    return lines


def runs_table(out: str) -> str:
    """Each run's validation score (standardised) and test RMSE [V], a row per backend and seed."""
    lines = [
        "| backend | seed S | runs S, S+1000, ...: validation score / test RMSE (all) |",
        "|---|---|---|",
    ]
    for path in sorted(glob.glob(os.path.join(out, "*_seed*.json"))):
        with open(path) as f:
            result = json.load(f)
        runs = " ; ".join(f"{r['validation']:.3f} / {r['test']:.3f}" for r in result["runs"])
        lines.append(f"| {result['backend']} | {result['seed']} | {runs} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.summary:
        print(
            "| variant | backend | seeds | validation median, all runs | validation median, "
            "default's picks | test median | test worst | 5 restarts: median | worst |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for out in args.out:
            print("\n".join(summary(out)))
        return 0
    out = args.out[0]
    if args.report:
        print(report(out))
        print("\nEvery run:\n\n" + runs_table(out))
        return 0
    if args.backend:
        os.environ["KERAS_BACKEND"] = args.backend
    from keras_mgu import datasets

    data = datasets.load_cascaded_tanks(args.data_path)
    os.makedirs(out, exist_ok=True)
    overrides = json.loads(args.config)
    for seed in args.seeds:
        result = run_seed(data, seed, args.restarts, overrides)
        path = os.path.join(out, f"{result['backend']}_seed{seed}.json")
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        best3, best5 = chosen(result["runs"], DEFAULT_RESTARTS), chosen(result["runs"], 5)
        print(f"{result['backend']} seed {seed}: default {best3['test']:.4f}, "
              f"restarts 5 {best5['test']:.4f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
