"""A sweep against the default recipe: the wall time of ``sysid.tune`` and of ``sysid.identify``.

Each measurement runs in a fresh process on the chosen backend and times the
call alone (data loading, imports and the native build are outside the
clock; ``tune``'s worker processes start inside it):

* ``identify``: ``sysid.identify(data, restarts=3, seed=S)``, the default
  recipe.
* ``tune``: ``sysid.tune(data, max_trials=T, restarts=R, seed=S,
  workers=W, search_budget=B)`` over ``sysid.DEFAULT_SPACE`` (cell, units,
  learning rate, weight decay), random search, chosen on validation. ``B``
  is ``--search-budget``, or ``--budget-ratio`` times the wall time of the
  ``identify`` just measured in the same round.

Rounds alternate between the two. It prints the median wall times, their
ratio, and for each the validation RMSE (standardised) and the test RMSE (the
benchmark's protocol and unit) of the model returned; the test record is
scored after the choice, never used by it. ``--json`` writes every
measurement, with the sweep's table of trials.

Usage::

    python benchmarks/tune_speed.py --backend jax --search-budget 180
    python benchmarks/tune_speed.py --backend jax --budget-ratio 3.9 --rounds 2
    python benchmarks/tune_speed.py --backend torch --trials 16 --restarts 2 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ROOT = os.path.join(HERE, "..", "..", "shared", "data")
sys.path.insert(0, os.path.dirname(HERE))
from benchmarks.fresh_process import run_child  # noqa: E402

CHILD = """
import json, math, sys, time
from keras_mgu import datasets, native, sysid
job = json.loads(sys.argv[1])
data = datasets.load_benchmark(job["benchmark"], job["root"])
native.status()  # builds the native library if needed, outside the clock
start = time.perf_counter()
table = None
if job["what"] == "identify":
    found = sysid.identify(data, restarts=3, seed=job["seed"])
else:
    result = sysid.tune(
        data, max_trials=job["trials"], restarts=job["restarts"], seed=job["seed"],
        workers=job["workers"], search_budget=job["search_budget"], directory=job["directory"],
    )
    found, table = result.best, result.table
seconds = time.perf_counter() - start
def plain(v):
    if isinstance(v, tuple):
        return list(v)
    return None if isinstance(v, float) and not math.isfinite(v) else v
print("RESULT " + json.dumps({
    "what": job["what"], "seconds": seconds, "validation_rmse": found.validation_rmse(data),
    "test": found.score(data.test, "benchmark"), "settings": {
        "cell": found.config.cell, "units": list(found.config.units),
        "learning_rate": found.config.learning_rate, "weight_decay": found.config.weight_decay},
    "trials": None if table is None else [{k: plain(v) for k, v in r.items()} for r in table],
}))
"""


def measure(args: argparse.Namespace, what: str, search_budget: float | None = None) -> dict:
    """One fresh-process ``identify`` or ``tune``; its timing and scores."""
    with tempfile.TemporaryDirectory(prefix="tune_speed_") as directory:
        job = {
            "what": what, "benchmark": args.benchmark,
            "root": os.path.join(args.data_root, args.benchmark), "seed": args.seed,
            "trials": args.trials, "restarts": args.restarts, "workers": args.workers,
            "search_budget": search_budget, "directory": directory,
        }  # fmt: skip
        row = run_child(CHILD, [json.dumps(job)], args.backend, what)
    if what == "tune":
        row["search_budget"] = search_budget
        row["completed"] = sum(t["status"] == "COMPLETED" for t in row["trials"])
    return row


def report(rows: list[dict], args: argparse.Namespace) -> str:
    def median(what: str, key: str) -> float:
        return statistics.median(r[key] for r in rows if r["what"] == what)

    base = median("identify", "seconds")
    if args.budget_ratio:
        budget = f"{args.budget_ratio:g}x the round's identify"
    else:
        budget = f"{args.search_budget} s"
    completed = median("tune", "completed")
    sweep = (
        f"tune: {args.trials} trials x {args.restarts} restarts, {args.workers} worker(s), "
        f"search budget {budget}; trials completed (median) {completed:g} of {args.trials}"
    )
    lines = [
        f"{args.benchmark}, {args.backend}, seed {args.seed}, medians of {args.rounds} round(s); "
        f"{sweep}",
        "",
        "| call | wall time (s) | ratio to identify | validation RMSE | test RMSE |",
        "|---|---:|---:|---:|---:|",
    ]
    for what, name in (("identify", "identify, 3 restarts (default)"), ("tune", sweep)):
        seconds = median(what, "seconds")
        lines.append(
            f"| {name} | {seconds:.1f} | {seconds / base:.2f}x | "
            f"{median(what, 'validation_rmse'):.4f} | {median(what, 'test'):.4g} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"), default="jax")
    parser.add_argument("--benchmark", default="cascaded_tanks")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--search-budget",
        type=float,
        default=None,
        help="seconds for the whole sweep (default: none)",
    )
    parser.add_argument("--budget-ratio", type=float, default=None,
                        help="the sweep's budget: this times the identify of the same round "
                             "(measured first)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-root", default=DEFAULT_ROOT)
    parser.add_argument("--json", help="write every measurement to this file")
    args = parser.parse_args(argv)
    if args.budget_ratio is not None and args.search_budget is not None:
        parser.error("give --search-budget or --budget-ratio, not both")
    rows = []
    for r in range(args.rounds):
        for what in ("identify", "tune"):
            budget = args.search_budget
            if what == "tune" and args.budget_ratio is not None:
                budget = args.budget_ratio * rows[-1]["seconds"]
            rows.append(measure(args, what, budget))
            shown = {k: v for k, v in rows[-1].items() if k != "trials"}
            print(f"round {r + 1}: {shown}", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    print(report(rows, args))


if __name__ == "__main__":
    main()
