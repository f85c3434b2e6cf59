"""The polynomial's coefficient covariance against least squares written out, its draws, and
the free runs of the draws through a run's signal path."""

import types

import numpy as np
import pytest

from keras_mgu.datasets import Normalizer, Record
from keras_mgu.sysid.models.polynomial import PolynomialNarx
from keras_mgu.sysid.models.polynomial_uncertainty import (
    coefficient_covariances,
    coefficient_draws,
    drawn_simulations,
)
from keras_mgu.sysid.models.signals import SignalPath
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT

#: na = 1, nb = 1: r_t = [y(t-1), u(t)], terms index [r_t, 1] = [y1, u, 1].
TERMS = np.array([[0, 2, 2], [1, 2, 2], [0, 0, 2], [2, 2, 2]])  # y1, u, y1^2, 1


def _record(n=1500, seed=0, noise=0.05):
    """y(t) = 0.5 y(t-1) + 0.3 u(t) - 0.1 y(t-1)^2 + 0.05 + e(t), by a loop."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1, 1, n)
    y = np.zeros(n)
    for t in range(1, n):
        y[t] = 0.5 * y[t - 1] + 0.3 * u[t] - 0.1 * y[t - 1] ** 2 + 0.05
        y[t] += noise * rng.standard_normal()
    return Record(u[:, None], y[:, None])


def _reference(record):
    """``(theta, Sigma)`` of the four terms by least squares written out."""
    y, u = record.y[:, 0], record.u[:, 0]
    phi = np.column_stack([y[:-1], u[1:], y[:-1] ** 2, np.ones(len(y) - 1)])
    theta = np.linalg.lstsq(phi, y[1:], rcond=None)[0]
    e = y[1:] - phi @ theta
    s2 = e @ e / (len(e) - 4)
    rho = max(np.corrcoef(e[1:], e[:-1])[0, 1], 0.0)
    return theta, s2 * (1 + rho) / (1 - rho) * np.linalg.inv(phi.T @ phi)


def _model(theta, n_terms=4):
    coefficients = np.zeros((n_terms, 1))
    coefficients[: len(theta), 0] = theta
    return PolynomialNarx(1, 1, 2, TERMS[:n_terms], coefficients, np.zeros_like(coefficients), 1, 1)


def test_the_covariance_is_least_squares_written_out():
    record = _record()
    theta, sigma = _reference(record)
    (got,) = coefficient_covariances(_model(theta), record)
    np.testing.assert_allclose(got, sigma, rtol=1e-8)
    # A term an output does not use is left out of its covariance.
    model = _model(theta)
    model.coefficients[2, 0] = 0.0
    (three,) = coefficient_covariances(model, record)
    assert three.shape == (3, 3)


def test_the_draws_have_the_fit_s_mean_and_covariance():
    record = _record(seed=1)
    theta, sigma = _reference(record)
    model = _model(theta)
    model.coefficients[2, 0] = 0.0  # unused: it stays zero in every draw
    draws = coefficient_draws(model, record, 20_000, seed=3)
    assert draws.shape == (20_000, 4, 1)
    assert np.all(draws[:, 2, 0] == 0.0)
    (sigma3,) = coefficient_covariances(model, record)
    used = draws[:, [0, 1, 3], 0]
    np.testing.assert_allclose(
        used.mean(axis=0), theta[[0, 1, 3]], atol=4 * np.sqrt(np.diag(sigma3) / 20_000).max()
    )
    np.testing.assert_allclose(np.cov(used.T), sigma3, rtol=0.05, atol=0.05 * np.abs(sigma3).max())
    np.testing.assert_array_equal(coefficient_draws(model, record, 5, seed=3), draws[:5])
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="`draws` must be an integer >= 1"):
            coefficient_draws(model, record, bad)


def test_the_draws_part_more_outside_the_estimation_range():
    """Inside the range the drawn free runs stay close; driven three times harder, where the
    square term extrapolates, they part by more than twice as much."""
    record = _record(seed=2, noise=0.2)
    theta, _ = _reference(record)
    path = SignalPath(Normalizer([0.0], [1.0], [0.0], [1.0]))
    run = types.SimpleNamespace(polynomial=_model(theta), path=path)
    rng = np.random.default_rng(4)
    u = rng.uniform(-1, 1, (400, 1))
    y0 = np.zeros((1, 1))
    inside = drawn_simulations(run, record, u, y0, 50, seed=0)
    outside = drawn_simulations(run, record, 3 * u, y0, 50, seed=0)
    assert inside.shape == (50, 400, 1)
    # The same draws through simulate_batch by hand (the identity path): the same runs.
    sets = coefficient_draws(run.polynomial, record, 50, seed=0)
    np.testing.assert_allclose(inside, run.polynomial.simulate_batch(u, y0, sets), atol=1e-12)
    spread = lambda sims: np.mean(np.std(sims[:, 1:, 0], axis=0))  # noqa: E731
    assert spread(outside) > 2 * spread(inside) > 0
