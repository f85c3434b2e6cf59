"""The identification recipe on a long, fast-sampled, two-input two-output record.

Generates two simulated cascaded-tanks plants side by side (inputs ``u1, u2``,
outputs ``y1, y2``; random-step excitation, sample time 1 s) with
``--samples`` estimation samples and a 20,000-sample test record, writes them
as CSV files, and runs ``examples/system_identification.py`` on them through
``--train-csv/--test-csv`` with its default settings, reporting wall time,
peak memory and the test RMSE. The recipe trains on random 1024-sample
windows (batch 16) of records this long, so memory grows with the record
itself, not with the number of windows.

Usage::

    python benchmarks/sysid_long_record.py --backend jax --samples 120000 --seed 0
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from memory import PeakMemory  # noqa: E402


def two_tank_record(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(u, y)``, each ``(n, 2)``: two simulated tank rigs with step inputs."""
    from keras_mgu import datasets

    us, ys = [], []
    for k in range(2):
        data = datasets.simulate_cascaded_tanks(
            n_samples=n, ts=1.0, excitation="steps", seed=10 * seed + k, hold_samples=(40, 400)
        )
        us.append(data.estimation.u[:, 0])
        ys.append(data.estimation.y[:, 0])
    return np.stack(us, 1), np.stack(ys, 1)


def write_csv(path: str, u: np.ndarray, y: np.ndarray) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["u1", "u2", "y1", "y2"])
        writer.writerows(np.concatenate([u, y], axis=1).round(6).tolist())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"), default="jax")
    parser.add_argument("--samples", type=int, default=120_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--restarts", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ["KERAS_BACKEND"] = args.backend
    # The simulator keeps the first 80 % of its samples as estimation record.
    u, y = two_tank_record(int(args.samples / 0.8) + 20_000, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        train, test = os.path.join(tmp, "train.csv"), os.path.join(tmp, "test.csv")
        write_csv(train, u[:-20_000], y[:-20_000])
        write_csv(test, u[-20_000:], y[-20_000:])
        spec = importlib.util.spec_from_file_location(
            "system_identification",
            os.path.join(HERE, "..", "examples", "system_identification.py"),
        )
        example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(example)
        memory, start = PeakMemory(), time.perf_counter()
        example.main([
            "--train-csv", train, "--test-csv", test, "--inputs", "u1", "u2",
            "--outputs", "y1", "y2", "--seed", str(args.seed),
            "--restarts", str(args.restarts), "--out", os.path.join(tmp, "out"),
        ])  # fmt: skip
        seconds = time.perf_counter() - start
    print(f"\nrecord: {len(u) - 20_000} estimation+validation samples, 20000 test samples, "
          f"2 inputs, 2 outputs; backend {args.backend}")  # fmt: skip
    print(f"wall time {seconds:.0f} s, peak memory increase {memory.peak_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
