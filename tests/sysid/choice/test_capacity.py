"""Capacity and learning rate chosen on validation (``RecipeConfig(capacity="search")``)."""

import dataclasses
import math

import pytest

from keras_mgu import datasets, sysid
from keras_mgu.sysid import RecipeConfig, identify
from keras_mgu.sysid.choice.capacity import (
    LEARNING_RATES_GRID,
    UNITS_GRID,
    choose_capacity,
    screening_configs,
)
from tests.helpers import END_TO_END, NETWORK_CLASSES

TINY = RecipeConfig(
    iterations=8,
    steps_per_epoch=2,
    validation_checks=4,
    capacity="search",
    model_classes=NETWORK_CLASSES,
)


@pytest.fixture(scope="module")
def tanks():
    return datasets.simulate_cascaded_tanks(n_samples=160, seed=0)


def test_screening_runs_cover_the_grid_for_a_quarter_of_the_run():
    full = RecipeConfig(capacity="search").resolved(80_000, n_initial=50, time_constant=8.0)
    configs = screening_configs(full)
    assert len(configs) == len(UNITS_GRID) * len(LEARNING_RATES_GRID) == 9
    pairs = {(c.units, c.learning_rate) for c in configs}
    assert pairs == {((u,), r) for u in UNITS_GRID for r in LEARNING_RATES_GRID}
    for c in configs:
        assert c.iterations == full.iterations // 4 == 2500
        assert (c.window, c.batch_size, c.weight_decay) == (
            full.window, full.batch_size, full.weight_decay,
        )  # fmt: skip
        assert c.validation_interval() == 25  # the same 100 checks over the shorter run
    short = RecipeConfig(iterations=40, steps_per_epoch=20).resolved(500)
    assert {c.iterations for c in screening_configs(short)} == {20}  # at least one epoch
    with pytest.raises(ValueError, match="resolved config"):
        screening_configs(RecipeConfig())


def test_the_lowest_validation_score_chooses_and_nan_never_wins():
    full = RecipeConfig().resolved(800)
    scores = [5.0, 4.0, 3.0, 2.0, math.nan, 2.0, 9.0, 8.0, 7.0]  # by rate, then units
    seen = []

    def train(configs):
        seen.extend(configs)
        return scores

    chosen, table = choose_capacity(full, train)
    assert [(r["units"], r["learning_rate"]) for r in table] == [
        (c.units[0], c.learning_rate) for c in seen
    ]
    # 2.0 twice: (16 units, 0.01) and (64 units, 0.01); the fewer units win the tie.
    assert (chosen.units, chosen.learning_rate) == ((16,), 0.01)
    assert chosen.iterations == full.iterations and chosen.decay_points == full.decay_points
    assert table[4]["validation_rmse"] == math.inf
    with pytest.raises(ValueError, match="returned 2 scores for 9 configs"):
        choose_capacity(full, lambda configs: [1.0, 2.0])


@END_TO_END
def test_identify_trains_the_restarts_with_the_capacity_that_validated_best(tanks, tmp_path):
    found = identify(tanks, TINY, restarts=3, seed=0)
    table = found.capacity_table
    assert len(table) == 9 and all(r["iterations"] == 2 for r in table)
    best = min(table, key=lambda r: (r["validation_rmse"], r["units"], r["learning_rate"]))
    probes = [r for r in found.runs if r.seed == 0]
    restarts = [r for r in found.runs if r.seed != 0]
    assert len(restarts) == 2 and all(r.config.iterations == 8 for r in found.runs)
    assert all(r.config.units == (32,) and r.config.learning_rate == 0.01 for r in probes)
    for r in restarts:
        assert (r.config.units, r.config.learning_rate) == ((best["units"],), best["learning_rate"])
    found.save(tmp_path / "searched.kmgu")
    assert sysid.load(tmp_path / "searched.kmgu").capacity_table == table


def test_capacity_settings_are_checked(tanks):
    with pytest.raises(ValueError, match="`capacity` must be one of"):
        RecipeConfig(capacity="grid")
    with pytest.raises(ValueError, match="leave `units` None"):
        identify(tanks, dataclasses.replace(TINY, units=(8,)), restarts=2)
    fixed = identify(tanks, dataclasses.replace(TINY, capacity="fixed", units=(4,)), restarts=2)
    assert fixed.capacity_table == []
