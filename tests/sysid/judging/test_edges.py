"""The record's edges: the samples marked, the comparison with the ARX model, the runs kept."""

import types

import numpy as np
import pytest

from keras_mgu.sysid.judging.edges import (
    MIN_EDGE_SAMPLES,
    ROUNDING,
    EdgeCheck,
    edge_check,
    edge_mask,
)
from tests.helpers import BACKEND_INDEPENDENT


def _record(u, y):
    u, y = np.asarray(u, float), np.asarray(y, float)
    return types.SimpleNamespace(u=u, y=y, n_samples=len(u))


@BACKEND_INDEPENDENT
def test_the_edges_are_the_outer_tenth_of_each_channel_strictly():
    # u = 0 .. 100: its 0.05 and 0.95 quantiles are 5 and 95 (linear interpolation)
    est = _record(np.arange(101.0)[:, None], np.zeros((101, 1)))
    scored = _record([[-1.0], [5.0], [50.0], [95.0], [95.5], [50.0]],
                     [[0.0], [0.0], [0.0], [0.0], [0.0], [0.1]])  # fmt: skip
    np.testing.assert_array_equal(edge_mask(est, scored), [1, 0, 0, 0, 1, 1])
    # an input of two levels marks nothing at its levels; the output marks its own edges
    steps = _record(np.repeat([0.0, 1.0], 50)[:, None], np.linspace(0, 1, 100)[:, None])
    probe = _record([[0.0], [1.0], [1.0]], [[0.5], [0.5], [0.99]])
    np.testing.assert_array_equal(edge_mask(steps, probe), [0, 0, 1])
    with pytest.raises(ValueError, match=r"`share` must be in \(0, 1\)"):
        edge_mask(est, scored, share=1.0)


@BACKEND_INDEPENDENT
def test_the_check_scores_both_models_on_the_edge_samples_both_score():
    rng = np.random.default_rng(0)
    mask = rng.random(200) < 0.3
    error = rng.normal(size=(200 - 7, 2))  # scores samples 7 ..
    reference = 0.5 * rng.normal(size=(200 - 12, 2))  # scores samples 12 ..
    check = edge_check(mask, error, 7, reference, 12)
    t = np.flatnonzero(mask[12:]) + 12  # the edge samples both score
    assert check.samples == len(t)
    np.testing.assert_allclose(check.rmse, np.sqrt(np.mean(error[t - 7] ** 2)))
    np.testing.assert_allclose(check.linear_rmse, np.sqrt(np.mean(reference[t - 12] ** 2)))
    assert check.worse and check.decides
    assert not edge_check(mask, error, 7, 3 * reference, 12).worse
    with pytest.raises(ValueError, match="must have 193 rows; received 192"):
        edge_check(mask, error[1:], 7, reference, 12)


@BACKEND_INDEPENDENT
def test_too_few_edge_samples_decide_nothing_and_a_run_off_error_is_worse():
    assert not EdgeCheck(MIN_EDGE_SAMPLES - 1, 9.0, 1.0).worse
    assert EdgeCheck(MIN_EDGE_SAMPLES, 9.0, 1.0).worse
    assert EdgeCheck(MIN_EDGE_SAMPLES, float("inf"), 1.0).worse
    assert EdgeCheck(MIN_EDGE_SAMPLES, float("nan"), 1.0).worse
    assert not EdgeCheck(MIN_EDGE_SAMPLES, 1.0, 1.0).worse  # "above" it, not level with it
    assert not EdgeCheck(MIN_EDGE_SAMPLES, 1.0 + 0.5 * ROUNDING, 1.0).worse  # nor rounding
    assert EdgeCheck(MIN_EDGE_SAMPLES, 1.0 + 2 * ROUNDING, 1.0).worse
    empty = edge_check(np.zeros(10, bool), np.zeros((10, 1)), 0, np.zeros((10, 1)), 0)
    assert empty.samples == 0 and not empty.worse


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("guard", [True, False])
def test_with_the_guard_a_nonlinear_run_worse_at_the_edges_is_not_kept(guard):
    from keras_mgu.sysid.choice.restarts import best_run, kept_runs
    from keras_mgu.sysid.config import RecipeConfig
    from keras_mgu.sysid.training.run import RunResult

    config = RecipeConfig(edge_guard=guard)

    def run(structure, score, edge):
        result = RunResult(None, 0, float("nan"), 0, 0.0, None, config, structure=structure)
        result.choice_error = np.array([score])
        result.edge = EdgeCheck(50, edge, 0.2)
        return result

    runs = [run("narx", 0.1, 0.3), run("polynomial", 0.2, 0.19), run("linear", 0.3, 0.5)]
    assert [r.edge_worse for r in runs] == [True, False, False]  # linear: not held to it
    assert runs[1].not_kept is None and runs[2].not_kept is None
    if not guard:  # reported, not acted on
        assert runs[0].not_kept is None and kept_runs(runs) == [0, 1, 2] and best_run(runs) == 0
        return
    assert "at the record's edges" in runs[0].not_kept
    assert kept_runs(runs) == [1, 2] and best_run(runs) == 1
    assert best_run(runs, [0]) == 0  # every run of the pool kept out: they all stay


@BACKEND_INDEPENDENT
def test_the_guard_is_a_boolean():
    from keras_mgu.sysid.config import RecipeConfig

    with pytest.raises(ValueError, match="`edge_guard` must be True or False"):
        RecipeConfig(edge_guard="yes")
