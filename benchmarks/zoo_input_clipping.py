"""Does clipping the network's inputs to the estimation range help a model beyond that range?

For a zoo plant (``keras_mgu.datasets.zoo``) it identifies the plant with the
library's defaults (``sysid.identify(plant.data, restarts=3, seed=S)``, or
loads the model an earlier call saved in ``--out``), then simulates the
plant's ``beyond`` record (the test input, its last fifth beyond the
estimation input's range) from its first ``n`` measured outputs three ways:

* as trained;
* with every run's network inputs (the standardised ``u``, and ``y_lin`` for
  runs on the linear model's residual) clipped, channel by channel, to the
  range they span over the estimation record, so that beyond it the linear
  model alone carries what the network never saw (no retraining: clipping
  changes nothing within the range);
* the kept run's linear model alone, from rest.

It prints the RMSE over the within-range part (samples ``n`` to
``beyond_start``) and the beyond part, in the output's unit, and the
within-range test record's RMSE. The test records are scored for this
report only; nothing is chosen on them.

Usage::

    KERAS_BACKEND=jax python benchmarks/zoo_input_clipping.py duffing 0
"""

from __future__ import annotations

import argparse
import os

import numpy as np


def rmse(e: np.ndarray) -> float:
    return float(np.sqrt(np.mean(e**2)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plant")
    parser.add_argument("seed", type=int)
    parser.add_argument("--out", default=os.path.join("outputs", "zoo_input_clipping"))
    args = parser.parse_args()

    from keras_mgu import sysid
    from keras_mgu.datasets import zoo
    from keras_mgu.sysid.models import signals

    plant = zoo.zoo_plant(args.plant)
    data, beyond, start = plant.data, plant.beyond, plant.beyond_start
    saved = os.path.join(args.out, f"{args.plant}_seed{args.seed}.kmgu")
    if os.path.exists(saved):
        found = sysid.load(saved)
    else:
        found = sysid.identify(data, restarts=3, seed=args.seed)
        found.save(saved)
    n = found.n_initial or 50

    def parts(model) -> str:
        e = model.simulate(beyond.u, beyond.y[:n]) - beyond.y
        t = model.simulate(data.test.u, data.test.y[:n]) - data.test.y
        within, out = rmse(e[n:start]), rmse(e[start:])
        return f"test {rmse(t[n:]):.4g}, beyond record {within:.4g} within / {out:.4g} beyond"

    kept = found.members or (found.best,)
    print(f"{args.plant}, seed {args.seed}: runs {[r.structure for r in found.runs]}, kept {kept}")
    print(f"  as trained: {parts(found)}")
    as_trained = signals.SignalPath.inputs
    ranges = {}
    for run in found.runs:
        x, _ = as_trained(run.path, data.estimation.u, data.estimation.y[0])
        ranges[id(run.path)] = (x.min(axis=0), x.max(axis=0))

    def clipped(path, u, y0):
        x, y_lin = as_trained(path, u, y0)
        return np.clip(x, *ranges[id(path)]), y_lin

    signals.SignalPath.inputs = clipped
    try:
        print(f"  inputs clipped: {parts(found)}")
    finally:
        signals.SignalPath.inputs = as_trained
    path = found.runs[found.best].path
    if path.linear is not None:
        y_s = path.linear.simulate(
            path.outer.transform_u(beyond.u), path.outer.transform_y(beyond.y[0])
        )
        e = path.outer.inverse_transform_y(y_s) - beyond.y
        within, out = rmse(e[n:start]), rmse(e[start:])
        print(f"  linear model alone: beyond record {within:.4g} within / {out:.4g} beyond")


if __name__ == "__main__":
    main()
