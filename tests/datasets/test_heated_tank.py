"""Tests of keras_mgu.datasets.process_plants and the zoo's heated tank.

Dead time, steady states (saturation, heat loss), records and their ranges.

The steady states are checked against the energy balance solved apart
(``numpy.roots`` of ``k2 d^2 + (G + k1) d - P(u)``, and by hand for the
defaults); the dead time against the simulation of an unchanged input.
"""

from __future__ import annotations

import numpy as np
import pytest

from keras_mgu.datasets import (
    ZOO,
    HeatedTankParameters,
    simulate_heated_tank,
    zoo_plant,
)
from tests.helpers import BACKEND_INDEPENDENT, load_script

pytestmark = BACKEND_INDEPENDENT


def _rise_by_roots(p: HeatedTankParameters, u: float) -> float:
    """The positive root ``d`` of ``k2 d^2 + (G + k1) d - p_max tanh(u / u_sat)``."""
    power = p.p_max * np.tanh(u / p.u_sat)
    roots = np.roots([p.k2, 4186.0 * p.flow + p.k1, -power])
    return float(max(roots.real))


def test_heated_tank_is_in_the_zoo():
    assert "heated_tank" in ZOO
    plant = zoo_plant("heated-tank", n_samples=200, snr_db=None)
    assert plant.name == "heated_tank"
    assert plant.parameters == HeatedTankParameters()
    est = plant.data.estimation
    assert est.ts == 1.0 and est.input_names == ("heater",) and est.output_names == ("temperature",)
    # The zoo's output is the sensor's reading, from the steady state of 0.4 with the pipe full.
    y = simulate_heated_tank(est.u[:, 0], 1.0, initial_input=0.4)[:, 1]
    np.testing.assert_array_equal(est.y[:, 0], y)


def test_heated_tank_step_response_shows_the_dead_time():
    p = HeatedTankParameters()
    u0, step_at = 0.4, 100
    held = simulate_heated_tank(np.full(800, u0), 1.0, p, initial_input=u0)
    u = np.full(800, u0)
    u[step_at:] = 0.6
    stepped = simulate_heated_tank(u, 1.0, p, initial_input=u0)
    # Nothing moves before 12 samples of pipe and one of hold ...
    np.testing.assert_array_equal(stepped[: step_at + 13], held[: step_at + 13])
    # ... then the tank and, through its lag, the sensor move at sample 113, and go on rising.
    assert np.all(stepped[step_at + 13] > held[step_at + 13])
    assert stepped[step_at + 13, 0] - held[step_at + 13, 0] > 0.1
    assert 0.0 < stepped[step_at + 13, 1] - held[step_at + 13, 1] < 0.05
    assert stepped[step_at + 40, 1] - held[step_at + 40, 1] > 2.0
    assert p.steady_state(0.6) - p.steady_state(u0) == pytest.approx(stepped[-1, 1] - held[-1, 1])
    # The held input stays at the steady state it started from.
    np.testing.assert_allclose(held, p.steady_state(u0), rtol=0, atol=1e-9)


@pytest.mark.parametrize("u", [0.0, 0.1, 0.4, 0.7, 1.0])
def test_heated_tank_settles_where_the_energy_balance_says(u):
    p = HeatedTankParameters()
    settled = simulate_heated_tank(np.full(1200, u), 1.0, p, initial_input=0.0)[-1]
    expected = p.t_ambient + _rise_by_roots(p, u)
    np.testing.assert_allclose(settled, [expected, expected], rtol=0, atol=1e-6)
    assert p.steady_state(u) == pytest.approx(expected, rel=1e-12)


def test_heated_tank_heater_saturates_and_the_loss_grows_faster_than_linearly():
    p = HeatedTankParameters()
    # By hand: P(0.7) = 14 kW tanh(1) = 10.6623 kW; 2 d^2 + 103.72 d = 10662.3 gives d = 51.55 K.
    assert float(p.heater_power(0.7)) == pytest.approx(10_662.3, abs=0.1)
    assert p.steady_state(0.7) == pytest.approx(71.55, abs=0.01)
    assert p.steady_state(0.0) == p.t_ambient
    # Saturation: each 0.3 of drive adds less power than the one before.
    power = p.heater_power(np.array([0.1, 0.4, 0.7, 1.0]))
    assert np.all(np.diff(np.diff(power)) < 0.0)
    assert 0.3 < (power[3] - power[2]) / (power[1] - power[0]) < 0.4
    # The loss: without its quadratic term the tank settles higher, the more so the hotter.
    linear = HeatedTankParameters(k2=0.0)
    for u, share in ((0.1, (0.18, 0.27)), (0.7, (0.45, 0.55))):
        rise, linear_rise = p.steady_state(u) - 20.0, linear.steady_state(u) - 20.0
        assert linear_rise == pytest.approx(float(p.heater_power(u)) / (83.72 + 20.0))
        assert share[0] < 1.0 - rise / linear_rise < share[1]
    # Together: the rise for 0.7 is far from 7 times the rise for 0.1.
    assert (p.steady_state(0.7) - 20.0) / (p.steady_state(0.1) - 20.0) < 3.6


def test_heated_tank_integrator_converges_and_parameters_are_checked():
    u = np.random.default_rng(0).uniform(0.0, 1.0, 300)
    fine = simulate_heated_tank(u, substeps=32)
    assert np.abs(simulate_heated_tank(u) - fine).max() < 1e-6
    with pytest.raises(ValueError, match="HeatedTankParameters.flow must be a positive number"):
        HeatedTankParameters(flow=0.0)
    with pytest.raises(ValueError, match="HeatedTankParameters.k2 must be a >= 0 number"):
        HeatedTankParameters(k2=-1.0)
    with pytest.raises(ValueError, match="t_ambient must be a finite number"):
        HeatedTankParameters(t_ambient=float("nan"))
    with pytest.raises(ValueError, match="whole number of sample periods"):
        simulate_heated_tank(u, ts=5.0)
    with pytest.raises(ValueError, match="`initial_state` must be 2 finite numbers"):
        simulate_heated_tank(u, initial_state=(20.0,))
    # A delay of 10 s sampled at 2 s: 5 samples of pipe, a dead time of 6.
    p = HeatedTankParameters(delay=10.0)
    step = np.r_[np.zeros(10), np.ones(20)]
    y = simulate_heated_tank(step, 2.0, p)[:, 1]
    assert np.all(y[:16] == 20.0) and y[16] > 20.0


@pytest.mark.parametrize("seed", [0, 1])
def test_heated_tank_records_stay_in_range_and_the_beyond_tail_leaves_it(seed):
    plant = zoo_plant("heated_tank", seed=seed)
    assert plant.data.estimation.n_samples == plant.beyond.n_samples == 3000
    for record in (plant.data.estimation, plant.data.validation, plant.data.test):
        assert 0.1 <= record.u.min() and record.u.max() <= 0.7
    start, tail = plant.beyond_start, plant.beyond.u[plant.beyond_start :, 0]
    assert start == 2400
    np.testing.assert_array_equal(plant.beyond.u[:start], plant.data.test.u[:start])
    assert tail.min() == 0.0 and 0.9 < tail.max() <= 1.0
    assert np.mean((tail < 0.1) | (tail > 0.7)) > 0.4
    # Sensor noise of 0.1 degC; equal seeds give equal records.
    assert plant.noise_std == pytest.approx(0.1)
    clean = zoo_plant("heated_tank", seed=seed, snr_db=None)
    noise = plant.data.estimation.y - clean.data.estimation.y
    assert noise.std() == pytest.approx(0.1, rel=0.05)
    again = zoo_plant("heated_tank", seed=seed)
    np.testing.assert_array_equal(again.beyond.y, plant.beyond.y)
    np.testing.assert_array_equal(again.data.validation.u, plant.data.validation.u)


def _load_dead_time_script():
    return load_script("benchmarks", "dead_time.py")


def test_dead_time_references_fit_and_run_a_delayed_arx():
    script = _load_dead_time_script()
    rng = np.random.default_rng(7)
    u = rng.uniform(0.0, 1.0, 400)
    y = np.zeros(400)
    for k in range(14, 400):  # y[k] = 0.8 y[k-1] - 0.1 y[k-2] + 2 u[k-13] + 0.5 u[k-14] + 1
        y[k] = 0.8 * y[k - 1] - 0.1 * y[k - 2] + 2.0 * u[k - 13] + 0.5 * u[k - 14] + 1.0
    theta = script.fit_arx(u[20:], y[20:], 2, 2, 13)
    np.testing.assert_allclose(theta, [-0.8, 0.1, 2.0, 0.5, 1.0], atol=1e-9)
    y_sim = script.simulate_arx(theta, u, y, 2, 2, 13)
    np.testing.assert_array_equal(y_sim[:50], y[:50])
    np.testing.assert_allclose(y_sim, y, atol=1e-9)
    # On a short heated tank the true delay validates better than none.
    plant = zoo_plant("heated_tank", n_samples=600, seed=0)
    delayed = script.arx_reference(plant, 13, 3)
    assert delayed["nk"] == 13 and len(delayed["candidates"]) == 9
    assert delayed["validation"] < script.arx_reference(plant, 0, 3)["validation"]
