"""The training-time estimate: it times the run the recipe trains and counts the runs it trains."""

import dataclasses

import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.sysid import RecipeConfig, estimate_training, identify
from keras_mgu.sysid.timing import describe_seconds
from tests.helpers import END_TO_END, NETWORK_CLASSES

TINY = RecipeConfig(
    units=(4,), iterations=6, steps_per_epoch=3, validation_checks=3, model_classes=NETWORK_CLASSES
)


@pytest.fixture(scope="module")
def tanks():
    return datasets.simulate_cascaded_tanks(n_samples=160, seed=0)


@END_TO_END
@pytest.mark.parametrize("cell, restarts", [("mgu", 2), ("gru", 1)])
def test_estimate_counts_the_runs_and_iterations_identify_trains(tanks, cell, restarts):
    config = dataclasses.replace(TINY, cell=cell)
    found = identify(tanks, config, restarts=restarts, seed=0)
    estimate = estimate_training(tanks, config, restarts=restarts, steps=2)
    assert estimate.cell == cell == found.config.cell
    assert estimate.runs == len(found.runs)
    assert estimate.iterations == found.runs[0].config.iterations == 6
    assert np.isfinite(estimate.step_seconds) and estimate.step_seconds > 0
    assert estimate.run_seconds == pytest.approx(estimate.step_seconds * 6)
    assert estimate.seconds == pytest.approx(estimate.run_seconds * len(found.runs))


def test_estimate_follows_the_resolved_iterations(tanks):
    short = estimate_training(tanks, dataclasses.replace(TINY, iterations=None, effort=1), 1, 1)
    assert short.iterations == RecipeConfig(units=(4,)).resolved(
        tanks.estimation.n_samples).iterations  # fmt: skip
    assert short.runs in (1, 2)  # the linear model a candidate or not


@pytest.mark.parametrize(
    "kwargs, match",
    [({"steps": 0}, "steps"), ({"steps": 1.5}, "steps"), ({"restarts": 0}, "restarts")],
)
def test_bad_estimate_arguments_say_what_was_expected(tanks, kwargs, match):
    with pytest.raises(ValueError, match=match):
        estimate_training(tanks, TINY, **kwargs)


def test_seconds_read_in_the_unit_that_suits_them():
    assert [describe_seconds(s) for s in (4.2, 119, 600, 7199, 12_600)] == [
        "4 s", "119 s", "10 min", "120 min", "3.5 h"
    ]  # fmt: skip
