"""The k-step prediction mixed with the ARX reference's, the last sample and the free run: the
fit, the lookup, the model's use."""

import dataclasses

import numpy as np
import pytest

from keras_mgu import datasets, sysid
from keras_mgu.sysid import identify
from keras_mgu.sysid.judging.prediction_mix import (
    PredictionMix,
    best_on_simplex,
    fit_prediction_mix,
    last_sample_predictions,
)
from tests.helpers import BACKEND_INDEPENDENT
from tests.sysid.judging.test_evaluation import TINY


def brute_force(y, p, r, last, steps=201):
    """``(a, b)`` of the least squared error of ``a p + b last + (1 - a - b) r`` on a grid."""
    grid = np.linspace(0.0, 1.0, steps)
    best = (np.inf, None)
    for a in grid:
        for b in grid[grid <= 1.0 - a + 1e-12]:
            error = np.sum((y - a * p - b * last - (1 - a - b) * r) ** 2)
            best = min(best, (error, (a, b)), key=lambda item: item[0])
    return best[1]


@BACKEND_INDEPENDENT
def test_the_mix_minimises_the_squared_error_on_the_triangle():
    """Against a brute-force grid: inside the triangle, on each edge, at a corner."""
    rng = np.random.default_rng(0)
    y = np.cumsum(rng.normal(size=(200, 4)), axis=0)  # a slow output: the last sample helps
    model = {1: y + 0.8 * rng.normal(size=y.shape), 5: y + rng.normal(size=y.shape)}
    reference = {1: y + 0.9 * rng.normal(size=y.shape), 5: y + 0.5 * rng.normal(size=y.shape)}
    model[1][:, 2], reference[1][:, 2] = y[:, 2] + 5.0, y[:, 2] + 4.0  # best past the edge
    model[1][:, 3] = y[:, 3] + 0.01 * rng.normal(size=200)  # the model alone
    model[5][17, 1] = np.inf  # a model that diverges on an output: no share
    mix = fit_prediction_mix(model, reference, y, n=10)
    last = last_sample_predictions(y, (1, 5), 10)
    for row, k in enumerate((1, 5)):
        for j in range(4):
            got = (mix.weights[row, j], mix.last[row, j])
            if k == 5 and j == 1:  # the model's share is 0: the last sample's against the ARX's
                assert got[0] == 0.0
                want = brute_force(y[10:, j], *(m[k][10:, j] for m in (reference, reference, last)))
                assert got[1] == pytest.approx(want[1], abs=6e-3)
                continue
            want = brute_force(y[10:, j], *(m[k][10:, j] for m in (model, reference, last)))
            np.testing.assert_allclose(got, want, atol=6e-3)
    assert 0 < mix.last[0, 0] < 1 and 0 < mix.weights[0, 0]  # inside: all three share
    assert mix.weights[0, 3] == pytest.approx(1.0, abs=0.02)
    same = fit_prediction_mix({1: y}, {1: y}, y, 0)
    np.testing.assert_array_equal(same.weights, np.ones((1, 4)))  # nothing to choose: the model
    mixed = mix.mixed(model, reference, last)
    assert np.all(np.isfinite(mixed[5]))
    a, b = mix.weights[0], mix.last[0]
    np.testing.assert_allclose(mixed[1], a * model[1] + b * last[1] + (1 - a - b) * reference[1])
    with pytest.raises(ValueError, match="pass `last`"):
        mix.mixed(model, reference)


def brute_force_simplex(y, columns, steps=41):
    """The weights (summing to 1, each >= 0) of the least squared error on a grid."""
    grid = np.linspace(0.0, 1.0, steps)
    best = (np.inf, None)
    for a in grid:
        for b in grid[grid <= 1.0 - a + 1e-12]:
            for c in grid[grid <= 1.0 - a - b + 1e-12]:
                w = np.array([a, b, c, max(1.0 - a - b - c, 0.0)])
                error = np.sum((y - columns @ w) ** 2)
                best = min(best, (error, w), key=lambda item: item[0])
    return best


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("case", range(6))
def test_the_four_way_mix_is_the_least_squares_point_of_the_simplex(case):
    """Against a grid over the simplex of the model, the last sample, the free run and the
    ARX reference: inside, on faces, at corners (the grid's own best never errs less)."""
    rng = np.random.default_rng(case)
    y = np.cumsum(rng.normal(size=300))
    noise = rng.uniform(0.2, 2.0, size=4)
    columns = y[:, None] + noise * rng.normal(size=(300, 4))
    if case == 4:
        columns[:, 2] = y + 0.01 * rng.normal(size=300)  # the free run alone
    if case == 5:
        columns[:, 1] = columns[:, 0]  # two predictors alike: a singular face
    w = best_on_simplex(columns, y)
    assert np.all(w >= 0) and w.sum() == pytest.approx(1.0)
    error = np.sum((y - columns @ w) ** 2)
    grid_error, grid_w = brute_force_simplex(y, columns)
    assert error <= grid_error * (1 + 1e-12)
    if case == 5:  # only the sum of the alike two is defined: the model's, first among equals
        assert w[1] == 0.0
        w_cmp, grid_cmp = [w[0] + w[1], *w[2:]], [grid_w[0] + grid_w[1], *grid_w[2:]]
        np.testing.assert_allclose(w_cmp, grid_cmp, atol=0.05)
    else:
        np.testing.assert_allclose(w, grid_w, atol=0.05)
    if case == 4:
        assert w[2] > 0.95
    # Through the mix: the shares are the weights of the model, the last sample, the free run.
    model, reference = {1: columns[:, :1]}, {1: columns[:, 3:]}
    mix = fit_prediction_mix(model, reference, y[:, None], 0, {1: columns[:, 1:2]},
                             free=columns[:, 2:3])  # fmt: skip
    np.testing.assert_allclose(
        [mix.weights[0, 0], mix.last[0, 0], mix.free[0, 0]], w[:3], atol=1e-9
    )
    mixed = mix.mixed(model, reference, {1: columns[:, 1:2]}, columns[:, 2:3])
    np.testing.assert_allclose(mixed[1][:, 0], columns @ w, atol=1e-9)
    if mix.free[0, 0] > 0:
        with pytest.raises(ValueError, match="pass `free`"):
            mix.mixed(model, reference, {1: columns[:, 1:2]})


@BACKEND_INDEPENDENT
def test_the_last_sample_predictor_is_the_sample_each_prediction_starts_after():
    y = np.arange(10.0)[:, None]
    last = last_sample_predictions(y, (1, 3), n=2)
    np.testing.assert_array_equal(last[1][:, 0], [0, 1, 1, 2, 3, 4, 5, 6, 7, 8])
    np.testing.assert_array_equal(last[3][:, 0], [0, 1, 1, 1, 1, 2, 3, 4, 5, 6])  # s >= n


@BACKEND_INDEPENDENT
def test_a_mix_saved_before_the_last_sample_joined_gives_it_no_share():
    old = PredictionMix.from_config({"horizons": [1, 5], "weights": [[0.3], [0.6]]})
    assert old.last is None and float(old.last_weight(1)[0]) == 0.0
    assert old.free is None and float(old.free_weight(1)[0]) == 0.0 and not old.reads_free_run
    p, r = {1: np.ones((4, 1))}, {1: np.zeros((4, 1))}
    np.testing.assert_allclose(old.mixed(p, r)[1], 0.3)


@BACKEND_INDEPENDENT
def test_a_horizon_takes_the_weights_of_the_next_longer_one_fitted():
    mix = PredictionMix(np.array([1, 5, 10]), np.array([[0.1], [0.5], [0.9]]))
    assert [float(mix.weight(k)[0]) for k in (1, 2, 5, 6, 10, 11, 500)] == [
        0.1, 0.5, 0.5, 0.9, 0.9, 1.0, 1.0,
    ]  # fmt: skip
    again = PredictionMix.from_config(mix.to_config())
    np.testing.assert_array_equal(again.weights, mix.weights)
    mix = PredictionMix(np.array([1, 5]), np.array([[0.1], [0.5]]), np.array([[0.7], [0.2]]))
    assert [float(mix.last_weight(k)[0]) for k in (1, 2, 5, 6)] == [0.7, 0.2, 0.2, 0.0]
    np.testing.assert_array_equal(PredictionMix.from_config(mix.to_config()).last, mix.last)


def test_an_identification_predicts_with_the_mix_fitted_on_validation(tmp_path):
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    found = identify(data, TINY, restarts=1, seed=0)
    assert found.prediction_mix is not None and found.arx is not None
    alone = dataclasses.replace(found, prediction_mix=None)
    fitted = alone.with_prediction_mix(data.validation)
    np.testing.assert_allclose(fitted.prediction_mix.weights, found.prediction_mix.weights)
    u, y, n = data.test.u, data.test.y, 6
    model = alone.predictions(u, y, (1, 3), n)
    reference = found.reference().predictions(u, y, (1, 3), n)
    last = last_sample_predictions(y, (1, 3), n)
    got = found.predictions(u, y, (1, 3), n)
    free = alone.simulate(u, y[:n])
    mix = found.prediction_mix
    for k in (1, 3):
        a, b, c = mix.weight(k), mix.last_weight(k), mix.free_weight(k)
        want = a * model[k] + b * last[k] + c * free + (1 - a - b - c) * reference[k]
        np.testing.assert_allclose(got[k], want, rtol=1e-10)
    back = sysid.load(found.save(tmp_path / "mix.kmgu"))
    np.testing.assert_array_equal(back.prediction_mix.weights, mix.weights)
    np.testing.assert_array_equal(back.prediction_mix.free, mix.free)
    # On the record it was fitted on, no horizon's mix errs more than the free run alone.
    val, m = data.validation, found.resolve_n_initial()
    free_val = alone.simulate(val.u, val.y[:m])
    mixed = found.predictions(val.u, val.y, list(mix.horizons), m)
    for k in mix.horizons:
        for j in range(val.y.shape[1]):
            err = np.sum((mixed[int(k)][m:, j] - val.y[m:, j]) ** 2)
            assert err <= np.sum((free_val[m:, j] - val.y[m:, j]) ** 2) * (1 + 1e-9), k
    assert found.run_alone(found.best).prediction_mix is None
