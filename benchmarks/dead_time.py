"""References for the zoo's heated tank, a plant with dead time: ARX with and without the delay.

The heated tank (``zoo_plant("heated_tank")``) answers its heater 13 samples
late. Its linear floors, fitted by least squares on the estimation record
(raw units, degC and the heater's drive), no training:

* ARX with the true delay, ``nk = 13``::

      y[k] = -sum_{j=1..na} a_j y[k-j] + sum_{j=0..nb-1} b_j u[k-13-j] + c

* the same without a delay, ``nk = 0`` (``u[k] .. u[k-nb+1]``).

For each, ``na`` and ``nb`` in ``1..--max-order`` (8) are tried; the pair
whose free run (its own outputs fed back) simulates the validation record
best is kept. Every free run starts from the record's first 50 measured
outputs (the zoo's ``n``, ``suite_zoo.ZOO_N_INITIAL``: the measured outputs
and inputs before sample 50 are the model's past) and is scored from sample
50 on, in degC: the test record (within the estimation input's range) and
the ``beyond`` record, one free run scored before and after ``beyond_start``
(the tail where the drive leaves [0.1, 0.7] for [0, 1]). The test records
choose nothing.

Each data seed writes ``--out/arx_seedS.json``; SysIdentPy's polynomial
NARX, run in its own environment by ``peers/sysidentpy_dead_time.py``,
writes ``sysidentpy_SETTING_seedS.json`` beside them. The table printed
holds every file found there::

    python benchmarks/dead_time.py --seeds 0 1       # fit, write, print the table
    python benchmarks/dead_time.py --report          # the table of the files alone
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results", "dead_time")
PLANT = "heated_tank"
N_INITIAL = 50  # suite_zoo.ZOO_N_INITIAL: measured outputs that set a free run's state
DELAY = 13  # the plant's dead time in samples: 12 of pipe and one of hold


def _lags(x: np.ndarray, first: int, count: int, k: np.ndarray) -> np.ndarray:
    """Columns ``x[k - first - j]`` for ``j`` in ``0..count-1``, rows ``k``."""
    return np.column_stack([x[k - first - j] for j in range(count)])


def fit_arx(u: np.ndarray, y: np.ndarray, na: int, nb: int, nk: int) -> np.ndarray:
    """Least-squares ``theta = [a_1..a_na, b_0..b_{nb-1}, c]`` on ``(N,)`` records."""
    k = np.arange(max(na, nk + nb - 1), len(y))
    regressors = np.column_stack([-_lags(y, 1, na, k), _lags(u, nk, nb, k), np.ones(len(k))])
    return np.linalg.lstsq(regressors, y[k], rcond=None)[0]


def simulate_arx(theta: np.ndarray, u: np.ndarray, y: np.ndarray, na: int, nb: int, nk: int,
                 n: int = N_INITIAL) -> np.ndarray:  # fmt: skip
    """Free run ``(N,)``: the measured ``y[:n]``, then the model fed its own outputs.

    ``u`` is the measured input throughout (``nk + nb - 1 <= n``: every lag is measured).
    """
    from scipy.signal import lfilter, lfiltic

    if max(na, nk + nb - 1) > n:
        raise ValueError(f"ARX({na}, {nb}, nk={nk}) needs more than the {n} given samples.")
    a, b, c = theta[:na], theta[na : na + nb], theta[-1]
    k = np.arange(n, len(y))
    forcing = _lags(u, nk, nb, k) @ b + c
    den = np.r_[1.0, a]
    zi = lfiltic([1.0], den, y[n - na : n][::-1])
    out = y.astype(np.float64).copy()
    with np.errstate(all="ignore"):
        out[n:] = lfilter([1.0], den, forcing, zi=zi)[0]
    return out


def rmse(y: np.ndarray, y_sim: np.ndarray) -> float:
    err = y - y_sim
    return float(np.sqrt(np.mean(err**2))) if np.all(np.isfinite(err)) else float("inf")


def arx_reference(plant, nk: int, max_order: int) -> dict:
    """The ARX(na, nb) with input delay ``nk`` that simulates validation best, and its scores."""
    rec = {part: (r.u[:, 0], r.y[:, 0]) for part, r in (
        ("estimation", plant.data.estimation), ("validation", plant.data.validation),
        ("test", plant.data.test), ("beyond", plant.beyond))}  # fmt: skip
    candidates, best = [], None
    for na in range(1, max_order + 1):
        for nb in range(1, max_order + 1):
            theta = fit_arx(*rec["estimation"], na, nb, nk)
            u, y = rec["validation"]
            score = rmse(y[N_INITIAL:], simulate_arx(theta, u, y, na, nb, nk)[N_INITIAL:])
            candidates.append({"na": na, "nb": nb, "validation": score})
            if best is None or score < best[0]:
                best = (score, na, nb, theta)
    validation, na, nb, theta = best
    u, y = rec["test"]
    test = rmse(y[N_INITIAL:], simulate_arx(theta, u, y, na, nb, nk)[N_INITIAL:])
    u, y = rec["beyond"]
    start = plant.beyond_start
    y_sim = simulate_arx(theta, u, y, na, nb, nk)
    return {
        "model": f"ARX(na={na}, nb={nb}, nk={nk})", "na": na, "nb": nb, "nk": nk,
        "validation": validation, "test": test,
        "beyond_before": rmse(y[N_INITIAL:start], y_sim[N_INITIAL:start]),
        "beyond_after": rmse(y[start:], y_sim[start:]),
        "theta": theta.tolist(), "candidates": candidates,
    }  # fmt: skip


def run_seed(seed: int, max_order: int) -> dict:
    from keras_mgu.datasets import zoo_plant

    began = time.perf_counter()
    plant = zoo_plant(PLANT, seed=seed)
    rows = {
        "arx_delay": arx_reference(plant, DELAY, max_order),
        "arx_no_delay": arx_reference(plant, 0, max_order),
    }
    return {
        "plant": PLANT, "data_seed": seed, "n_samples": plant.data.estimation.n_samples,
        "n_initial": N_INITIAL, "beyond_start": plant.beyond_start, "unit": "degC",
        "noise_std": plant.noise_std, "max_order": max_order,
        "choice": "lowest validation free-run RMSE over na, nb in 1..max_order",
        "test_output_std": float(plant.data.test.y.std()),
        "beyond_after_output_std": float(plant.beyond.y[plant.beyond_start :].std()),
        "models": rows, "seconds": round(time.perf_counter() - began, 1),
        "numpy_version": np.__version__,
        "command": " ".join(["python", "benchmarks/dead_time.py", *sys.argv[1:]]),
    }  # fmt: skip


def _cells(r: dict) -> str:
    """The four RMSEs, ``inf (diverged)`` for a free run that left every bound."""
    keys = ("validation", "test", "beyond_before", "beyond_after")
    return " | ".join("inf (diverged)" if r[k] == float("inf") else f"{r[k]:.3g}" for k in keys)


def report(out: str) -> str:
    """Markdown: one row per model and data seed found under ``out``, RMSEs in degC."""
    lines = [
        "| reference | data seed | model | validation | test | beyond, before | beyond, after |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    titles = {"arx_delay": "ARX, true delay (nk = 13)", "arx_no_delay": "ARX, no delay"}
    for path in sorted(glob.glob(os.path.join(out, "arx_seed*.json"))):
        with open(path) as f:
            r = json.load(f)
        for key, title in titles.items():
            m = r["models"][key]
            lines.append(f"| {title} | {r['data_seed']} | {m['model']} | {_cells(m)} |")
    for path in sorted(glob.glob(os.path.join(out, "sysidentpy_*_seed*.json"))):
        with open(path) as f:
            r = json.load(f)
        model = (f"degree {r['degree']}, ylag {r['ylag']}, xlag {r['xlag_text']}, "
                 f"{r['n_terms']} terms")  # fmt: skip
        title = f"SysIdentPy FROLS, {r['setting_text']}"
        lines.append(f"| {title} | {r['data_seed']} | {model} | {_cells(r['scores'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="data seeds")
    parser.add_argument("--max-order", type=int, default=8, help="largest na and nb tried")
    parser.add_argument("--out", default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--report", action="store_true", help="print the table of --out alone")
    args = parser.parse_args(argv)
    if not args.report:
        os.makedirs(args.out, exist_ok=True)
        for seed in args.seeds:
            result = run_seed(seed, args.max_order)
            with open(os.path.join(args.out, f"arx_seed{seed}.json"), "w") as f:
                json.dump(result, f, indent=1)
            for key, m in result["models"].items():
                print(f"seed {seed} {key}: {m['model']} validation {m['validation']:.4g}, test "
                      f"{m['test']:.4g}, beyond after {m['beyond_after']:.4g} degC",
                      file=sys.stderr)  # fmt: skip
    print(report(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
