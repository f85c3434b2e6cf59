"""SysIdentPy's polynomial NARX (FROLS) on the zoo's heated tank, 13 samples of dead time.

The references of ``benchmarks/dead_time.py`` from SysIdentPy, in its own
environment (``README.md``: SysIdentPy's set-up). The model, its settings
and the scores are those of ``sysidentpy_narx.py`` (FROLS over a
``Polynomial(degree)`` basis, ``LeastSquares()``, AIC over the first 50
values, raw data; SysIdentPy's own free run from the last ``max_lag`` of
the first 50 measured outputs, RMSE from sample 50 in degC), on the heated
tank's records for each data seed given. What differs is the lags: three
settings, each a choice on the validation record's free run:

* ``default``: ``sysidentpy_narx.py``'s own, ``ylag = xlag = L`` for ``L`` in
  2..6 and degree 2 or 3: no input lag reaches the dead time.
* ``delay``: ``xlag = [13, 14, 15, 16]`` (the dead time and three samples
  after it), ``ylag`` in 1..3, degree 2 or 3.
* ``wide``: ``xlag = 15`` (every input lag 1..15), ``ylag = 2``, degree 2.

Each setting and seed writes ``--out/sysidentpy_SETTING_seedS.json``
(``benchmarks/results/dead_time/``), read by ``dead_time.py --report``::

    PYTHONPATH=$PWD ../peers-sysidentpy-venv/bin/python benchmarks/peers/sysidentpy_dead_time.py \\
        --seeds 0 1 --settings default delay wide
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "numpy")  # keras_mgu.datasets imports keras; nothing trains
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from subnet import write_json  # noqa: E402  benchmarks/peers/subnet.py, beside this script
from sysidentpy_narx import (  # noqa: E402  beside this script
    FROLS_SETTINGS,
    arrays,
    fit_one,
    free_run,
    resimulate,
    rmse,
    terms_table,
)

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
DEFAULT_OUT = os.path.join(BENCH, "results", "dead_time")
PLANT = "heated_tank"
N_INITIAL = 50  # suite_zoo.ZOO_N_INITIAL

#: Per setting: its description and the candidates ``(degree, ylag, xlag)`` it chooses among.
SETTINGS = {
    "default": (
        "default lags (ylag = xlag = 2..6)",
        [(d, lag, lag) for d in (2, 3) for lag in (2, 3, 4, 5, 6)],
    ),
    "delay": (
        "xlag 13..16",
        [(d, ylag, [13, 14, 15, 16]) for d in (2, 3) for ylag in (1, 2, 3)],
    ),
    "wide": ("xlag 1..15", [(2, 2, 15)]),
}


def xlag_text(xlag) -> str:
    if isinstance(xlag, int):
        return f"1..{xlag}" if xlag > 1 else "1"
    return (
        f"{xlag[0]}..{xlag[-1]}" if list(xlag) == list(range(xlag[0], xlag[-1] + 1)) else str(xlag)
    )


def run(setting: str, seed: int) -> dict:
    import sysidentpy

    from keras_mgu.datasets import zoo_plant

    load_average = os.getloadavg()
    plant = zoo_plant(PLANT, seed=seed)
    u_est, y_est = arrays(plant.data.estimation)
    u_val, y_val = arrays(plant.data.validation)
    mean, std = float(np.mean(y_est)), float(np.std(y_est))
    text, grid = SETTINGS[setting]
    candidates, best, best_model = [], None, None
    began = time.perf_counter()
    for degree, ylag, xlag in grid:
        start = time.perf_counter()
        model = fit_one(u_est, y_est, degree, ylag, xlag)
        validation = rmse(y_val[N_INITIAL:, 0], free_run(model, u_val, y_val, N_INITIAL), mean,
                          std)  # fmt: skip
        candidates.append({"degree": degree, "ylag": ylag, "xlag": xlag,
                           "n_terms": int(model.n_terms), "validation": validation,
                           "seconds": round(time.perf_counter() - start, 2)})  # fmt: skip
        print(f"  {setting} seed {seed}: degree {degree} ylag {ylag} xlag {xlag_text(xlag)}: "
              f"{model.n_terms} terms, validation {validation:.4g} degC", flush=True)  # fmt: skip
        if best is None or validation < best["validation"]:
            best, best_model = candidates[-1], model
    seconds = time.perf_counter() - began
    model = best_model
    u_test, y_test = arrays(plant.data.test)
    y_sim = free_run(model, u_test, y_test, N_INITIAL)
    test = rmse(y_test[N_INITIAL:, 0], y_sim, mean, std)
    lag = model.max_lag
    again = resimulate(model.final_model, np.ravel(model.theta), u_test[N_INITIAL - lag :, 0],
                       y_test[N_INITIAL - lag : N_INITIAL, 0])[lag:]  # fmt: skip
    u_b, y_b = arrays(plant.beyond)
    start = plant.beyond_start
    y_sim_b = free_run(model, u_b, y_b, N_INITIAL)  # one free run, scored before and after start
    return {
        "plant": PLANT, "data_seed": seed, "peer": "sysidentpy_frols", "setting": setting,
        "setting_text": text, "unit": "degC", "n_initial": N_INITIAL,
        "degree": best["degree"], "ylag": best["ylag"], "xlag": best["xlag"],
        "xlag_text": xlag_text(best["xlag"]), "max_lag": int(lag), "n_terms": int(model.n_terms),
        "scores": {
            "validation": best["validation"], "test": test,
            "beyond_before": rmse(y_b[N_INITIAL:start, 0], y_sim_b[: start - N_INITIAL], mean, std),
            "beyond_after": rmse(y_b[start:, 0], y_sim_b[start - N_INITIAL :], mean, std),
        },
        "beyond_start": start,
        "terms": terms_table(model),
        "regressor_codes": np.asarray(model.final_model).astype(int).tolist(),
        "theta": np.ravel(model.theta).tolist(),
        "candidates": candidates,
        "choice": "lowest validation free-run RMSE over the setting's candidates",
        "resimulation_max_abs_diff": float(np.max(np.abs(again - y_sim))),
        "frols_settings": {k: v for k, v in FROLS_SETTINGS.items() if k != "ylag = xlag"},
        "seconds": round(seconds, 1),
        "load_average_at_start": [round(x, 2) for x in load_average],
        "sysidentpy_version": sysidentpy.__version__,
        "numpy_version": np.__version__,
        "command": " ".join(["python", "benchmarks/peers/sysidentpy_dead_time.py", *sys.argv[1:]]),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="data seeds")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--out", default=DEFAULT_OUT, help="results folder")
    args = parser.parse_args(argv)
    for setting in args.settings:
        for seed in args.seeds:
            result = run(setting, seed)
            write_json(os.path.join(args.out, f"sysidentpy_{setting}_seed{seed}.json"), result)
            s = result["scores"]
            print(f"{setting} seed {seed}: degree {result['degree']}, ylag {result['ylag']}, xlag "
                  f"{result['xlag_text']}, {result['n_terms']} terms, validation "
                  f"{s['validation']:.4g}, test {s['test']:.4g}, beyond after "
                  f"{s['beyond_after']:.4g} degC ({result['seconds']:.0f} s)",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
