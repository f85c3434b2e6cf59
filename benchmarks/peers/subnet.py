"""deepSI's SUBNET on the suite's splits and protocol: the peer beside keras-mgu's tables.

Runs in its own environment (``benchmarks/peers/README.md``: torch, deepSI
and, for the package's data loaders, keras and numpy); deepSI is no
dependency of keras-mgu. The data come from ``keras_mgu.datasets.load_benchmark``,
so the estimation, validation and test records are exactly those of
``benchmarks/sysid_suite.py``:

* SUBNET (``deepSI.SUBNET``, its default MLP networks) is trained on the
  estimation record with deepSI's truncated-simulation loss (windows of ``T``
  samples, Adam, mini-batches), its normalisation fitted on the estimation
  record.
* Every ``--val-freq`` iterations, and once more when the time is up, the
  model simulates the validation record (the encoder reads its first
  ``max(na, nb)`` samples); the parameters with the lowest validation RMSE are
  kept. The test record is never seen during training or choice.
* Test: the encoder reads the ``max(na, nb)`` measured samples before the
  protocol's sample ``n`` (``max(na, nb) <= n``), the model simulates from
  sample ``n`` on, and the RMSE over those samples is reported in the
  protocol's unit, as the suite scores keras-mgu.

The training loop is deepSI's ``fit`` (same batcher, loss ``compute_NMSE``,
Adam with its default learning rate, validation every ``val_freq``
iterations) with a wall-time cap: ``--seconds`` (default: the median
``seconds`` of keras-mgu's default runs of the suite on that benchmark for
``--suite-backend``, read from ``benchmarks/results/suite``). Torch runs on one
thread (``torch.set_num_threads(1)``) unless ``--threads`` says otherwise.

Each run writes ``--out/BENCHMARK/subnet_seedS.json``.

Usage (from the checkout's root, in the peers environment)::

    PYTHONPATH=$PWD peers-venv/bin/python benchmarks/peers/subnet.py \\
        --benchmarks cascaded_tanks --seeds 0 1 2 3 4 --seconds 67.5
"""

from __future__ import annotations

import argparse
import copy
import glob
import json
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "torch")  # keras_mgu.datasets imports keras

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
DEFAULT_ROOT = os.path.join(BENCH, "..", "..", "shared", "data")
DEFAULT_OUT = os.path.join(BENCH, "results", "peers")
SUITE = os.path.join(BENCH, "results", "suite")
BENCHMARKS = ("cascaded_tanks", "wh2009", "emps")

#: SUBNET settings per benchmark. deepSI's defaults (nx=10, na=nb=20, T=50,
#: batch 256, validation every 250 iterations) except for Wiener-Hammerstein,
#: which takes the settings of deepSI's own Wiener-Hammerstein example
#: (nx=6, na=nb=40, T=80, batch 128). max(na, nb) never exceeds the
#: protocol's n (Cascaded Tanks 50, Wiener-Hammerstein 50, EMPS 20).
SETTINGS = {
    "cascaded_tanks": {"nx": 10, "na": 20, "nb": 20, "T": 50, "batch_size": 256, "val_freq": 250},
    "emps": {"nx": 10, "na": 20, "nb": 20, "T": 50, "batch_size": 256, "val_freq": 250},
    "wh2009": {"nx": 6, "na": 40, "nb": 40, "T": 80, "batch_size": 128, "val_freq": 250},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--seconds", type=float, default=None,
                        help="training wall-time cap (default: the suite's median for the "
                        "benchmark and --suite-backend)")  # fmt: skip
    parser.add_argument("--suite-backend", default="jax", choices=("jax", "tensorflow", "torch"))
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--data-root", default=DEFAULT_ROOT, help="folder of benchmark folders")
    parser.add_argument("--out", default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--suite", default=SUITE, help="the suite's results folder")
    return parser.parse_args(argv)


def suite_seconds(suite: str, benchmark: str, backend: str) -> float:
    """Median ``seconds`` of the suite's default runs of ``benchmark`` on ``backend``."""
    paths = sorted(glob.glob(os.path.join(suite, benchmark, f"{backend}_seed*.json")))
    seconds = []
    for path in paths:
        with open(path) as f:
            result = json.load(f)
        if not result.get("config"):  # the library's defaults only
            seconds.append(float(result["seconds"]))
    if not seconds:
        raise ValueError(
            f"No default-settings suite results for {benchmark} on {backend} under {suite!r}; "
            "expected BACKEND_seedS.json files, or pass --seconds."
        )
    return statistics.median(seconds)


def as_deepsi(record, name: str):
    """A keras-mgu Record (one input, one output) as deepSI's Input_output_data (scalar u, y)."""
    from deepSI import Input_output_data

    if record.n_inputs != 1 or record.n_outputs != 1:
        raise ValueError(
            f"{name}: expected one input and one output; got {record.n_inputs} and "
            f"{record.n_outputs}."
        )
    return Input_output_data(u=record.u[:, 0], y=record.y[:, 0], sampling_time=record.ts, name=name)


def simulated_rmse(model, data, start: int) -> float:
    """RMSE of ``y - y_sim`` over samples ``start`` onward, the encoder reading those before.

    ``data`` is deepSI's Input_output_data; the encoder reads samples
    ``start - max(na, nb)`` to ``start - 1`` (measured u and y), the model
    simulates from ``start`` on with the measured input only.
    """
    import torch
    from deepSI import Input_output_data

    lag = max(model.na, model.nb)
    if lag > start:
        raise ValueError(f"The encoder needs {lag} past samples; only {start} are allowed.")
    part = Input_output_data(u=data.u[start - lag :], y=data.y[start - lag :],
                             sampling_time=data.sampling_time)  # fmt: skip
    with torch.no_grad():
        y_sim = model.simulate(part).y[lag:]
    return float(np.sqrt(np.mean((data.y[start:] - y_sim) ** 2)))


def train(model, train_data, val_data, settings: dict, seconds: float, seed: int) -> dict:
    """deepSI's ``fit`` loop with a wall-time cap; the model ends with its best-on-validation state.

    Returns the iterations done, the validation RMSE history (records' units)
    and the best one.
    """
    import torch
    from deepSI.fitting import compute_NMSE, data_batcher

    start = time.perf_counter()
    optimizer = torch.optim.Adam(model.parameters())
    arrays, indices = model.create_arrays(train_data, T=settings["T"])
    batches = data_batcher(*arrays, batch_size=settings["batch_size"], seed=seed, indices=indices)
    lag = max(model.na, model.nb)
    history, best, best_state, iterations = [], float("inf"), None, 0
    while True:
        out_of_time = time.perf_counter() - start >= seconds
        if iterations % settings["val_freq"] == 0 or out_of_time:
            model.eval()
            history.append((iterations, simulated_rmse(model, val_data, lag)))
            model.train()
            if history[-1][1] <= best:
                best, best_state = history[-1][1], copy.deepcopy(model.state_dict())
        if out_of_time:
            break
        loss = compute_NMSE(model, *next(batches))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if not np.isfinite(loss.item()):
            print(f"  loss became {loss.item()} at iteration {iterations}; stopping", flush=True)
            break
        iterations += 1
    model.load_state_dict(best_state)
    return {"iterations": iterations, "validation_history": history, "validation_rmse": best}


def run_one(args: argparse.Namespace, benchmark: str, seed: int) -> dict:
    """Train SUBNET on one benchmark with one seed; scores on validation and test."""
    import deepSI
    import torch

    from keras_mgu import datasets

    torch.set_num_threads(args.threads)
    torch.manual_seed(seed)
    data = datasets.load_benchmark(benchmark, os.path.join(args.data_root, benchmark))
    protocol, settings = data.protocol, SETTINGS[benchmark]
    if args.seconds is not None:
        seconds, source = args.seconds, "--seconds"
    else:
        seconds = suite_seconds(args.suite, benchmark, args.suite_backend)
        source = f"median of the suite's {args.suite_backend} runs"
    est, val, test = (as_deepsi(r, f"{benchmark}/{part}") for r, part in
                      ((data.estimation, "estimation"), (data.validation, "validation"),
                       (data.test, "test")))  # fmt: skip
    nu, ny, norm = deepSI.get_nu_ny_and_auto_norm(est)
    model = deepSI.SUBNET(nu, ny, norm, nx=settings["nx"], na=settings["na"], nb=settings["nb"])
    began = time.perf_counter()
    fitted = train(model, est, val, settings, seconds, seed)
    model.eval()
    test_rmse = simulated_rmse(model, test, protocol.n_initial)
    total = time.perf_counter() - began
    ystd = float(norm.ystd)
    return {
        "benchmark": benchmark,
        "peer": "subnet",
        "seed": seed,
        "unit": protocol.unit,
        "n_initial": protocol.n_initial,
        "test": protocol.scale * test_rmse,
        "validation": protocol.scale * fitted["validation_rmse"],
        "validation_rmse": fitted["validation_rmse"] / ystd,
        "iterations": fitted["iterations"],
        "seconds_cap": round(seconds, 1),
        "seconds_cap_source": source,
        "seconds": round(total, 1),
        "threads": args.threads,
        "settings": settings,
        "validation_history": [[i, protocol.scale * v] for i, v in fitted["validation_history"]],
        "deepsi_version": _version("deepSI"),
        "torch_version": torch.__version__,
        "command": " ".join(["python", "benchmarks/peers/subnet.py", *sys.argv[1:]]),
    }


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def result_path(out: str, benchmark: str, seed: int) -> str:
    return os.path.join(out, benchmark, f"subnet_seed{seed}.json")


def write_json(path: str, result: dict) -> None:
    """Write ``result`` whole or not at all (an earlier file survives a crash)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for benchmark in args.benchmarks:
        for seed in args.seeds:
            print(f"== SUBNET {benchmark} seed {seed}", flush=True)
            result = run_one(args, benchmark, seed)
            write_json(result_path(args.out, benchmark, seed), result)
            print(
                f"{benchmark} SUBNET seed {seed}: test {result['test']:.4g} {result['unit']} "
                f"(from sample {result['n_initial']}), validation {result['validation']:.4g}, "
                f"{result['iterations']} iterations, {result['seconds']:.0f} s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
