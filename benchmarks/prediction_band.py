"""The k-step prediction's ordering and the band's coverage, on the zoo and the measured records.

For each record and seed S it runs ``sysid.identify(data, restarts=3,
seed=S)`` with the defaults (every class) in a fresh process and judges the
model on the test record with ``sysid.evaluate`` (``n``: the protocol's, else
50; the band at 0.95): the RMSE of the 1- and 10-step predictions and of the
simulation from the first ``n`` measured outputs, the last-sample predictor's
and the ARX reference's (simulation, one step), and the share of the test
samples inside each band; and for every class (its first run alone) the
RMSE of its 1- and 10-step predictions and of its simulation. Each run goes to
``--out/RECORD/BACKEND_seedS.json``; ``--report`` prints the table of
``benchmarks/RESULTS.md`` ("Prediction and band").

Usage::

    python benchmarks/prediction_band.py --backend jax --seeds 0 \\
        --records zoo:duffing zoo:pendulum cascaded_tanks emps
    python benchmarks/prediction_band.py --report

A zoo plant is ``zoo:NAME`` (its default length, data seed 0); a measured
record's folder is read from ``--data-root`` (default ``../shared/data``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results", "prediction_band")
LEVEL = 0.95
CLASSES = ("network", "linear+network", "narx", "loop", "linear")
ZOO = "zoo:"


def load(record: str, data_root: str):
    """The :class:`SysIdData` of ``zoo:NAME`` or of a measured record's folder."""
    from keras_mgu import datasets

    if record.startswith(ZOO):
        return datasets.zoo_plant(record[len(ZOO) :], seed=0).data
    return datasets.load_benchmark(record, os.path.join(data_root, record))


def run_one(record: str, seed: int, data_root: str) -> dict:
    """Identify ``record`` with the defaults and judge it on its test record (module)."""
    import keras

    from keras_mgu import sysid

    data = load(record, data_root)
    start = time.perf_counter()
    found = sysid.identify(data, restarts=3, seed=seed)
    seconds = time.perf_counter() - start
    test, n = data.test, found.resolve_n_initial()
    ev = sysid.evaluate(found, test.u, test.y, n, steps_ahead=10, band=LEVEL)
    one = sysid.rmse(test.y[n:], found.predict(test.u, test.y, 1, n)[n:])
    scale = 1.0 if data.protocol is None else data.protocol.scale
    classes = {}
    for k, run in enumerate(found.runs):
        if run.structure in classes:
            continue
        alone = found.run_alone(k)
        pred = alone.predictions(test.u, test.y, (1, 10), n)
        free = alone.simulate(test.u, test.y[:n])
        classes[run.structure] = [sysid.rmse(test.y[n:], y_hat[n:]) for y_hat in
                                  (pred[1], pred[10], free)]  # fmt: skip
    return {
        "record": record, "seed": seed, "backend": keras.backend.backend(),
        "seconds": seconds, "chosen": found.runs[found.best].structure, "scale": scale,
        "rmse_1": one, "rmse_10": ev.prediction["rmse"], "rmse_free": ev.from_n["rmse"],
        "last_sample": ev.reference["last_sample"], "arx": ev.reference["arx"],
        "coverage": ev.band["coverage"], "level": LEVEL, "classes": classes,
    }  # fmt: skip


def run(args: argparse.Namespace) -> None:
    for record in args.records:
        for seed in args.seeds:
            name = f"{args.backend}_seed{seed}.json"
            path = os.path.join(args.out, record.replace(":", "_"), name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            env = {**os.environ, "KERAS_BACKEND": args.backend}
            code = (
                f"import json, sys; sys.path.insert(0, {HERE!r}); import prediction_band as p; "
                f"print('RESULT ' + json.dumps(p.run_one({record!r}, {seed}, {args.data_root!r})))"
            )
            done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                  text=True)  # fmt: skip
            line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
            if done.returncode or not line:
                print(f"{record} seed {seed}: failed\n{done.stderr[-2000:]}", flush=True)
                continue
            result = json.loads(line[-1][len("RESULT ") :])
            with open(path, "w") as f:
                json.dump(result, f, indent=1)
            print(f"{record} seed {seed}: {summary(result)}", flush=True)


def summary(r: dict) -> str:
    c = r["coverage"]
    return (
        f"{r['chosen']}, RMSE 1-step {r['rmse_1']:.4g}, 10-step {r['rmse_10']:.4g}, "
        f"free {r['rmse_free']:.4g}, last sample {r['last_sample']:.4g}; coverage "
        f"{c['simulation']:.3f} / {c['1']:.3f} / {c['10']:.3f}; {r['seconds']:.0f} s"
    )


def report(args: argparse.Namespace) -> None:
    """The markdown table of every JSON file under ``--out`` (the output's unit)."""
    print("| record | backend | seed | chosen | RMSE 1-step | 10-step | free run | last sample | "
          "ARX free run | ARX 1-step | ordered | coverage free / 1 / 10 |")  # fmt: skip
    print("|---" * 12 + "|")
    for path in sorted(glob.glob(os.path.join(args.out, "*", "*.json"))):
        with open(path) as f:
            r = json.load(f)
        s, arx, c = r["scale"], r["arx"] or {}, r["coverage"]
        ordered = r["rmse_1"] <= 1.05 * r["rmse_10"] and r["rmse_10"] <= 1.05 * r["rmse_free"]
        ordered = "yes" if ordered and r["rmse_1"] < r["last_sample"] else "**no**"
        cells = [r["record"], r["backend"], r["seed"], r["chosen"]]
        cells += [f"{s * r[k]:.4g}" for k in ("rmse_1", "rmse_10", "rmse_free", "last_sample")]
        cells += [f"{s * arx[k]:.4g}" if k in arx else "-" for k in ("simulation", "one_step")]
        cells += [ordered, " / ".join(f"{100 * c[k]:.1f}" for k in ("simulation", "1", "10"))]
        print("| " + " | ".join(str(x) for x in cells) + " |")


def class_report(args: argparse.Namespace) -> None:
    """Per record and class: whether RMSE(1) <= RMSE(10) <= RMSE(simulation), within 5 %."""
    print("\n| record | seed | " + " | ".join(CLASSES) + " |")
    print("|---" * (len(CLASSES) + 2) + "|")
    for path in sorted(glob.glob(os.path.join(args.out, "*", "*.json"))):
        with open(path) as f:
            r = json.load(f)
        if "classes" not in r:
            continue
        cells = []
        for name in CLASSES:
            if name not in r["classes"]:
                cells.append("-")
                continue
            one, ten, free = r["classes"][name]
            ok = one <= 1.05 * ten and ten <= 1.05 * free and one < r["last_sample"]
            cells.append(f"{'yes' if ok else '**no**'} ({one:.3g} / {ten:.3g} / {free:.3g})")
        print(f"| {r['record']} | {r['seed']} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="jax")
    parser.add_argument("--records", nargs="+", default=["zoo:duffing", "cascaded_tanks"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--data-root", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args()
    if args.report:
        report(args)
        class_report(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
