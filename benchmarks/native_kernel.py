"""The native MGU loops alone, and where they beat each backend's own fused loops.

Two measurements, each side by side in one process:

1. ``loop``: the compiled forward and backward loops of :mod:`keras_mgu.native`
   called directly on NumPy arrays (float32, ``T`` steps, batch ``B``), in
   microseconds per time step; the median of ``--repeats`` runs.
2. ``crossover`` (one worker process per backend): the fused kernel of the
   backend, ``keras_mgu.kernels.<backend>.mgu_sequence``, forward and backward
   (the gradient of the summed outputs with respect to inputs and weights),
   once with the native loops (the unit limit lifted) and once with the
   backend's own loops (``KERAS_MGU_NATIVE=0``), alternating, for
   each number of units. The ratios native / own at two batch sizes are what
   ``MAX_STEP_MACS`` in ``keras_mgu/native/<backend>.py`` is set from: the
   native loops run by default where a step's recurrent product,
   ``batch * units**2`` multiply-adds, is small enough for them to be faster.

3. ``threads`` (one worker process per backend): a Keras training step,
   ``train_on_batch`` of ``Input((T, 2)) -> MGU(H, return_sequences=True) ->
   Dense(1)`` on the native loops, with one loop thread
   (``KERAS_MGU_NUM_THREADS=1``) and with as many as the process has CPUs,
   two models with the same weights timed in alternating rounds. It is what
   the per-backend thread defaults (:func:`keras_mgu.native.max_threads`)
   are set from.

Usage::

    python benchmarks/native_kernel.py                 # loop and crossover
    python benchmarks/native_kernel.py --part loop --units 8 --batch 32
    python benchmarks/native_kernel.py --part threads --units 8 64 --steps 1000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKENDS = ("tensorflow", "jax", "torch")


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up (tracing, compilation, first allocation)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def loop_table(units_list: list[int], batch: int, steps: int, repeats: int) -> list[str]:
    """Markdown rows: the native loops alone, microseconds per time step."""
    sys.path.insert(0, ROOT)
    from keras_mgu import native

    rng = np.random.default_rng(0)
    cpus = len(os.sched_getaffinity(0))
    lines = [
        f"Native loops alone, float32, batch {batch}, {steps} steps (median of {repeats}), "
        f"one thread and the default ({cpus} CPUs available):",
        "",
        "| units | threads | forward µs/step | backward µs/step | forward + backward µs/step |",
        "|---:|---:|---:|---:|---:|",
    ]
    for units in units_list:
        xw = rng.standard_normal((steps, batch, 2 * units)).astype("float32")
        u = (rng.standard_normal((units, 2 * units)) / np.sqrt(units)).astype("float32")
        h0 = np.zeros((batch, units), "float32")
        hs, saved = native.forward(xw, h0, u, None)
        d_hs = np.ones_like(hs)
        for setting in ("1", ""):
            os.environ[native.THREADS_ENV_VAR] = setting  # "" is the default
            fwd = _median_ms(lambda a=(xw, h0, u): native.forward(*a, None), repeats)
            bwd = _median_ms(lambda a=(d_hs, None, saved, u): native.backward(*a, None), repeats)
            per = 1000.0 / steps
            threads = native.threads(steps, batch, units)
            lines.append(
                f"| {units} | {threads} | {fwd * per:.2f} | {bwd * per:.2f} "
                f"| {(fwd + bwd) * per:.2f} |"
            )
    os.environ.pop(native.THREADS_ENV_VAR)
    return lines


# ------------------------------------------------------------------ crossover
def _native_loops(on: bool) -> None:
    """Turn the native loops on or off through their environment variable."""
    from keras_mgu import native

    if on:
        os.environ.pop(native.ENV_VAR, None)
    else:
        os.environ[native.ENV_VAR] = "0"


def _gradient_function(backend: str, module, args: list, native: bool) -> Callable[[], object]:
    """A callable running the kernel forward and backward on ``args`` once.

    ``native`` False sets ``KERAS_MGU_NATIVE=0`` (the one switch of the native
    loops); JAX and TensorFlow read it when the function is traced, PyTorch at
    every call.
    """
    _native_loops(native)
    if backend == "jax":
        import jax

        def loss(x, w, u, h0, b):
            return module.mgu_sequence(x, h0, w, u, b, None)[0].sum()

        grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
        return lambda: jax.block_until_ready(grad(*args))
    if backend == "tensorflow":
        import tensorflow as tf

        tensors = [tf.constant(a) for a in args]

        @tf.function
        def step(x, w, u, h0, b):
            with tf.GradientTape() as tape:
                tape.watch([x, w, u])
                loss = tf.reduce_sum(module.mgu_sequence(x, h0, w, u, b, None)[0])
            return tape.gradient(loss, [x, w, u])

        return lambda: [g.numpy() for g in step(*tensors)]
    import torch

    tensors = [torch.tensor(a) for a in args]

    def run():
        _native_loops(native)
        x, w, u = (t.detach().requires_grad_() for t in tensors[:3])
        out = module.mgu_sequence(x, tensors[3], w, u, tensors[4], None)[0]
        return torch.autograd.grad(out.sum(), (x, w, u))

    return run


def crossover_worker(backend: str, units_list: list[int], batch: int, steps: int, repeats: int):
    """One JSON line per size: native and own-loop milliseconds (alternating runs)."""
    sys.path.insert(0, ROOT)
    import importlib

    from keras_mgu import kernels

    module = kernels.backend_module(backend)
    front_end = importlib.import_module(f"keras_mgu.native.{backend}")
    front_end.MAX_STEP_MACS = 1 << 62  # measure past the default limit
    rng = np.random.default_rng(0)
    for units in units_list:
        args = [
            rng.standard_normal((batch, steps, 2)).astype("float32"),
            (0.5 * rng.standard_normal((2, 2 * units))).astype("float32"),
            (rng.standard_normal((units, 2 * units)) / np.sqrt(units)).astype("float32"),
            np.zeros((batch, units), "float32"),
            np.zeros((2 * units,), "float32"),
        ]
        times: dict[bool, list[float]] = {True: [], False: []}
        runs = {}
        for flag in (True, False):
            runs[flag] = _gradient_function(backend, module, args, flag)
            runs[flag]()  # trace and compile with this setting
        for _ in range(repeats):
            for flag in (True, False):
                times[flag].append(_median_ms(runs[flag], 1))
        record = {
            "backend": backend,
            "units": units,
            "native_ms": statistics.median(times[True]),
            "own_ms": statistics.median(times[False]),
        }
        print(json.dumps(record), flush=True)


# -------------------------------------------------------------------- threads
def threads_worker(backend: str, units_list: list[int], batch: int, steps: int, repeats: int):
    """One JSON line per size: Keras training-step milliseconds with one and with all threads."""
    sys.path.insert(0, ROOT)
    import keras

    from keras_mgu import MGU, native

    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, steps, 2)).astype("float32")
    y = rng.standard_normal((batch, steps, 1)).astype("float32")
    cpus = len(os.sched_getaffinity(0))
    settings = {"1": 1, str(cpus): cpus}
    for units in units_list:
        models = {}
        for setting in settings:
            os.environ[native.THREADS_ENV_VAR] = setting
            keras.utils.set_random_seed(0)
            layers = [keras.Input((steps, 2)), MGU(units, return_sequences=True)]
            model = keras.Sequential([*layers, keras.layers.Dense(1)])
            model.compile(keras.optimizers.Adam(1e-3), "mse")
            for _ in range(3):
                model.train_on_batch(x, y)  # traces with this setting (JAX, TensorFlow)
            models[setting] = model
        times: dict[str, list[float]] = {s: [] for s in settings}
        for _ in range(repeats):
            for setting, model in models.items():
                os.environ[native.THREADS_ENV_VAR] = setting  # read per call on PyTorch
                for _ in range(8):
                    start = time.perf_counter()
                    model.train_on_batch(x, y)
                    times[setting].append(1000.0 * (time.perf_counter() - start))
        record = {"backend": backend, "units": units, "kernel": model.layers[0].kernel_in_use}
        record["cpus"] = cpus
        record["one_ms"], record["all_ms"] = (statistics.median(times[s]) for s in settings)
        print(json.dumps(record), flush=True)


def _worker_records(part: str, backend: str, args: list[str]) -> tuple[list[dict], str | None]:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", backend, "--part", part, *args]
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("KERAS_MGU_NUM_THREADS", None)
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        return [], result.stderr.strip().splitlines()[-1]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")], None


def _records(part, units_list, batch, steps, repeats, backends, lines: list[str]):
    """``(backend, record)`` from one worker per backend; a failure adds a row to ``lines``."""
    args = ["--units", *map(str, units_list), "--batch", str(batch), "--steps", str(steps)]
    for backend in backends:
        records, error = _worker_records(part, backend, [*args, "--repeats", str(repeats)])
        if error:
            lines.append(f"| {backend} | failed: {error} | | | |")
        for record in records:
            yield backend, record


def threads_table(units_list, batch, steps, repeats, backends) -> list[str]:
    lines = [
        f"Keras train_on_batch step on the native loops, float32, batch {batch}, {steps} steps, "
        f"median of {repeats} alternating rounds of 8 steps (ms):",
        "",
        "| backend | units | one loop thread | all CPUs | all / one |",
        "|---|---:|---:|---:|---:|",
    ]
    for backend, r in _records("threads", units_list, batch, steps, repeats, backends, lines):
        ratio = r["all_ms"] / r["one_ms"]
        lines.append(
            f"| {backend} | {r['units']} | {r['one_ms']:.2f} | {r['all_ms']:.2f} "
            f"({r['cpus']}) | {ratio:.2f} |"
        )
    return lines


def crossover_table(units_list, batch, steps, repeats, backends) -> list[str]:
    lines = [
        f"Fused kernel forward + backward, float32, batch {batch}, {steps} steps, "
        f"median of {repeats} alternating runs (ms):",
        "",
        "| backend | units | native loops | backend's own loops | native / own |",
        "|---|---:|---:|---:|---:|",
    ]
    for backend, r in _records("crossover", units_list, batch, steps, repeats, backends, lines):
        ratio = r["native_ms"] / r["own_ms"]
        lines.append(
            f"| {backend} | {r['units']} | {r['native_ms']:.2f} | {r['own_ms']:.2f} | {ratio:.2f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", choices=["loop", "crossover", "threads", "both"], default="both",
        help="both: loop and crossover",
    )  # fmt: skip
    parser.add_argument("--units", type=int, nargs="+")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--worker", choices=BACKENDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker = threads_worker if args.part == "threads" else crossover_worker
        worker(args.worker, args.units, args.batch, args.steps, args.repeats)
        return 0
    lines = []
    if args.part in ("loop", "both"):
        units = args.units or [1, 4, 8, 16, 32, 64, 128]
        lines += loop_table(units, args.batch, args.steps or 1000, args.repeats) + [""]
    if args.part in ("crossover", "both"):
        units = args.units or [8, 16, 32, 64, 96, 128]
        lines += crossover_table(units, args.batch, args.steps or 500, args.repeats, args.backends)
    if args.part == "threads":
        units = args.units or [8, 64]
        lines += threads_table(units, args.batch, args.steps or 1000, args.repeats, args.backends)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
