"""A zoo of simulated plants: experiments to judge an identification method on.

* :data:`ZOO`: the plant names.
* :func:`zoo_plant`: one plant's estimation, validation and test records and
  a test record that goes beyond the estimation input's range, as a
  :class:`ZooPlant`.

The plants' equations and simulators are in ``plants`` (``simulator`` for
the tanks, ``process_plants`` for the heated tank); this module designs the
experiments: excitation, amplitude ranges, sensor noise.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from keras_mgu.datasets import plants, process_plants
from keras_mgu.datasets.protocols import dataset_key
from keras_mgu.datasets.records import Record, SysIdData
from keras_mgu.datasets.simulator import TankParameters, _random_steps, simulate_tank_levels

__all__ = ["ZOO", "ZooPlant", "zoo_plant"]

#: Fraction of the beyond-range test record, at its end, with the larger amplitude.
BEYOND_FRACTION = 0.2


@dataclasses.dataclass(frozen=True)
class _Design:
    """How one plant is excited and observed."""

    ts: float
    n_samples: int
    excitation: Callable[[np.random.Generator, int, float], np.ndarray]  # unit std
    u_mean: float
    u_std: float
    simulate: Callable[[np.ndarray, float, Any], np.ndarray]  # u (N,), ts, params -> y (N,)
    parameters: Callable[[], Any]  # made on use: the default filters need scipy.signal
    input_name: str
    output_name: str
    u_min: float = -math.inf
    u_max: float = math.inf
    noise_scale: float | None = None  # output std the SNR is of; None: the estimation output's


def _multisine(f_min: float, f_max: float):
    """Random-phase flat multisine on the harmonics in ``[f_min, f_max]`` Hz, unit std."""

    def draw(rng: np.random.Generator, n: int, ts: float) -> np.ndarray:
        f0 = 1.0 / (n * ts)
        first = max(1, math.ceil(f_min / f0 - 1e-9))
        last = min(int(f_max / f0 + 1e-9), (n - 1) // 2)
        if last < first:
            raise ValueError(
                f"{n} samples of {ts} s are too few for a multisine in [{f_min}, {f_max}] Hz "
                f"(harmonics every {f0:.3g} Hz); expected a longer record."
            )
        spectrum = np.zeros(n // 2 + 1, dtype=np.complex128)
        spectrum[first : last + 1] = np.exp(1j * rng.uniform(0.0, 2.0 * np.pi, last - first + 1))
        s = np.fft.irfft(spectrum, n)  # sum of cos(2 pi k t / n + phase_k) over the band
        return s / s.std()

    return draw


def _filtered_noise(cutoff: float, order: int = 4):
    """Gaussian noise through a Butterworth low-pass (``cutoff`` relative to Nyquist), unit std."""

    def draw(rng: np.random.Generator, n: int, ts: float) -> np.ndarray:
        from scipy import signal

        b, a = signal.butter(order, cutoff)
        s = signal.lfilter(b, a, rng.standard_normal(n + 200))[200:]  # drop the filter's start
        return s / s.std()

    return draw


def _steps(hold: tuple[int, int]):
    def draw(rng: np.random.Generator, n: int, ts: float) -> np.ndarray:
        return _random_steps(rng, n, hold)

    return draw


def _tank_output(u: np.ndarray, ts: float, p: TankParameters) -> np.ndarray:
    """Lower-tank reading ``(N,)`` from the steady state for the mean input (2.8 V)."""
    levels = simulate_tank_levels(u, ts, p, initial_levels=p.steady_state(2.8))
    return p.sensor_gain * levels[:, 1]


def _overflowing_tanks() -> TankParameters:
    return TankParameters(h1_max=6.0, h2_max=8.0, sensor_max=100.0)


def _hardening_oscillator() -> plants.DuffingParameters:
    """``y'' + 0.12 y' + y + y^3 = u``: damping ratio 0.06 at 1 rad/s, cubic = linear at 1 m.

    Excited around its resonance (0.159 Hz, 126 samples of 0.05 s per
    period), the displacement's standard deviation ``s`` is 0.52-0.81 m over
    seeds (0.57 m for seed 0): the cubic spring force at ``s``, ``k3 s^3``, is
    ``k3 s^2 / k`` = 30-65 % of the linear ``k s``, and the peaks (1.3-2 m)
    reach where it is about twice the linear.
    """
    return plants.DuffingParameters(m=1.0, c=0.12, k=1.0, k3=1.0)


def _van_der_pol() -> plants.VanDerPolParameters:
    """``x'' - (1 - x^2) x' + x = u``: unforced, a limit cycle of amplitude 2 and period 6.66 s.

    Sampled at 0.1 s: 67-75 samples per period of the forced response. The
    multisine around the natural frequency (0.08-0.32 Hz, std 1.5) entrains
    it: on every record of seeds 0-9, responses from states as far apart as
    ``(2, 0)``, ``(-2.5, 0)`` and ``(-1, 1.5)`` agree with the one from rest
    to 1e-3 within 700 samples (within 460 on the estimation records), so the
    output is set by the input's past, not by the initial state. The
    displacement's standard deviation is 1.7-1.8 and ``|x| > 1``, where the
    damping turns from negative to positive, three quarters of the time; a
    doubled force moves the response by 80-100 % of its peak. The growing
    damping bounds the beyond record: its tail peaks 10-25 % above the
    estimation output's peak (about 3).
    """
    return plants.VanDerPolParameters(mu=1.0, omega=1.0)


def _heated_tank_output(u: np.ndarray, ts: float, p: process_plants.HeatedTankParameters):
    """Sensor reading ``(N,)`` (degC) from the steady state, pipe included, for 0.4."""
    return process_plants.simulate_heated_tank(u, ts, p, initial_input=0.4)[:, 1]


_DESIGNS: dict[str, _Design] = {
    "duffing": _Design(
        ts=0.4,
        n_samples=8192,
        excitation=_multisine(0.0, 0.5),
        u_mean=0.0,
        u_std=0.3,
        simulate=lambda u, ts, p: plants.simulate_duffing(u, ts, p)[:, 0],
        parameters=plants.DuffingParameters,
        input_name="force",
        output_name="displacement",
    ),
    "bouc_wen": _Design(
        ts=1.0 / 750.0,
        n_samples=8192,
        excitation=_multisine(5.0, 150.0),
        u_mean=0.0,
        u_std=50.0,
        simulate=lambda u, ts, p: plants.simulate_bouc_wen(u, ts, p)[:, 0],
        parameters=plants.BoucWenParameters,
        input_name="force",
        output_name="displacement",
    ),
    "wiener_hammerstein": _Design(
        ts=1.0 / 51200.0,
        n_samples=100_000,
        excitation=_filtered_noise(0.4),
        u_mean=0.0,
        u_std=1.0,
        simulate=lambda u, ts, p: plants.simulate_wiener_hammerstein(u, p),
        parameters=plants.WienerHammersteinParameters,
        input_name="u",
        output_name="y",
    ),
    "two_mass_drive": _Design(
        ts=0.01,
        n_samples=20_000,
        excitation=_steps((20, 150)),
        u_mean=0.0,
        u_std=3.0,
        simulate=lambda u, ts, p: plants.simulate_two_mass_drive(u, ts, p)[:, 3],
        parameters=plants.TwoMassParameters,
        input_name="torque",
        output_name="load_speed",
    ),
    "overflowing_tanks": _Design(
        ts=4.0,
        n_samples=1024,
        excitation=_multisine(0.0, 0.0047),
        u_mean=2.8,
        u_std=1.0,
        simulate=_tank_output,
        parameters=_overflowing_tanks,
        input_name="u",
        output_name="y",
        u_min=0.0,
    ),
    # Short and lightly damped: ~16 periods of the resonance in 2,000 samples.
    "hardening_oscillator": _Design(
        ts=0.05,
        n_samples=2000,
        excitation=_multisine(0.08, 0.32),
        u_mean=0.0,
        u_std=0.33,
        simulate=lambda u, ts, p: plants.simulate_duffing(u, ts, p)[:, 0],
        parameters=_hardening_oscillator,
        input_name="force",
        output_name="displacement",
    ),
    # ~100 samples per small-signal period (2.01 s), 30 periods in 3,000 samples; the
    # amplitude keeps the 1.75x beyond record under pi (no swing over the top).
    "pendulum": _Design(
        ts=0.02,
        n_samples=3000,
        excitation=_multisine(0.25, 0.8),
        u_mean=0.0,
        u_std=0.8,
        simulate=lambda u, ts, p: plants.simulate_pendulum(u, ts, p)[:, 0],
        parameters=plants.PendulumParameters,
        input_name="torque",
        output_name="angle",
    ),
    # Self-excited near rest, entrained by its force: ~35 periods of the response in 2,500
    # samples; no linear small-signal limit (a weak force leaves it on its limit cycle).
    "van_der_pol": _Design(
        ts=0.1,
        n_samples=2500,
        excitation=_multisine(0.08, 0.32),
        u_mean=0.0,
        u_std=1.5,
        simulate=lambda u, ts, p: plants.simulate_van_der_pol(u, ts, p)[:, 0],
        parameters=_van_der_pol,
        input_name="force",
        output_name="displacement",
    ),
    # Dead time 13 samples, time constants 27-51 s (sensor 5 s): steps held 5-60 s, levels uniform
    # in [0.1, 0.7]; beyond, clipped to the drive's [0, 1]. Noise: 0.1 degC at 40 dB (of 10 degC).
    "heated_tank": _Design(
        ts=1.0,
        n_samples=3000,
        excitation=_steps((5, 60)),
        u_mean=0.4,
        u_std=0.3 / math.sqrt(3.0),
        simulate=_heated_tank_output,
        parameters=process_plants.HeatedTankParameters,
        input_name="heater",
        output_name="temperature",
        u_min=0.0,
        u_max=1.0,
        noise_scale=10.0,
    ),
}

#: Names of the zoo's plants, for :func:`zoo_plant`.
ZOO: tuple[str, ...] = tuple(_DESIGNS)


@dataclasses.dataclass(frozen=True, eq=False)
class ZooPlant:
    """One plant of the zoo: its records and how they were made.

    Attributes:
        name: The plant's name (one of :data:`ZOO`).
        data: Estimation, validation and test records (:class:`SysIdData`),
            each ``(n_samples, 1)`` input and output. The test input stays
            within the estimation input's range ``u_range``.
        beyond: A second test record: the test input up to ``beyond_start``,
            then ``beyond_factor`` times the estimation input's excursions
            from its mean or more (same length as the test record).
        beyond_start: Sample at which ``beyond`` leaves the estimation range.
        beyond_factor: Least ratio of the excursions after ``beyond_start`` to
            the estimation input's largest excursions, on both sides (the
            tanks' pump voltage and the heater's drive are clipped at 0, so
            only above for them; the drive also at 1).
        u_range: ``(min, max)`` of the estimation input.
        snr_db: Signal-to-noise ratio of every output, in dB (None: noise-free); the
            heated tank's is of a nominal 10 degC, not of its estimation output.
        noise_std: Standard deviation of the added output noise.
        parameters: The plant's parameters (e.g. :class:`plants.DuffingParameters`).
    """

    name: str
    data: SysIdData
    beyond: Record
    beyond_start: int
    beyond_factor: float
    u_range: tuple[float, float]
    snr_db: float | None
    noise_std: float
    parameters: Any


def _check_name(name: Any) -> str:
    key = dataset_key(name)
    if key not in _DESIGNS:
        raise ValueError(f"Unknown zoo plant {name!r}; expected one of {', '.join(ZOO)}.")
    return key


def _check_arguments(n_samples: Any, snr_db: Any, beyond_factor: Any) -> None:
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 100:
        raise ValueError(f"`n_samples` must be an integer >= 100; received {n_samples!r}.")
    if snr_db is not None and not (isinstance(snr_db, (int, float)) and math.isfinite(snr_db)):
        raise ValueError(f"`snr_db` must be a finite number of dB or None; received {snr_db!r}.")
    if not (
        isinstance(beyond_factor, (int, float))
        and math.isfinite(beyond_factor)
        and beyond_factor > 1.0
    ):
        raise ValueError(f"`beyond_factor` must be a number > 1; received {beyond_factor!r}.")


def _excursions(dev: np.ndarray) -> tuple[float, float]:
    """Largest excursions ``(above, below)`` the mean of a deviation signal (both >= 0)."""
    return float(max(dev.max(), 0.0)), float(max(-dev.min(), 0.0))


def _within(dev: np.ndarray, est: tuple[float, float]) -> np.ndarray:
    """``dev`` scaled down, if need be, so both excursions stay within ``est``'s."""
    above, below = _excursions(dev)
    scale = min(1.0, *(e / a for e, a in zip(est, (above, below)) if a > 0.0))
    return scale * dev


def _beyond(dev: np.ndarray, est: tuple[float, float], factor: float) -> np.ndarray:
    """``dev`` scaled so both excursions reach at least ``factor`` times ``est``'s."""
    above, below = _excursions(dev)
    scale = factor * max(e / a for e, a in zip(est, (above, below)) if a > 0.0)
    return scale * dev


def _inputs(
    design: _Design, rng: np.random.Generator, n: int, factor: float
) -> tuple[dict[str, np.ndarray], int]:
    """Inputs ``(n,)`` of the estimation, validation, test and beyond records; ``beyond_start``."""
    dev = {
        part: design.u_std * design.excitation(rng, n, design.ts) for part in ("est", "val", "test")
    }
    lo_clip, hi_clip = design.u_min - design.u_mean, design.u_max - design.u_mean
    dev = {part: np.clip(d, lo_clip, hi_clip) for part, d in dev.items()}
    est = _excursions(dev["est"])
    test = _within(dev["test"], est)
    start = n - int(round(BEYOND_FRACTION * n))
    beyond = test.copy()
    beyond[start:] = np.clip(_beyond(test[start:], est, factor), lo_clip, hi_clip)
    u = {
        "estimation": dev["est"],
        "validation": dev["val"],
        "test": test,
        "beyond": beyond,
    }
    return {part: design.u_mean + v for part, v in u.items()}, start


def zoo_plant(
    name: str,
    n_samples: int | None = None,
    seed: int | None = 0,
    snr_db: float | None = 40.0,
    beyond_factor: float = 1.75,
) -> ZooPlant:
    """Simulated experiments on one plant of the zoo.

    Every record is a fresh experiment from the same initial state (at rest;
    the tanks at the steady state of their mean input), with its own seeded
    excitation. The test record's input is scaled down, if need be, so that
    it stays within the estimation input's range; the ``beyond`` record has
    the same input up to ``beyond_start`` (the last fifth begins there), then
    that input scaled so its excursions from the mean reach at least
    ``beyond_factor`` times the estimation's on both sides (above only for the
    tanks and the heated tank, whose inputs are clipped at 0; the heater's
    drive also at 1). White Gaussian noise of one standard deviation is added
    to every output: the noise-free estimation output's standard deviation
    (the heated tank: a nominal 10 degC, so 0.1 degC at 40 dB) times
    ``10^(-snr_db / 20)``.

    Args:
        name: One of :data:`ZOO` (``-`` is read as ``_``).
        n_samples: Samples per record (>= 100); the plant's default if None.
        seed: Seed of the excitations and the noise (separate streams, so the
            SNR does not change the inputs); equal seeds give equal data.
        snr_db: Output signal-to-noise ratio in dB; None for noise-free outputs.
        beyond_factor: Least ratio of the beyond-range excursions to the
            estimation input's (> 1).

    Returns:
        :class:`ZooPlant` with records named ``"zoo/<name>/<part>"`` (``part``:
        ``estimation``, ``validation``, ``test``, ``beyond``).
    """
    key = _check_name(name)
    design = _DESIGNS[key]
    n = design.n_samples if n_samples is None else n_samples
    _check_arguments(n, snr_db, beyond_factor)
    excitation_seed, noise_seed = np.random.SeedSequence(seed).spawn(2)
    inputs, start = _inputs(design, np.random.default_rng(excitation_seed), n, float(beyond_factor))
    parameters = design.parameters()
    clean = {part: design.simulate(u, design.ts, parameters) for part, u in inputs.items()}
    noise_std = 0.0
    if snr_db is not None:
        scale = design.noise_scale or float(clean["estimation"].std())
        noise_std = scale * 10.0 ** (-float(snr_db) / 20.0)
    noise_rng = np.random.default_rng(noise_seed)
    records = {
        part: Record(
            inputs[part][:, None],
            (clean[part] + noise_std * noise_rng.standard_normal(n))[:, None],
            design.ts,
            (design.input_name,),
            (design.output_name,),
            f"zoo/{key}/{part}",
        )
        for part in inputs
    }
    u_est = inputs["estimation"]
    return ZooPlant(
        name=key,
        data=SysIdData(records["estimation"], records["validation"], records["test"]),
        beyond=records["beyond"],
        beyond_start=start,
        beyond_factor=float(beyond_factor),
        u_range=(float(u_est.min()), float(u_est.max())),
        snr_db=None if snr_db is None else float(snr_db),
        noise_std=noise_std,
        parameters=parameters,
    )
