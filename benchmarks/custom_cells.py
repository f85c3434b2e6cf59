"""Training speed of user-written cells: ``FusedRNN`` against ``keras.layers.RNN``.

The cells are those of ``examples/custom_cells.py``: a peephole LSTM and a
GRU (and, with ``--with-mgu``, an MGU) written as ``keras_mgu.FusedCell``
subclasses. Each model is ``Input((T, D)) -> <rnn>(H, return_sequences=True)
-> Dense(1)`` trained with Adam on a mean-squared error; the recurrent layers
compared on every backend are

* ``FusedRNN(cell)``: the fused path (``implementation="auto"``),
* ``RNN(cell)``: the same cell in the plain Keras cell loop,
* the built-in ``keras.layers.LSTM`` (and ``keras_mgu.MGU`` with ``--with-mgu``).

Method: one worker process per backend builds every model, warms each up with
one ``fit`` on two batches (tracing and compilation excluded), then runs
``--repeats`` rounds; in each round every model trains one epoch of
``--batches`` batches, models interleaved so that load changes on the machine
hit all of them alike. A callback waits for each step's loss and records the
time between the ends of consecutive steps; the median of those per-step times
is reported, with ratios taken within the same backend and run.

Usage::

    python benchmarks/custom_cells.py                       # S and M, all backends
    python benchmarks/custom_cells.py --backends torch --shapes S --torch-threads 1

Progress (one JSON record per model) goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

BACKENDS = ("tensorflow", "jax", "torch")
SHAPES = {"S": (32, 1000, 2, 8), "M": (32, 500, 2, 64)}
WARMUP_BATCHES = 2
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cells_module():
    path = os.path.join(ROOT, "examples", "custom_cells.py")
    spec = importlib.util.spec_from_file_location("custom_cells", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _models(with_mgu: bool) -> list[str]:
    models = ["FusedRNN(LSTM)", "RNN(LSTM)", "FusedRNN(GRU)", "RNN(GRU)", "keras LSTM"]
    return models + (["FusedRNN(MGU)", "RNN(MGU)", "keras_mgu MGU"] if with_mgu else [])


def _layer(name: str, units: int, cells):
    import keras

    import keras_mgu

    if name == "keras LSTM":
        return keras.layers.LSTM(units, return_sequences=True)
    if name == "keras_mgu MGU":
        return keras_mgu.MGU(units, return_sequences=True)
    wrapper, cell = name[:-1].split("(")
    cell = cells.CUSTOM_CELLS[cell](units)
    if wrapper == "FusedRNN":
        return keras_mgu.FusedRNN(cell, return_sequences=True)
    return keras.layers.RNN(cell, return_sequences=True)


def _trainer(name: str, shape: tuple, cells):
    """``train(x, y) -> per-step seconds`` (one epoch) for one compiled model."""
    import keras

    batch, steps, features, units = shape
    keras.utils.set_random_seed(0)
    rnn = _layer(name, units, cells)
    model = keras.Sequential([keras.Input((steps, features)), rnn, keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")

    class StepTimer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.last, self.steps = None, []

        def on_train_batch_end(self, batch, logs=None):
            float(keras.ops.convert_to_numpy(logs["loss"]))  # waits for asynchronous backends
            now = time.perf_counter()
            if self.last is not None:
                self.steps.append(now - self.last)
            self.last = now

    timer = StepTimer()

    def train(x, y):
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0, callbacks=[timer])
        return timer.steps

    return train, bool(getattr(rnn, "uses_fused_path", False))


def run_worker(args: argparse.Namespace) -> None:
    import keras

    if args.torch_threads and keras.backend.backend() == "torch":
        import torch

        torch.set_num_threads(args.torch_threads)

    cells = _cells_module()
    for label in args.shapes:
        shape = SHAPES[label]
        rng = np.random.default_rng(0)
        n = max(args.batches, WARMUP_BATCHES) * shape[0]
        x = rng.standard_normal((n, *shape[1:3])).astype("float32")
        y = rng.standard_normal((n, shape[1], 1)).astype("float32")
        trainers, times, fused = {}, {}, {}
        for name in _models(args.with_mgu):
            trainers[name], fused[name] = _trainer(name, shape, cells)
            trainers[name](x[: WARMUP_BATCHES * shape[0]], y[: WARMUP_BATCHES * shape[0]])
            times[name] = []
        for _ in range(args.repeats):
            for name, train in trainers.items():
                times[name] += train(x[: args.batches * shape[0]], y[: args.batches * shape[0]])
        for name in trainers:
            record = {
                "backend": keras.backend.backend(),
                "shape": label,
                "model": name,
                "fused": fused[name],
                "median_ms": 1000.0 * statistics.median(times[name]),
                "min_ms": 1000.0 * min(times[name]),
            }
            print(json.dumps(record), flush=True)


def _table(records: list[dict]) -> str:
    """Markdown tables: per shape, every model with its ratio to the reference it replaces."""
    lines = []
    by_key = {(r["backend"], r["shape"], r["model"]): r for r in records}
    for label in dict.fromkeys(r["shape"] for r in records):
        b, t, d, h = SHAPES[label]
        lines += [f"\n### {label}: batch {b}, steps {t}, features {d}, units {h}\n"]
        lines += ["| backend | model | path | median ms/step | min ms/step | speed-up |"]
        lines += ["|---|---|---|---:|---:|---|"]
        for r in records:
            if r["shape"] != label:
                continue
            speedup = ""
            if r["model"].startswith("FusedRNN("):
                cell = r["model"][len("FusedRNN(") : -1]
                ref = by_key.get((r["backend"], label, f"RNN({cell})"))
                lstm = by_key.get((r["backend"], label, "keras LSTM"))
                if ref:
                    speedup = f"{ref['median_ms'] / r['median_ms']:.2f}x vs RNN({cell})"
                if cell == "LSTM" and lstm:
                    speedup += f", {lstm['median_ms'] / r['median_ms']:.2f}x vs keras LSTM"
            path = "fused" if r["fused"] else "cell loop"
            if r["model"] == "keras LSTM":
                path = "built-in"
            lines.append(
                f"| {r['backend']} | {r['model']} | {path} | {r['median_ms']:.1f} | "
                f"{r['min_ms']:.1f} | {speedup} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--batches", type=int, default=5, help="training steps per fit")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--with-mgu", action="store_true", help="also the MGU cell and kernel")
    parser.add_argument(
        "--torch-threads", type=int, help="torch intra-op threads (default: torch's own)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args)
        return 0
    print(f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, {platform.platform()}")
    print(f"load average at start: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"command: python benchmarks/custom_cells.py {' '.join(argv or sys.argv[1:])}")
    records = []
    for backend in args.backends:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", backend]
        cmd += ["--shapes", *args.shapes, "--batches", str(args.batches)]
        cmd += ["--repeats", str(args.repeats)] + (["--with-mgu"] if args.with_mgu else [])
        env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
        if args.torch_threads:
            cmd += ["--torch-threads", str(args.torch_threads)]
        with subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as worker:
            for line in worker.stdout:
                if line.startswith("{"):
                    records.append(json.loads(line))
                    print(line.strip(), file=sys.stderr, flush=True)  # progress
            errors = worker.stderr.read()
        if worker.returncode:
            print(f"{backend} worker failed:\n{errors[-3000:]}", file=sys.stderr)
    print(_table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
