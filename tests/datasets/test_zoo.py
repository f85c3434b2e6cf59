"""Tests of keras_mgu.datasets.zoo and .plants: records, ranges, noise and each plant's physics.

Each simulator is checked against an independent reference: SciPy's ``lsim``
of the linear limit, SciPy's ``solve_ivp`` at tight tolerances, a NumPy
convolution with impulse responses from the frequency response, analytical
steady states, and the RK4 order.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, signal

from keras_mgu.datasets import (
    ZOO,
    BoucWenParameters,
    DuffingParameters,
    PendulumParameters,
    TwoMassParameters,
    VanDerPolParameters,
    WienerHammersteinParameters,
    ZooPlant,
    simulate_bouc_wen,
    simulate_duffing,
    simulate_pendulum,
    simulate_tank_levels,
    simulate_two_mass_drive,
    simulate_van_der_pol,
    simulate_wiener_hammerstein,
    zoo_plant,
)
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT

N = 400  # samples per record in the zoo tests: small and fast


def _records(plant: ZooPlant):
    return (plant.data.estimation, plant.data.validation, plant.data.test, plant.beyond)


def _lsim_zoh(a, b, u, ts):
    """First state-space output of ``x' = a x + b u`` from rest, ``u`` held over each sample."""
    c = np.eye(a.shape[0])
    _, _, x = signal.lsim(
        (a, b, c, np.zeros((a.shape[0], 1))), u, np.arange(u.size) * ts, interp=False
    )
    return x


def _rel_err(x, ref):
    return float(np.max(np.abs(x - ref)) / np.max(np.abs(ref)))


def test_zoo_names_and_unknown_name():
    assert set(ZOO) == {
        "duffing",
        "bouc_wen",
        "wiener_hammerstein",
        "two_mass_drive",
        "overflowing_tanks",
        "hardening_oscillator",
        "pendulum",
        "van_der_pol",
        "heated_tank",
    }
    assert zoo_plant("two-mass-drive", n_samples=N).name == "two_mass_drive"
    with pytest.raises(ValueError, match="Unknown zoo plant 'silverbox'; expected one of duffing"):
        zoo_plant("silverbox")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_samples": 50}, "n_samples` must be an integer >= 100"),
        ({"n_samples": 500.0}, "n_samples` must be an integer >= 100"),
        ({"snr_db": float("nan")}, "snr_db` must be a finite number"),
        ({"beyond_factor": 1.0}, "beyond_factor` must be a number > 1"),
        ({"beyond_factor": float("inf")}, "beyond_factor` must be a number > 1"),
    ],
)
def test_zoo_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        zoo_plant("duffing", **kwargs)


def test_plant_parameters_are_checked():
    with pytest.raises(ValueError, match="DuffingParameters.m must be a positive number"):
        DuffingParameters(m=0.0)
    with pytest.raises(ValueError, match="TwoMassParameters.fm must be a >= 0 number"):
        TwoMassParameters(fm=-1.0)
    with pytest.raises(ValueError, match="give both b1 and a1, or neither"):
        WienerHammersteinParameters(b1=[1.0])
    with pytest.raises(ValueError, match="`u` must be a finite"):
        simulate_duffing(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="PendulumParameters.c must be a >= 0 number"):
        PendulumParameters(c=-0.1)
    with pytest.raises(ValueError, match="VanDerPolParameters.mu must be a >= 0 number"):
        VanDerPolParameters(mu=-1.0)
    with pytest.raises(ValueError, match="VanDerPolParameters.omega must be a positive number"):
        VanDerPolParameters(omega=0.0)
    with pytest.raises(ValueError, match="VanDerPolParameters.mu must be a >= 0 number"):
        VanDerPolParameters(mu=float("nan"))
    with pytest.raises(ValueError, match="`substeps` must be a positive integer"):
        simulate_van_der_pol(np.zeros(3), substeps=0)


@pytest.mark.parametrize("name", ZOO)
def test_zoo_records_shapes_names_and_ts(name):
    plant = zoo_plant(name, n_samples=N)
    expected_ts = {
        "duffing": 0.4,
        "bouc_wen": 1 / 750,
        "wiener_hammerstein": 1 / 51200,
        "two_mass_drive": 0.01,
        "overflowing_tanks": 4.0,
        "hardening_oscillator": 0.05,
        "pendulum": 0.02,
        "van_der_pol": 0.1,
        "heated_tank": 1.0,
    }[name]
    for part, rec in zip(("estimation", "validation", "test", "beyond"), _records(plant)):
        assert rec.u.shape == rec.y.shape == (N, 1)
        assert rec.name == f"zoo/{name}/{part}"
        assert rec.ts == pytest.approx(expected_ts, rel=1e-12)
        assert rec.input_names == plant.data.estimation.input_names
        assert rec.output_names == plant.data.estimation.output_names
        assert np.all(np.isfinite(rec.y))
    assert plant.beyond_start == N - N // 5
    assert plant.data.estimation.y.std() > 0
    # Each record is its own experiment: no two share an input.
    u = [rec.u[:, 0] for rec in _records(plant)[:3]]
    assert not np.allclose(u[0], u[1]) and not np.allclose(u[0], u[2])


def test_zoo_default_lengths_differ():
    from keras_mgu.datasets.zoo import _DESIGNS

    lengths = {name: design.n_samples for name, design in _DESIGNS.items()}
    assert lengths["wiener_hammerstein"] == 100_000
    assert lengths["overflowing_tanks"] == min(lengths.values()) == 1024
    assert len(set(lengths.values())) >= 4


@pytest.mark.parametrize("name", ZOO)
def test_zoo_is_deterministic_for_a_seed(name):
    a, b = zoo_plant(name, n_samples=N, seed=3), zoo_plant(name, n_samples=N, seed=3)
    c = zoo_plant(name, n_samples=N, seed=4)
    for ra, rb, rc in zip(_records(a), _records(b), _records(c)):
        np.testing.assert_array_equal(ra.u, rb.u)
        np.testing.assert_array_equal(ra.y, rb.y)
        assert not np.allclose(ra.u, rc.u)


@pytest.mark.parametrize("name", ZOO)
def test_zoo_test_within_range_and_beyond_outside(name):
    plant = zoo_plant(name, n_samples=N, seed=1)
    est, test, beyond = plant.data.estimation.u, plant.data.test.u, plant.beyond.u
    start = plant.beyond_start
    assert plant.u_range == (est.min(), est.max())
    assert np.abs(test).max() <= np.abs(est).max() + 1e-12
    assert est.min() - 1e-12 <= test.min() and test.max() <= est.max() + 1e-12
    assert np.abs(beyond).max() > np.abs(est).max()
    assert np.abs(beyond[:start]).max() <= np.abs(est).max() + 1e-12
    np.testing.assert_array_equal(beyond[:start], test[:start])
    mean = {"overflowing_tanks": 2.8, "heated_tank": 0.4}.get(name, 0.0)
    above_est, above_tail = est.max() - mean, beyond[start:].max() - mean
    assert above_tail >= plant.beyond_factor * above_est * (1 - 1e-12)
    if mean == 0.0:  # the pump voltage and the heater's drive are clipped at 0 below
        below_est, below_tail = mean - est.min(), mean - beyond[start:].min()
        assert below_tail >= plant.beyond_factor * below_est * (1 - 1e-12)


@pytest.mark.parametrize("name", ZOO)
def test_zoo_noise_has_the_documented_snr(name):
    n = 2000
    clean = zoo_plant(name, n_samples=n, seed=2, snr_db=None)
    noisy = zoo_plant(name, n_samples=n, seed=2, snr_db=30.0)
    assert clean.noise_std == 0.0
    for rc, rn in zip(_records(clean), _records(noisy)):
        np.testing.assert_array_equal(rc.u, rn.u)  # the SNR does not change the inputs
        noise = rn.y[:, 0] - rc.y[:, 0]
        assert noise.std() == pytest.approx(noisy.noise_std, rel=0.1)
    y_est = clean.data.estimation.y[:, 0]
    noise_est = noisy.data.estimation.y[:, 0] - y_est
    scale = 10.0 if name == "heated_tank" else y_est.std()  # the heated tank's: a nominal 10 degC
    snr = 10 * np.log10(scale**2 / noise_est.var())
    assert snr == pytest.approx(30.0, abs=0.5)


def test_duffing_small_amplitude_is_the_linear_oscillator():
    p = DuffingParameters()
    u = 1e-3 * np.random.default_rng(0).standard_normal(500)
    a = np.array([[0.0, 1.0], [-p.k / p.m, -p.c / p.m]])
    ref = _lsim_zoh(a, np.array([[0.0], [1.0 / p.m]]), u, 0.4)
    states = simulate_duffing(u, ts=0.4, parameters=p)
    assert _rel_err(states, ref) < 1e-4
    # At unit amplitude the cubic stiffness matters.
    big = simulate_duffing(u * 1e3, ts=0.4, parameters=p)
    assert _rel_err(big, ref * 1e3) > 1e-2


def test_duffing_integrator_is_fourth_order():
    u = np.random.default_rng(1).standard_normal(200)
    reference = simulate_duffing(u, substeps=64)
    errors = [np.abs(simulate_duffing(u, substeps=s) - reference).max() for s in (2, 4)]
    assert 10.0 < errors[0] / errors[1] < 24.0  # RK4: halving the step cuts the error ~16x


def test_bouc_wen_without_beta_is_linear_with_stiffness_k_plus_alpha():
    p = BoucWenParameters(beta=0.0)
    ts = 1 / 750
    u = 50.0 * np.random.default_rng(2).standard_normal(600)
    a = np.array([[0.0, 1.0], [-(p.k + p.alpha) / p.m, -p.c / p.m]])
    ref = _lsim_zoh(a, np.array([[0.0], [1.0 / p.m]]), u, ts)
    states = simulate_bouc_wen(u, ts, parameters=p)
    assert _rel_err(states[:, :2], ref) < 1e-3
    np.testing.assert_allclose(states[:, 2], p.alpha * states[:, 0], atol=1e-9 * p.alpha)


def _loop_area(u_amplitude: float, parameters: BoucWenParameters) -> float:
    """``integral z dy`` over the last of 20 periods of a 10 Hz sine force."""
    ts, per_period = 1 / 750, 75
    t = np.arange(20 * per_period + 1) * ts
    states = simulate_bouc_wen(u_amplitude * np.sin(2 * np.pi * 10.0 * t), ts, parameters)
    y, z = states[-per_period - 1 :, 0], states[-per_period - 1 :, 2]
    return float(np.sum(0.5 * (z[1:] + z[:-1]) * np.diff(y)))


def test_bouc_wen_hysteresis_loop_dissipates_energy():
    area = _loop_area(100.0, BoucWenParameters())
    linear = _loop_area(100.0, BoucWenParameters(beta=0.0))
    assert area > 0.0
    assert abs(linear) < 1e-3 * area


def _impulse_response(b, a, length: int = 4096) -> np.ndarray:
    """Impulse response from the frequency response ``B/A`` by inverse FFT (not lfilter)."""
    return np.fft.irfft(np.fft.rfft(b, length) / np.fft.rfft(a, length), length)


def test_wiener_hammerstein_is_the_convolution_chain():
    p = WienerHammersteinParameters()
    u = np.random.default_rng(3).standard_normal(1500)
    h1, h2 = _impulse_response(p.b1, p.a1), _impulse_response(p.b2, p.a2)
    x = np.convolve(u, h1)[: u.size]
    w = p.saturation * np.tanh(x / p.saturation) + p.quadratic * x**2
    ref = np.convolve(w, h2)[: u.size]
    y = simulate_wiener_hammerstein(u, p)
    assert _rel_err(y, ref) < 1e-9
    # The nonlinearity matters: a linear chain is far off.
    assert _rel_err(np.convolve(x, h2)[: u.size], ref) > 0.05


def test_two_mass_drive_sticks_under_a_small_torque():
    p = TwoMassParameters()
    states = simulate_two_mass_drive(np.full(500, 0.5 * p.fm), parameters=p)
    assert np.all(states == 0.0)  # the motor never breaks away


def test_two_mass_drive_slips_to_the_analytical_speed():
    p = TwoMassParameters()
    torque = 5.0
    states = simulate_two_mass_drive(np.full(6000, torque), parameters=p)
    speed = (torque - p.fm - p.fl) / (p.bm + p.bl)
    np.testing.assert_allclose(states[-1, 2:], [speed, speed], rtol=1e-3)
    twist = states[-1, 0] - states[-1, 1]
    assert twist == pytest.approx((p.fl + p.bl * speed) / p.k, rel=1e-3)


def test_two_mass_drive_without_friction_matches_lsim_at_first_order():
    p = TwoMassParameters(fm=0.0, fl=0.0)
    a = np.array(
        [
            [0.0, 0.0, 1.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [-p.k / p.jm, p.k / p.jm, -(p.d + p.bm) / p.jm, p.d / p.jm],
            [p.k / p.jl, -p.k / p.jl, p.d / p.jl, -(p.d + p.bl) / p.jl],
        ]
    )
    u = np.repeat(np.random.default_rng(4).standard_normal(20), 50)
    ref = _lsim_zoh(a, np.array([[0.0], [0.0], [1.0 / p.jm], [0.0]]), u, 0.01)
    errors = [_rel_err(simulate_two_mass_drive(u, parameters=p, substeps=s), ref) for s in (10, 20)]
    assert errors[0] < 1e-3
    assert 1.6 < errors[0] / errors[1] < 2.4  # first order: half the step, half the error


def test_overflowing_tanks_overflow_and_reach_the_analytical_steady_state():
    plant = zoo_plant("overflowing_tanks", snr_db=None)
    p = plant.parameters
    h0 = p.steady_state(2.8)
    levels = simulate_tank_levels(plant.data.estimation.u, 4.0, p, initial_levels=h0)
    assert np.any(levels[:, 0] == p.h1_max)  # the estimation experiment overflows
    assert not np.all(levels[:, 0] == p.h1_max)
    np.testing.assert_allclose(plant.data.estimation.y[:, 0], levels[:, 1], rtol=1e-12)
    # A sustained 5 V overflows the upper tank: both levels settle where the equations say.
    steady = simulate_tank_levels(np.full(1500, 5.0), 4.0, p, initial_levels=h0)[-1]
    np.testing.assert_allclose(steady, p.steady_state(5.0), rtol=1e-6)
    assert steady[0] == p.h1_max


# The two short, lightly damped oscillators: each simulated on its own records.
OSCILLATORS = {"hardening_oscillator": simulate_duffing, "pendulum": simulate_pendulum}


def _free_decay(free: np.ndarray) -> tuple[float, float]:
    """Damping ratio (logarithmic decrement) and samples per period of a free response's peaks.

    ``delta = mean(ln(x_i / x_{i+1}))`` over successive maxima ``x_i``,
    ``zeta = delta / sqrt(4 pi^2 + delta^2)``.
    """
    peaks, _ = signal.find_peaks(free)
    delta = float(np.mean(np.log(free[peaks[:-1]] / free[peaks[1:]])))
    return delta / np.sqrt(4 * np.pi**2 + delta**2), float(np.mean(np.diff(peaks)))


@pytest.mark.parametrize(
    "name, n_samples, zeta, per_period",
    [("hardening_oscillator", 2000, (0.055, 0.065), (120, 130)),
     ("pendulum", 3000, (0.07, 0.09), (95, 106))],
)  # fmt: skip
def test_oscillators_are_short_fast_sampled_and_lightly_damped(name, n_samples, zeta, per_period):
    plant = zoo_plant(name, snr_db=None)
    assert plant.data.estimation.n_samples == plant.beyond.n_samples == n_samples
    # Free response from a small displacement: the linearised oscillator.
    free = OSCILLATORS[name](np.zeros(1500), plant.data.estimation.ts, plant.parameters,
                             initial_state=(1e-3, 0.0))[:, 0]  # fmt: skip
    measured_zeta, samples = _free_decay(free)
    assert zeta[0] < measured_zeta < zeta[1]
    assert per_period[0] < samples < per_period[1]


@pytest.mark.parametrize("name", OSCILLATORS)
def test_oscillators_answer_a_doubled_input_with_more_or_less_than_twice(name):
    plant = zoo_plant(name, snr_db=None)
    u, ts, p = plant.data.estimation.u[:, 0], plant.data.estimation.ts, plant.parameters
    simulate = OSCILLATORS[name]
    y = simulate(u, ts, p)[:, 0]
    np.testing.assert_allclose(y, plant.data.estimation.y[:, 0], rtol=0, atol=1e-12)
    twice = _rel_err(simulate(2 * u, ts, p)[:, 0], 2 * y)
    assert twice > 0.3  # the nonlinearity is no small correction at these amplitudes
    small = simulate(1e-3 * u, ts, p)[:, 0]  # ... but vanishes at small ones
    assert _rel_err(simulate(2e-3 * u, ts, p)[:, 0], 2 * small) < 1e-3


def test_hardening_oscillator_cubic_force_is_a_sizeable_share_of_the_linear():
    plant = zoo_plant("hardening_oscillator", snr_db=None)
    p = plant.parameters
    s = plant.data.estimation.y.std()
    assert 0.3 < p.k3 * s**3 / (p.k * s) < 0.5  # at the typical displacement
    assert p.c / (2 * np.sqrt(p.k * p.m)) == pytest.approx(0.06)


@pytest.mark.parametrize("name", OSCILLATORS)
def test_oscillators_beyond_record_grows_and_stays_finite(name):
    plant = zoo_plant(name)
    est, beyond, start = plant.data.estimation, plant.beyond, plant.beyond_start
    assert np.abs(beyond.u[start:]).max() >= 1.75 * np.abs(est.u).max() * (1 - 1e-12)
    assert np.all(np.isfinite(beyond.y))
    peak = np.abs(beyond.y[start:]).max()
    assert peak > 1.3 * np.abs(est.y).max()
    if name == "pendulum":
        assert peak < np.pi  # it swings wider but never over the top
    else:
        assert peak < 3.0 * np.abs(est.y).max()  # the stiffening spring holds it


def test_pendulum_small_swings_are_the_linear_oscillator_and_a_torque_holds_it_at_asin():
    p = PendulumParameters()
    assert p.natural_frequency == pytest.approx(np.sqrt(9.81))
    assert p.damping_ratio == pytest.approx(0.5 / (2 * np.sqrt(9.81)))
    u = 1e-3 * np.random.default_rng(5).standard_normal(500)
    a = np.array([[0.0, 1.0], [-p.g / p.l, -p.c / (p.m * p.l**2)]])
    ref = _lsim_zoh(a, np.array([[0.0], [1.0 / (p.m * p.l**2)]]), u, 0.02)
    assert _rel_err(simulate_pendulum(u, parameters=p), ref) < 1e-4
    # A constant torque below m g l settles at asin(u / (m g l)); above it, it goes over the top.
    held = simulate_pendulum(np.full(3000, 5.0), parameters=p)[-1]
    np.testing.assert_allclose(held, [np.arcsin(5.0 / (p.m * p.g * p.l)), 0.0], atol=1e-6)
    over = simulate_pendulum(np.full(1000, 12.0), parameters=p)[:, 0]
    assert over[-1] > 2 * np.pi


def _van_der_pol_reference(u, ts, p, initial_state=(0.0, 0.0)):
    """States ``(N, 2)`` by ``solve_ivp`` (DOP853, tolerances 1e-12), one call per held sample."""
    state, out = np.asarray(initial_state, dtype=float), np.empty((u.size, 2))
    for k, uk in enumerate(u):
        out[k] = state

        def rates(t, z, uk=uk):
            return [z[1], uk + p.mu * (1.0 - z[0] ** 2) * z[1] - p.omega**2 * z[0]]

        sol = integrate.solve_ivp(rates, (0.0, ts), state, method="DOP853", rtol=1e-12, atol=1e-12)
        state = sol.y[:, -1]
    return out


def test_van_der_pol_matches_solve_ivp_on_the_held_input():
    plant = zoo_plant("van_der_pol", n_samples=N, snr_db=None)
    u, ts, p = plant.beyond.u[:, 0], plant.beyond.ts, plant.parameters  # to 1.75x the range
    ref = _van_der_pol_reference(u, ts, p, initial_state=(0.5, -0.2))
    states = simulate_van_der_pol(u, ts, p, initial_state=(0.5, -0.2))
    assert states.shape == (N, 2)
    np.testing.assert_array_equal(states[0], [0.5, -0.2])
    assert _rel_err(states, ref) < 5e-6  # 4 RK4 steps per sample: ~2e-6
    finer = simulate_van_der_pol(u, ts, p, initial_state=(0.5, -0.2), substeps=16)
    assert _rel_err(finer, ref) < 1e-7
    np.testing.assert_allclose(plant.beyond.y[:, 0], simulate_van_der_pol(u, ts, p)[:, 0],
                               rtol=0, atol=1e-12)  # fmt: skip


def test_van_der_pol_without_mu_is_the_undamped_linear_oscillator():
    p = VanDerPolParameters(mu=0.0, omega=2.0)
    u = np.random.default_rng(6).standard_normal(300)
    a = np.array([[0.0, 1.0], [-(p.omega**2), 0.0]])
    ref = _lsim_zoh(a, np.array([[0.0], [1.0]]), u, 0.1)
    assert _rel_err(simulate_van_der_pol(u, 0.1, p), ref) < 1e-4


def test_van_der_pol_unforced_settles_on_its_limit_cycle():
    # From near rest (the unstable equilibrium) or from outside, to the cycle of amplitude ~2.01.
    for x0 in ((1e-3, 0.0), (4.0, 0.0)):
        x = simulate_van_der_pol(np.zeros(1500), 0.1, initial_state=x0)[-700:, 0]
        assert x.max() == pytest.approx(2.009, abs=0.01)
        assert -x.min() == pytest.approx(2.009, abs=0.01)
        up = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
        assert np.diff(up).mean() == pytest.approx(66.6, abs=1.0)  # period 6.66 s at mu = 1
    np.testing.assert_array_equal(simulate_van_der_pol(np.zeros(50)), 0.0)  # rest stays at rest


def test_van_der_pol_zoo_plant_is_entrained_nonlinear_and_bounded_beyond():
    plant = zoo_plant("van_der_pol", snr_db=None)
    est, beyond, start = plant.data.estimation, plant.beyond, plant.beyond_start
    assert est.n_samples == beyond.n_samples == 2500 and start == 2000
    assert plant.parameters == VanDerPolParameters(mu=1.0, omega=1.0)
    assert est.input_names == ("force",) and est.output_names == ("displacement",)
    u, ts, p, y = est.u[:, 0], est.ts, plant.parameters, est.y[:, 0]
    # Entrained: the forced response forgets where it started.
    other = simulate_van_der_pol(u, ts, p, initial_state=(2.0, 0.0))[:, 0]
    assert np.abs(other - y)[:100].max() > 0.5
    assert np.abs(other - y)[1000:].max() < 1e-6
    # 60-130 samples per period, mostly where the damping is positive (|x| > 1).
    up = np.flatnonzero((y[:-1] < 0) & (y[1:] >= 0))
    assert 60 < np.diff(up).mean() < 80
    assert 0.6 < np.mean(np.abs(y) > 1.0) < 0.9
    # No small correction: a doubled force is far from a doubled response.
    assert _rel_err(simulate_van_der_pol(2 * u, ts, p)[:, 0], 2 * y) > 0.5
    # Beyond: the input leaves the range, the output peaks past the estimation's but stays bounded.
    assert np.abs(beyond.u[start:]).max() >= 1.75 * np.abs(est.u).max() * (1 - 1e-12)
    assert np.all(np.isfinite(beyond.y))
    peak = np.abs(beyond.y[start:]).max()
    assert 1.05 * np.abs(y).max() < peak < 1.5 * np.abs(y).max()
    assert beyond.y[start:].max() > y.max() and beyond.y[start:].min() < y.min()
