"""The polynomial NARX class judged on the estimation record's own edge: two designs.

The estimation record's *edge block* is the contiguous ``share`` of it centred
on its largest excursion (the sample where some standardised input or output
is farthest from its mean). Set aside before anything is fitted, the model
fitted on the rest must extrapolate there a little: a held-out view of what it
does beyond its range, from the record alone. Two uses of it are measured,
each against today's fit (:func:`keras_mgu.sysid.models.polynomial.fit_polynomial`
scored on validation and the estimation record's free run):

* **structure**: the lags, degree and terms chosen on the free runs of the
  validation record and the edge block (FROLS fitted on the rest), then the
  chosen terms' coefficients fitted again on the whole record
  (:func:`~keras_mgu.sysid.models.polynomial.refit_polynomial`);
* **behaviour**: today's structure, its terms fitted on the rest, runs free
  through the edge block three ways: its own law (``own``), faded to the ARX
  model of its lags outside the regressors' range (``fade``, the loop cell's
  rule, :mod:`keras_mgu.sysid.models.loop_cell`, written here in NumPy) and
  that ARX model alone (``linear``); the behaviour with the lowest edge error
  is the one the edge would choose;
* **folds** (the blocked cross-validation the field would try first): the
  record cut into ``K`` contiguous blocks; fold ``k`` chooses its structure on
  the validation record and block ``k`` (FROLS fitted on the other blocks),
  its terms are fitted again on the whole record, and the kept model is the
  mean of the ``K`` fold models' free runs.

Least squares only (no refinement, no other class): the figures are the
fitted polynomial's, in the output's unit, on the test record from sample 50
and on the beyond record after ``beyond_start``. The record seed is the zoo's
data seed (each seed a new record); the fit has no other seed.

Usage::

    python benchmarks/edge_fold.py --records hardening_oscillator duffing van_der_pol pendulum \\
        --seeds 0 1 --out benchmarks/results/edge_fold
    python benchmarks/edge_fold.py --report --out benchmarks/results/edge_fold
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results", "edge_fold")
SHARES = (0.1, 0.2)
FOLDS = (3, 5)
BEHAVIOURS = ("own", "fade", "linear")
FADE = 0.25  # the loop cell's default
FIRST = 50  # measured outputs a simulation starts from


def standardised(record, means, stds):
    return dataclasses.replace(
        record, u=(record.u - means[0]) / stds[0], y=(record.y - means[1]) / stds[1]
    )


def held_out(estimation, start: int, stop: int):
    """``(rest, block)``: samples ``[start, stop)`` set aside, the pieces before and after them
    as two experiments (a piece of 20 samples or fewer is left out: too short to fit)."""
    from keras_mgu.datasets import join_experiments

    n = estimation.n_samples
    rest = [estimation.slice(i, j) for i, j in ((0, start), (stop, n)) if j - i > 20]
    return join_experiments(rest), estimation.slice(start, stop)


def edge_split(estimation, share: float):
    """``(rest, edge)``: the block of ``share`` of the record around its largest excursion."""
    n, b = estimation.n_samples, int(estimation.n_samples * share)
    excursion = np.concatenate([np.abs(estimation.u), np.abs(estimation.y)], axis=1).max(axis=1)
    start = min(max(int(np.argmax(excursion)) - b // 2, 0), n - b)
    return held_out(estimation, start, start + b)


def blocks(estimation, k: int):
    """``(rest, block)`` for each of ``k`` contiguous blocks of the record."""
    edges = np.linspace(0, estimation.n_samples, k + 1).astype(int)
    for a, b in zip(edges[:-1], edges[1:]):
        yield held_out(estimation, a, b)


def anchor(model, record):
    """The ARX model of ``model``'s regressors fitted on ``record`` ``(width + 1, n_y)``, and
    the regressors' ``(lower, upper)`` there."""
    from keras_mgu.sysid.models.polynomial import lag_regressors

    lag = model.lag
    rows = [(lag_regressors(record.u[i:j], record.y[i:j], model.na, model.nb), record.y[i + lag:j])
            for i, j in record.experiments if j - i > lag]  # fmt: skip
    r = np.concatenate([x for x, _ in rows])
    targets = np.concatenate([t for _, t in rows])
    theta = np.linalg.lstsq(np.c_[r, np.ones(len(r))], targets, rcond=None)[0]
    return theta, (r.min(axis=0), r.max(axis=0))


def simulate(model, u, y0, behaviour: str, theta=None, bounds=None) -> np.ndarray:
    """The free run ``(N, n_y)`` of ``model`` from ``y0`` with one behaviour outside ``bounds``."""
    n = len(y0)
    y = np.zeros((len(u), model.n_outputs))
    y[:n] = y0
    inputs = np.concatenate([np.repeat(u[:1], model.nb - 1, axis=0), u])
    a, b, c = model.terms.T
    lagged = list(y0[::-1][: model.na])
    for t in range(n, len(u)):
        past_u = [inputs[t + model.nb - 1 - j] for j in range(1, model.nb)]
        r = np.concatenate([*lagged, *past_u, u[t]])
        if behaviour == "own":
            e = np.append(r, 1.0)
            step = (e[a] * e[b] * e[c]) @ model.coefficients
        else:
            linear = np.append(r, 1.0) @ theta
            step = linear
            if behaviour == "fade":
                inside = np.clip(r, *bounds)
                e = np.append(inside, 1.0)
                own = (e[a] * e[b] * e[c]) @ model.coefficients
                out = np.max(np.abs(r - inside) / (bounds[1] - bounds[0]))
                step = linear + np.clip(1.0 - out / FADE, 0.0, 1.0) * (own - linear)
        step = np.clip(step, *model.limits)
        y[t] = step
        lagged = [step, *lagged[:-1]]
    return y


def rmse(y_sim, y, first: int, scale) -> float:
    return float(np.sqrt(np.mean(((y_sim - y)[first:] * scale) ** 2)))


def measure(name: str, seed: int) -> list[dict]:
    from keras_mgu import datasets
    from keras_mgu.sysid.models.polynomial import fit_polynomial, refit_polynomial

    plant = datasets.zoo_plant(name, seed=seed)
    e = plant.data.estimation
    means, stds = (e.u.mean(0), e.y.mean(0)), (e.u.std(0), e.y.std(0))
    records = (e, plant.data.validation, plant.data.test, plant.beyond)
    est, val, test, beyond = (standardised(r, means, stds) for r in records)

    def scores(model, behaviour="own", theta=None, bounds=None):
        """Test and beyond RMSE of ``model`` (a list: the mean of their free runs)."""
        models = model if isinstance(model, list) else [model]
        runs = [np.mean([simulate(m, r.u, r.y[:FIRST], behaviour, theta, bounds) for m in models],
                        axis=0) for r in (test, beyond)]  # fmt: skip
        return {"test": rmse(runs[0], test.y, FIRST, stds[1]),
                "beyond": rmse(runs[1], beyond.y, plant.beyond_start, stds[1])}  # fmt: skip

    def row(design, model, **more):
        return {"record": name, "seed": seed, "design": design, "na": model.na,
                "degree": model.degree, "terms": len(model.terms), **more}  # fmt: skip

    today = fit_polynomial(est, val, held_out=est)[0]
    rows = [row("today", today, **scores(today))]
    for share in SHARES:
        rest, edge = edge_split(est, share)
        chosen = refit_polynomial(est, fit_polynomial(rest, val, held_out=edge)[0])
        chosen = dataclasses.replace(chosen, limits=today.limits)
        rows.append(row(f"structure, edge {share:g}", chosen, **scores(chosen)))
    for k in FOLDS:
        models = [refit_polynomial(est, fit_polynomial(rest, val, held_out=block)[0])
                  for rest, block in blocks(est, k)]  # fmt: skip
        models = [dataclasses.replace(m, limits=today.limits) for m in models]
        rows.append(row(f"folds, K = {k}, mean", models[0], terms=[len(m.terms) for m in models],
                        **scores(models)))  # fmt: skip
    rest, edge = edge_split(est, max(SHARES))
    on_rest = dataclasses.replace(refit_polynomial(rest, today), limits=today.limits)
    theta_rest, bounds_rest = anchor(today, rest)
    theta, bounds = anchor(today, est)
    for behaviour in BEHAVIOURS:
        run = simulate(on_rest, edge.u, edge.y[: today.lag], behaviour, theta_rest, bounds_rest)
        edge_error = rmse(run, edge.y, today.lag, 1.0)  # standardised
        rows.append(row(f"behaviour {behaviour}", today, edge=edge_error,
                        **scores(today, behaviour, theta, bounds)))  # fmt: skip
    return rows


def report(out: str) -> str:
    """The markdown table of every ``RECORD_seedS.json`` under ``out``."""
    rows = [
        r for path in sorted(glob.glob(os.path.join(out, "*.json"))) for r in json.load(open(path))
    ]
    lines = ["| record | seed | design | na, degree, terms | edge (std) | test | beyond, after |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        edge = f"{r['edge']:.4f}" if "edge" in r else ""
        if isinstance(r["terms"], list):
            r["na"], r["degree"], r["terms"] = "-", "-", "/".join(map(str, r["terms"]))
        lines.append(f"| {r['record']} | {r['seed']} | {r['design']} | {r['na']}, {r['degree']}, "
                     f"{r['terms']} | {edge} | {r['test']:.4g} | {r['beyond']:.4g} |")  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", nargs="+", default=["hardening_oscillator"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.out))
        return 0
    os.makedirs(args.out, exist_ok=True)
    for name in args.records:
        for seed in args.seeds:
            rows = measure(name, seed)
            with open(os.path.join(args.out, f"{name}_seed{seed}.json"), "w") as f:
                json.dump(rows, f, indent=1)
            print("\n".join(json.dumps(r) for r in rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
