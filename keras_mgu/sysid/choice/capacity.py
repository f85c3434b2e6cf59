"""Capacity and learning rate chosen on validation: a screening rung before the restarts.

With ``RecipeConfig(capacity="search")`` :func:`~keras_mgu.sysid.identify`
does not take the units and learning rate as given. After the structure probe
(one full run of each structure with the config's own units and learning
rate), it trains one short run of the winning structure for every pair of

* units of the one MGU layer in :data:`UNITS_GRID` and
* initial learning rate in :data:`LEARNING_RATES_GRID`,

each for :data:`SCREEN_FRACTION` of the run's iterations (its schedule,
checks and early stopping scaled with it; the weight decay kept), all from the
same seed, runs of one learning rate trained as one population. The pair with
the lowest validation RMSE is the capacity of the remaining ``restarts - 1``
full runs; the probe's full run stays among the runs the selection chooses
from. This is the first rung of successive halving, cut to one rung: its cost
is ``len(grid) * SCREEN_FRACTION`` full runs (9 / 4 = 2.25), paid once
whatever the number of restarts.

No rule here is keyed to a record: the grid is the same for every record,
and the choice is made on the validation record alone.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence

from keras_mgu.sysid.config import RecipeConfig

__all__ = [
    "LEARNING_RATES_GRID", "SCREEN_FRACTION", "UNITS_GRID", "choose_capacity", "screening_configs",
]  # fmt: skip

#: Units of the one MGU layer the screening tries.
UNITS_GRID = (16, 32, 64)
#: Initial learning rates the screening tries (the schedule's decays follow).
LEARNING_RATES_GRID = (0.003, 0.01, 0.03)
#: The share of the full run's iterations a screening run trains.
SCREEN_FRACTION = 0.25


def screening_configs(config: RecipeConfig) -> list[RecipeConfig]:
    """One short config per (units, learning rate) of the grid, from a resolved ``config``.

    Each trains ``SCREEN_FRACTION`` of ``config.iterations`` (at least one
    epoch of ``steps_per_epoch``, at most the full run) with the same window,
    batch, weight decay, schedule fractions and number of validation checks.
    """
    if config.iterations is None:
        raise ValueError("Screening needs a resolved config (`iterations` set).")
    short = int(max(config.steps_per_epoch, round(config.iterations * SCREEN_FRACTION)))
    short = min(short, config.iterations)
    return [
        dataclasses.replace(
            config, units=(units,), learning_rate=rate, iterations=short, validation_every=None
        )
        for rate, units in itertools.product(LEARNING_RATES_GRID, UNITS_GRID)
    ]


def choose_capacity(
    config: RecipeConfig, train: Callable[[Sequence[RecipeConfig]], Sequence[float]]
) -> tuple[RecipeConfig, list[dict]]:
    """The full-length config with the capacity that validates best, and the screening table.

    Args:
        config: The resolved config of the winning structure.
        train: Trains the given configs (from one seed) and returns each
            run's validation RMSE, in order.

    Returns:
        ``config`` with the chosen ``units`` and ``learning_rate`` (its
        iterations and schedule unchanged), and one row per screening run:
        ``{"units", "learning_rate", "iterations", "validation_rmse"}``. A
        tie goes to the fewer units, then the lower learning rate; a run that
        diverged (NaN) scores infinity.
    """
    candidates = screening_configs(config)
    scores = list(train(candidates))
    if len(scores) != len(candidates):
        raise ValueError(f"`train` returned {len(scores)} scores for {len(candidates)} configs.")
    table = [
        {
            "units": c.units[0], "learning_rate": c.learning_rate, "iterations": c.iterations,
            "validation_rmse": float(s) if math.isfinite(s) else math.inf,
        }
        for c, s in zip(candidates, scores, strict=True)
    ]  # fmt: skip
    best = min(table, key=lambda r: (r["validation_rmse"], r["units"], r["learning_rate"]))
    chosen = dataclasses.replace(
        config, units=(best["units"],), learning_rate=best["learning_rate"]
    )
    return chosen, table
