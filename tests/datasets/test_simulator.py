"""Tests of keras_mgu.datasets.simulator: tank physics, RK4 accuracy, excitations, seeding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from keras_mgu.datasets import (
    TankParameters,
    simulate_cascaded_tanks,
    simulate_tank_levels,
)
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def _run_lengths(x: np.ndarray) -> list[int]:
    change = np.nonzero(np.diff(x) != 0)[0] + 1
    edges = np.concatenate([[0], change, [len(x)]])
    return list(np.diff(edges))


def _rk45_levels(u, ts, p, h0):
    """Independent reference: SciPy's adaptive RK45 on each hold interval (no overflow)."""
    integrate = pytest.importorskip("scipy.integrate")
    out, h = [], np.asarray(h0, dtype=float)
    for uk in u:
        out.append(h.copy())

        def f(_, x, uk=uk):
            s1, s2 = np.sqrt(max(x[0], 0.0)), np.sqrt(max(x[1], 0.0))
            return [-p.k1 * s1 + p.k2 * uk, p.k3 * s1 - p.k4 * s2]

        sol = integrate.solve_ivp(f, (0.0, ts), h, method="RK45", rtol=1e-11, atol=1e-12)
        h = sol.y[:, -1]
    return np.array(out)


def test_tank_parameters_validation():
    with pytest.raises(ValueError, match="k1 must be a positive"):
        TankParameters(k1=0.0)
    with pytest.raises(ValueError, match="overflow_fraction must be in"):
        TankParameters(overflow_fraction=1.5)


def test_levels_stay_in_tanks_and_output_in_sensor_range():
    p = TankParameters()
    # Long full-power pumping overflows both tanks, then the pump stops and they drain.
    u = np.concatenate([np.full(150, 10.0), np.zeros(400), np.full(100, 3.0)])
    levels = simulate_tank_levels(u, ts=4.0, parameters=p, initial_levels=(0.0, 0.0))
    assert levels.shape == (u.size, 2)
    assert levels.min() >= 0.0
    assert levels[:, 0].max() <= p.h1_max and levels[:, 1].max() <= p.h2_max
    assert levels[:, 0].max() == p.h1_max and levels[:, 1].max() == p.h2_max  # overflow happened
    assert levels[549, 0] < 0.05  # nearly drained after 1600 s without pumping

    data = simulate_cascaded_tanks(
        n_samples=300, seed=3, u_mean=4.0, u_std=2.5, noise_std=0.3, initial_levels="random"
    )
    for rec in (data.estimation, data.validation, data.test):
        assert rec.u.min() >= 0.0 and rec.u.max() <= 10.0
        assert rec.y.min() >= 0.0 and rec.y.max() <= p.sensor_max
        assert np.any(rec.y == p.sensor_max)  # this excitation saturates the sensor


@pytest.mark.parametrize("u, params", [(2.0, {}), (3.0, {"k1": 0.05, "k3": 0.04, "k4": 0.035})])
def test_steady_state_without_overflow(u, params):
    p = TankParameters(**params)
    h1_star = (p.k2 * u / p.k1) ** 2
    h2_star = (p.k3 / p.k4) ** 2 * h1_star
    assert h1_star < p.h1_max and h2_star < p.h2_max
    levels = simulate_tank_levels(np.full(800, u), ts=4.0, parameters=p)
    np.testing.assert_allclose(levels[-1], [h1_star, h2_star], rtol=1e-6)
    np.testing.assert_allclose(p.steady_state(u), [h1_star, h2_star], rtol=1e-12)


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
def test_steady_state_with_overflow(fraction):
    p = TankParameters(h2_max=100.0, sensor_max=100.0, overflow_fraction=fraction)
    u = 6.0
    assert (p.k2 * u / p.k1) ** 2 > p.h1_max
    spill = p.k2 * u - p.k1 * math.sqrt(p.h1_max)  # upper-tank level rate that is spilled
    h2_star = ((p.k3 * math.sqrt(p.h1_max) + fraction * p.k3 / p.k1 * spill) / p.k4) ** 2
    levels = simulate_tank_levels(np.full(1000, u), ts=4.0, parameters=p)
    np.testing.assert_allclose(levels[-1], [p.h1_max, h2_star], rtol=1e-6)
    np.testing.assert_allclose(p.steady_state(u), [p.h1_max, h2_star], rtol=1e-12)


def test_rk4_matches_adaptive_reference_and_converges():
    p = TankParameters()
    k = np.arange(120)
    u = 2.6 + 0.6 * np.sin(2 * np.pi * k / 40.0) + 0.3 * np.sign(np.sin(2 * np.pi * k / 17.0))
    h0 = p.steady_state(2.6)
    ref = _rk45_levels(u, 4.0, p, h0)
    runs = {s: simulate_tank_levels(u, 4.0, p, h0, substeps=s) for s in (1, 2, 4, 8)}
    errs = {s: np.abs(runs[s] - ref).max() for s in runs}
    assert errs[8] < 1e-8
    # Fourth order: halving the step divides the error by about 16.
    for s in (1, 2):
        assert 8.0 < errs[s] / errs[2 * s] < 32.0, errs


def test_rk4_substep_halving_with_overflow_changes_little():
    kwargs = {"n_samples": 300, "seed": 5, "noise_std": 0.0, "u_mean": 3.6, "u_std": 1.5}
    coarse = simulate_cascaded_tanks(substeps=8, **kwargs).estimation.y
    fine = simulate_cascaded_tanks(substeps=16, **kwargs).estimation.y
    assert 0.05 < np.mean(coarse == 10.0) < 0.5  # the comparison covers overflow and saturation
    assert np.abs(coarse - fine).max() < 1e-4


def test_output_is_sensor_of_simulated_levels_plus_noise():
    p = TankParameters()
    clean = simulate_cascaded_tanks(n_samples=256, seed=7, noise_std=0.0)
    for rec in (clean.estimation, clean.validation, clean.test):
        levels = simulate_tank_levels(rec.u, 4.0, p, p.steady_state(2.8))
        np.testing.assert_allclose(rec.y[:, 0], np.clip(levels[:, 1], 0.0, 10.0), atol=1e-12)
    # Same records start from the same documented state.
    first = [r.y[0, 0] for r in (clean.estimation, clean.validation, clean.test)]
    np.testing.assert_allclose(first, p.steady_state(2.8)[1])

    noisy = simulate_cascaded_tanks(n_samples=256, seed=7, noise_std=0.05)
    np.testing.assert_array_equal(noisy.test.u, clean.test.u)
    inside = clean.test.y < 9.8
    residual = (noisy.test.y - clean.test.y)[inside]
    assert 0.04 < residual.std() < 0.06


def test_default_output_resembles_benchmark():
    ys = []
    for seed in range(3):
        data = simulate_cascaded_tanks(seed=seed)
        assert data.estimation.n_samples == 1024 and data.test.ts == 4.0
        assert data.estimation.input_names == ("u",) and data.test.output_names == ("y",)
        ys += [r.y[:, 0] for r in (data.estimation, data.validation, data.test)]
    y = np.concatenate(ys)
    assert np.mean((y >= 2.0) & (y <= 10.0)) > 0.9
    assert 0.001 < np.mean(y == 10.0) < 0.1


def test_seeding():
    a = simulate_cascaded_tanks(n_samples=200, seed=11)
    b = simulate_cascaded_tanks(n_samples=200, seed=11)
    c = simulate_cascaded_tanks(n_samples=200, seed=12)
    for part in ("estimation", "validation", "test"):
        np.testing.assert_array_equal(getattr(a, part).u, getattr(b, part).u)
        np.testing.assert_array_equal(getattr(a, part).y, getattr(b, part).y)
        assert not np.allclose(getattr(a, part).u, getattr(c, part).u)
    # The three records get independent excitations.
    assert not np.allclose(a.estimation.u, a.test.u)
    assert not np.allclose(a.estimation.u, a.validation.u)


def test_multisine_excitation_spectrum():
    n, ts = 1024, 4.0
    data = simulate_cascaded_tanks(n_samples=n, ts=ts, seed=2, u_range=(-100.0, 100.0))
    u = data.estimation.u[:, 0]
    assert u.mean() == pytest.approx(2.8) and u.std() == pytest.approx(1.0)
    amp = np.abs(np.fft.rfft(u - u.mean()))
    flat = np.arange(1, 20)  # harmonics up to 0.0047 Hz with f0 = 1 / 4096 Hz
    high = np.arange(20, 60)  # up to 0.0145 Hz
    np.testing.assert_allclose(amp[flat], amp[1], rtol=1e-9)
    np.testing.assert_allclose(amp[high], 0.1 * amp[1], rtol=1e-9)
    assert amp[60:].max() < 1e-9 * amp[1]
    # Default clipping to 0..10 V.
    clipped = simulate_cascaded_tanks(n_samples=n, seed=2, u_std=3.0).estimation.u
    assert clipped.min() == 0.0 and clipped.max() <= 10.0


def test_steps_excitation():
    data = simulate_cascaded_tanks(n_samples=600, excitation="steps", seed=4, hold_samples=(5, 9))
    for rec in (data.estimation, data.validation, data.test):
        u = rec.u[:, 0]
        runs = _run_lengths(u)
        assert len(runs) > 600 // 9
        assert all(5 <= r <= 9 for r in runs[:-1]) and runs[-1] <= 9
        lo, hi = 2.8 - math.sqrt(3.0), 2.8 + math.sqrt(3.0)
        assert u.min() >= lo and u.max() <= hi
        assert np.all(np.isfinite(rec.y))
    assert not np.allclose(data.estimation.u, data.test.u)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"excitation": "chirp"}, "excitation"),
        ({"n_samples": 1}, "n_samples"),
        ({"initial_levels": "full"}, "initial_levels"),
        ({"initial_levels": (1.0, 2.0, 3.0)}, "initial_levels"),
        ({"substeps": 0}, "substeps"),
        ({"hold_samples": (0, 3)}, "hold_samples"),
        ({"n_samples": 8, "max_frequency_hz": 0.001}, "too short"),
    ],
)
def test_simulator_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate_cascaded_tanks(**kwargs)
