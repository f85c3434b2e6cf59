"""Training speed of MGU against the built-in GRU and LSTM, side by side.

Every model is ``Input((T, D)) -> <rnn>(H, return_sequences=True) -> Dense(1)``
trained with Adam on a mean-squared error, on a fixed random data set of
``--batches`` batches of ``B`` sequences. The recurrent layers compared are

* ``MGU`` (``implementation="auto"``: the native loops of
  :mod:`keras_mgu.native` where they serve, else the backend's fused kernel,
  else the cell loop; the kernel that ran is reported),
* ``MGU-fused`` (the same with the native loops turned off: the backend's own
  fused kernel, as before the native loops existed),
* ``MGU-cell`` (``implementation="cell"``, the plain Keras cell loop),
* ``keras.layers.GRU`` and ``keras.layers.LSTM``,
* on request (``--models BiMGU BiGRU``), ``keras.layers.Bidirectional`` around
  an MGU (``"auto"``) and around a GRU,

on each Keras backend (TensorFlow, JAX, PyTorch), plus, when PyTorch is
installed, ``torch.nn.GRU`` / ``torch.nn.LSTM`` (``batch_first``) with a
``torch.nn.Linear`` head in a plain PyTorch training loop (backend
``torch.nn``).

Methodology:

* Each backend runs in its own worker process (this script with
  ``--worker BACKEND``), which prints one JSON line per measurement. By
  default there is one worker per (backend, shape, model), so that the peak
  memory of each model can be measured; ``--quick`` runs one worker per
  backend instead and reports no memory.
* Warm-up: one ``fit`` on two batches first, so that tracing and compilation
  are excluded from the timings.
* Timing: ``fit`` over all ``--batches`` batches (one epoch), repeated
  ``--repeats`` times; a callback waits for each step's loss and records the
  time between the ends of consecutive steps, so the per-``fit`` start-up
  (building the data iterator, callbacks) is not counted as training time. The
  median and the minimum of these per-step times are reported. The PyTorch
  loop times each iteration the same way (its first one in each epoch left
  out, as ``fit``'s first step is).
* Peak memory: the highest resident set size of the worker during warm-up and
  timing, minus its resident set size after imports and model building (the
  kernel's peak counter is reset at that point). It therefore covers the
  optimizer state, activations kept for the backward pass, and whatever
  tracing/compilation allocated. Linux only.
* Rounds: with ``--rounds N`` every worker runs N times, rounds alternating
  (all backends, then all again), and each model's figure is the median of
  its rounds' medians; the minimum is over all rounds. Backends run at
  different times, so a comparison across backends is exposed to the
  machine's slow spells; several rounds spread each backend over the run.
* Ratios relate each median to the same backend's Keras GRU (``torch.nn`` to
  ``torch.nn.GRU``) and to the fastest built-in (every GRU/LSTM row of every
  backend, ``torch.nn`` included) of the same shape. Ratios from one run on
  one machine are the meaningful figures; absolute times only mean something
  together with the machine description printed with them.
* Thread pools are left at the libraries' defaults and recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from memory import PeakMemory  # benchmarks/memory.py, beside this script

KERAS_BACKENDS = ("tensorflow", "jax", "torch")
TORCH_NN = "torch.nn"
KERAS_MODELS = ("MGU", "MGU-fused", "MGU-cell", "GRU", "LSTM")
TORCH_NN_MODELS = ("GRU", "LSTM")
BUILTIN_MODELS = ("GRU", "LSTM")
#: Run only when asked for with ``--models``.
BIDIRECTIONAL_MODELS = ("BiMGU", "BiGRU")
MODEL_CHOICES = KERAS_MODELS + BIDIRECTIONAL_MODELS
DEFAULT_SHAPES = {
    "S": (32, 1000, 2, 8),
    "M": (32, 500, 2, 64),
    "L": (32, 200, 2, 256),
}
QUICK_SHAPES = ("S", "M")
WARMUP_BATCHES = 2
BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch", TORCH_NN: "torch"}

#: The environment variable that turns keras-mgu's native loops off (both checkouts read it).
NATIVE_ENV_VAR = "KERAS_MGU_NATIVE"
#: Labels of the two checkouts compared with ``--compare-checkout``.
BEFORE, AFTER = "before", "after"

Shape = tuple[int, int, int, int]
#: ``train(x, y)``: one epoch over ``x, y``, returning once the weights are updated.
Trainer = Callable[[np.ndarray, np.ndarray], list[float]]


def _dataset(shape: Shape, batches: int) -> tuple[np.ndarray, np.ndarray]:
    """Fixed random inputs ``(batches*B, T, D)`` and targets ``(batches*B, T, 1)``."""
    b, t, d, _ = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batches * b, t, d)).astype("float32")
    y = rng.standard_normal((batches * b, t, 1)).astype("float32")
    return x, y


def _keras_rnn(name: str, units: int) -> Any:
    import keras

    if name in ("MGU", "MGU-fused"):
        from keras_mgu import MGU

        return MGU(units, return_sequences=True)  # MGU-fused: see _native_loops_off
    if name == "MGU-cell":
        from keras_mgu import MGU

        return MGU(units, return_sequences=True, implementation="cell")
    if name == "GRU":
        return keras.layers.GRU(units, return_sequences=True)
    if name == "LSTM":
        return keras.layers.LSTM(units, return_sequences=True)
    if name in BIDIRECTIONAL_MODELS:
        return keras.layers.Bidirectional(_keras_rnn(name[2:], units))
    raise ValueError(f"Unknown Keras model {name!r}; expected one of {MODEL_CHOICES}.")


def _keras_trainer(name: str, shape: Shape) -> tuple[Trainer, dict]:
    """A compiled Keras model as ``train(x, y) -> step seconds`` (one epoch) and facts about it."""
    import keras

    _, t, d, h = shape
    keras.utils.set_random_seed(0)
    rnn = _keras_rnn(name, h)
    model = keras.Sequential([keras.Input((t, d)), rnn, keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    batch = shape[0]

    class StepTimer(keras.callbacks.Callback):
        """Seconds between the ends of consecutive training steps, each waited on."""

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.last, self.steps = None, []

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            float(keras.ops.convert_to_numpy((logs or {})["loss"]))  # waits for async backends
            now = time.perf_counter()
            if self.last is not None:
                self.steps.append(now - self.last)
            self.last = now

    timer = StepTimer()

    def train(x: np.ndarray, y: np.ndarray) -> list[float]:
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0, callbacks=[timer])
        return timer.steps

    layer = getattr(rnn, "forward_layer", rnn)  # a Bidirectional's layers run alike
    facts = {
        "fused": bool(getattr(layer, "uses_fused_path", False)) if "MGU" in name else None,
        "kernel": getattr(layer, "kernel_in_use", None) if "MGU" in name else None,
    }
    return train, facts


def _torch_trainer(name: str, shape: Shape) -> tuple[Trainer, dict]:
    """A plain PyTorch ``torch.nn`` RNN + Linear trained with Adam on MSE, one epoch per call."""
    import torch

    _, _, d, h = shape
    torch.manual_seed(0)
    if name not in TORCH_NN_MODELS:
        raise ValueError(f"Unknown torch.nn model {name!r}; expected one of {TORCH_NN_MODELS}.")
    rnn = getattr(torch.nn, name)(d, h, batch_first=True)
    head = torch.nn.Linear(h, 1)
    params = list(rnn.parameters()) + list(head.parameters())
    optimizer = torch.optim.Adam(params, lr=1e-3)
    batch = shape[0]

    def train(x: np.ndarray, y: np.ndarray) -> list[float]:
        xs, ys = torch.from_numpy(x), torch.from_numpy(y)
        steps = []
        for start in range(0, len(xs), batch):
            began = time.perf_counter()
            optimizer.zero_grad()
            pred = head(rnn(xs[start : start + batch])[0])
            loss = torch.nn.functional.mse_loss(pred, ys[start : start + batch])
            loss.backward()
            optimizer.step()
            loss.item()
            steps.append(time.perf_counter() - began)
        return steps[1:]

    return train, {"fused": None}


# --------------------------------------------------------------------------- worker: timing
def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


@contextlib.contextmanager
def _native_loops_off(off: bool) -> Iterator[None]:
    """With ``off``, the native loops turned off by ``KERAS_MGU_NATIVE=0`` (read at every call)."""
    saved = os.environ.get(NATIVE_ENV_VAR)
    if off:
        os.environ[NATIVE_ENV_VAR] = "0"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(NATIVE_ENV_VAR, None)
        else:
            os.environ[NATIVE_ENV_VAR] = saved


def _measure(
    backend: str, name: str, shape: Shape, repeats: int, batches: int, memory: bool
) -> dict:
    """Build, warm up and time one model; returns its result record."""
    with _native_loops_off(name == "MGU-fused"):
        return _measure_model(backend, name, shape, repeats, batches, memory)


def _measure_model(
    backend: str, name: str, shape: Shape, repeats: int, batches: int, memory: bool
) -> dict:
    make = _torch_trainer if backend == TORCH_NN else _keras_trainer
    train, facts = make(name, shape)
    x, y = _dataset(shape, max(batches, WARMUP_BATCHES))
    tracker = PeakMemory() if memory else None
    warm, timed = WARMUP_BATCHES * shape[0], batches * shape[0]
    start = time.perf_counter()
    train(x[:warm], y[:warm])
    warmup_s = time.perf_counter() - start
    step_ms = []
    for _ in range(repeats):
        step_ms += [1000.0 * seconds for seconds in train(x[:timed], y[:timed])]
    return {
        "kind": "result",
        "backend": backend,
        "model": name,
        "shape": list(shape),
        "median_ms": statistics.median(step_ms),
        "min_ms": min(step_ms),
        "step_ms": step_ms,
        "warmup_s": warmup_s,
        "peak_mb": tracker.peak_mb() if tracker else None,
        **facts,
    }


def _thread_info(backend: str) -> dict:
    """Thread-pool settings of the backend (left at their defaults)."""
    info: dict[str, Any] = {}
    if backend in ("torch", TORCH_NN):
        import torch

        info["torch_num_threads"] = torch.get_num_threads()
        info["torch_num_interop_threads"] = torch.get_num_interop_threads()
    elif backend == "tensorflow":
        import tensorflow as tf

        info["tf_intra_op_threads"] = tf.config.threading.get_intra_op_parallelism_threads()
        info["tf_inter_op_threads"] = tf.config.threading.get_inter_op_parallelism_threads()
    elif backend == "jax":
        import jax

        info["jax_devices"] = [str(dev) for dev in jax.devices()]
    info["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "")
    info["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "")
    return info


def run_worker(args: argparse.Namespace) -> int:
    """Measure every (shape, model) given on the command line in this process."""
    backend = args.worker
    if backend != TORCH_NN:
        import keras

        if keras.backend.backend() != backend:
            raise RuntimeError(
                f"worker for {backend!r} runs with Keras backend {keras.backend.backend()!r}; "
                "set KERAS_BACKEND"
            )
    _emit({"kind": "info", "backend": backend, "threads": _thread_info(backend)})
    for shape in args.shapes:
        for name in args.models:
            _emit({"kind": "start", "backend": backend, "model": name, "shape": list(shape)})
            try:
                record = _measure(backend, name, shape, args.repeats, args.batches, args.memory)
            except Exception as err:  # noqa: BLE001 - reported to the parent, run continues
                record = {
                    "kind": "error",
                    "backend": backend,
                    "model": name,
                    "shape": list(shape),
                    "error": f"{type(err).__name__}: {err}",
                }
            _emit(record)
    return 0


# --------------------------------------------------------------------------- parent: jobs
@dataclass
class Job:
    """One worker process: a backend, the shapes and models it measures."""

    backend: str
    shapes: list[Shape]
    models: list[str]
    #: ``(label, path)`` of another checkout whose ``keras_mgu`` the worker imports, or None.
    checkout: tuple[str, str] | None = None


def _installed(backend: str) -> bool:
    return importlib.util.find_spec(BACKEND_MODULES[backend]) is not None


def _models_for(backend: str, wanted: list[str] | None) -> list[str]:
    if backend == TORCH_NN:
        return [m for m in TORCH_NN_MODELS if wanted is None or m in wanted]
    return [m for m in MODEL_CHOICES if (m in wanted if wanted else m in KERAS_MODELS)]


def plan_jobs(
    backends: list[str], shapes: list[Shape], models: list[str] | None, per_model: bool
) -> list[Job]:
    """Workers to run, in order: shape-major when one process per model, else one per backend."""
    if not per_model:
        return [
            Job(b, list(shapes), _models_for(b, models)) for b in backends if _models_for(b, models)
        ]
    return [
        Job(b, [shape], [m]) for shape in shapes for b in backends for m in _models_for(b, models)
    ]


def _worker_command(job: Job, args: argparse.Namespace, memory: bool) -> list[str]:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", job.backend]
    cmd += ["--shapes", *(",".join(map(str, s)) for s in job.shapes)]
    cmd += ["--models", *job.models, "--repeats", str(args.repeats)]
    cmd += ["--batches", str(args.batches)]
    return cmd + (["--memory"] if memory else [])


def _worker_env(backend: str, checkout: str | None = None) -> dict[str, str]:
    """The worker's environment; ``checkout`` (a repository root) goes first on its path."""
    env = dict(os.environ)
    env["KERAS_BACKEND"] = "torch" if backend == TORCH_NN else backend
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = (checkout, root, env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def _label(record: dict) -> str:
    shape = ",".join(map(str, record["shape"]))
    checkout = f" [{record['checkout']}]" if record.get("checkout") else ""
    return f"{record['backend']} ({shape}) {record['model']}{checkout}"


class Progress:
    """Progress lines on stderr: elapsed time, measurement count, what runs."""

    def __init__(self, total: int) -> None:
        self.t0 = time.perf_counter()
        self.total = total
        self.done = 0

    def log(self, message: str) -> None:
        elapsed = time.perf_counter() - self.t0
        print(f"[{elapsed:7.1f} s {self.done}/{self.total}] {message}", file=sys.stderr, flush=True)

    def record(self, record: dict) -> None:
        kind = record["kind"]
        if kind == "start":
            self.log(f"{_label(record)} ...")
            return
        if kind not in ("result", "error"):
            return
        self.done += 1
        if kind == "error":
            self.log(f"{_label(record)} FAILED: {record['error']}")
            return
        path = {True: " [fused]", False: " [cell loop]", None: ""}[record.get("fused")]
        mem = f", peak +{record['peak_mb']:.0f} MB" if record["peak_mb"] is not None else ""
        self.log(
            f"{_label(record)}{path}: median {record['median_ms']:.1f} ms/step{mem} "
            f"(warm-up {record['warmup_s']:.1f} s)"
        )


def _parse_line(line: str) -> dict | None:
    """The worker's JSON record on ``line``, or None for any other output."""
    if not line.startswith("{"):
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and "kind" in record else None


def run_job(job: Job, args: argparse.Namespace, memory: bool, progress: Progress) -> list[dict]:
    """Run one worker to its end; its JSON records, plus a crash record if it failed."""
    records = []
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen(
            _worker_command(job, args, memory),
            stdout=subprocess.PIPE,
            stderr=errors,
            env=_worker_env(job.backend, job.checkout and job.checkout[1]),
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            record = _parse_line(line)
            if record is not None and job.checkout:
                record["checkout"] = job.checkout[0]
            if record is not None:
                progress.record(record)
                records.append(record)
        if proc.wait() != 0:
            errors.seek(0)
            tail = errors.read()[-2000:]
            progress.log(f"worker {job.backend} exited with status {proc.returncode}:\n{tail}")
            records.append({"kind": "crash", "backend": job.backend, "error": tail})
    return [r for r in records if r["kind"] != "start"]


# --------------------------------------------------------------------------- parent: report
def merge_rounds(records: list[dict]) -> list[dict]:
    """One result per (backend, shape, model) over the rounds, after the other records.

    The merged median is the median of the rounds' medians (with several
    rounds, a slow spell of the machine during one round moves it little), the
    minimum the smallest step of any round; ``round_medians_ms`` keeps each
    round's median. A model measured in one round keeps its record as it is.
    """
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        if r["kind"] == "result":
            key = (r["backend"], tuple(r["shape"]), r["model"], r.get("checkout"))
            groups.setdefault(key, []).append(r)
    others = [r for r in records if r["kind"] != "result"]
    return others + [_merged(rounds) for rounds in groups.values()]


def _merged(rounds: list[dict]) -> dict:
    """The record of one model over its ``rounds`` (see :func:`merge_rounds`)."""
    if len(rounds) == 1:
        return rounds[0]
    medians = [r["median_ms"] for r in rounds]
    peaks = [r["peak_mb"] for r in rounds if r.get("peak_mb") is not None]
    return {
        **rounds[0],
        "median_ms": statistics.median(medians),
        "min_ms": min(r["min_ms"] for r in rounds),
        "round_medians_ms": medians,
        "peak_mb": max(peaks) if peaks else None,
    }


#: Libraries whose versions :func:`machine_description` records by default.
VERSIONED = ("keras", "tensorflow", "jax", "jaxlib", "torch", "numpy")


def machine_description(dists: tuple[str, ...] = VERSIONED) -> dict:
    """Processor, core count, the versions of ``dists``, date and load of this machine."""
    versions = {}
    for dist in dists:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "processor": platform.processor() or _cpu_model_name(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "versions": versions,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def _cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _model_label(record: dict) -> str:
    if record["backend"] == TORCH_NN:
        return f"torch.nn.{record['model']}"
    if record["model"] == "MGU":
        return f"MGU (auto: {record.get('kernel') or ('fused' if record.get('fused') else 'cell')})"
    if record["model"] == "MGU-fused":
        return "MGU (backend's fused kernel)"
    if record["model"] == "MGU-cell":
        return "MGU (cell)"
    if record["model"] == "BiMGU":
        return f"Bidirectional MGU (auto: {'fused' if record.get('fused') else 'cell loop'})"
    if record["model"] == "BiGRU":
        return "Bidirectional GRU"
    return record["model"]


def _ratio(value: float, reference: float | None) -> str:
    return f"{value / reference:.2f}" if reference else "n/a"


def _find(rows: list[dict], backend: str, model: str) -> dict | None:
    return next((r for r in rows if r["backend"] == backend and r["model"] == model), None)


def shape_table(rows: list[dict], shape: Shape) -> list[str]:
    """Markdown lines for one shape's results."""
    b, t, d, h = shape
    builtins = [r["median_ms"] for r in rows if r["model"] in BUILTIN_MODELS]
    fastest = min(builtins) if builtins else None
    lines = [
        f"### batch {b}, steps {t}, features {d}, units {h}",
        "",
        "| backend | model | median ms/step | min ms/step | peak memory MB "
        "| × GRU (same backend) | × fastest built-in |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        gru = _find(rows, r["backend"], "GRU")
        mem = f"{r['peak_mb']:.0f}" if r.get("peak_mb") is not None else "n/a"
        lines.append(
            f"| {r['backend']} | {_model_label(r)} | {r['median_ms']:.1f} | {r['min_ms']:.1f} "
            f"| {mem} | {_ratio(r['median_ms'], gru and gru['median_ms'])} "
            f"| {_ratio(r['median_ms'], fastest)} |"
        )
    if any(r.get("round_medians_ms") for r in rows):
        lines += ["", "Each round's median, ms/step:", ""]
        for r in rows:
            rounds = " / ".join(f"{m:.1f}" for m in r.get("round_medians_ms") or [r["median_ms"]])
            lines.append(f"- {r['backend']} {_model_label(r)}: {rounds}")
    tf_mgu, jax_mgu = _find(rows, "tensorflow", "MGU"), _find(rows, "jax", "MGU")
    if tf_mgu and jax_mgu:
        ratio = tf_mgu["median_ms"] / jax_mgu["median_ms"]
        lines += ["", f"TF MGU / JAX MGU (auto, median): {ratio:.2f}"]
    for backend in KERAS_BACKENDS:
        bi_mgu, bi_gru = _find(rows, backend, "BiMGU"), _find(rows, backend, "BiGRU")
        if bi_mgu and bi_gru:
            ratio = bi_mgu["median_ms"] / bi_gru["median_ms"]
            lines += ["", f"{backend}: Bidirectional MGU / Bidirectional GRU (median): {ratio:.2f}"]
    return lines + [""]


def comparison_table(results: list[dict]) -> list[str]:
    """Markdown lines: each model's median ms/step after / before (``--compare-checkout``).

    ``results`` are the records merged over the rounds (:func:`merge_rounds`);
    a ratio is that of the medians over the rounds, and each round's own ratio
    is listed beside it.
    """
    rounds: dict[tuple, dict[str, list[float]]] = {}
    for r in results:
        key = (r["backend"], tuple(r["shape"]), r["model"])
        medians = r.get("round_medians_ms") or [r["median_ms"]]
        rounds.setdefault(key, {BEFORE: [], AFTER: []})[r["checkout"]] += medians
    lines = [
        "### after / before (median ms/step; < 1 is faster after)",
        "",
        "| backend | shape B,T,D,H | model | before ms | after ms | after/before "
        "| each round's after/before |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for (backend, shape, model), runs in rounds.items():
        before, after = runs[BEFORE], runs[AFTER]
        if not before or not after:
            continue
        each = " / ".join(f"{a / b:.2f}" for a, b in zip(after, before))
        b_med, a_med = statistics.median(before), statistics.median(after)
        lines.append(
            f"| {backend} | {','.join(map(str, shape))} | {model} | {b_med:.2f} | {a_med:.2f} "
            f"| {a_med / b_med:.2f} | {each} |"
        )
    return lines + [""]


def _failures(records: list[dict]) -> list[str]:
    lines = []
    for r in records:
        if r["kind"] == "error":
            lines.append(f"- {_label(r)} failed: {r['error']}")
        elif r["kind"] == "crash":
            last = (r["error"].strip().splitlines() or ["no error output"])[-1]
            lines.append(f"- worker {r['backend']} crashed: {last}")
    return lines


def markdown_report(records: list[dict], shapes: list[Shape]) -> str:
    """All tables (one per shape), then the failures, as markdown."""
    results = [r for r in records if r["kind"] == "result"]
    lines: list[str] = []
    if any(r.get("checkout") for r in results):
        return "\n".join(comparison_table(results) + _failures(records))
    for shape in shapes:
        rows = [r for r in results if tuple(r["shape"]) == tuple(shape)]
        if rows:
            lines += shape_table(rows, shape)
    failures = _failures(records)
    if failures:
        lines += ["Failures:", "", *failures, ""]
    return "\n".join(lines)


def machine_header(machine: dict, threads: dict, settings: dict) -> str:
    """Markdown description of the machine, versions, threads and run settings."""
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items() if v)
    load = machine["load_average"]
    lines = [
        "# Training speed: MGU vs GRU / LSTM",
        "",
        f"- Machine: {machine['processor']} ({machine['machine']}), "
        f"{machine['cpu_count']} logical CPUs, {machine['platform']}",
        f"- Date: {machine['date']}; load average at start: "
        + (", ".join(f"{x:.2f}" for x in load) if load else "n/a"),
        f"- Python {machine['python']}; {versions}",
        f"- Threads (library defaults): {json.dumps(threads)}",
        f"- Settings: {json.dumps(settings)}",
        "- Method: see benchmarks/README.md (median of per-step times of `fit` over "
        "a fixed random data set, after a warm-up fit; with several rounds, the median of "
        "the rounds' medians).",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- command line
def parse_shape(text: str) -> Shape:
    """``"B,T,D,H"`` or a preset name (S, M, L) as a 4-tuple of positive ints."""
    if text.upper() in DEFAULT_SHAPES:
        return DEFAULT_SHAPES[text.upper()]
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4 or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"a shape is 'batch,steps,features,units' (four positive integers) or one of "
            f"{sorted(DEFAULT_SHAPES)}; received {text!r}"
        )
    return values  # type: ignore[return-value]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", type=parse_shape, help="B,T,D,H or S/M/L")
    parser.add_argument(
        "--backends", nargs="+", choices=[*KERAS_BACKENDS, TORCH_NN], help="default: installed"
    )
    parser.add_argument(
        "--models", nargs="+", choices=MODEL_CHOICES, help="default: all but BiMGU, BiGRU"
    )
    parser.add_argument("--repeats", type=int, help="timed fits per model (default 5, quick 2)")
    parser.add_argument("--batches", type=int, help="batches per timed fit (default 10, quick 3)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="shapes S and M, 2 repeats of 3 batches, one worker per backend, no memory",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every worker this many times, rounds alternating; a model's figure is the "
        "median of its rounds' medians (default 1)",
    )
    parser.add_argument(
        "--compare-checkout",
        metavar="PATH",
        help="also run every worker with PATH (another checkout's root) first on its "
        "PYTHONPATH, labelled 'before', alternating with this checkout ('after') in every "
        "round, and report the after/before ratios",
    )
    parser.add_argument("--json", metavar="FILE", help="write all results and the machine as JSON")
    parser.add_argument("--markdown", metavar="FILE", help="write the report as markdown")
    parser.add_argument("--worker", choices=[*KERAS_BACKENDS, TORCH_NN], help=argparse.SUPPRESS)
    parser.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    return parser


def _resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Fill in the defaults that depend on ``--quick`` and check the counts."""
    if args.shapes is None:
        names = QUICK_SHAPES if args.quick else tuple(DEFAULT_SHAPES)
        args.shapes = [DEFAULT_SHAPES[n] for n in names]
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    if args.batches is None:
        args.batches = 3 if args.quick else 10
    if args.repeats < 1 or args.batches < 1 or args.rounds < 1:
        raise SystemExit("--repeats, --batches and --rounds must be positive integers")
    if args.worker and args.models is None:
        args.models = list(TORCH_NN_MODELS if args.worker == TORCH_NN else KERAS_MODELS)
    return args


def _round_jobs(jobs: list[Job], compare_checkout: str | None, round_index: int) -> list[Job]:
    """The workers of one round: each job, and with a checkout to compare, it twice.

    The two checkouts of a job run back to back, "before" first in even rounds
    and "after" first in odd ones, so that a slow spell of the machine falls on
    both alike.
    """
    if not compare_checkout:
        return jobs
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pair = [(BEFORE, os.path.abspath(compare_checkout)), (AFTER, root)]
    if round_index % 2:
        pair.reverse()
    return [dataclasses.replace(job, checkout=c) for job in jobs for c in pair]


def run_parent(args: argparse.Namespace) -> int:
    """Run every worker, then print (and optionally write) the tables."""
    machine = machine_description()
    wanted = args.backends or [*KERAS_BACKENDS, TORCH_NN]
    backends = [b for b in wanted if _installed(b)]
    per_model = not args.quick
    jobs = plan_jobs(backends, args.shapes, args.models, per_model)
    copies = 2 if args.compare_checkout else 1
    progress = Progress(
        copies * args.rounds * sum(len(job.shapes) * len(job.models) for job in jobs)
    )
    for missing in sorted(set(wanted) - set(backends)):
        progress.log(f"skipping {missing}: not installed")
    records: list[dict] = []
    for round_index in range(args.rounds):
        for job in _round_jobs(jobs, args.compare_checkout, round_index):
            run = run_job(job, args, memory=per_model, progress=progress)
            records += [{**r, "round": round_index} for r in run]
    threads = {r["backend"]: r["threads"] for r in records if r["kind"] == "info"}
    settings = {
        "repeats": args.repeats,
        "batches_per_fit": args.batches,
        "warmup_batches": WARMUP_BATCHES,
        "rounds": args.rounds,
        "process_per": "model" if per_model else "backend",
        "memory": per_model,
    }
    report = markdown_report(merge_rounds(records), args.shapes)
    print(report)
    progress.log("done")
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(machine_header(machine, threads, settings) + "\n" + report)
    if args.json:
        with open(args.json, "w") as out:
            payload = {"machine": machine, "threads": threads, "settings": settings}
            json.dump({**payload, "records": records}, out, indent=2)
    return 1 if _failures(records) else 0


def main(argv: list[str] | None = None) -> int:
    args = _resolve(build_parser().parse_args(argv))
    return run_worker(args) if args.worker else run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
