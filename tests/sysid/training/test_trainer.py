"""The trainer's blocks of steps: where the checks fall, and the same run as one step per call."""

import keras
import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.datasets import Normalizer
from keras_mgu.sysid import train_simulator
from keras_mgu.sysid.training import run, trainer
from keras_mgu.sysid.training.trainer import MAX_BLOCK, execution_block
from tests.helpers import short_network_config


@pytest.mark.parametrize(
    "marks, block",
    [((20, 100), 20), ((70, 100), 10), ((5000, 5000), 50), ((7, 100), 1), ((3, 0), 3),
     ((64, 128), 32)],
)  # fmt: skip
def test_the_block_divides_every_mark_and_is_the_largest_under_the_cap(marks, block):
    assert execution_block(*marks) == block
    for mark in marks:
        assert mark < 1 or mark % block == 0
    larger = [b for b in range(block + 1, MAX_BLOCK + 1) if all(m < 1 or m % b == 0 for m in marks)]
    assert larger == []  # independent brute force: no larger block under the cap fits


def test_no_mark_gives_one_step_and_a_cap_below_one_is_refused():
    assert execution_block() == execution_block(0) == 1
    with pytest.raises(ValueError, match="`cap` must be >= 1"):
        execution_block(20, cap=0)


def test_a_run_in_blocks_is_the_run_of_one_step_per_call(monkeypatch):
    """Checks every 5 iterations, epochs of 10: blocks of 5 (one step per call on PyTorch)."""
    data = datasets.simulate_cascaded_tanks(n_samples=240, seed=0)
    norm = Normalizer.fit(data.estimation)
    est, val = norm.transform(data.estimation), norm.transform(data.validation)
    config = short_network_config(4, 30, 6).resolved(est.n_samples)
    assert execution_block(config.validation_interval(), config.steps_per_epoch) == 5
    compiled = []
    fit_windows = trainer.fit_windows

    def spy(*args, **kwargs):
        seconds = fit_windows(*args, **kwargs)
        compiled.append(args[0].steps_per_execution)
        return seconds

    monkeypatch.setattr(run, "fit_windows", spy)
    blocks = train_simulator(est, val, config, seed=3)
    monkeypatch.setattr(run, "execution_block", lambda *marks: 1)
    one = train_simulator(est, val, config, seed=3)
    assert compiled == [1 if keras.backend.backend() == "torch" else 5, 1]
    checks = [h["iteration"] for h in blocks.stopper.history]
    every = [5, 10, 15, 20, 25, 30]
    # The first check comes at the first call back: iteration 1, or the first block's end.
    assert [h["iteration"] for h in one.stopper.history] == [1, *every]
    assert checks == (every if compiled[0] == 5 else [1, *every])
    np.testing.assert_allclose(
        [h["score"] for h in blocks.stopper.history][-6:],
        [h["score"] for h in one.stopper.history][-6:], rtol=1e-5,
    )  # fmt: skip
    assert blocks.best_iteration == one.best_iteration
    for a, b in zip(blocks.model.get_weights(), one.model.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
