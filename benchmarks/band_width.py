"""The free run's band: one width, a width that follows the members' disagreement, a reach.

For each record and seed S it runs ``sysid.identify(data, seed=S)`` with the
defaults (``--config``: the RecipeConfig settings that differ, as JSON), then
draws two 0.95 bands around the simulation from the first ``n`` measured
outputs (the protocol's ``n``, else 50), both calibrated on the validation
record's simulation from its first ``n`` outputs: the model's own
band (one width per output, :mod:`keras_mgu.sysid.judging.band`) and the
band scaled by the members' disagreement
(:mod:`keras_mgu.sysid.judging.scaled_band`); the same with more members where
the class kept is the polynomial (``drawn``: the free runs of ``DRAWS``
coefficient sets drawn from each kept polynomial run's least-squares
uncertainty, :mod:`keras_mgu.sysid.models.polynomial_uncertainty`; the
scaled band itself where it is another class); and a fourth, the one-width
band stretched, on the samples outside the estimation range (an input or the
simulated output outside ``found.ranges``), to take in the ARX reference's
simulation from the same start (``reach``). On the test record (samples
``n`` on) and, for a zoo plant, on its beyond record after ``beyond_start``,
it writes each band's coverage and mean half-width over the simulation's
RMSE to ``--out/RECORD/BACKEND_seedS.json``; ``--report`` prints the table of
``benchmarks/RESULTS.md`` ("A band that widens where the members disagree").

Usage::

    python benchmarks/band_width.py --backend jax --seeds 0 1 \\
        --records zoo:van_der_pol zoo:hardening_oscillator zoo:duffing zoo:pendulum cascaded_tanks
    python benchmarks/band_width.py --report

A zoo plant is ``zoo:NAME`` (its default length, data seed 0); a measured
record's folder is read from ``--data-root`` (default ``../shared/data``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results", "band_width")
LEVEL = 0.95
ZOO = "zoo:"
BANDS = ("constant", "scaled", "drawn", "reach")
#: Coefficient sets drawn per polynomial run for the ``drawn`` band.
DRAWS = 20


def load(record: str, data_root: str):
    """``(data, plant)``: the records of ``zoo:NAME`` (and its plant) or of a measured folder."""
    from keras_mgu import datasets

    if record.startswith(ZOO):
        plant = datasets.zoo_plant(record[len(ZOO) :], seed=0)
        return plant.data, plant
    return datasets.load_benchmark(record, os.path.join(data_root, record)), None


def drawn_members(found, estimation, u, y_initial) -> list:
    """The free runs of ``DRAWS`` coefficient sets of each polynomial run of the class kept
    (none that ran off), physical; none where the class kept is another."""
    from keras_mgu.sysid.models.polynomial_uncertainty import drawn_simulations

    chosen = found.runs[found.best].structure
    runs = [r for r in found.runs if r.structure == chosen and not r.ran_off and r.polynomial]
    return [
        y for k, run in enumerate(runs)
        for y in drawn_simulations(run, estimation, u, y_initial, DRAWS, seed=k)
    ]  # fmt: skip


def disagreements(found, estimation, u, y_initial) -> tuple:
    """``(y_hat, D, D_drawn)``: the members' disagreement, and with :func:`drawn_members`."""
    import numpy as np

    from keras_mgu.sysid.judging.scaled_band import disagreement, member_disagreement

    y_hat, d = member_disagreement(found, u, y_initial)
    more = drawn_members(found, estimation, u, y_initial)
    return y_hat, d, np.maximum(d, disagreement(y_hat, more))


def judge(found, bands, u, y, n: int, first: int, estimation) -> dict:
    """Each band's coverage and mean half-width / RMSE over rows ``first`` on; ``bands``:
    the scaled band and the drawn one (:func:`drawn_members` of ``estimation``)."""
    import numpy as np

    from keras_mgu.sysid.judging.band import Trajectory, coverage

    band, drawn_band = bands
    y_hat, d, d_drawn = disagreements(found, estimation, u, y[:n])
    error = float(np.sqrt(np.mean((y[first:] - y_hat[first:]) ** 2)))
    out = {"rmse": error}
    constant = found.band.around(y_hat, LEVEL, measured=n)
    reach = constant
    if found.arx is not None:
        arx = found.reference().simulate(u, y[:n])
        inputs, outputs = found.ranges.outside(u, y_hat)
        outside = (inputs | outputs)[:, None] & (np.arange(len(y)) >= n)[:, None]
        lower = np.where(outside, np.minimum(constant.lower, arx), constant.lower)
        upper = np.where(outside, np.maximum(constant.upper, arx), constant.upper)
        reach = Trajectory(y_hat, lower, upper)
        out["outside_share"] = float(np.mean((inputs | outputs)[first:]))
    for name, drawn in (
        ("constant", constant),
        ("scaled", band.around(y_hat, d, LEVEL, measured=n)),
        ("drawn", drawn_band.around(y_hat, d_drawn, LEVEL, measured=n)),
        ("reach", reach),
    ):
        half = float(np.mean(drawn.upper[first:] - drawn.lower[first:])) / 2
        out[name] = {"coverage": coverage(y, drawn, first), "width_over_rmse": half / error}
    return out


def run_one(record: str, seed: int, data_root: str, config: dict | None = None) -> dict:
    """Identify ``record`` with the defaults (``config``: RecipeConfig settings that
    differ) and judge the bands (module)."""
    import keras

    from keras_mgu import sysid
    from keras_mgu.sysid.judging.scaled_band import calibrate_scaled_band

    data, plant = load(record, data_root)
    start = time.perf_counter()
    found = sysid.identify(data, sysid.RecipeConfig(**(config or {})), seed=seed)
    seconds = time.perf_counter() - start
    n, val = found.resolve_n_initial(), data.validation
    y_hat, d, d_drawn = disagreements(found, data.estimation, val.u, val.y[:n])
    bands = tuple(calibrate_scaled_band(val.y, y_hat, e, n) for e in (d, d_drawn))
    row = {
        "record": record, "seed": seed, "backend": keras.backend.backend(), "n": n,
        "chosen": found.runs[found.best].structure, "members": len(set(found.kept)),
        "has_arx": found.arx is not None, "seconds": seconds, "config": config or {},
        "test": judge(found, bands, data.test.u, data.test.y, n, n, data.estimation),
    }  # fmt: skip
    if plant is not None:
        beyond = plant.beyond
        start = plant.beyond_start
        row["beyond_after"] = judge(found, bands, beyond.u, beyond.y, n, start, data.estimation)
    return row


def read_rows(out: str) -> list[dict]:
    """Every result under ``out`` (``RECORD/BACKEND_seedS.json``), in the folders' order."""
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(out, "*", "*.json")))]


def write_row(out: str, row: dict) -> str:
    """Write ``row`` (its ``record``, ``backend`` and ``seed``) to
    ``out/RECORD/BACKEND_seedS.json`` (``zoo:NAME`` as ``zoo_NAME``); its path."""
    folder = os.path.join(out, row["record"].replace(":", "_"))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{row['backend']}_seed{row['seed']}.json")
    with open(path, "w") as f:
        json.dump(row, f, indent=1, default=str)
    return path


def report(out: str) -> str:
    """The markdown table of every run under ``out``, and the medians over seeds (``-``: a
    band a result has not, one written before it joined)."""
    rows = read_rows(out)
    lines = [
        "| record | part | backend | seeds | chosen | coverage one width | coverage scaled "
        "| coverage drawn | coverage reach | width/RMSE one width | scaled | drawn | reach |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["record"], r["backend"]) for r in rows})
    for record, backend in keys:
        runs = [r for r in rows if (r["record"], r["backend"]) == (record, backend)]
        for part in ("test", "beyond_after"):
            parts = [r[part] for r in runs if part in r]
            if not parts:
                continue
            covers, widths = {}, {}
            for band in BANDS:
                if not all(band in p for p in parts):
                    covers[band] = widths[band] = "-"
                    continue
                covers[band] = " / ".join(f"{p[band]['coverage']:.3f}" for p in parts)
                width = statistics.median(p[band]["width_over_rmse"] for p in parts)
                widths[band] = f"{width:.2f}"
            lines.append(
                f"| {record} | {part} | {backend} | {' '.join(str(r['seed']) for r in runs)} "
                f"| {', '.join(r['chosen'] for r in runs)} | "
                + " | ".join(covers[band] for band in BANDS) + " | "
                + " | ".join(widths[band] for band in BANDS) + " |"
            )
    return "\n".join(lines)


def record_parser(description: str, out: str) -> argparse.ArgumentParser:
    """The options of a script that identifies records per seed into ``out``: ``--backend``,
    ``--records``, ``--seeds``, ``--data-root``, ``--out`` and ``--report``."""
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)
    parser.add_argument("--backend", default=None, choices=("tensorflow", "jax", "torch"))
    parser.add_argument("--records", nargs="+", default=[])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--data-root", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("--out", default=out)
    parser.add_argument("--report", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = record_parser(__doc__.splitlines()[0], DEFAULT_OUT)
    parser.add_argument("--config", default="{}", help="RecipeConfig settings as a JSON object")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.out))
        return 0
    if args.backend:
        os.environ["KERAS_BACKEND"] = args.backend
    for record in args.records:
        for seed in args.seeds:
            row = run_one(record, seed, args.data_root, json.loads(args.config))
            write_row(args.out, row)
            test = row["test"]
            print(f"{record} seed {seed}: {row['chosen']}, test coverage "
                  f"{test['constant']['coverage']:.3f} / {test['scaled']['coverage']:.3f}",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
