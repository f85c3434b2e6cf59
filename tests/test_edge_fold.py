"""benchmarks/edge_fold.py: its edge block, its folds and its three behaviours beyond the range."""

import numpy as np
import pytest

from keras_mgu.datasets import Record, zoo_plant
from keras_mgu.sysid.models.polynomial import fit_polynomial
from tests.helpers import BACKEND_INDEPENDENT, load_script

pytestmark = BACKEND_INDEPENDENT


@pytest.fixture(scope="module")
def edge_fold():
    return load_script("benchmarks", "edge_fold.py")


@pytest.fixture(scope="module")
def fitted(edge_fold):
    plant = zoo_plant("duffing", n_samples=400, seed=0)
    e = plant.data.estimation
    means, stds = (e.u.mean(0), e.y.mean(0)), (e.u.std(0), e.y.std(0))
    est, val = (edge_fold.standardised(r, means, stds) for r in (e, plant.data.validation))
    model = fit_polynomial(est, val, lags=(2,), degrees=(2,), max_terms=6)[0]
    return model, est, val


def test_the_edge_block_holds_the_largest_excursion_and_the_rest_the_other_samples(edge_fold):
    u = np.sin(np.arange(200) / 7.0)[:, None]
    y = 0.5 * u.copy()
    y[150] = 9.0  # the largest excursion
    rest, edge = edge_fold.edge_split(Record(u, y), 0.1)
    assert edge.n_samples == 20 and 9.0 in edge.y
    assert rest.n_samples == 180 and len(rest.experiments) == 2 and 9.0 not in rest.y
    np.testing.assert_array_equal(edge.y[:, 0], y[140:160, 0])


def test_the_folds_hold_out_each_block_once(edge_fold):
    u = np.arange(500.0)[:, None]
    folds = list(edge_fold.blocks(Record(u, u), 5))
    held = np.concatenate([block.u[:, 0] for _, block in folds])
    np.testing.assert_array_equal(held, u[:, 0])
    for rest, block in folds:
        assert rest.n_samples + block.n_samples == 500
        assert not set(rest.u[:, 0]) & set(block.u[:, 0])


def test_its_own_law_is_the_models_free_run(edge_fold, fitted):
    model, _, val = fitted
    expected = model.simulate_batch(val.u, val.y[: model.lag])[0]
    run = edge_fold.simulate(model, val.u, val.y[: model.lag], "own")
    np.testing.assert_allclose(run, expected, rtol=1e-12, atol=1e-12)


def test_the_fade_is_the_model_inside_its_range_and_the_linear_model_far_outside(edge_fold, fitted):
    model, est, val = fitted
    theta, (lower, upper) = edge_fold.anchor(model, est)
    y0 = val.y[: model.lag]
    own = edge_fold.simulate(model, val.u, y0, "own")
    wide = edge_fold.simulate(model, val.u, y0, "fade", theta, (lower - 1e3, upper + 1e3))
    np.testing.assert_allclose(wide, own, rtol=1e-12, atol=1e-12)
    linear = edge_fold.simulate(model, val.u, y0, "linear", theta)
    tiny = (np.full_like(lower, -1e-9), np.full_like(upper, 1e-9))  # every regressor far out
    faded = edge_fold.simulate(model, val.u, y0, "fade", theta, tiny)
    np.testing.assert_allclose(faded[model.lag :], linear[model.lag :], rtol=1e-9, atol=1e-9)
    assert np.abs(linear - own)[model.lag :].max() > 1e-3  # the two laws differ here


def test_the_anchor_is_least_squares_on_the_models_regressors(edge_fold, fitted):
    """The ARX model of [y_{t-1}, y_{t-2}, u_{t-1}, u_{t-2}, u_t, 1], against a least-squares
    fit of regressors written out here, on y_t = 0.5 y_{t-1} + 0.3 u_t + 0.1 + e_t."""
    model = fitted[0]
    assert (model.na, model.nb) == (2, 3)
    rng = np.random.default_rng(0)
    u, e = rng.normal(size=(300, 1)), 0.01 * rng.normal(size=(300, 1))
    y = np.zeros((300, 1))
    for t in range(1, 300):
        y[t] = 0.5 * y[t - 1] + 0.3 * u[t] + 0.1 + e[t]
    t = np.arange(2, 300)
    rows = np.stack([y[t - 1, 0], y[t - 2, 0], u[t - 1, 0], u[t - 2, 0], u[t, 0], 0 * t + 1.0], 1)
    expected = np.linalg.lstsq(rows, y[2:], rcond=None)[0]
    theta, (lower, upper) = edge_fold.anchor(model, Record(u, y))
    np.testing.assert_allclose(theta, expected, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(lower, rows[:, :5].min(axis=0))
    np.testing.assert_allclose(upper, rows[:, :5].max(axis=0))
