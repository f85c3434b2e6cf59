"""tsfast's plain GRU on the suite's splits and protocol: a peer beside keras-mgu's tables.

Runs in its own environment (``benchmarks/peers/README.md``: torch, tsfast
and, for the package's data loaders, keras); tsfast is no dependency of
keras-mgu. The data come from ``keras_mgu.datasets.load_benchmark``, so the
estimation, validation and test records are exactly those of
``benchmarks/sysid_suite.py``:

* The estimation and validation records are written to HDF5 files in a
  temporary folder (tsfast's data pipeline reads files) and handed to
  ``tsfast.tsdata.create_dls``; the model is ``tsfast.training.RNNLearner``
  (a GRU of 100 units, one layer, a linear head), trained with its own loop
  (``Learner.fit_flat_cos``: Adam at lr 3e-3, flat then cosine), L1 loss,
  10 epochs of 300 random windows of 200 samples, batch 64, zero initial
  state, the first 50 samples of each window left out of the loss, inputs
  and outputs standardised with the estimation record's mean and standard
  deviation.
* No choice on validation (tsfast's loop keeps the final parameters); the
  validation record is only scored.
* Test: the model simulates the whole test record from zero state with the
  measured input, and the RMSE over samples ``n`` onward (the protocol's
  ``n_initial``) is reported in the protocol's unit, as the suite scores
  keras-mgu. The validation record is scored the same way.

``--seconds`` stops training at a wall-time cap (a tsfast composable checked
before every training step); without it the run is tsfast's 10 epochs.
Torch runs on one thread (``torch.set_num_threads(1)``) unless ``--threads``
says otherwise, and ``OMP_WAIT_POLICY`` is ``PASSIVE`` unless set: on a
small shared machine spinning OpenMP threads slow torch several-fold.

Each run writes ``--out/BENCHMARK/tsfast_gru_seedS.json``, or
``tsfast_gru_seedS_sSECONDS.json`` when ``--seconds`` is given.

Usage (from the checkout's root, in the tsfast peer's environment)::

    PYTHONPATH=$PWD peers-tsfast-venv/bin/python benchmarks/peers/tsfast_gru.py \\
        --benchmarks cascaded_tanks --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "torch")  # keras_mgu.datasets imports keras
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported

import numpy as np  # noqa: E402
from subnet import write_json  # noqa: E402  benchmarks/peers/subnet.py, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
DEFAULT_ROOT = os.path.join(BENCH, "..", "..", "shared", "data")
DEFAULT_OUT = os.path.join(BENCH, "results", "peers")
BENCHMARKS = ("cascaded_tanks", "wh2009", "emps")

#: tsfast's GRU recipe for system identification, the same on every benchmark.
SETTINGS = {
    "rnn_type": "gru",
    "hidden_size": 100,
    "num_layers": 1,
    "loss": "L1",
    "optimizer": "Adam",
    "lr": 3e-3,
    "schedule": "fit_flat_cos (pct_start 0.75)",
    "epochs": 10,
    "batches_per_epoch": 300,
    "batch_size": 64,
    "win_sz": 200,
    "stp_sz": 1,
    "valid_stp_sz": 200,
    "n_skip": 50,
    "input_norm": "StandardScaler (estimation record)",
    "output_norm": "StandardScaler (estimation record)",
    "initial_state": "zero",
}

#: Where tsfast 0.5.0's own function defaults differ from SETTINGS (recorded in each JSON).
TSFAST_DEFAULTS_DIFFERING = {
    "create_dls win_sz": 100,
    "RNNLearner n_skip": 0,
    "RNNLearner output_norm": None,
    "DataLoaders.norm_stats": "estimated from the first 10 training batches unless dls_id is given",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", choices=BENCHMARKS, default=list(BENCHMARKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--seconds", type=float, default=None,
                        help="training wall-time cap (default: none: 10 epochs)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--data-root", default=DEFAULT_ROOT, help="folder of benchmark folders")
    parser.add_argument("--out", default=DEFAULT_OUT, help="results folder")
    return parser.parse_args(argv)


class TimeUp(Exception):
    """Raised by :class:`WallTimeStop` when the training time is spent."""


class WallTimeStop:
    """tsfast composable (a train-only augmentation that leaves the batch alone).

    Counts the training steps and, when ``seconds`` is set, raises
    :class:`TimeUp` before the first step that would start past the cap.
    """

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.steps = 0
        self.began = None

    def setup(self, learner) -> None:
        self.began = time.perf_counter()

    def __call__(self, xb, yb):
        if self.seconds is not None and time.perf_counter() - self.began >= self.seconds:
            raise TimeUp
        self.steps += 1
        return xb, yb


def set_seed(seed: int) -> None:
    """Seed Python's, numpy's and torch's generators (tsfast's sampler draws from torch's)."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def write_hdf5(path: str, record) -> None:
    """One record as an HDF5 file of 1-D float32 datasets ``u`` and ``y`` (tsfast's layout)."""
    import h5py

    if record.n_inputs != 1 or record.n_outputs != 1:
        raise ValueError(
            f"Expected one input and one output; got {record.n_inputs} and {record.n_outputs}."
        )
    if record.boundaries:
        raise ValueError("Records of several experiments are not supported here.")
    with h5py.File(path, "w") as f:
        f.create_dataset("u", data=np.asarray(record.u[:, 0], dtype=np.float32))
        f.create_dataset("y", data=np.asarray(record.y[:, 0], dtype=np.float32))


def simulated_rmse(model, record, start: int) -> float:
    """RMSE of ``y - y_sim`` over samples ``start`` onward; the model runs from zero state.

    The model (tsfast's scaled GRU) maps the whole measured input sequence to
    the simulated output sequence; nothing of the measured output is used.
    """
    import torch

    model.eval()
    x = torch.as_tensor(np.asarray(record.u, dtype=np.float32))[None]
    with torch.no_grad():
        out = model(x)
        y_sim = (out[0] if isinstance(out, tuple) else out)[0].double().numpy()
    err = record.y[start:] - y_sim[start:]
    return float(np.sqrt(np.mean(err**2)))


def run_one(args: argparse.Namespace, benchmark: str, seed: int) -> dict:
    """Train tsfast's GRU on one benchmark with one seed; scores on validation and test."""
    load_average = os.getloadavg()
    import torch
    from torch import nn
    from tsfast.models._core.scaling import StandardScaler
    from tsfast.training import RNNLearner, fun_rmse
    from tsfast.tsdata import create_dls

    from keras_mgu import datasets

    torch.set_num_threads(args.threads)
    data = datasets.load_benchmark(benchmark, os.path.join(args.data_root, benchmark))
    protocol, s = data.protocol, SETTINGS
    set_seed(seed)
    with tempfile.TemporaryDirectory(prefix="tsfast_gru_") as tmp:
        files = {}
        for part, record in (("train", data.estimation), ("valid", data.validation)):
            files[part] = [os.path.join(tmp, f"{part}.hdf5")]
            write_hdf5(files[part][0], record)
        dls = create_dls(u=["u"], y=["y"], dataset=files, win_sz=s["win_sz"], stp_sz=s["stp_sz"],
                         bs=s["batch_size"], valid_stp_sz=s["valid_stp_sz"],
                         n_batches_train=s["batches_per_epoch"])  # fmt: skip
        # Normalisation from the whole estimation record (tsfast's exact, file-based stats).
        dls._cached_stats = dls.stats_from_files()
        stop = WallTimeStop(args.seconds)
        learner = RNNLearner(dls, loss_func=nn.L1Loss(), metrics=[fun_rmse], lr=s["lr"],
                             n_skip=s["n_skip"], num_layers=s["num_layers"],
                             hidden_size=s["hidden_size"], input_norm=StandardScaler,
                             output_norm=StandardScaler, augmentations=[stop],
                             device=torch.device("cpu"), show_bar=False)  # fmt: skip
        began = time.perf_counter()
        stopped = False
        try:
            learner.fit_flat_cos(s["epochs"], lr=s["lr"])
        except TimeUp:
            stopped = True
        seconds = time.perf_counter() - began
        n_batches = len(dls.train)
        stats = dls.norm_stats
    model = learner.model
    n = protocol.n_initial
    test_rmse = simulated_rmse(model, data.test, n)
    val_rmse = simulated_rmse(model, data.validation, n)
    ystd = float(np.std(data.estimation.y[:, 0]))
    return {
        "benchmark": benchmark,
        "peer": "tsfast_gru",
        "seed": seed,
        "unit": protocol.unit,
        "n_initial": n,
        "test": protocol.scale * test_rmse,
        "validation": protocol.scale * val_rmse,
        "validation_rmse": val_rmse / ystd,
        "choice": "final parameters (tsfast's loop keeps no best-on-validation state)",
        "epochs": stop.steps / n_batches,
        "epochs_completed": len(learner.recorder),
        "iterations": stop.steps,
        "stopped_by_time": stopped,
        "seconds_cap": args.seconds,
        "seconds": round(seconds, 1),
        "threads": args.threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "load_average_at_start": [round(x, 2) for x in load_average],
        "settings": SETTINGS,
        "tsfast_defaults_differing": TSFAST_DEFAULTS_DIFFERING,
        "norm_stats": {
            "u_mean": float(stats.u.mean[0]),
            "u_std": float(stats.u.std[0]),
            "y_mean": float(stats.y.mean[0]),
            "y_std": float(stats.y.std[0]),
        },
        "epoch_history": [
            {"train_l1": r[0], "valid_l1": r[1], "valid_fun_rmse": r[2]} for r in learner.recorder
        ],
        "tsfast_version": _version("tsfast"),
        "fastai_version": _version("fastai"),
        "torch_version": torch.__version__,
        "command": " ".join(["python", "benchmarks/peers/tsfast_gru.py", *sys.argv[1:]]),
    }


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:  # tsfast 0.5.0 no longer builds on fastai
        return None


def result_path(out: str, benchmark: str, seed: int, seconds: float | None) -> str:
    suffix = "" if seconds is None else f"_s{seconds:g}"
    return os.path.join(out, benchmark, f"tsfast_gru_seed{seed}{suffix}.json")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for benchmark in args.benchmarks:
        if not os.path.isdir(os.path.join(args.data_root, benchmark)):
            print(f"== skipping {benchmark}: no folder {os.path.join(args.data_root, benchmark)}",
                  flush=True)  # fmt: skip
            continue
        for seed in args.seeds:
            print(f"== tsfast GRU {benchmark} seed {seed}", flush=True)
            result = run_one(args, benchmark, seed)
            write_json(result_path(args.out, benchmark, seed, args.seconds), result)
            print(
                f"{benchmark} tsfast GRU seed {seed}: test {result['test']:.4g} {result['unit']} "
                f"(from sample {result['n_initial']}), validation {result['validation']:.4g}, "
                f"{result['epochs']:.3g} epochs ({result['iterations']} iterations), "
                f"{result['seconds']:.0f} s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
