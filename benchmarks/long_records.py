"""Time and peak memory of MGU on one long record, per backend.

For each record length ``T`` (10k, 100k and 1M steps; ``--quick``: 10k, 30k
and 100k) and each backend, a fresh worker process (this script with
``--worker BACKEND T``) builds::

    Input((T, F)) -> MGU(H, return_sequences=True) -> Dense(1)     # batch 1, F=3, H=16

compiled with Adam and the mean squared error, and measures

* ``train s``: one ``train_on_batch`` (forward, backward through all ``T``
  steps, update), after two untimed warm-up steps (tracing, compilation),
* ``predict s``: one ``predict_on_batch`` (inference), after a warm-up call,
* ``peak MB``: the peak resident memory of the worker during warm-up and the
  timed calls minus its resident memory after imports and model building
  (Linux ``/proc/self/status`` ``VmHWM`` after resetting it with
  ``/proc/self/clear_refs``); it covers the activations kept for the backward
  pass, the optimizer state, and what tracing/compilation allocated.

It prints a markdown table and, per backend, the growth check: the marginal
memory and time per step between consecutive lengths (``(m2 - m1) / (T2 - T1)``)
should stay about constant (ratio of the last to the first interval within
``[1/3, 3]``), i.e. memory and time grow linearly with ``T``. The exit status is
1 if a worker failed or growth looks superlinear.

Run: ``python benchmarks/long_records.py [--quick] [--backends tensorflow jax torch]
[--timeout 600]`` (a worker running longer is reported as timed out).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from memory import PeakMemory  # benchmarks/memory.py, beside this script

LENGTHS = (10_000, 100_000, 1_000_000)
QUICK_LENGTHS = (10_000, 30_000, 100_000)  # three points, so that growth is still checked
FEATURES, UNITS = 3, 16
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def worker(backend: str, steps: int) -> dict:
    """Measure one (backend, length) in this process; returns the figures."""
    os.environ["KERAS_BACKEND"] = backend
    sys.path.insert(0, ROOT)
    import keras
    import numpy as np

    from keras_mgu import MGU

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, steps, FEATURES)).astype("float32")
    y = rng.standard_normal((1, steps, 1)).astype("float32")
    keras.utils.set_random_seed(0)
    layer = MGU(UNITS, return_sequences=True)
    model = keras.Sequential([keras.Input((steps, FEATURES)), layer, keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    memory = PeakMemory()

    for _ in range(2):  # warm-up: tracing, compilation (torch: its JIT's profiling runs)
        model.train_on_batch(x, y)
    start = time.perf_counter()
    loss = model.train_on_batch(x, y)
    float(np.asarray(keras.ops.convert_to_numpy(model.weights[0])).sum())
    train_s = time.perf_counter() - start

    model.predict_on_batch(x)
    start = time.perf_counter()
    np.asarray(model.predict_on_batch(x))
    predict_s = time.perf_counter() - start

    peak_mb = memory.peak_mb()
    return {
        "backend": backend,
        "steps": steps,
        "train_s": train_s,
        "predict_s": predict_s,
        "peak_mb": peak_mb,
        "loss": float(np.asarray(loss)),
        "fused": layer.uses_fused_path,
    }


def run_worker(backend: str, steps: int, timeout: float) -> dict:
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--worker", backend, str(steps)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"backend": backend, "steps": steps, "error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"backend": backend, "steps": steps, "error": proc.stderr.strip()[-800:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def growth(rows: list[dict], key: str) -> float | None:
    """Marginal cost per step of the last interval / that of the first one."""
    rows = [r for r in rows if r.get(key) is not None]
    if len(rows) < 3:
        return None
    first = (rows[1][key] - rows[0][key]) / (rows[1]["steps"] - rows[0]["steps"])
    last = (rows[-1][key] - rows[-2][key]) / (rows[-1]["steps"] - rows[-2]["steps"])
    return last / first if first > 0 else None


def table(results: list[dict]) -> str:
    lines = [
        "| backend | path | steps | train step s | µs/step (train) | predict s | peak MB "
        "| KB/step |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['backend']} | error | {r['steps']:,} | | | | | |")
            continue
        mb = "n/a" if r["peak_mb"] is None else f"{r['peak_mb']:.0f}"
        per_step = "n/a" if r["peak_mb"] is None else f"{r['peak_mb'] * 1024 / r['steps']:.2f}"
        lines.append(
            f"| {r['backend']} | {'fused' if r['fused'] else 'cell loop'} | {r['steps']:,} "
            f"| {r['train_s']:.3f} | {r['train_s'] / r['steps'] * 1e6:.1f} "
            f"| {r['predict_s']:.3f} | {mb} | {per_step} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description="MGU time and memory on long records.")
    parser.add_argument("--quick", action="store_true", help="stop at 100k steps")
    parser.add_argument("--backends", nargs="+", default=["tensorflow", "jax", "torch"])
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds allowed per worker (default 600)"
    )
    parser.add_argument("--worker", nargs=2, metavar=("BACKEND", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]))))
        return 0
    lengths = QUICK_LENGTHS if args.quick else LENGTHS
    results, ok = [], True
    for backend in args.backends:
        for steps in lengths:
            print(f"{backend} T={steps:,} ...", file=sys.stderr, flush=True)
            results.append(run_worker(backend, steps, args.timeout))
    print(f"Batch 1, {FEATURES} features, {UNITS} units, one train_on_batch / predict_on_batch.\n")
    print(table(results))
    print()
    for backend in args.backends:
        rows = [r for r in results if r["backend"] == backend and "error" not in r]
        ok &= len(rows) == len(lengths)
        for key, label in (("peak_mb", "memory"), ("train_s", "train time")):
            ratio = growth(rows, key)
            if ratio is None:
                print(f"- {backend} {label}: growth not checked (needs 3 lengths)")
                continue
            linear = 1 / 3 <= ratio <= 3
            ok &= linear or ratio < 1 / 3  # sublinear is fine
            print(
                f"- {backend} {label}: marginal cost per step, last/first interval = "
                f"{ratio:.2f} ({'linear' if linear else 'NOT linear'})"
            )
    for r in results:
        if "error" in r:
            print(f"\n{r['backend']} T={r['steps']}: {r['error']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
