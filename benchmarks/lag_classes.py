"""The defaults (every model class) on the zoo's short oscillators: test and beyond RMSE per seed.

Identifies each plant (``keras_mgu.datasets.zoo_plant(name)``, data seed 0)
with ``RecipeConfig(model_classes=...)`` (default: the library's, every
class) and the recipe's other defaults, for each seed, and prints one line per run: the
class chosen, the wall time, the test RMSE and the beyond record's RMSE
before and after ``beyond_start``, each simulated from the record's first 50
measured outputs and scored after them, in the output's unit. The floors
(ARX, the plant's own class) come from ``benchmarks/sysid_suite.py
--floors``.

    KERAS_BACKEND=jax python benchmarks/lag_classes.py hardening_oscillator pendulum --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np

N_INITIAL = 50


def rmse(y: np.ndarray, y_sim: np.ndarray) -> float:
    return float(np.sqrt(np.mean((y - y_sim) ** 2)))


def run(plant_name: str, seed: int, classes: tuple[str, ...]) -> dict:
    """One identification of ``plant_name`` with ``seed``; its scores."""
    from keras_mgu import datasets, sysid

    plant = datasets.zoo_plant(plant_name)
    start = time.perf_counter()
    found = sysid.identify(plant.data, sysid.RecipeConfig(model_classes=classes), seed=seed)
    wall = time.perf_counter() - start
    n, beyond, cut = N_INITIAL, plant.beyond, plant.beyond_start
    test = plant.data.test
    y_beyond = found.simulate(beyond.u, beyond.y[:n])
    return {
        "plant": plant_name,
        "seed": seed,
        "chosen": found.runs[found.best].structure,
        "wall_s": wall,
        "test": rmse(test.y[n:], found.simulate(test.u, test.y[:n])[n:]),
        "beyond_before": rmse(beyond.y[n:cut], y_beyond[n:cut]),
        "beyond_after": rmse(beyond.y[cut:], y_beyond[cut:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plants", nargs="+")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--classes", nargs="+", default=None)
    args = parser.parse_args()
    classes = None if args.classes is None else tuple(args.classes)
    if classes is not None and "all" in classes:
        classes = "all"
    print("| plant | seed | chosen | wall s | test | beyond, before | beyond, after |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for plant in args.plants:
        for seed in args.seeds:
            r = run(plant, seed, classes)
            print(
                f"| {r['plant']} | {seed} | {r['chosen']} | {r['wall_s']:.0f} | {r['test']:.4f} | "
                f"{r['beyond_before']:.4f} | {r['beyond_after']:.4f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
