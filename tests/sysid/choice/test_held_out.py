"""The held-out start or end: its bookkeeping, and no sample the choice scores fitted by a run."""

import numpy as np
import pytest

from keras_mgu import datasets, sysid
from keras_mgu.datasets import Record, SysIdData, join_experiments
from keras_mgu.sysid.choice.held_out import MIN_FITTED, MIN_HELD_OUT, hold_out
from tests.helpers import END_TO_END


def _data(rng, lengths=(1000,), n_val=300):
    parts = [Record(rng.normal(size=(n, 1)), rng.normal(size=(n, 1))) for n in lengths]
    val = Record(rng.normal(size=(n_val, 1)), rng.normal(size=(n_val, 1)))
    return SysIdData(join_experiments(parts), val, val)


def test_the_head_is_the_first_share_of_the_first_experiment(rng):
    data = _data(rng, (1000, 700))
    fitted, head = hold_out(data, 0.2)
    est = data.estimation
    np.testing.assert_array_equal(head.u, est.u[:200])
    np.testing.assert_array_equal(head.y, est.y[:200])
    np.testing.assert_array_equal(fitted.estimation.y, est.y[200:])
    assert fitted.estimation.boundaries == (800,)  # the second experiment stays one
    assert fitted.validation is data.validation and fitted.test is data.test
    # Every estimation sample is in exactly one of the two.
    assert head.n_samples + fitted.estimation.n_samples == est.n_samples


def test_the_tail_is_the_last_share_of_the_last_experiment(rng):
    data = _data(rng, (700, 1000))
    fitted, tail = hold_out(data, 0.2, at="end")
    est = data.estimation
    np.testing.assert_array_equal(tail.u, est.u[-200:])
    np.testing.assert_array_equal(tail.y, est.y[-200:])
    np.testing.assert_array_equal(fitted.estimation.u, est.u[:-200])
    np.testing.assert_array_equal(fitted.estimation.y, est.y[:-200])
    assert fitted.estimation.boundaries == (700,)  # the first experiment stays whole
    assert tail.boundaries == ()
    assert fitted.validation is data.validation and fitted.test is data.test
    assert tail.n_samples + fitted.estimation.n_samples == est.n_samples
    # The shares and limits are the last experiment's: 0.2 of 300 is too short.
    assert hold_out(_data(rng, (1000, 300)), 0.2, at="end")[1] is None


def test_a_bad_part_is_refused_with_what_is_expected():
    with pytest.raises(ValueError, match="`held_out_at` must be 'start' .* or 'end'"):
        sysid.RecipeConfig(held_out=0.2, held_out_at="middle")
    with pytest.raises(ValueError, match="`held_out_at` must be"):
        hold_out(_data(np.random.default_rng(0)), 0.2, at="tail")


def test_no_head_where_it_or_the_rest_would_be_too_short(rng):
    assert hold_out(_data(rng), 0.0)[1] is None
    short = _data(rng, (MIN_HELD_OUT * 4,))  # 0.2 of it: fewer than MIN_HELD_OUT samples
    fitted, head = hold_out(short, 0.2)
    assert head is None and fitted is short
    n = MIN_FITTED + MIN_HELD_OUT - 1  # half of it held out would leave too few to fit
    assert hold_out(_data(rng, (n,)), 0.5)[1] is None
    assert hold_out(_data(rng, (2 * MIN_FITTED,)), 0.5)[1].n_samples == MIN_FITTED


@pytest.mark.parametrize("fraction", [-0.1, 0.6, "0.2", True, None])
def test_a_bad_share_is_refused_with_what_is_expected(fraction):
    with pytest.raises(ValueError, match=r"`held_out` must be .*\[0, 0.5\]"):
        sysid.RecipeConfig(held_out=fraction)


@END_TO_END
@pytest.mark.parametrize("at", ["start", "end"])
def test_no_run_fits_the_samples_the_choice_scores(monkeypatch, at):
    """Every fitting step gets the estimation record without its held-out part; every run's
    choice error is its validation and held-out errors, recomputed here from that part."""
    plant = datasets.zoo_plant("duffing", n_samples=700, seed=1)
    fitted, head = hold_out(plant.data, 0.25, at)
    n_fit = fitted.estimation.n_samples
    seen = []
    from keras_mgu.sysid.choice import candidates, restarts

    def spy(module, name):
        original = getattr(module, name)

        def wrapped(*args, **kwargs):
            records = [a for a in (*args, *kwargs.values()) if isinstance(a, (Record, SysIdData))]
            seen.append((name, records))
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapped)

    spy(candidates, "lag_structures")
    spy(candidates, "structures")
    spy(restarts, "train_lag_run")
    spy(restarts, "fit_polynomial")
    spy(restarts, "train_simulator")
    config = sysid.RecipeConfig(
        model_classes=("linear", "polynomial", "network"), units=(4,), iterations=20,
        validation_checks=2, held_out=0.25, held_out_at=at, refit=False,
    )  # fmt: skip
    found = sysid.identify(plant.data, config, restarts=1, seed=0)
    assert {name for name, _ in seen} >= {
        "lag_structures", "structures", "train_lag_run", "fit_polynomial", "train_simulator"
    }  # fmt: skip
    dead = found.runs[0].path.dead_samples  # the lag fits' records start after them
    for name, records in seen:
        estimation = records[0].estimation if isinstance(records[0], SysIdData) else records[0]
        trimmed = name in ("train_lag_run", "fit_polynomial")
        assert estimation.n_samples == n_fit - (dead if trimmed else 0), name  # never the held out
        if isinstance(records[0], SysIdData):  # physical: the fitted part's own samples
            np.testing.assert_array_equal(estimation.y, fitted.estimation.y)
    for k, run in enumerate(found.runs):
        alone = found.run_alone(k)
        n = alone.measured_n()
        val = alone.test_like_error(plant.data.validation)
        y_sim = alone.simulate(head.u, head.y[:n])
        outer = run.path.outer
        on_head = outer.transform_y(y_sim[n:]) - outer.transform_y(head.y[n:])
        expected = np.sqrt((np.mean(val**2) + np.mean(on_head**2)) / 2)
        np.testing.assert_allclose(run.choice_rmse, expected, rtol=1e-5)
        np.testing.assert_allclose(run.horizon_rmse, np.sqrt(np.mean(on_head**2)), rtol=1e-5)
    # The free run's band pools the validation errors with the kept model's on the head.
    from keras_mgu.sysid.judging.band import FREE_RUN, QUANTILE_GRID

    val, n, m = plant.data.validation, found.resolve_n_initial(), found.measured_n()
    errors = np.concatenate([
        np.abs(val.y[n:] - found.simulate(val.u, val.y[:n])[n:]),
        np.abs(head.y[m:] - found.simulate(head.u, head.y[:m])[m:]),
    ])  # fmt: skip
    free = list(found.band.horizons).index(FREE_RUN)
    assert found.band.counts[free] == len(errors)
    expected = np.quantile(errors, QUANTILE_GRID, axis=0, method="inverted_cdf")
    np.testing.assert_allclose(found.band.quantiles[free], expected, rtol=1e-5, atol=1e-9)


@END_TO_END
def test_the_kept_runs_are_trained_again_on_the_whole_estimation_record(monkeypatch):
    """After the choice (runs fitted without the head), the runs it keeps train again on
    every estimation sample; they keep the choice errors the choice read."""
    from keras_mgu.sysid import recipe
    from keras_mgu.sysid.choice import restarts

    plant = datasets.zoo_plant("duffing", n_samples=700, seed=1)
    n_fit = hold_out(plant.data, 0.25)[0].estimation.n_samples
    lengths = []
    for name in ("train_lag_run", "train_polynomial_run"):
        original = getattr(restarts, name)

        def wrapped(*args, _original=original, **kwargs):
            est = next(a for a in args if isinstance(a, Record))
            lengths.append(est.n_samples)
            return _original(*args, **kwargs)

        monkeypatch.setattr(restarts, name, wrapped)
    config = sysid.RecipeConfig(
        model_classes=("linear", "polynomial"), iterations=20, validation_checks=2, held_out=0.25,
        refit=True,
    )  # fmt: skip
    choices = []  # the identification the choice made, before its runs are refitted
    refit_kept = recipe.refit_kept

    def spied(found, *args, **kwargs):
        choices.append(found)
        return refit_kept(found, *args, **kwargs)

    monkeypatch.setattr(recipe, "refit_kept", spied)
    found = sysid.identify(plant.data, config, seed=0)
    [chosen] = choices
    kept = sorted(set(found.members) or {found.best})
    n_runs = len(found.runs)
    dead = found.runs[0].path.dead_samples  # the lag fits' records start after them
    assert lengths[:n_runs] == [n_fit - dead] * n_runs
    assert lengths[n_runs:] == [plant.data.estimation.n_samples - dead] * len(kept)
    test = plant.data.test
    for k, run in enumerate(found.runs):
        np.testing.assert_array_equal(run.choice_error, chosen.runs[k].choice_error)
        assert (run.seed, run.structure) == (chosen.runs[k].seed, chosen.runs[k].structure)
    for k in kept:  # a model of its own: more samples fitted
        refitted = found.run_alone(k).simulate(test.u, test.y[:20])
        assert not np.allclose(refitted, chosen.run_alone(k).simulate(test.u, test.y[:20]))
    est = plant.data.estimation
    np.testing.assert_array_equal(found.ranges.y_upper, est.y.max(axis=0))


def test_the_report_says_which_end_is_held_out(rng):
    from keras_mgu.sysid.choice.report import held_out_line

    data = _data(rng, (1000,))
    assert "first 200 samples, held out" in held_out_line(hold_out(data, 0.2)[1])
    assert "last 200 samples, held out" in held_out_line(hold_out(data, 0.2, "end")[1], "end")


@pytest.mark.parametrize("at", ["start", "end"])
def test_the_time_estimate_fits_what_the_runs_fit(monkeypatch, rng, at):
    """``estimate_training`` times the runs on the estimation record without the part held
    out, the same part ``identify`` sets aside."""
    from keras_mgu.sysid import timing

    class Seen(Exception):
        pass

    def spy(data, config):
        raise Seen(data)

    monkeypatch.setattr(timing, "structures", spy)
    data = _data(rng, (1000,))
    config = sysid.RecipeConfig(held_out=0.2, held_out_at=at)
    with pytest.raises(Seen) as seen:
        timing.estimate_training(data, config)
    fitted = seen.value.args[0].estimation
    np.testing.assert_array_equal(fitted.y, hold_out(data, 0.2, at)[0].estimation.y)
