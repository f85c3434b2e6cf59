"""The recipe: defaults that scale with the record, restarts chosen on validation, errors."""

import dataclasses
import os

import numpy as np
import pytest
from scipy.signal import lfilter

from keras_mgu import datasets, sysid
from keras_mgu.datasets import Record, SysIdData
from keras_mgu.sysid import RecipeConfig, identify
from tests.helpers import END_TO_END, NETWORK_CLASSES

TINY = RecipeConfig(
    units=(4,), iterations=6, steps_per_epoch=3, validation_checks=3, model_classes=NETWORK_CLASSES
)


@pytest.fixture(scope="module")
def tanks():
    return datasets.simulate_cascaded_tanks(n_samples=160, seed=0)


def test_defaults_follow_from_the_record():
    short = RecipeConfig().resolved(820)
    assert (short.window, short.batch_size, short.initial_state) == (820, 1, "learned")
    assert (short.iterations, short.weight_decay, short.validation_continues) == (2000, 0.1, True)
    assert short.time_budget is None  # a fixed amount of work, never cut by the clock
    long = RecipeConfig().resolved(80_000, n_initial=50, time_constant=8.5)
    assert (long.initial_state, long.n_initial, long.validation_continues) == ("encoder", 50, False)
    assert (long.window, long.batch_size) == (128, 64)  # 8 tau -> 68 -> 128, 8192 / 128
    assert long.iterations == 10_000 and long.weight_decay == pytest.approx(0.02)
    assert long.time_budget is None
    integrator = RecipeConfig().resolved(20_000, time_constant=float("inf"))
    assert (integrator.window, integrator.batch_size, integrator.n_initial) == (1024, 8, 20)
    assert integrator.iterations == 2500
    assert RecipeConfig(window=64, washout=8).resolved(1000).window == 64
    assert RecipeConfig(initial_state="learned").resolved(5000).validation_continues


def test_several_experiments_cap_the_window_and_validate_apart():
    """Experiments of 300 and 520 samples: windows fit the shorter; no continuing validation."""
    short = RecipeConfig().resolved(820, shortest_experiment=300)
    assert (short.window, short.batch_size, short.initial_state) == (300, 1, "learned")
    assert short.washout == 75 and short.validation_continues is False
    long = RecipeConfig().resolved(
        80_000, n_initial=50, time_constant=30.0, shortest_experiment=200
    )
    assert long.window == 150 and long.initial_state == "encoder"  # 200 less the encoder's 50
    with pytest.raises(ValueError, match="shortest estimation experiment has 300 samples"):
        RecipeConfig(window=400).resolved(820, shortest_experiment=300)


def test_identify_on_several_experiments_trains_the_network_alone(tanks):
    est = datasets.join_experiments([tanks.estimation.slice(0, 60), tanks.estimation.slice(60)])
    data = SysIdData(est, tanks.validation, tanks.test)
    found = identify(data, TINY, restarts=1)
    run = found.runs[found.best]
    assert run.structure == "network" and run.config.window == 60
    assert not run.config.validation_continues
    with pytest.raises(ValueError, match="`linear_prior=True` needs one estimation experiment"):
        identify(data, dataclasses.replace(TINY, linear_prior=True), restarts=1)


def test_effort_multiplies_the_derived_iterations():
    """Weight decay follows the iterations, so the total shrinkage stays that of effort 1."""
    for n_samples in (820, 30_000, 200_000):
        one, four = (RecipeConfig(effort=k).resolved(n_samples) for k in (1, 4))
        assert four.iterations == 4 * one.iterations
        assert four.weight_decay * four.iterations == pytest.approx(
            min(one.weight_decay * one.iterations, 0.1 * 2000)
        )
        assert (four.window, four.batch_size, four.units) == (one.window, one.batch_size, one.units)
    assert RecipeConfig(effort=4, iterations=30).resolved(820).iterations == 30


def test_the_default_run_ignores_the_clock(tanks, monkeypatch):
    """A clock that jumps an hour per reading changes nothing without a time budget.

    The same seed gives the same validation scores and stopping points as with
    the real clock, and every run does all its iterations; a user's
    ``time_budget`` does cut runs under that clock.
    """
    from keras_mgu.callbacks import budget as budget_module

    config = dataclasses.replace(TINY, iterations=9)
    first = identify(tanks, config, restarts=1)
    ticks = iter(range(0, 10**9, 3600))
    monkeypatch.setattr(budget_module.time, "perf_counter", lambda: float(next(ticks)))
    again = identify(tanks, config, restarts=1)
    assert [r.validation_score for r in again.runs] == [r.validation_score for r in first.runs]
    assert [r.best_iteration for r in again.runs] == [r.best_iteration for r in first.runs]
    capped = identify(tanks, dataclasses.replace(config, time_budget=60.0), restarts=1)
    assert all(r.stopper.history[-1]["iteration"] < 9 for r in capped.runs)


def test_settings_given_are_kept():
    given = RecipeConfig(units=16, iterations=7, weight_decay=0.0, batch_size=3, time_budget=9.0)
    resolved = given.resolved(50_000, time_constant=2.0)
    assert resolved.units == (16,) and resolved.iterations == 7 and resolved.weight_decay == 0.0
    assert resolved.batch_size == 3 and resolved.time_budget == 9.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"window": 500}, "fewer than the training window"),
        ({"window": 50, "washout": 50}, "washout"),
        ({"window": 90, "n_initial": 20}, "plus 20 encoder samples"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RecipeConfig(**kwargs).resolved(100)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"iterations": 0}, "iterations"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"weight_decay": float("nan")}, "weight_decay"),
        ({"initial_state": "zeros"}, "initial_state"),
        ({"time_budget": 0}, "time_budget"),
        ({"effort": 0}, "effort"),
        ({"effort": 1.5}, "effort"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"decay_points": (0.5, 1.2)}, r"decay_points.*\(0, 1\]"),
        ({"decay_points": ()}, "decay_points"),
        ({"decay_rate": 0.0}, "decay_rate"),
        ({"score_weights": {"val_rmse": 1.0, "val_mae": 1.0}}, r"among \['val_rmse', 'loss'\]"),
        ({"score_weights": {"val_rmse": 1.0, "loss": -0.1}}, "'loss'.*>= 0"),
        ({"score_weights": {"val_rmse": 0.0}}, "positive weight"),
        ({"validation_every": 0}, "validation_every"),
    ],
)
def test_bad_values_are_refused_when_the_config_is_made(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RecipeConfig(**kwargs)


def test_validation_interval():
    assert RecipeConfig(iterations=300, validation_checks=6).validation_interval() == 50
    assert RecipeConfig(iterations=300, validation_every=7).validation_interval() == 7
    assert RecipeConfig(iterations=5, validation_checks=10).validation_interval() == 1
    assert RecipeConfig(decay_points=0.5).decay_points == (0.5,)
    with pytest.raises(ValueError, match="once `iterations` is resolved"):
        RecipeConfig().validation_interval()


@pytest.mark.parametrize("decay", [0.0, 0.1])
def test_weight_decay_reaches_the_optimizer(tanks, decay):
    """The run trains with AdamW carrying the configured decoupled weight decay."""
    from keras_mgu.datasets import Normalizer
    from keras_mgu.sysid import train_simulator

    norm = Normalizer.fit(tanks.estimation)
    data = norm.transform(tanks)
    config = RecipeConfig(
        units=(4,), iterations=3, steps_per_epoch=3, validation_checks=1, weight_decay=decay
    )
    run = train_simulator(data.estimation, data.validation, config, seed=0)
    assert float(run.model.optimizer.weight_decay or 0.0) == pytest.approx(decay)


@END_TO_END
def test_restarts_are_chosen_on_validation_and_never_see_the_test_record(tanks):
    config = dataclasses.replace(TINY, linear_prior=False)
    found = identify(tanks, config, restarts=3, seed=5)
    rmses = [run.validation_rmse for run in found.runs]
    assert [r.seed for r in found.runs] == [5, 1005, 2005]
    assert {r.structure for r in found.runs} == {"network"}
    assert found.best == int(np.argmin(rmses)) and found.model is found.runs[found.best].model
    # The same run with a different test record chooses the same model with the same weights.
    other_test = dataclasses.replace(tanks.test, y=tanks.test.y[::-1] * 3.0 + 1.0)
    data = SysIdData(tanks.estimation, tanks.validation, other_test)
    again = identify(data, config, 3, seed=5)
    assert [r.validation_rmse for r in again.runs] == pytest.approx(rmses, rel=1e-5)
    assert again.best == found.best
    y_sim = found.simulate(tanks.test.u)
    np.testing.assert_allclose(again.simulate(tanks.test.u), y_sim, atol=1e-5)


@END_TO_END
def test_both_structures_are_tried_and_the_better_one_gets_the_restarts(tanks):
    found = identify(tanks, TINY, restarts=3, seed=7)
    assert found.linear_table and len(found.runs) == 4  # the linear model explains validation
    first, second = found.runs[:2]
    assert (first.structure, second.structure) == ("network", "linear+network")
    assert first.seed == second.seed == 7
    winner = min(found.runs[:2], key=lambda run: run.choice_rmse).structure
    assert [r.structure for r in found.runs[2:]] == [winner, winner]
    assert [r.seed for r in found.runs[2:]] == [1007, 2007]
    assert found.best == int(np.argmin([r.choice_rmse for r in found.runs]))
    assert found.runs[1].path.linear is not None and found.runs[0].path.linear is None
    # Validation RMSEs are in standardised units of the estimation record: the best run's
    # alone, and the kept average's (the default selection).
    val = tanks.validation
    u = np.concatenate([tanks.estimation.u, val.u])
    for kept, rmse in (
        (found.run_alone(found.best), found.runs[found.best].validation_rmse),
        (found, found.validation_rmse(tanks)),
    ):
        y_sim = kept.simulate(u)[-val.n_samples :]
        expected = np.sqrt(np.mean(((y_sim - val.y) / found.normalizer.y_std[0]) ** 2))
        assert rmse == pytest.approx(expected, rel=1e-5)
    assert found.members and found.members[0] == found.best


def test_simulation_and_scores_are_in_physical_units(tanks):
    found = identify(tanks, TINY, restarts=1, seed=0)
    y_sim = found.simulate(tanks.test.u)
    assert y_sim.shape == tanks.test.y.shape
    assert found.score(tanks.test) == pytest.approx(sysid.rmse(tanks.test.y, y_sim), rel=1e-6)
    late = found.score(tanks.test, "benchmark")  # no protocol: the first 50 outputs set the state
    from_measured = found.simulate(tanks.test.u, tanks.test.y[:50])
    assert late == pytest.approx(sysid.rmse(tanks.test.y[50:], from_measured[50:]), rel=1e-6)
    with pytest.raises(ValueError, match="shape"):
        found.simulate(np.zeros((10, 3)))


def test_training_lowers_the_validation_error(tanks):
    config = dataclasses.replace(
        TINY, iterations=150, steps_per_epoch=50, learning_rate=0.01, linear_prior=False
    )
    untrained = identify(tanks, dataclasses.replace(config, iterations=1, steps_per_epoch=1), 1)
    trained = identify(tanks, config, restarts=1, seed=0)
    assert trained.runs[0].validation_rmse < 0.8 * untrained.runs[0].validation_rmse


def test_separate_validation_record_with_washout(tanks):
    config = dataclasses.replace(TINY, validation_continues=False, washout=5, linear_prior=False)
    found = identify(tanks, config, restarts=1)
    assert np.isfinite(found.validation_scores[0])


def test_long_multichannel_record_trains_on_windows():
    rng = np.random.default_rng(0)
    u = rng.normal(size=(6000, 2))
    y = np.stack([np.convolve(u[:, 0], np.ones(8) / 8, "same"), np.tanh(u[:, 1])], axis=1)
    est, val = Record(u[:5000], y[:5000], 1.0), Record(u[5000:], y[5000:], 1.0)
    data = SysIdData(est, val, val)
    config = dataclasses.replace(TINY, window=None, batch_size=4)
    found = identify(data, config, restarts=1)
    # The linear model explains the record: both structures are tried. The network alone
    # trains on the longest windows; on the linear model's residual they follow its memory.
    plain, prior = found.runs[:2]
    assert plain.config.initial_state == prior.config.initial_state == "encoder"
    assert (plain.config.window, plain.config.batch_size) == (1024, 4)
    assert prior.path.linear is not None and prior.config.window == 128
    assert found.simulate(val.u).shape == (1000, 2)
    assert found.simulate(val.u, val.y[:30]).shape == (1000, 2)


@END_TO_END
def test_the_linear_model_is_used_where_it_explains_validation():
    rng = np.random.default_rng(1)
    u = rng.normal(size=(900, 1))
    y = lfilter([1.0], [1.0, -0.8], u[:, 0])[:, None]
    data = SysIdData(Record(u[:600], y[:600]), Record(u[600:], y[600:]), Record(u, y))
    found = identify(data, dataclasses.replace(TINY, linear_prior=True), restarts=1)
    assert found.path.linear is not None and found.config.linear_prior
    # The linear model alone is nearly exact; the network starts from its residual.
    assert found.linear_table and min(r["validation_rmse"] for r in found.linear_table) < 1e-6
    off = identify(data, dataclasses.replace(TINY, linear_prior=False), restarts=1)
    assert off.path.linear is None and not off.config.linear_prior


def test_identify_takes_a_record_and_validates_on_its_end(tanks):
    """A record alone (as ``load_record`` gives it): its last 20 % validates, as the CLI's."""
    config = dataclasses.replace(TINY, model_classes=("network",))  # the split, not the classes
    found = identify(tanks.estimation, config, restarts=1)
    est, val = tanks.estimation.split(0.2)
    assert found.normalizer.u_mean == pytest.approx(est.u.mean(axis=0))  # stats of 80 % only
    same = identify(SysIdData(est, val, val), config, restarts=1)
    rmse = [run.validation_rmse for run in found.runs]
    assert rmse == pytest.approx([run.validation_rmse for run in same.runs])


def test_bad_inputs_are_refused(tanks):
    with pytest.raises(TypeError, match="SysIdData, a Record .* received str"):
        identify("run.csv")
    with pytest.raises(ValueError, match="restarts"):
        identify(tanks, TINY, restarts=0)
    short = Record(np.zeros((1, 1)), np.zeros((1, 1)), 1.0)
    with pytest.raises(ValueError, match="at least 2"):
        sysid.train_simulator(short, short, TINY)


def test_reduced_run_on_the_real_benchmark(shared_data_dir):
    path = os.path.join(shared_data_dir, "cascaded_tanks", "dataBenchmark.csv")
    if not os.path.exists(path):
        pytest.skip("the Cascaded Tanks benchmark file is not beside this checkout")
    data = datasets.load_cascaded_tanks(path)
    config = dataclasses.replace(TINY, units=(8,), iterations=100, steps_per_epoch=50,
                                 learning_rate=0.01)  # fmt: skip
    found = identify(data, config, restarts=1)
    scores = found.score(data.test), found.score(data.test, "benchmark")
    assert all(np.isfinite(s) and 0 < s < 5 * data.test.y.std() for s in scores)
