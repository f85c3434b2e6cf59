"""Restarts at population speed: the wall time of ``sysid.identify`` against the number of restarts.

Each measurement runs ``sysid.identify(data, restarts=K, seed=S,
population=P)`` with the library's defaults in a fresh process on the chosen
backend and times ``identify`` alone (data loading, imports and the native
build are outside the clock). Rounds alternate between the settings, so a
slow spell of the machine hits all of them. It prints, per setting, the
median wall time over the rounds, its ratio to the median of one restart,
and the validation RMSE (standardised) and test RMSE (the benchmark's
protocol and unit) of the chosen run. ``--json`` writes every measurement.

Usage::

    python benchmarks/restarts_speed.py --backend jax --restarts 1 8 32 --rounds 3
    python benchmarks/restarts_speed.py --backend torch --restarts 1 8 --sequential
    python benchmarks/restarts_speed.py --benchmark wh2009 --restarts 1 4 --rounds 1
    python benchmarks/restarts_speed.py --restarts 1 8 --config '{"time_budget": 10000}'

``--config`` changes settings of ``RecipeConfig`` (a large ``time_budget``
shows the training speed without the budget's shortening).

``--sequential`` adds the one-by-one runs of every ``K > 1`` beside the
population. The data come from ``--data-root`` (default ``../shared/data``
beside the checkout).
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
import json, sys, time
from keras_mgu import datasets, native, sysid
name, root, restarts, seed, population, config = sys.argv[1:7]
data = datasets.load_benchmark(name, root)
native.status()  # builds the native library if needed, outside the clock
config = sysid.RecipeConfig(**json.loads(config))
start = time.perf_counter()
found = sysid.identify(
    data, config, restarts=int(restarts), seed=int(seed), population=population == "1"
)
seconds = time.perf_counter() - start
best = found.runs[found.best]
print("RESULT " + json.dumps({
    "seconds": seconds, "validation_rmse": best.validation_rmse,
    "test": found.score(data.test, "benchmark"), "runs": len(found.runs),
}))
"""


def measure(args: argparse.Namespace, restarts: int, population: bool, seed: int) -> dict:
    """One fresh-process ``identify``; its timing and scores."""
    root = os.path.join(args.data_root, args.benchmark)
    argv = [args.benchmark, root, str(restarts), str(seed), "1" if population else "0", args.config]
    row = run_child(CHILD, argv, args.backend, f"identify {argv}")
    return {"restarts": restarts, "population": population, "seed": seed, **row}


def settings(args: argparse.Namespace) -> list[tuple[int, bool]]:
    out = []
    for k in args.restarts:
        out.append((k, True))
        if args.sequential and k > 1:
            out.append((k, False))
    return out


def report(rows: list[dict], args: argparse.Namespace) -> str:
    def median(k: int, pop: bool, key: str) -> float:
        return statistics.median(
            r[key] for r in rows if r["restarts"] == k and r["population"] == pop
        )

    base = median(min(args.restarts), True, "seconds")
    lines = [
        f"{args.benchmark}, {args.backend}, seed {args.seed}, config {args.config}, "
        f"medians of {args.rounds} round(s)",
        "",
        "| restarts | training | identify (s) | ratio | validation RMSE | test RMSE |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for k, pop in settings(args):
        seconds = median(k, pop, "seconds")
        lines.append(
            f"| {k} | {'population' if pop else 'one by one'} | {seconds:.1f} | "
            f"{seconds / base:.2f}x | {median(k, pop, 'validation_rmse'):.4f} | "
            f"{median(k, pop, 'test'):.4g} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"), default="jax")
    parser.add_argument("--benchmark", default="cascaded_tanks")
    parser.add_argument("--restarts", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sequential", action="store_true", help="also train one by one")
    parser.add_argument("--config", default="{}", help="RecipeConfig settings as a JSON object")
    parser.add_argument("--data-root", default=DEFAULT_ROOT)
    parser.add_argument("--json", help="write every measurement to this file")
    args = parser.parse_args(argv)
    rows = []
    for r in range(args.rounds):
        for k, pop in settings(args):
            rows.append(measure(args, k, pop, args.seed))
            print(f"round {r + 1}: {rows[-1]}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    print(report(rows, args))


if __name__ == "__main__":
    main()
