"""A model file in fresh processes: the imports, load and first simulation, `keras-mgu simulate`.

Each round runs two fresh processes on the chosen backend:

* a Python process that imports ``keras_mgu.sysid`` (timed: the imports),
  then calls ``sysid.load(model)`` and simulates the record's inputs once
  (timed together, after the imports: what a script that loads a model pays
  before its first answer), then simulates once more from the first 50
  measured outputs (shown, not a target);
* ``keras-mgu simulate --model MODEL --data RECORD --out CSV``, the whole
  command's wall time (start-up, imports, reading, the free run, the
  simulation from the first 50 outputs, the 1- and 10-step predictions and
  their band, the ARX reference, the residual analysis, the CSV file).

The record is the built-in simulated tanks' test record of ``--samples``
samples (seed 1, which the model did not train on), written as a CSV file
with the model's columns ``u`` and ``y``. Without ``--model`` the model is
identified first, as README.md's quick start does (``keras-mgu identify``
with the defaults, seed 0, on the same backend; about a minute), into
``--out``. It prints the median, minimum and maximum of each time over the
rounds and whether the targets are met: load and first simulation at most
3 s, ``keras-mgu simulate`` at most 6 s (medians). ``--json`` writes every
round. ``--code DIR`` runs every child on the ``keras_mgu`` package in
``DIR`` (an export of another commit: ``git archive COMMIT keras_mgu | tar
-x -C DIR``), to time the same file before a change; the children run in a
scratch folder, so that the checkout's package does not come first.

Usage::

    python benchmarks/load_speed.py --backend jax --rounds 5 \\
        --json benchmarks/results/load_speed_jax.json
    python benchmarks/load_speed.py \
        --model outputs/system_identification/network_mgu_h32_lr0.01/network_mgu.kmgu
    python benchmarks/load_speed.py --model mgu.kmgu --code /tmp/before   # an earlier commit's code
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from benchmarks.fresh_process import run_child  # noqa: E402

#: The targets (medians, seconds): load with the first simulation, and the whole command.
TARGETS = {"load_and_simulate": 3.0, "command": 6.0}

CHILD = """
import json, sys, time
start = time.perf_counter()
import numpy as np
from keras_mgu import sysid
imported = time.perf_counter()
model, record = sys.argv[1:3]
uy = np.loadtxt(record, delimiter=",", skiprows=1, ndmin=2)
u, y = uy[:, :1], uy[:, 1:]
begin = time.perf_counter()
found = sysid.load(model)
loaded = time.perf_counter()
found.simulate(u)
simulated = time.perf_counter()
found.simulate(u, y[:50])
given = time.perf_counter()
print("RESULT " + json.dumps({
    "imports": imported - start, "load": loaded - begin, "simulate": simulated - loaded,
    "load_and_simulate": simulated - begin, "from_50": given - simulated,
    "package": sysid.__file__.rsplit("/sysid/", 1)[0],
    "heavy_modules": sorted(
        m for m in ("tensorflow", "torch", "scipy.signal", "scipy.stats", "matplotlib")
        if m in sys.modules
    ),
}))
"""


def command(*argv: str) -> list[str]:
    """The ``keras-mgu`` command line: the installed script beside this Python, else ``-m``."""
    script = os.path.join(os.path.dirname(sys.executable), "keras-mgu")
    if os.path.isfile(script):
        return [script, *argv]
    return [sys.executable, "-m", "keras_mgu", *argv]


def code_env(code: str | None) -> dict:
    """What makes a child import ``keras_mgu`` from ``code`` (None: the installed one)."""
    if code is None:
        return {}
    return {"PYTHONPATH": os.pathsep.join(p for p in (code, os.environ.get("PYTHONPATH")) if p)}


def child_env(backend: str, code: str | None = None) -> dict:
    return {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", **code_env(code)}


def identify_model(backend: str, out: str, code: str | None, cwd: str) -> str:
    """README.md's quick-start identification (defaults, seed 0) into ``out``; the model file."""
    print(f"identifying the default model on {backend} into {out} ...", flush=True)
    done = subprocess.run(
        command("identify", "--seed", "0", "--out", out), env=child_env(backend, code),
        capture_output=True, text=True, check=False, cwd=cwd,
    )  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"keras-mgu identify failed:\n{done.stderr[-3000:]}")
    found = [
        os.path.join(folder, name)
        for folder, _, names in os.walk(out)
        for name in names
        if name.endswith(".kmgu")
    ]
    if len(found) != 1:
        raise RuntimeError(f"expected one model file under {out}, found {found}")
    print(done.stdout.strip().splitlines()[-1], flush=True)
    return found[0]


RECORD = """
import sys, numpy as np
from keras_mgu.datasets import simulate_cascaded_tanks
path, samples = sys.argv[1], int(sys.argv[2])
test = simulate_cascaded_tanks(n_samples=samples, seed=1).test
values = np.concatenate([test.u, test.y], axis=1)
np.savetxt(path, values, delimiter=",", header="u,y", comments="", fmt="%.9g")
print("RESULT " + str(len(values)))
"""


def write_record(path: str, samples: int, backend: str, code: str | None, cwd: str) -> None:
    """The simulated tanks' test record (seed 1), ``u`` and ``y``, as a CSV file (in a child)."""
    run_child(RECORD, [path, str(samples)], backend, "the record", env=code_env(code), cwd=cwd)


def time_command(model: str, record: str, out: str, backend: str, code: str | None) -> float:
    """The wall time of ``keras-mgu simulate`` on ``record``, in a fresh process."""
    start = time.perf_counter()
    done = subprocess.run(
        command("simulate", "--model", model, "--data", record, "--out", out),
        env=child_env(backend, code), capture_output=True, text=True, check=False,
        cwd=os.path.dirname(out),
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"keras-mgu simulate failed:\n{done.stderr[-3000:]}")
    return seconds


def summary(rows: list[dict], key: str) -> tuple[float, float, float]:
    values = [row[key] for row in rows]
    return statistics.median(values), min(values), max(values)


def report(rows: list[dict], args: argparse.Namespace) -> str:
    names = {
        "imports": "imports (`from keras_mgu import sysid`)",
        "load": "`sysid.load`",
        "simulate": "first `simulate` (free run)",
        "load_and_simulate": "`sysid.load` + first `simulate`",
        "from_50": "then `simulate` from 50 measured outputs",
        "command": "`keras-mgu simulate` (whole command)",
    }
    code = f", keras_mgu from {args.code}" if args.code else ""
    lines = [
        f"{args.backend}{code}, {args.samples} samples, {len(rows)} round(s) of fresh processes; "
        f"{platform.node()} ({os.cpu_count()} CPUs), load average at the end "
        f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}",
        "",
        "| time (s) | median | min | max | target |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, name in names.items():
        med, low, high = summary(rows, key)
        target = TARGETS.get(key)
        mark = "" if target is None else f"<= {target:g} ({'met' if med <= target else 'not met'})"
        lines.append(f"| {name} | {med:.2f} | {low:.2f} | {high:.2f} | {mark} |")
    heavy = sorted({m for row in rows for m in row["heavy_modules"]})
    lines += ["", f"modules loaded by the load and simulations: {', '.join(heavy) or 'none'}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"), default="jax")
    parser.add_argument("--model", help="a model file (.kmgu); default: identify one first")
    parser.add_argument("--out", help="folder for the identified model (default: a temporary one)")
    parser.add_argument("--samples", type=int, default=1500, help="samples of the record")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="write every round to this file")
    parser.add_argument("--code", help="a folder holding the keras_mgu package the children run")
    args = parser.parse_args(argv)
    code = None if args.code is None else os.path.abspath(args.code)
    scratch = tempfile.mkdtemp(prefix="load_speed_")
    try:
        model = os.path.abspath(args.model) if args.model else None
        model = model or identify_model(args.backend, os.path.abspath(args.out or scratch), code,
                                        scratch)  # fmt: skip
        record = os.path.join(scratch, "record.csv")
        write_record(record, args.samples, args.backend, code, scratch)
        rows = []
        for r in range(args.rounds):
            row = run_child(CHILD, [model, record], args.backend, "load and simulate",
                            env=code_env(code), cwd=scratch)  # fmt: skip
            row["command"] = time_command(model, record, os.path.join(scratch, "sim.csv"),
                                          args.backend, code)  # fmt: skip
            rows.append(row)
            print(f"round {r + 1}: {json.dumps(row)}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"backend": args.backend, "samples": args.samples, "model": model,
                       "code": code, "rounds": rows}, f, indent=1)  # fmt: skip
    print(report(rows, args))


if __name__ == "__main__":
    main()
