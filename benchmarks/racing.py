"""Racing: the defaults with and without it, per record and class, seconds and scores.

For each record and seed S it runs ``sysid.identify(data, seed=S)`` twice in
one process, with ``RecipeConfig(racing=False)`` and with the defaults
(racing on), in alternating order (seed 0 unraced first, seed 1 raced first).
Per run it writes the class, the seconds it took, its choice RMSE and where a
race stopped it; per identification the wall time, the class chosen, its
members and the test RMSE (and, for a zoo plant, the beyond record's RMSE
after ``beyond_start``). From the unraced identification it also writes what
the rule needs measured (``keras_mgu/sysid/choice/racing.py``): for each run
of a class that races, its floor at the checkpoint
(``scale * best validation RMSE so far / sqrt(2)``) over its choice RMSE at
its end: how much it still improved. The rule is safe where that ratio stays
below ``RACE_FACTOR`` for every run that could win. The zoo's estimation and
validation records decide it; no test figure does.

Usage::

    python benchmarks/racing.py --backend jax --seeds 0 1 --records zoo:van_der_pol \\
        zoo:hardening_oscillator zoo:duffing zoo:pendulum zoo:two_mass_drive cascaded_tanks
    python benchmarks/racing.py --report

Results go to ``--out/RECORD/BACKEND_seedS.json`` (default
``benchmarks/results/racing``). A zoo plant is ``zoo:NAME`` (its default
length, data seed 0); a measured record's folder is read from ``--data-root``
(default ``../shared/data``).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from benchmarks.band_width import load, read_rows, write_row  # noqa: E402

DEFAULT_OUT = os.path.join(HERE, "results", "racing")


def checkpoint_ratio(run) -> float | None:
    """A racing run's floor at its checkpoint over its choice RMSE at its end (None: it does
    not race)."""
    from keras_mgu.sysid.choice.racing import (
        QUICK_CLASSES,
        checkpoint_iteration,
        floors,
        network_scale,
    )
    from keras_mgu.sysid.training.lag_run import one_step_iterations

    if run.structure in QUICK_CLASSES:
        return None
    config = run.config
    if run.structure in ("narx", "loop"):
        every = max(1, config.iterations // min(config.validation_checks, 20))
        offset = one_step_iterations(run.structure, config)
        history = run.validation_history
    else:
        every, offset = config.validation_interval(), 0
        history = [(h["iteration"], h["score"]) for h in run.stopper.history]
    at = offset + checkpoint_iteration(config.iterations, every)
    best = min((score for step, score in history if step <= at), default=math.inf)
    return floors([best], [network_scale(run.path)])[0] / run.choice_rmse


def identify_once(data, plant, seed: int, racing: bool) -> dict:
    """One identification and its per-run and per-record figures."""
    from keras_mgu import sysid

    start = time.perf_counter()
    found = sysid.identify(data, sysid.RecipeConfig(racing=racing), seed=seed)
    seconds = time.perf_counter() - start
    n = found.resolve_n_initial()
    runs = [
        {
            "class": run.structure, "seed": run.seed, "seconds": run.seconds,
            "choice_rmse": run.choice_rmse, "stopped": run.stopped,
            "checkpoint_ratio": None if racing else checkpoint_ratio(run),
        }
        for run in found.runs
    ]  # fmt: skip
    test = data.test
    row = {
        "seconds": seconds, "chosen": found.runs[found.best].structure,
        "members": sorted(int(k) for k in set(found.kept)), "runs": runs,
        "test": found.score(test, "benchmark", n),
    }  # fmt: skip
    if plant is not None:
        beyond, first = plant.beyond, plant.beyond_start
        y = found.simulate(beyond.u, beyond.y[:n])
        row["beyond_after"] = float(math.sqrt(((y[first:] - beyond.y[first:]) ** 2).mean()))
    return row


def run_one(record: str, seed: int, data_root: str) -> dict:
    """Both identifications of ``record`` and ``seed``, in the order the seed gives (module)."""
    import keras

    data, plant = load(record, data_root)
    order = (False, True) if seed % 2 == 0 else (True, False)
    out = {"record": record, "seed": seed, "backend": keras.backend.backend()}
    for racing in order:
        out["raced" if racing else "unraced"] = identify_once(data, plant, seed, racing)
    return out


def report(out: str) -> str:
    """The markdown tables of every result under ``out``."""
    rows = read_rows(out)
    lines = [
        "| record | backend | seed | chosen (unraced / raced) | same members | test (unraced / "
        "raced) | seconds unraced | raced | ratio | stopped |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = r["unraced"], r["raced"]
        stopped = ", ".join(run["class"] for run in b["runs"] if run["stopped"])
        lines.append(
            f"| {r['record']} | {r['backend']} | {r['seed']} | {a['chosen']} / {b['chosen']} "
            f"| {a['members'] == b['members']} | {_fmt(a['test'])} / {_fmt(b['test'])} "
            f"| {a['seconds']:.0f} | {b['seconds']:.0f} | {b['seconds'] / a['seconds']:.2f} "
            f"| {stopped or '-'} |"
        )
    lines += ["", "| class | runs | checkpoint floor / final choice RMSE: median | max |"]
    lines.append("|---|---|---|---|")
    ratios: dict[str, list[float]] = {}
    for r in rows:
        for run in r["unraced"]["runs"]:
            if run["checkpoint_ratio"] is not None and run["seed"] == r["seed"]:
                ratios.setdefault(run["class"], []).append(run["checkpoint_ratio"])
    for name, values in sorted(ratios.items()):
        lines.append(
            f"| {name} | {len(values)} | {statistics.median(values):.2f} | {max(values):.2f} |"
        )
    return "\n".join(lines)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="jax", choices=("jax", "tensorflow", "torch"))
    parser.add_argument("--records", nargs="+", default=[])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--data-root", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--report", action="store_true", help="print the tables and stop")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.out))
        return 0
    os.environ["KERAS_BACKEND"] = args.backend
    for record in args.records:
        for seed in args.seeds:
            row = run_one(record, seed, args.data_root)
            path = write_row(args.out, row)
            print(f"{record} seed {seed}: unraced {row['unraced']['seconds']:.0f} s, raced "
                  f"{row['raced']['seconds']:.0f} s -> {path}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
