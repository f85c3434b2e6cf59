"""The linear model fitted first: least squares, free-run simulation at rest, order choice."""

import numpy as np
import pytest

from keras_mgu.datasets import Record
from keras_mgu.sysid import LinearModel, select_linear_model
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def arx_data(n=600, seed=0):
    """Two inputs, one output: y[k] = 1.5 y[k-1] - 0.7 y[k-2] + 0.5 u0[k] + 0.2 u1[k-1] + 0.1."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(n, 2))
    y = np.zeros((n, 1))
    for k in range(2, n):
        y[k] = 1.5 * y[k - 1] - 0.7 * y[k - 2] + 0.5 * u[k, 0] + 0.2 * u[k - 1, 1] + 0.1
    return u, y


def loop_simulation(model, u, y0):
    """The ARX recursion sample by sample, inputs held at u[0] and outputs at y0 before."""
    na, nb = model.orders
    out = np.zeros((len(u), len(model.c)))
    for i in range(len(model.c)):
        for k in range(len(u)):
            past = [out[k - j, i] if k - j >= 0 else y0[i] for j in range(1, na + 1)]
            value = model.c[i] - np.dot(model.a[i], past)
            for m in range(u.shape[1]):
                for j in range(nb):
                    value += model.b[i, m, j] * u[max(k - j, 0), m]
            out[k, i] = value
    return out


def test_least_squares_recovers_the_coefficients():
    u, y = arx_data()
    model = LinearModel.fit(u, y, na=2)
    np.testing.assert_allclose(model.a[0], [-1.5, 0.7], atol=1e-8)
    np.testing.assert_allclose(model.b[0], [[0.5, 0, 0], [0, 0.2, 0]], atol=1e-8)
    np.testing.assert_allclose(model.c, [0.1], atol=1e-8)
    assert model.orders == (2, 3)


def test_simulation_matches_the_recursion_written_out():
    rng = np.random.default_rng(3)
    u, y = arx_data(seed=1)
    model = LinearModel.fit(u, y + 0.01 * rng.normal(size=y.shape), na=3)
    u_new = rng.normal(size=(40, 2))
    np.testing.assert_allclose(
        model.simulate(u_new, [0.7]), loop_simulation(model, u_new, [0.7]), atol=1e-10
    )


def test_at_rest_means_constant_output_for_constant_input():
    u, y = arx_data()
    model = LinearModel.fit(u, y, na=2)
    steady = (0.5 * 1.0 + 0.2 * -1.0 + 0.1) / (1 - 1.5 + 0.7)
    out = model.simulate(np.tile([[1.0, -1.0]], (25, 1)), [steady])
    np.testing.assert_allclose(out, steady, atol=1e-9)


def test_time_constant_of_the_slowest_pole():
    model = LinearModel(np.array([[-0.9]]), np.ones((1, 1, 1)), np.zeros(1))
    assert model.time_constant == pytest.approx(-1 / np.log(0.9))
    integrator = LinearModel(np.array([[-1.0]]), np.ones((1, 1, 1)), np.zeros(1))
    assert integrator.time_constant == np.inf


def test_order_choice_on_validation_and_refusal_when_it_explains_nothing():
    u, y = arx_data(800)
    est, val = Record(u[:600], y[:600]), Record(u[600:], y[600:])
    model, table = select_linear_model(est, val)
    assert model is not None and model.orders[0] >= 2
    assert [row["na"] for row in table] == [1, 2, 3, 4, 6, 8]
    chosen = min(table, key=lambda row: row["validation_rmse"])
    assert chosen["validation_rmse"] < 1e-6 and model.orders[0] == chosen["na"]
    rng = np.random.default_rng(0)
    noise = Record(rng.normal(size=(600, 1)), rng.normal(size=(600, 1)))
    none, rows = select_linear_model(noise.slice(0, 400), noise.slice(400, None))
    assert none is None and len(rows) == 6
