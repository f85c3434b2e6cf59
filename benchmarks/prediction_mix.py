"""The k-step prediction with and without its mix with the ARX reference's, per record and seed.

Identifies each record (the defaults, ``sysid.identify(data, seed=S)``) and
prints, on its test record from its first ``n`` measured samples (the
protocol's, else 50), the RMSE of the 1- and 10-step predictions with the
mix (what ``identify`` returns, ``found.prediction_mix``) and without it
(the model's prediction alone), of the simulation, of the last-sample
predictor and of the ARX reference's one-step prediction, in the record's
unit. The targets: ``RMSE(1) < last sample`` and ``RMSE(1) <= RMSE(10) <=
RMSE(free run)``. Records are named as ``benchmarks/sysid_suite.py`` names
them (``emps``, ``zoo:duffing``, ...):

    KERAS_BACKEND=jax python benchmarks/prediction_mix.py --benchmarks emps zoo:duffing --seeds 0 1
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _suite():
    path = os.path.join(HERE, "sysid_suite.py")
    spec = importlib.util.spec_from_file_location("sysid_suite", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["sysid_suite"] = module
    spec.loader.exec_module(module)
    return module


def rmse(y: np.ndarray, y_hat: np.ndarray, n: int) -> float:
    return float(np.sqrt(np.mean((y[n:] - y_hat[n:]) ** 2)))


def run(suite, args: argparse.Namespace, benchmark: str, seed: int) -> dict:
    """One identification of ``benchmark``; its prediction figures (the record's unit)."""
    from keras_mgu import sysid

    data, _ = suite.load_data(args, benchmark)
    _, scale = suite.unit_and_scale(data)
    start = time.perf_counter()
    found = sysid.identify(data, seed=seed)
    seconds = time.perf_counter() - start
    test, n = data.test, found.resolve_n_initial()
    u, y = test.u, test.y
    row = {"benchmark": benchmark, "seed": seed, "class": found.runs[found.best].structure,
           "seconds": seconds}  # fmt: skip
    alone = dataclasses.replace(found, prediction_mix=None)
    for name, model in (("mixed", found), ("alone", alone)):
        p = model.predictions(u, y, (1, 10), n)
        row[f"{name}_1"], row[f"{name}_10"] = (scale * rmse(y, p[k], n) for k in (1, 10))
    row["free"] = scale * rmse(y, found.simulate(u, y[:n]), n)
    row["last"] = scale * rmse(y, np.concatenate([y[:1], y[:-1]]), n)
    arx = found.reference()
    if arx is not None:
        row["arx_1"] = scale * rmse(y, arx.predict(u, y, 1, n), n)
    return row


def main(argv: list[str] | None = None) -> None:
    suite = _suite()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmarks", nargs="+", type=suite.benchmark_name, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--data-root", default=suite.DEFAULT_ROOT)
    args = parser.parse_args(argv)
    print("| record | seed | class | 1-step mixed | 10-step mixed | free run | last sample | "
          "1-step alone | 10-step alone | ARX 1-step | targets met |")  # fmt: skip
    print("|---" * 11 + "|")
    for benchmark in args.benchmarks:
        for seed in args.seeds:
            r = run(suite, args, benchmark, seed)
            met = r["mixed_1"] < r["last"] and r["mixed_1"] <= r["mixed_10"] <= r["free"]
            print(f"| {benchmark} | {seed} | {r['class']} | {r['mixed_1']:.4g} | "
                  f"{r['mixed_10']:.4g} | {r['free']:.4g} | {r['last']:.4g} | "
                  f"{r['alone_1']:.4g} | {r['alone_10']:.4g} | {r.get('arx_1', float('nan')):.4g} "
                  f"| {'yes' if met else 'no'} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
