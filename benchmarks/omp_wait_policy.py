"""Training speed on the PyTorch backend under each OpenMP wait policy, quiet and busy.

PyTorch's CPU kernels run on an OpenMP thread pool. How its threads wait for
the next parallel region is ``OMP_WAIT_POLICY``: ``ACTIVE`` spins, ``PASSIVE``
sleeps, unset spins a while, then sleeps (GNU OpenMP). A recurrent training
step is a long chain of small parallel regions, so spinning threads can cost
a lot when other processes want the same cores. This script measures
``train_on_batch`` of a small model,
``Input((T, D)) -> keras_mgu.MGU(H, return_sequences=True) -> Dense(1)``
(Adam, mean-squared error, fixed random data), with ``KERAS_BACKEND=torch``:

* models: ``MGU`` (``implementation="auto"``, what the command line and
  :mod:`keras_mgu.sysid` use) and ``MGU-cell`` (``implementation="cell"``, the
  Keras cell loop: one small set of torch ops per time step); on request
  ``GRU`` (``keras.layers.GRU``, as ``keras-mgu identify --compare`` trains
  it);
* policies: ``PASSIVE``, ``ACTIVE`` and unset, each in its own worker process
  (this script with ``--worker``), since OpenMP reads the variable once, when
  it starts;
* loads, each a phase of the worker, their order rotated by round:
  ``quiet`` (nothing else started by the script); ``busy`` (``--burners``
  Python processes spinning ``while True: pass``, one per logical CPU by
  default); ``peers`` (``--peers`` other processes training the same models
  in a loop under the same policy, as ``keras-mgu tune --workers 2`` or two
  parallel jobs do). What a phase starts is ended when it ends.

Method: each worker builds and compiles the models, warms each up with
``--warmup`` steps (tracing and first-call allocation excluded), then, for each
load, times single ``train_on_batch`` calls (each returns the loss as a
number, so the step is finished) for ``--phase-seconds`` per model: at least
3 steps, at most ``--steps``. Each row also gives the share of the CPUs that
processes the script did not start used meanwhile (from ``/proc``), since on a
shared machine "quiet" is only as quiet as the neighbours. With ``--rounds N`` every policy runs N
times, rounds alternating and the order of the policies rotated; a figure is
the median of its rounds' median ms/step, with the range of the rounds'
medians. Ratios are to the unset policy (the library default) of the same
model and load. Thread pools are left at the defaults and recorded.

::

    python benchmarks/omp_wait_policy.py                  # about 3 minutes on 2 cores
    python benchmarks/omp_wait_policy.py --rounds 5 --steps 30 --shape 32,200,2,64
    python benchmarks/omp_wait_policy.py --models MGU --burners 4 --json omp.json

Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from train_speed import machine_description  # benchmarks/train_speed.py, beside this script

POLICIES = ("PASSIVE", "ACTIVE", "unset")
LOADS = ("quiet", "busy", "peers")
MODELS = ("MGU", "MGU-cell", "GRU")
#: Run unless ``--models`` says otherwise.
DEFAULT_MODELS = ("MGU", "MGU-cell")
#: Seconds the burners run before the busy phase is timed (so they are scheduled).
BURNER_LEAD_S = 0.5
BURNER = "while True: pass"
#: Fewest timed steps of a phase, however slow.
MIN_STEPS = 3


# --------------------------------------------------------------------------- worker
def _model(name: str, shape: tuple[int, int, int, int]):
    import keras

    from keras_mgu import MGU

    _, t, d, h = shape
    keras.utils.set_random_seed(0)
    if name == "GRU":
        rnn = keras.layers.GRU(h, return_sequences=True)
    else:
        implementation = "cell" if name == "MGU-cell" else "auto"
        rnn = MGU(h, return_sequences=True, implementation=implementation)
    model = keras.Sequential([keras.Input((t, d)), rnn, keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    return model


def _time_steps(model, x, y, steps: int, max_seconds: float = float("inf")) -> list[float]:
    """Seconds of each step: ``steps`` of them, fewer (at least 3) once ``max_seconds`` passed."""
    times: list[float] = []
    began = time.perf_counter()
    for _ in range(steps):
        start = time.perf_counter()
        model.train_on_batch(x, y)
        times.append(time.perf_counter() - start)
        if len(times) >= MIN_STEPS and time.perf_counter() - began >= max_seconds:
            break
    return times


def _cpu_seconds(pids: list[int]) -> tuple[float, float] | None:
    """(CPU seconds all processes used, CPU seconds ``pids`` used) so far; ``None`` off Linux."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        own = 0
        for pid in pids:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
            own += int(stat[11]) + int(stat[12])  # utime, stime
    except (OSError, ValueError, IndexError):
        return None
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait (guest is in user)
    return busy / tick, own / tick


def _others_share(before, after, seconds: float) -> float | None:
    """Share of all CPUs that processes other than ours used between two snapshots."""
    if before is None or after is None or seconds <= 0:
        return None
    others = (after[0] - before[0]) - (after[1] - before[1])
    return max(0.0, others) / (seconds * (os.cpu_count() or 1))


def _start_burners(count: int) -> list[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    burners = [subprocess.Popen([sys.executable, "-c", BURNER], env=env) for _ in range(count)]
    time.sleep(BURNER_LEAD_S)
    return burners


def _spawn_peers(args: argparse.Namespace) -> list[subprocess.Popen]:
    """``args.peers`` copies of this script (same environment), importing, then waiting."""
    command = [
        sys.executable, os.path.abspath(__file__), "--peer", "--worker", args.worker,
        "--shape", ",".join(map(str, args.shape)), "--warmup", str(args.warmup),
        "--models", *args.models,
    ]  # fmt: skip
    return [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(args.peers)
    ]


def _start_peers(peers: list[subprocess.Popen]) -> list[subprocess.Popen]:
    """Let the spawned peers train; return once all are warmed up and training."""
    for peer in peers:
        peer.stdin.write("go\n")
        peer.stdin.flush()
    if not all(peer.stdout.readline().strip() == "ready" for peer in peers):
        raise RuntimeError("a peer process failed to start")
    return peers


def run_peer(args: argparse.Namespace) -> int:
    """Import, wait for ``go``, then train the models in turn until killed (``ready`` first).

    The models are built and run only after ``go``: until then the process has
    started no OpenMP threads, so it cannot spin beside the other phases.
    """
    import keras  # noqa: F401  (the slow part, done while the worker starts too)
    import numpy as np

    if sys.stdin.readline().strip() != "go":
        return 0
    b, t, d, _ = args.shape
    rng = np.random.default_rng(1)
    x = rng.standard_normal((b, t, d)).astype("float32")
    y = rng.standard_normal((b, t, 1)).astype("float32")
    models = [_model(name, args.shape) for name in args.models]
    for model in models:
        _time_steps(model, x, y, args.warmup)
    print("ready", flush=True)
    while True:
        for model in models:
            model.train_on_batch(x, y)


def _stop_burners(burners: list[subprocess.Popen]) -> None:
    for burner in burners:
        burner.kill()
    for burner in burners:
        burner.wait()


def run_worker(args: argparse.Namespace) -> int:
    """Time each model quiet and busy in this process; one JSON line per measurement."""
    peers = _spawn_peers(args)
    try:
        return _run_phases(args, peers)
    finally:
        _stop_burners(peers)


def _run_phases(args: argparse.Namespace, peers: list[subprocess.Popen]) -> int:
    import numpy as np
    import torch

    b, t, d, _ = args.shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, t, d)).astype("float32")
    y = rng.standard_normal((b, t, 1)).astype("float32")
    models = {name: _model(name, args.shape) for name in args.models}
    for model in models.values():
        _time_steps(model, x, y, args.warmup)
    threads = {"torch_num_threads": torch.get_num_threads()}
    shift = args.round % len(LOADS)
    for load in LOADS[shift:] + LOADS[:shift]:
        burners = []
        try:
            if load == "busy":
                burners = _start_burners(args.burners)
            elif load == "peers":
                burners = _start_peers(peers)
            for name, model in models.items():
                pids = [os.getpid(), *(p.pid for p in burners)]
                before, began = _cpu_seconds(pids), time.perf_counter()
                times = _time_steps(model, x, y, args.steps, args.phase_seconds)
                others = _others_share(before, _cpu_seconds(pids), time.perf_counter() - began)
                record = {
                    "policy": args.worker,
                    "load": load,
                    "model": name,
                    "round": args.round,
                    "median_ms": 1000 * statistics.median(times),
                    "min_ms": 1000 * min(times),
                    "steps": len(times),
                    "others_cpu": others,
                    **threads,
                }
                print(json.dumps(record), flush=True)
        finally:
            _stop_burners(burners)
    return 0


# --------------------------------------------------------------------------- parent
def _worker_env(policy: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update(KERAS_BACKEND="torch", TF_CPP_MIN_LOG_LEVEL="3")
    if policy != "unset":
        env["OMP_WAIT_POLICY"] = policy
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def run_policy(policy: str, round_index: int, args: argparse.Namespace) -> list[dict]:
    command = [
        sys.executable, os.path.abspath(__file__), "--worker", policy,
        "--round", str(round_index), "--shape", ",".join(map(str, args.shape)),
        "--steps", str(args.steps), "--warmup", str(args.warmup),
        "--phase-seconds", str(args.phase_seconds),
        "--burners", str(args.burners), "--peers", str(args.peers), "--models", *args.models,
    ]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, env=_worker_env(policy), timeout=args.timeout
    )
    records = []
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            records.append(json.loads(line))
    if done.returncode != 0 or not records:
        tail = done.stderr.strip().splitlines()[-5:]
        print(f"  {policy}: failed (status {done.returncode}): {' | '.join(tail)}", file=sys.stderr)
    return records


def summarize(records: list[dict]) -> list[dict]:
    """One row per (model, load, policy): median and range of the rounds' medians, ratios."""
    rows = []
    for model in dict.fromkeys(r["model"] for r in records):
        for load in LOADS:
            medians, others = {}, {}
            for policy in POLICIES:
                chosen = [
                    r
                    for r in records
                    if (r["model"], r["load"], r["policy"]) == (model, load, policy)
                ]
                if chosen:
                    medians[policy] = [r["median_ms"] for r in chosen]
                    shares = [r["others_cpu"] for r in chosen if r.get("others_cpu") is not None]
                    others[policy] = statistics.median(shares) if shares else None
            reference = statistics.median(medians["unset"]) if "unset" in medians else None
            for policy, values in medians.items():
                median = statistics.median(values)
                rows.append(
                    {
                        "model": model,
                        "load": load,
                        "policy": policy,
                        "median_ms": median,
                        "low_ms": min(values),
                        "high_ms": max(values),
                        "rounds": len(values),
                        "vs_unset": median / reference if reference else None,
                        "others_cpu": others[policy],
                    }
                )
    return rows


def markdown_report(rows: list[dict], machine: dict, settings: dict, threads: list[int]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items() if v)
    load = machine["load_average"]
    lines = [
        "# OpenMP wait policy: keras-mgu training on the PyTorch backend",
        "",
        f"- Machine: {machine['processor']}, {machine['cpu_count']} logical CPUs, "
        f"{machine['platform']}",
        f"- Date: {machine['date']}; load average at start: "
        + (", ".join(f"{x:.2f}" for x in load) if load else "n/a"),
        f"- Python {machine['python']}; {versions}; torch threads: "
        + (", ".join(map(str, sorted(set(threads)))) or "n/a"),
        f"- Settings: {json.dumps(settings)}",
        "",
        "| model | load | OMP_WAIT_POLICY | median ms/step | rounds' range | vs unset "
        "| others' CPU |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratio = f"{row['vs_unset']:.2f}x" if row["vs_unset"] else "n/a"
        others = "n/a" if row["others_cpu"] is None else f"{100 * row['others_cpu']:.0f}%"
        lines.append(
            f"| {row['model']} | {row['load']} | {row['policy']} | {row['median_ms']:.1f} | "
            f"{row['low_ms']:.1f}-{row['high_ms']:.1f} | {ratio} | {others} |"
        )
    lines += [
        "",
        "others' CPU: the share of all CPUs used, while the row was timed, by processes "
        "this script did not start (median over rounds).",
    ]
    return "\n".join(lines) + "\n"


def run_parent(args: argparse.Namespace) -> int:
    machine = machine_description(("keras", "torch", "numpy"))
    records: list[dict] = []
    started = time.perf_counter()
    for round_index in range(args.rounds):
        shift = round_index % len(POLICIES)
        order = POLICIES[shift:] + POLICIES[:shift]
        for policy in order:
            print(
                f"[{time.perf_counter() - started:6.1f}s] round {round_index + 1}/{args.rounds}: "
                f"{policy}",
                file=sys.stderr,
                flush=True,
            )
            records += run_policy(policy, round_index, args)
    settings = {
        "shape (B,T,D,H)": list(args.shape),
        "steps": args.steps,
        "warmup": args.warmup,
        "phase_seconds": args.phase_seconds,
        "rounds": args.rounds,
        "burners": args.burners,
        "peers": args.peers,
        "models": args.models,
    }
    rows = summarize(records)
    threads = [r["torch_num_threads"] for r in records]
    report = markdown_report(rows, machine, settings, threads)
    print(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "settings": settings, "rows": rows,
                       "records": records}, f, indent=2)  # fmt: skip
    expected = args.rounds * len(POLICIES) * len(LOADS) * len(args.models)
    return 0 if len(records) == expected else 1


def parse_shape(text: str) -> tuple[int, int, int, int]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4 or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"a shape is 'batch,steps,features,units' (four positive integers); received {text!r}"
        )
    return values  # type: ignore[return-value]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape", type=parse_shape, default=(32, 100, 2, 32), help="B,T,D,H (default 32,100,2,32)"
    )
    parser.add_argument(
        "--models",
        nargs="+",
        choices=MODELS,
        default=list(DEFAULT_MODELS),
        help=f"default: {' '.join(DEFAULT_MODELS)}",
    )
    parser.add_argument(
        "--steps", type=int, default=200, help="most timed steps of a model per load (default 200)"
    )
    parser.add_argument(
        "--phase-seconds",
        type=float,
        default=1.0,
        help=f"seconds of timed steps of a model per load (at least {MIN_STEPS} steps; default 1)",
    )
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of every policy, alternating (default 3)"
    )
    parser.add_argument(
        "--burners",
        type=int,
        default=os.cpu_count() or 2,
        help="busy processes beside the busy phase (default: the logical CPUs)",
    )
    parser.add_argument(
        "--peers", type=int, default=1, help="training processes beside the peers phase (default 1)"
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds per worker")
    parser.add_argument("--json", metavar="FILE", help="write the rows, records and machine")
    parser.add_argument("--worker", choices=POLICIES, help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if min(args.steps, args.rounds) < 1 or min(args.warmup, args.burners, args.peers) < 0:
        build_parser().error(
            "--steps and --rounds must be positive; --warmup, --burners and --peers >= 0"
        )
    if args.peer:
        return run_peer(args)
    return run_worker(args) if args.worker else run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
