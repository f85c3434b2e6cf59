"""Local worker processes of a distributed search (:func:`~keras_mgu.sysid.tuning.search.tune`).

``tune(..., workers=N)`` holds KerasTuner's oracle (the *chief*) in the
calling process and starts ``N`` worker processes on this machine
(:func:`run_local_workers`), each running trials until the oracle has none
left. Each worker gets an equal share of the CPUs for its threads
(:func:`worker_threads`), so that they do not contend for the same cores,
and on JAX one persistent compilation cache (:func:`worker_compile_cache`),
so that a model one trial compiled is not compiled again by the next trial
with the same shapes.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["run_local_workers", "worker_compile_cache", "worker_threads"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_threads(workers: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The thread settings of one of ``workers`` local worker processes: its share of the CPUs.

    Each framework reads them at start: the native loops
    (``KERAS_MGU_NUM_THREADS``), PyTorch (``OMP_NUM_THREADS``), TensorFlow
    (``TF_NUM_INTRAOP_THREADS``, ``TF_NUM_INTEROP_THREADS``) and, with one
    CPU each, XLA on JAX (``XLA_FLAGS``: no multi-threaded Eigen). Variables
    already set in ``environ`` (default ``os.environ``) are left as they are.
    """
    environ = os.environ if environ is None else environ
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    share = str(max(1, (cpus or 1) // workers))
    names = ("KERAS_MGU_NUM_THREADS", "OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
             "TF_NUM_INTEROP_THREADS")  # fmt: skip
    caps = {name: share for name in names}
    if share == "1":
        caps["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return {name: value for name, value in caps.items() if name not in environ}


def worker_compile_cache(
    directory: str, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of local workers that share a JAX compilation cache in ``directory``.

    JAX writes every compiled program there (no minimum compile time or
    size) and a worker reads it back instead of compiling a program of the
    same shapes again: a model one trial compiled (its training step, its
    simulation) is not compiled again by the next. Other backends ignore
    the variables. A cache the user set (``JAX_COMPILATION_CACHE_DIR`` in
    ``environ``, default ``os.environ``) is kept.
    """
    environ = os.environ if environ is None else environ
    if "JAX_COMPILATION_CACHE_DIR" in environ:
        return {}
    return {
        "JAX_COMPILATION_CACHE_DIR": directory,
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


def run_local_workers(job: dict, workers: int, make_tuner: Callable[[dict], Any]) -> Any:
    """Run ``job``'s search with ``workers`` local worker processes; the chief's tuner.

    The chief (``make_tuner(job)``, KerasTuner's oracle server) runs in this
    process; the workers run ``python -m keras_mgu.sysid.tuning.workers SPEC``,
    ``SPEC`` a file holding ``job`` and ``make_tuner`` (by reference).
    """
    os.makedirs(job["directory"], exist_ok=True)
    spec = os.path.join(job["directory"], f"{job['project_name']}_job.pkl")
    with open(spec, "wb") as f:
        # The tuner's maker travels by reference (module and name), as pickle stores functions.
        pickle.dump({"job": {**job, "overwrite": False}, "make_tuner": make_tuner}, f)
    env = {"KERASTUNER_ORACLE_IP": "127.0.0.1", "KERASTUNER_ORACLE_PORT": str(_free_port())}
    saved = {k: os.environ.get(k) for k in (*env, "KERASTUNER_TUNER_ID")}
    os.environ.update(env, KERASTUNER_TUNER_ID="chief")
    procs = []
    cache = worker_compile_cache(os.path.join(job["directory"], f"{job['project_name']}_jax_cache"))
    try:
        tuner = make_tuner(job)
        for i in range(workers):
            worker_env = {**os.environ, **worker_threads(workers), **cache, **env,
                          "KERASTUNER_TUNER_ID": f"tuner{i}"}  # fmt: skip
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "keras_mgu.sysid.tuning.workers", spec],
                    env=worker_env,
                )
            )
        _serve_until_done(tuner, procs)
    finally:
        for p in procs:
            p.wait(timeout=60) if p.poll() is None else None
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    failed = [p.returncode for p in procs if p.returncode]
    if failed:
        raise RuntimeError(f"{len(failed)} worker process(es) failed (exit codes {failed}).")
    return tuner


def _serve_until_done(tuner, procs: list[subprocess.Popen]) -> None:
    """Serve the oracle to the local workers until all of them have exited.

    KerasTuner's chief (``tuner.search()``) runs in a daemon thread: once
    the oracle has run out of trials it only notices that the last worker is
    done on its next poll (up to 20 s later), while the workers' exit says
    so at once; a worker exits after its last trial has ended.
    """
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            tuner.search()
        except BaseException as err:  # re-raised in the calling thread
            errors.append(err)

    chief = threading.Thread(target=serve, name="keras_mgu-tune-chief", daemon=True)
    chief.start()
    while any(p.poll() is None for p in procs):
        if errors:
            for p in procs:
                p.kill()
            message = "The search's chief (KerasTuner's oracle server) failed."
            raise RuntimeError(message) from errors[0]
        time.sleep(0.05)


def _worker_main(path: str) -> None:
    """Run trials of the search written to ``path`` until the chief has none left."""
    with open(path, "rb") as f:
        spec = pickle.load(f)
    spec["make_tuner"](spec["job"]).search()


if __name__ == "__main__":
    _worker_main(sys.argv[1])
