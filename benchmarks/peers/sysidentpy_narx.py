"""SysIdentPy's polynomial NARX (FROLS) on the suite's records and protocol: a peer of keras-mgu.

Runs in its own environment (``benchmarks/peers/README.md``: sysidentpy and,
for the package's data loaders, keras with its inference-only NumPy backend);
SysIdentPy is no dependency of keras-mgu. The records are the suite's: a
measured benchmark through ``keras_mgu.datasets.load_benchmark`` (estimation,
validation: the last 20% of the estimation experiment, test), a zoo plant
``zoo:NAME`` through ``suite_zoo.load_zoo_plant`` (data seed 0; estimation,
validation, test and the ``beyond`` record).

* Model: ``sysidentpy.model_structure_selection.FROLS`` with a
  ``Polynomial(degree)`` basis, ``ylag = xlag = lag``, ``LeastSquares()``, its
  information criterion choosing the number of terms (``order_selection=True``,
  ``info_criteria="aic"``, ``n_info_values=50``, the setting of SysIdentPy's
  own Wiener-Hammerstein case study), fitted on the raw (not standardised)
  estimation record, as SysIdentPy's documentation does.
* Choice: every ``degree`` in ``--degrees`` (2 3) and ``lag`` in ``--lags``
  (2 to 6) is fitted, and the one whose free run has the lowest RMSE on the
  validation record is kept. The test record is not used for the choice.
* Scores: SysIdentPy's free run, ``predict(X=u[n - L:], y=y[n - L:n],
  steps_ahead=None)`` with ``L`` the model's ``max_lag``: its recursion
  starts from the ``L`` measured outputs just before sample ``n`` (the
  protocol's ``n``: Cascaded Tanks 50, EMPS 20, Wiener-Hammerstein 50; 50 for
  a zoo plant) and runs free from ``n`` on with the measured input; the RMSE
  over samples ``n`` onward is reported in the protocol's unit (the suite's
  score). Validation and test are scored the same way; a zoo plant's
  ``beyond`` record too, split at ``beyond_start`` as ``suite_zoo.zoo_scores``
  splits it. A free run that is not finite, or leaves the estimation output's
  mean by more than 1e6 of its standard deviations, scores ``inf``.
* Check: the test record's free run is simulated again by :func:`resimulate`
  (NumPy, from the selected terms and coefficients alone); the largest
  difference is recorded as ``resimulation_max_abs_diff``.

``seconds`` is the whole choice loop (every fit and every validation free
run, ``time.perf_counter``). NumPy's BLAS runs on one thread
(``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``: 1 unless set) on this small
shared machine. Each record writes ``--out/RECORD/sysidentpy_frols.json``
(``zoo:duffing`` -> ``zoo_duffing``). ``--report`` prints a Markdown table
of the files found instead.

Usage (from the checkout's root, in the SysIdentPy peer's environment)::

    PYTHONPATH=$PWD ../peers-sysidentpy-venv/bin/python benchmarks/peers/sysidentpy_narx.py \\
        --records zoo:duffing cascaded_tanks emps
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
import warnings

os.environ.setdefault("KERAS_BACKEND", "numpy")  # keras_mgu.datasets imports keras; nothing trains
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from subnet import write_json  # noqa: E402  benchmarks/peers/subnet.py, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, os.path.dirname(BENCH))  # the checkout, for benchmarks.suite_zoo
from benchmarks.suite_zoo import ZOO_N_INITIAL, ZOO_PREFIX, is_zoo, load_zoo_plant  # noqa: E402

DEFAULT_ROOT = os.path.join(BENCH, "..", "..", "shared", "data")
DEFAULT_OUT = os.path.join(BENCH, "results", "peers")
MEASURED = ("cascaded_tanks", "wh2009", "emps")
FILE = "sysidentpy_frols.json"
#: A free run further than this many estimation standard deviations from its mean has diverged.
DIVERGED = 1e6

#: FROLS's settings besides degree and lags (SysIdentPy's Wiener-Hammerstein case study's).
FROLS_SETTINGS = {
    "order_selection": True,
    "info_criteria": "aic",
    "n_info_values": 50,
    "estimator": "LeastSquares()",
    "model_type": "NARMAX",
    "basis_function": "Polynomial(degree)",
    "ylag = xlag": "lag",
}


def record_name(text: str) -> str:
    """A measured benchmark's name, or ``zoo:NAME`` of a zoo plant (``-`` read as ``_``)."""
    from keras_mgu.datasets import ZOO

    if text in MEASURED:
        return text
    if text.startswith(ZOO_PREFIX) and text[len(ZOO_PREFIX) :].replace("-", "_") in ZOO:
        return ZOO_PREFIX + text[len(ZOO_PREFIX) :].replace("-", "_")
    known = " ".join([*MEASURED, *(ZOO_PREFIX + name for name in ZOO)])
    raise argparse.ArgumentTypeError(f"unknown record {text!r}; expected one of {known}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", nargs="+", type=record_name, default=list(MEASURED),
                        help="cascaded_tanks wh2009 emps or zoo:NAME")  # fmt: skip
    parser.add_argument("--degrees", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--lags", type=int, nargs="+", default=[2, 3, 4, 5, 6],
                        help="ylag = xlag candidates")  # fmt: skip
    parser.add_argument("--data-root", default=DEFAULT_ROOT, help="folder of benchmark folders")
    parser.add_argument("--out", default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--report", action="store_true", help="print the results table and exit")
    return parser.parse_args(argv)


def load(args: argparse.Namespace, record: str):
    """``(SysIdData, ZooPlant or None, n, unit, scale)`` of a record, as the suite loads it."""
    from keras_mgu import datasets

    if is_zoo(record):
        plant = load_zoo_plant(record)
        return plant.data, plant, ZOO_N_INITIAL, "", 1.0
    data = datasets.load_benchmark(record, os.path.join(args.data_root, record))
    protocol = data.protocol
    return data, None, protocol.n_initial, protocol.unit, protocol.scale


def arrays(record) -> tuple[np.ndarray, np.ndarray]:
    """A one-input, one-output record's ``(u, y)``, each ``(N, 1)`` float64."""
    if record.n_inputs != 1 or record.n_outputs != 1:
        raise ValueError(f"Expected one input and one output; got {record.n_inputs} and "
                         f"{record.n_outputs}.")  # fmt: skip
    if record.boundaries:
        raise ValueError("Records of several experiments are not supported here.")
    return np.asarray(record.u, dtype=np.float64), np.asarray(record.y, dtype=np.float64)


def free_run(model, u: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """SysIdentPy's free run of a record from its measured outputs ``n - L`` to ``n - 1``.

    ``L = model.max_lag <= n``. Returns ``y_sim`` ``(N - n,)``, aligned with
    ``y[n:]``: ``predict`` puts the ``L`` given outputs first, then its
    recursion (fed its own outputs and the measured input ``u``) from sample
    ``n`` on. Overflows give non-finite values (see :func:`diverged`).
    """
    lag = model.max_lag
    if lag > n:
        raise ValueError(f"The model needs {lag} past outputs; only {n} are allowed.")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y_hat = model.predict(X=u[n - lag :], y=y[n - lag : n], steps_ahead=None)
    y_hat = np.asarray(y_hat, dtype=np.float64).reshape(-1)
    if not np.array_equal(y_hat[:lag], y[n - lag : n, 0]) or len(y_hat) != len(y) - n + lag:
        raise RuntimeError("predict did not return the given outputs followed by the free run.")
    return y_hat[lag:]


def diverged(y_sim: np.ndarray, mean: float, std: float) -> bool:
    return not np.all(np.isfinite(y_sim)) or np.max(np.abs(y_sim - mean)) > DIVERGED * std


def rmse(y: np.ndarray, y_sim: np.ndarray, mean: float, std: float) -> float:
    """RMSE of ``y - y_sim`` (both ``(K,)``), or ``inf`` for a diverged free run."""
    if diverged(y_sim, mean, std):
        return float("inf")
    return float(np.sqrt(np.mean((y - y_sim) ** 2)))


def resimulate(codes: np.ndarray, theta: np.ndarray, u: np.ndarray, y_initial: np.ndarray
               ) -> np.ndarray:  # fmt: skip
    """The free run of a polynomial NARX from its terms alone, in NumPy.

    ``codes`` ``(terms, degree)``: SysIdentPy's regressor codes, ``0`` for no
    factor, ``1000 + j`` for ``y[k - j]``, ``2000 + j`` for ``u[k - j]``;
    ``theta`` ``(terms,)``. ``y[k] = sum_t theta_t prod_f factor_tf(k)`` for
    ``k >= L = len(y_initial)``, the first ``L`` outputs given. ``u`` ``(N,)``;
    returns ``y`` ``(N,)``, the given outputs first.
    """
    codes = np.asarray(codes, dtype=np.int64)
    lags = codes % 1000
    kinds = codes // 1000
    if not set(np.unique(kinds)) <= {0, 1, 2}:
        raise ValueError(f"Unexpected regressor codes {np.unique(codes)}.")
    lag = len(y_initial)
    # Index into the row [1, y[k-1..k-lag], u[k-1..k-lag]] of every factor.
    index = np.where(kinds == 0, 0, np.where(kinds == 1, lags, lag + lags))
    y = np.empty(len(u))
    y[:lag] = y_initial
    row = np.empty(1 + 2 * lag)
    row[0] = 1.0
    with np.errstate(all="ignore"):
        for k in range(lag, len(u)):
            row[1 : lag + 1] = y[k - lag : k][::-1]  # y[k-1], ..., y[k-lag]
            row[lag + 1 :] = u[k - lag : k][::-1]
            y[k] = np.prod(row[index], axis=1) @ theta
    return y


def fit_one(u: np.ndarray, y: np.ndarray, degree: int, lag: int, xlag=None):
    """FROLS with a ``Polynomial(degree)`` basis fitted on ``(u, y)``, AIC choosing its terms.

    ``ylag = lag``; ``xlag`` defaults to ``lag`` too (SysIdentPy's ``xlag``: a number or a
    list of input lags)."""
    from sysidentpy.basis_function import Polynomial
    from sysidentpy.model_structure_selection import FROLS
    from sysidentpy.parameter_estimation import LeastSquares

    xlag = lag if xlag is None else xlag
    model = FROLS(ylag=lag, xlag=xlag, basis_function=Polynomial(degree=degree),
                  estimator=LeastSquares(), order_selection=True, info_criteria="aic",
                  n_info_values=FROLS_SETTINGS["n_info_values"], model_type="NARMAX")  # fmt: skip
    with warnings.catch_warnings():  # n_info_values above the regressors there are: it says so
        warnings.simplefilter("ignore", UserWarning)
        model.fit(X=u, y=y)
    return model


def terms_table(model) -> list[dict]:
    """SysIdentPy's ``results`` table: regressor, parameter, ERR per term."""
    from sysidentpy.utils.display_results import results

    rows = results(model.final_model, model.theta, model.err, model.n_terms, err_precision=8,
                   dtype="sci")  # fmt: skip
    return [{"regressor": r[0], "parameter": r[1], "err": r[2]} for r in rows]


def run_one(args: argparse.Namespace, record: str) -> dict:
    """The choice over degrees and lags on one record; the kept model's scores."""
    import sysidentpy

    load_average = os.getloadavg()
    data, plant, n, unit, scale = load(args, record)
    u_est, y_est = arrays(data.estimation)
    u_val, y_val = arrays(data.validation)
    mean, std = float(np.mean(y_est)), float(np.std(y_est))
    candidates, best, best_model = [], None, None
    began = time.perf_counter()
    for degree in args.degrees:
        for lag in args.lags:
            start = time.perf_counter()
            model = fit_one(u_est, y_est, degree, lag)
            fitted = time.perf_counter() - start
            validation = rmse(y_val[n:, 0], free_run(model, u_val, y_val, n), mean, std)
            candidates.append({
                "degree": degree, "lag": lag, "n_terms": int(model.n_terms),
                "n_info_values": int(model.n_info_values), "validation": scale * validation,
                "fit_seconds": round(fitted, 2),
                "seconds": round(time.perf_counter() - start, 2),
            })  # fmt: skip
            print(f"  degree {degree} lag {lag}: {model.n_terms} terms, validation "
                  f"{scale * validation:.4g} {unit} ({candidates[-1]['seconds']:.1f} s)",
                  flush=True)  # fmt: skip
            if best is None or validation < best["validation_rmse_raw"]:
                best, best_model = {**candidates[-1], "validation_rmse_raw": validation}, model
    seconds = time.perf_counter() - began
    model = best_model
    u_test, y_test = arrays(data.test)
    y_sim = free_run(model, u_test, y_test, n)
    test = rmse(y_test[n:, 0], y_sim, mean, std)
    check = None
    if np.isfinite(test):
        lag = model.max_lag
        again = resimulate(model.final_model, np.ravel(model.theta), u_test[n - lag :, 0],
                           y_test[n - lag : n, 0])[lag:]  # fmt: skip
        check = float(np.max(np.abs(again - y_sim)))
    result = {
        "benchmark": record,
        "peer": "sysidentpy_frols",
        "seed": None,  # deterministic: no seed
        "unit": unit,
        "n_initial": n,
        "test": scale * test,
        "validation": scale * best["validation_rmse_raw"],
        "validation_rmse": best["validation_rmse_raw"] / std,
        "degree": best["degree"],
        "lag": best["lag"],
        "ylag": best["lag"],
        "xlag": best["lag"],
        "max_lag": int(model.max_lag),
        "n_terms": int(model.n_terms),
        "n_info_values": best["n_info_values"],
        "terms_at_cap": best["n_terms"] == best["n_info_values"],
        "terms": terms_table(model),
        "regressor_codes": np.asarray(model.final_model).astype(int).tolist(),
        "theta": np.ravel(model.theta).tolist(),
        "info_values": [float(v) for v in np.ravel(model.info_values)],
        "candidates": candidates,
        "choice": "lowest validation free-run RMSE over degrees and lags",
        "resimulation_max_abs_diff": check,
        "seconds": round(seconds, 1),
        "seconds_what": "the whole choice loop: every fit and every validation free run",
        "data": "raw (not standardised), float64",
        "frols_settings": FROLS_SETTINGS,
        "degrees": args.degrees,
        "lags": args.lags,
        "output_std": std,
        "threads": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")},
        "load_average_at_start": [round(x, 2) for x in load_average],
        "sysidentpy_version": sysidentpy.__version__,
        "numpy_version": np.__version__,
        "command": " ".join(["python", "benchmarks/peers/sysidentpy_narx.py", *sys.argv[1:]]),
    }
    if plant is not None:
        result["data_seed"] = 0
        result["zoo"] = zoo_scores(model, plant, n, mean, std, test)
    return result


def zoo_scores(model, plant, n: int, mean: float, std: float, within: float) -> dict:
    """``suite_zoo.zoo_scores``'s fields: the ``beyond`` record's free run, before and after."""
    u, y = arrays(plant.beyond)
    start = plant.beyond_start
    y_sim = free_run(model, u, y, n)  # one free run, scored before and after ``start``
    before = rmse(y[n:start, 0], y_sim[: start - n], mean, std)
    after = rmse(y[start:, 0], y_sim[start - n :], mean, std)
    return {
        "within": within,
        "beyond_before": before,
        "beyond_after": after,
        "ratio": after / within if np.isfinite(within) and within > 0 else float("inf"),
        "beyond_start": start,
        "beyond_factor": plant.beyond_factor,
    }


def result_path(out: str, record: str) -> str:
    return os.path.join(out, record.replace(":", "_"), FILE)


def report(out: str) -> str:
    """Markdown: one row per record with a ``sysidentpy_frols.json`` under ``out``."""
    lines = [
        "| record | degree | lags | terms | validation | test | beyond, before | beyond, after "
        "| seconds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for path in sorted(glob.glob(os.path.join(out, "*", FILE))):
        with open(path) as f:
            r = json.load(f)
        unit = f" {r['unit']}" if r["unit"] else ""
        zoo = r.get("zoo") or {}
        beyond = [f"{zoo[k]:.3g}" if k in zoo else "-" for k in ("beyond_before", "beyond_after")]
        lines.append(
            f"| {r['benchmark']} | {r['degree']} | {r['lag']} | {r['n_terms']} | "
            f"{r['validation']:.3g}{unit} | {r['test']:.3g}{unit} | {' | '.join(beyond)} | "
            f"{r['seconds']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        print(report(args.out))
        return 0
    for record in args.records:
        if not is_zoo(record) and not os.path.isdir(os.path.join(args.data_root, record)):
            print(f"== skipping {record}: no folder {os.path.join(args.data_root, record)}",
                  flush=True)  # fmt: skip
            continue
        print(f"== SysIdentPy FROLS {record}", flush=True)
        result = run_one(args, record)
        write_json(result_path(args.out, record), result)
        print(
            f"{record} SysIdentPy FROLS: degree {result['degree']}, lag {result['lag']}, "
            f"{result['n_terms']} terms, test {result['test']:.4g} {result['unit']} (from sample "
            f"{result['n_initial']}), validation {result['validation']:.4g}, "
            f"{result['seconds']:.0f} s, re-simulation differs by "
            f"{result['resimulation_max_abs_diff']}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
