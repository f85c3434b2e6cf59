"""Choosing among runs on validation: the best run, or a greedy average of runs."""

import dataclasses

import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.sysid import RecipeConfig, greedy_ensemble, identify
from keras_mgu.sysid.choice.restarts import selection_pool
from keras_mgu.sysid.choice.selection import select
from tests.helpers import END_TO_END, NETWORK_CLASSES

TINY = RecipeConfig(
    units=(4,), iterations=6, steps_per_epoch=3, validation_checks=3, model_classes=NETWORK_CLASSES
)


def _rmse(error):
    return float(np.sqrt(np.mean(np.square(error))))


def test_opposite_errors_cancel():
    a = np.random.default_rng(0).standard_normal((50, 1))
    assert sorted(greedy_ensemble([a, -a, 3 * a])) == [0, 1]


def test_repeats_weigh_a_run_more():
    # Best alone: -a/2 (RMSE |a|/2); with a: a/4; with -a/2 again: (a - a) / 3 = 0.
    a = np.linspace(-1.0, 1.0, 40)[:, None]
    assert greedy_ensemble([a, -0.5 * a]) == (1, 0, 1)


def test_it_stops_when_no_run_lowers_the_rmse():
    a = np.random.default_rng(1).standard_normal((30, 2))
    assert greedy_ensemble([a, 1.01 * a, a.copy()]) == (0,)


def test_the_average_never_validates_worse_than_the_best_run():
    rng = np.random.default_rng(2)
    common = rng.standard_normal((80, 1))
    for _ in range(20):
        errors = [common * rng.uniform(0.2, 1) + rng.standard_normal((80, 1)) for _k in range(6)]
        picked = greedy_ensemble(errors)
        scores = [_rmse(e) for e in errors]
        assert picked[0] == int(np.argmin(scores))
        averaged = np.mean([errors[k] for k in picked], axis=0)
        assert _rmse(averaged) <= min(scores) + 1e-12
        # Greedy: each pick lowered the RMSE of the average made so far.
        steps = [
            _rmse(np.mean([errors[k] for k in picked[:i]], axis=0))
            for i in range(1, len(picked) + 1)
        ]
        assert all(b < a for a, b in zip(steps, steps[1:], strict=False))


def test_runs_that_diverged_are_never_added():
    a = np.ones((10, 1))
    bad = np.full((10, 1), np.nan)
    assert greedy_ensemble([a, bad, -0.9 * a]) == (2, 0)  # (-0.9 + 1) / 2; nothing after
    assert greedy_ensemble([bad, bad]) == (0,)


def test_bad_input_says_what_was_expected():
    with pytest.raises(ValueError, match="at least one"):
        greedy_ensemble([])
    with pytest.raises(ValueError, match="same shape"):
        greedy_ensemble([np.zeros((5, 1)), np.zeros((6, 1))])
    with pytest.raises(ValueError, match=r"one of \('best', 'ensemble'\)"):
        select([np.zeros((5, 1))], "mean")
    with pytest.raises(ValueError, match="selection"):
        RecipeConfig(selection="top3")


@pytest.fixture(scope="module")
def tanks():
    return datasets.simulate_cascaded_tanks(n_samples=160, seed=0)


@END_TO_END
def test_identify_averages_the_runs_chosen_on_validation(tanks):
    config = dataclasses.replace(TINY, linear_prior=False)
    best = identify(tanks, config, restarts=3, seed=3)
    found = identify(tanks, dataclasses.replace(config, selection="ensemble"), restarts=3, seed=3)
    # The same runs; the ensemble starts from the best one and validates no worse.
    assert [r.validation_rmse for r in found.runs] == pytest.approx(
        [r.validation_rmse for r in best.runs], rel=1e-5
    )
    assert found.members and found.members[0] == best.best == found.best
    # Chosen on the choice error (validation and horizon, each from measured samples).
    errors = [found.run_alone(k).choice_error(tanks) for k in range(len(found.runs))]
    pool = selection_pool(found.runs, found.runs[found.best].structure)  # the winning class's
    assert found.members == tuple(pool[k] for k in greedy_ensemble([errors[k] for k in pool]))
    for run, error in zip(found.runs, errors, strict=True):
        np.testing.assert_allclose(run.choice_error, error, rtol=1e-5, atol=1e-7)
    chosen = dataclasses.replace(found, members=found.members)
    average = np.mean([errors[k] for k in found.members], axis=0)
    np.testing.assert_allclose(chosen.choice_error(tanks), average, rtol=1e-4, atol=1e-6)
    assert np.sqrt(np.mean(average**2)) <= found.runs[found.best].choice_rmse * (1 + 1e-6)
    # Its simulation is the weighted average of its runs' simulations, in physical units.
    u = tanks.test.u
    sims = [found.run_alone(k).simulate(u) for k in found.members]
    np.testing.assert_allclose(found.simulate(u), np.mean(sims, axis=0), rtol=1e-6, atol=1e-9)
    y0 = tanks.test.y[:5]
    sims = [found.run_alone(k).simulate(u, y0) for k in found.members]
    np.testing.assert_allclose(found.simulate(u, y0), np.mean(sims, axis=0), rtol=1e-6, atol=1e-9)


def test_the_selection_is_said_in_words_runs_numbered_from_one():
    from keras_mgu.sysid.choice.selection import describe_members, member_weights

    assert describe_members((2,)) == describe_members((2, 2, 2)) == "run 3 alone"
    assert describe_members((1, 1, 0)) == (
        "the weighted average of run 2 (weight 2/3) and run 1 (weight 1/3)"
    )
    assert describe_members((0, 3, 1)).count("weight 1/3") == 3
    classes = ["network", "linear+network"]
    assert describe_members((1, 1, 0), classes) == (
        "the weighted average of run 2 (linear+network, weight 2/3) and run 1 (network, weight 1/3)"
    )
    assert describe_members((0,), classes) == "run 1 (network) alone"
    assert member_weights((1, 1, 0)) == pytest.approx({1: 2 / 3, 0: 1 / 3})


def test_an_average_is_the_winning_class_runs_alone():
    """Runs of the network and of the network on a linear model's residual are never mixed."""
    import types

    from keras_mgu.sysid.choice.restarts import selection_pool

    classes = ["network", "linear+network", "narx", "network", "polynomial", "network"]
    runs = [types.SimpleNamespace(structure=c, not_kept=None) for c in classes]
    assert selection_pool(runs, "network") == [0, 3, 5]
    assert selection_pool(runs, "linear+network") == [1]
    assert selection_pool(runs, "polynomial") == [4]
