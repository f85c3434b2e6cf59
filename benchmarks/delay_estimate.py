"""The input delay the recipe estimates on each zoo plant and measured record.

``estimate_input_delay(estimation, validation)``
(:mod:`keras_mgu.sysid.models.delay`) on every zoo plant (its default length,
data seeds ``--seeds``) and on each measured record found under
``--data-root``, beside the dead time the plant is built with (the zoo's
heated tank: 13 samples, 12 of pipe and one of hold; the others none, so 0
with direct feed-through, else 1). Least squares only: NumPy, no backend.

Usage::

    python benchmarks/delay_estimate.py --seeds 0 1 2 3
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MEASURED = ("cascaded_tanks", "emps", "wh2009")
#: The dead time each zoo plant is built with, in samples; the others have none.
BUILT_DELAY = {"heated_tank": 13}


def zoo_row(name: str, seeds: list[int]) -> str:
    """A markdown row: the zoo plant, its built delay, the delay found per data seed."""
    from keras_mgu.datasets import zoo_plant
    from keras_mgu.sysid.models.delay import estimate_input_delay

    found = []
    for seed in seeds:
        data = zoo_plant(name, seed=seed).data
        found.append(estimate_input_delay(data.estimation, data.validation))
    built = BUILT_DELAY.get(name, "none")
    return f"| zoo: {name} | {built} | " + " / ".join(_delays(d) for d in found) + " |"


def measured_row(name: str, data_root: str) -> str | None:
    """A markdown row for a measured record under ``data_root`` (None where it is absent)."""
    from keras_mgu.datasets import load_benchmark
    from keras_mgu.sysid.models.delay import estimate_input_delay

    folder = os.path.join(data_root, name)
    if not os.path.isdir(folder):
        return None
    data = load_benchmark(name, folder)
    return f"| {name} | none | {_delays(estimate_input_delay(data.estimation, data.validation))} |"


def _delays(delay: tuple[int, ...]) -> str:
    return ", ".join(str(d) for d in delay)


def main(argv: list[str] | None = None) -> int:
    from keras_mgu.datasets.zoo import ZOO

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--data-root", default=os.path.join(HERE, "..", "..", "shared", "data"))
    args = parser.parse_args(argv)
    seeds = ", ".join(map(str, args.seeds))
    print(f"| record | dead time built in | delay found (zoo: data seeds {seeds}) |")
    print("|---|---|---|")
    for name in ZOO:
        print(zoo_row(name, args.seeds), flush=True)
    for name in MEASURED:
        row = measured_row(name, args.data_root)
        if row is not None:
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
