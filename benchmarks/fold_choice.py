"""The class chosen on two held-out folds, and the two fold models averaged.

One held-out block of the estimation record judges a polynomial's terms
noisily (``benchmarks/RESULTS.md``, "The held-out part at the record's end":
Duffing's error beyond the range is 0.12 with the start held out, 0.7 with
the end). This script measures the next design, two folds, without changing
the recipe. For each record and seed S:

1. fold A: ``sysid.identify(data, RecipeConfig(held_out=0.2), seed=S)`` (the
   start held out); fold B: the same with ``held_out_at="end"``;
2. each class's score in a fold is its best run's choice RMSE there
   (validation and the fold's held-out part, neither fitted; runs that ran
   off are left out), and its two-fold score ``sqrt((a^2 + b^2) / 2)``;
3. the class with the lowest two-fold score is kept; its model in each fold is
   the fold's kept model where the fold chose it, else its best run there;
4. the model scored is the mean of the two fold models' simulations (each fold
   weighs one half): every estimation sample was fitted by one of them.

It writes, per record and seed, each fold's class and scores and the
two-fold model's, on the test record from sample ``n`` (the protocol's, else
50) and for a zoo plant on its beyond record after ``beyond_start``, to
``--out/RECORD/BACKEND_seedS.json``; ``--report`` prints the table of
``benchmarks/RESULTS.md`` ("Two folds").

Usage::

    python benchmarks/fold_choice.py --backend jax --seeds 0 \\
        --records zoo:van_der_pol zoo:hardening_oscillator zoo:duffing zoo:pendulum cascaded_tanks
    python benchmarks/fold_choice.py --report

A zoo plant is ``zoo:NAME`` (its default length, data seed 0); a measured
record's folder is read from ``--data-root`` (default ``../shared/data``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results", "fold_choice")
FOLDS = ("start", "end")
SHARE = 0.2
ZOO_N = 50


def class_scores(found) -> dict[str, float]:
    """Each class's best choice RMSE among ``found``'s runs that did not run off."""
    scores: dict[str, float] = {}
    for run in found.runs:
        if run.ran_off is None and math.isfinite(run.choice_rmse):
            scores[run.structure] = min(scores.get(run.structure, math.inf), run.choice_rmse)
    return scores


def two_fold_class(folds: dict) -> tuple[str, dict[str, float]]:
    """The class with the lowest ``sqrt((a^2 + b^2) / 2)`` over the folds' class scores
    (classes scored in every fold), and every such score."""
    per_fold = [class_scores(found) for found in folds.values()]
    shared = set.intersection(*(set(s) for s in per_fold))
    if not shared:
        raise ValueError("no class has a finite score in every fold")
    combined = {c: math.sqrt(sum(s[c] ** 2 for s in per_fold) / len(per_fold)) for c in shared}
    return min(sorted(combined), key=combined.get), combined


def fold_members(found, chosen: str) -> tuple[int, ...]:
    """The runs of ``found`` that stand for class ``chosen``: its kept model where the fold
    chose that class, else the best run of the class by choice RMSE."""
    if found.runs[found.best].structure == chosen:
        return tuple(found.kept)
    runs = [k for k, r in enumerate(found.runs) if r.structure == chosen and r.ran_off is None]
    return (min(runs, key=lambda k: found.runs[k].choice_rmse),)


def averaged(folds: dict, chosen: str):
    """One identification whose simulation is the mean of the folds' models of ``chosen``,
    each fold weighing one half (its members repeated so that the counts match)."""
    founds = list(folds.values())
    members = [fold_members(f, chosen) for f in founds]
    runs, kept, offset = [], [], 0
    for i, (found, own) in enumerate(zip(founds, members, strict=True)):
        others = math.prod(len(m) for j, m in enumerate(members) if j != i)
        kept += [offset + k for k in own] * others
        runs += list(found.runs)
        offset += len(found.runs)
    return dataclasses.replace(founds[0], runs=runs, members=tuple(kept))


def scores(found, data, plant, n: int, scale: float) -> dict:
    """Test RMSE from sample ``n`` (the protocol's unit), and a zoo plant's beyond scores."""
    out = {"test": scale * found.score(data.test, "benchmark", n)}
    if plant is not None:
        from suite_zoo import zoo_scores  # benchmarks/suite_zoo.py, beside this script

        out["beyond_after"] = zoo_scores(found, plant, n)["beyond_after"]
    return out


def run_one(record: str, seed: int, data_root: str) -> dict:
    """Both folds of ``record`` with ``seed``, and the two-fold model (module docstring)."""
    import keras
    from band_width import load  # benchmarks/band_width.py, beside this script

    from keras_mgu import sysid

    data, plant = load(record, data_root)
    n = data.n_initial or ZOO_N
    scale = 1.0 if data.protocol is None else data.protocol.scale
    start, folds = time.perf_counter(), {}
    for at in FOLDS:
        config = sysid.RecipeConfig(held_out=SHARE, held_out_at=at)
        folds[at] = sysid.identify(data, config, seed=seed)
    seconds = time.perf_counter() - start
    chosen, combined = two_fold_class(folds)
    row = {
        "record": record, "seed": seed, "backend": keras.backend.backend(), "n": n,
        "seconds": seconds, "two_fold_scores": combined, "chosen": chosen,
        "two_folds": scores(averaged(folds, chosen), data, plant, n, scale),
    }  # fmt: skip
    for at, found in folds.items():
        row[at] = {
            "chosen": found.runs[found.best].structure,
            "class_scores": class_scores(found),
            **scores(found, data, plant, n, scale),
        }
    return row


def report(out: str) -> str:
    """The markdown table of every run under ``out``: each fold's class and scores and the
    two-fold model's, seed by seed."""
    from band_width import read_rows

    rows = read_rows(out)
    lines = [
        "| record | seed | start held out: class, test, beyond | end held out | two folds |",
        "|---|---:|---|---|---|",
    ]

    def cell(part: dict, chosen: str) -> str:
        beyond = f", {part['beyond_after']:.3g}" if "beyond_after" in part else ""
        return f"{chosen} {part['test']:.3g}{beyond}"

    for r in rows:
        lines.append(
            f"| {r['record']} | {r['seed']} | {cell(r['start'], r['start']['chosen'])} "
            f"| {cell(r['end'], r['end']['chosen'])} | {cell(r['two_folds'], r['chosen'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from band_width import record_parser, write_row

    args = record_parser(__doc__.splitlines()[0], DEFAULT_OUT).parse_args(argv)
    if args.report:
        print(report(args.out))
        return 0
    if args.backend:
        os.environ["KERAS_BACKEND"] = args.backend
    for record in args.records:
        for seed in args.seeds:
            row = run_one(record, seed, args.data_root)
            write_row(args.out, row)
            print(f"{record} seed {seed}: {row['chosen']}, {row['two_folds']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
