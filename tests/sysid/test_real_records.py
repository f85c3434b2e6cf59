"""Reduced runs of the recipe on the measured benchmarks (skipped where their files are absent)."""

import dataclasses
import os

import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.sysid import RecipeConfig, identify
from tests.helpers import END_TO_END, short_network_config

TINY = short_network_config(4, 20, 2)


def _load(shared_data_dir, name):
    folder = os.path.join(shared_data_dir, name)
    if not os.path.isdir(folder):
        pytest.skip(f"the {name} benchmark files are not beside this checkout")
    return datasets.load_benchmark(name, folder)


@END_TO_END
@pytest.mark.parametrize("name, n", [("wh2009", 50), ("emps", 20)])
def test_long_records_train_from_the_encoder_and_score_under_their_protocol(
    shared_data_dir, name, n
):
    data = _load(shared_data_dir, name)
    found = identify(data, TINY, restarts=1)
    # The linear model explains both records, so both structures were tried.
    assert [run.structure for run in found.runs] == ["network", "linear+network"]
    for run in found.runs:
        assert run.config.initial_state == "encoder" and run.config.n_initial == n
        assert run.config.window <= 1024 and np.isfinite(run.validation_rmse)
    assert found.runs[1].path.linear is not None
    protocol = data.protocol
    score = protocol.score_in_unit(found.score(data.test, "benchmark"))
    spread = protocol.score_in_unit(float(data.test.y[n:].std()))
    assert 0 < score < 2 * spread, (score, spread)
    # The run on the linear model's residual starts from a model that simulates these records
    # well: after 20 iterations it scores far below the output's spread.
    linear = dataclasses.replace(found, best=1)
    assert protocol.score_in_unit(linear.score(data.test, "benchmark")) < 0.5 * spread


def test_defaults_follow_from_the_real_records(shared_data_dir):
    wh = _load(shared_data_dir, "wh2009")
    resolved = RecipeConfig().resolved(wh.estimation.n_samples, wh.n_initial)
    assert resolved.initial_state == "encoder" and resolved.n_initial == 50
    assert resolved.iterations == 10_000 and resolved.time_budget is None
