"""Which score ranks the model classes' runs as their test records do.

For each record and seed it runs ``sysid.identify(data, seed=S, restarts=1)``
(one run of every class, the defaults otherwise) and scores every run four
ways that use no test data, beside its test RMSE (the simulation from the test
record's first ``n`` measured outputs, scored after them; for the report only):

* ``train_val``: the validation RMSE as the run's training validated
  (``RunResult.validation_rmse``: a learned-state network continues the
  estimation record, a lag class starts from the validation record's lags);
* ``test_like``: the validation record simulated from its first ``n``
  measured samples, scored after them (``Identification.test_like_error``);
* ``horizon``: each estimation experiment simulated the same way
  (``Identification.horizon_error``);
* the equally weighted pairs ``train_val+horizon`` and ``test_like+horizon``
  (``sqrt`` of the mean of the squares), the three together, and the worst
  of the three (``max(...)``).

For each rule it prints, per record and seed, the class the rule picks and
the ratio of that run's test RMSE to the best run's (1.0: the rule picked the
run that tests best), then each rule's median and worst ratio. A zoo plant is
``zoo:NAME`` (data seed 0), ``tanks`` is the quick start's simulated
cascaded tanks, any other name a measured benchmark under ``--data-root``.

    KERAS_BACKEND=jax python benchmarks/class_choice.py tanks cascaded_tanks \\
        zoo:hardening_oscillator zoo:pendulum zoo:duffing zoo:two_mass_drive --seeds 0 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = (
    "train_val", "test_like", "horizon", "train_val+horizon", "test_like+horizon",
    "train_val+test_like+horizon", "max(train_val,test_like,horizon)",
)  # fmt: skip


def load(name: str, root: str):
    """``(data, n)``: the record named ``name`` and the measured outputs that start a test."""
    from keras_mgu import datasets

    if name == "tanks":
        return datasets.simulate_cascaded_tanks(seed=0), 50
    if name.startswith("zoo:"):
        return datasets.zoo_plant(name[4:]).data, 50
    data = datasets.load_benchmark(name, os.path.join(root, name))
    return data, data.n_initial or 50


def scores(name: str, seed: int, root: str) -> list[dict]:
    """Every run of one identification: its class, the four scores and its test RMSE."""
    from keras_mgu import sysid
    from keras_mgu.sysid.judging.scoring import error_rmse

    data, n = load(name, root)
    found = sysid.identify(data, seed=seed, restarts=1)
    rows = []
    for k, run in enumerate(found.runs):
        alone = found.run_alone(k)
        test_like = error_rmse(alone.test_like_error(data.validation))
        test = data.test
        error = alone.simulate(test.u, test.y[:n])[n:] - test.y[n:]
        rows.append({
            "class": run.structure, "train_val": run.validation_rmse, "test_like": test_like,
            "horizon": run.horizon_rmse, "test": float(np.sqrt(np.mean(error**2))),
        })  # fmt: skip
    return rows


def rule_score(row: dict, rule: str) -> float:
    """A run's score under ``rule``: ``a+b`` the root mean square, ``max(a,b)`` the worst."""
    if rule.startswith("max("):
        return float(max(row[p] for p in rule[4:-1].split(",")))
    return float(np.sqrt(np.mean([row[p] ** 2 for p in rule.split("+")])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", nargs="+")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--data-root", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("--json", help="write every run's scores here")
    parser.add_argument("--from-json", help="score the rules on runs a former --json wrote")
    args = parser.parse_args()
    saved = {}
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
    table, ratios = {}, {rule: [] for rule in RULES}
    print("| record | seed | best test (class) | " + " | ".join(RULES) + " |")
    print("|---|---:|---|" + "---|" * len(RULES))
    for name in args.records:
        for seed in args.seeds:
            key = f"{name}/{seed}"
            rows = saved[key] if key in saved else scores(name, seed, args.data_root)
            table[f"{name}/{seed}"] = rows
            best = min(rows, key=lambda r: r["test"])
            cells = []
            for rule in RULES:
                pick = min(rows, key=lambda r, rule=rule: rule_score(r, rule))
                ratios[rule].append(pick["test"] / best["test"])
                cells.append(f"{pick['class']} {pick['test'] / best['test']:.2f}")
            print(
                f"| {name} | {seed} | {best['test']:.4g} ({best['class']}) | "
                + " | ".join(cells) + " |",
                flush=True,
            )  # fmt: skip
    print("\nratio of the picked run's test RMSE to the best run's, median / mean / worst:")
    for rule in RULES:
        r = ratios[rule]
        print(f"  {rule:<34} {statistics.median(r):.2f} / {statistics.mean(r):.2f} / {max(r):.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
