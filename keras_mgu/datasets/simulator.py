"""A simulated cascaded-tanks plant resembling the public Cascaded Tanks benchmark.

* :class:`TankParameters`: the plant constants and equations (overflow of
  both tanks, sensor saturation), with its steady state.
* :func:`simulate_tank_levels`: noise-free tank levels for a pump-voltage
  sequence (fixed-step RK4, zero-order hold on the input).
* :func:`simulate_cascaded_tanks`: estimation, validation and test records
  with multisine or random-steps excitation and sensor noise.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from keras_mgu.datasets.records import Record, SysIdData, _check_ts

__all__ = ["TankParameters", "simulate_cascaded_tanks", "simulate_tank_levels"]


@dataclasses.dataclass(frozen=True)
class TankParameters:
    """Constants of the simulated cascaded tanks (defaults used by the simulator).

    Levels ``h1`` (upper tank) and ``h2`` (lower tank) are in level units
    (lu); the pump voltage ``u`` in volts; time in seconds::

        dh1/dt = -k1 sqrt(h1) + k2 u - s
        dh2/dt =  k3 sqrt(h1) - k4 sqrt(h2) + overflow_fraction * (k3 / k1) * s

    ``s`` is the overflow of the upper tank: ``0`` while ``h1 < h1_max``;
    at the top it takes whatever would raise ``h1`` further, so ``h1`` stays at
    ``h1_max``. The fraction ``overflow_fraction`` of that water falls into the
    lower tank (``k3 / k1`` converts an upper-tank level rate into a
    lower-tank one: the tanks' cross sections differ), the rest is lost. The
    lower tank overflows at ``h2_max`` (excess lost). Negative pump voltages
    pump nothing (``u`` is clipped at 0 in the inflow). The sensor reads
    ``y = clip(sensor_gain * h2 + noise, 0, sensor_max)`` volts.

    Without overflow the steady state for a constant ``u`` is
    ``h1* = (k2 u / k1)^2`` and ``h2* = (k3 / k4)^2 h1*``. With the defaults
    the upper tank overflows for ``u > 4.52 V`` and the sensor saturates
    (``h2 = 10 lu``) for ``u > 3.76 V``; at ``u = 2.8 V`` the levels settle at
    ``h1* = 3.84``, ``h2* = 5.53`` with linearised time constants of about
    65 s (upper) and 94 s (lower).
    """

    k1: float = 0.06
    k2: float = 0.042
    k3: float = 0.06
    k4: float = 0.05
    h1_max: float = 10.0
    h2_max: float = 10.0
    overflow_fraction: float = 0.5
    sensor_gain: float = 1.0
    sensor_max: float = 10.0

    def __post_init__(self) -> None:
        for field in ("k1", "k2", "k3", "k4", "h1_max", "h2_max", "sensor_gain", "sensor_max"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(
                    f"TankParameters.{field} must be a positive number; got {value!r}."
                )
        frac = self.overflow_fraction
        if not (isinstance(frac, (int, float)) and 0.0 <= frac <= 1.0):
            raise ValueError(f"TankParameters.overflow_fraction must be in [0, 1]; got {frac!r}.")

    def steady_state(self, u: float) -> tuple[float, float]:
        """Equilibrium levels ``(h1, h2)`` for a constant pump voltage ``u``.

        Includes overflow: once ``h1*`` would exceed ``h1_max`` the upper tank
        stays full and spills ``k2 u - k1 sqrt(h1_max)``; ``h2`` is capped at
        ``h2_max``.
        """
        inflow = self.k2 * max(float(u), 0.0)
        h1 = (inflow / self.k1) ** 2
        spill = 0.0
        if h1 > self.h1_max:
            h1 = self.h1_max
            spill = inflow - self.k1 * math.sqrt(h1)
        into_lower = self.k3 * math.sqrt(h1) + self.overflow_fraction * self.k3 / self.k1 * spill
        h2 = min((into_lower / self.k4) ** 2, self.h2_max)
        return h1, h2

    def sensor(self, h2: np.ndarray) -> np.ndarray:
        """Noise-free sensor reading ``clip(sensor_gain * h2, 0, sensor_max)`` (V)."""
        return np.clip(self.sensor_gain * np.asarray(h2, dtype=np.float64), 0.0, self.sensor_max)


def _tank_rates(h1: float, h2: float, pumped: float, p: TankParameters) -> tuple[float, float]:
    """``(dh1/dt, dh2/dt)`` for levels ``h1, h2`` and inflow ``pumped = k2 max(u, 0)``.

    Includes the overflow of both tanks (see :class:`TankParameters`).
    """
    sq1 = math.sqrt(min(max(h1, 0.0), p.h1_max))
    sq2 = math.sqrt(min(max(h2, 0.0), p.h2_max))
    dh1 = pumped - p.k1 * sq1
    spill = 0.0
    if h1 >= p.h1_max and dh1 > 0.0:
        spill, dh1 = dh1, 0.0
    dh2 = p.k3 * sq1 - p.k4 * sq2 + (p.overflow_fraction * p.k3 / p.k1) * spill
    if h2 >= p.h2_max and dh2 > 0.0:
        dh2 = 0.0
    return dh1, dh2


def _rk4_step(
    h1: float, h2: float, pumped: float, dt: float, p: TankParameters
) -> tuple[float, float]:
    """One classical Runge-Kutta step of length ``dt`` (unclipped result)."""
    a1, a2 = _tank_rates(h1, h2, pumped, p)
    b1, b2 = _tank_rates(h1 + 0.5 * dt * a1, h2 + 0.5 * dt * a2, pumped, p)
    c1, c2 = _tank_rates(h1 + 0.5 * dt * b1, h2 + 0.5 * dt * b2, pumped, p)
    d1, d2 = _tank_rates(h1 + dt * c1, h2 + dt * c2, pumped, p)
    return (
        h1 + dt / 6.0 * (a1 + 2.0 * b1 + 2.0 * c1 + d1),
        h2 + dt / 6.0 * (a2 + 2.0 * b2 + 2.0 * c2 + d2),
    )


def _fills_up(h: tuple[float, float], new: tuple[float, float], p: TankParameters) -> bool:
    """Whether a tank below its top in ``h`` is above it in ``new``."""
    return (h[0] < p.h1_max < new[0]) or (h[1] < p.h2_max < new[1])


def _clip_levels(h: tuple[float, float], p: TankParameters) -> tuple[float, float]:
    return min(max(h[0], 0.0), p.h1_max), min(max(h[1], 0.0), p.h2_max)


def _substep(
    h: tuple[float, float], pumped: float, dt: float, p: TankParameters
) -> tuple[float, float]:
    """Advance by ``dt``, stopping at the instant a tank fills up (located by bisection).

    The overflow switches the equations; stepping across that switch would
    make RK4 only first-order accurate, so the step is split there and
    continued with the tank held full.
    """
    remaining = dt
    for _ in range(3):  # at most two tanks can fill up within one step
        new = _rk4_step(*h, pumped, remaining, p)
        if not _fills_up(h, new, p):
            break
        lo, hi = 0.0, 1.0
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            if _fills_up(h, _rk4_step(*h, pumped, mid * remaining, p), p):
                hi = mid
            else:
                lo = mid
        h = _clip_levels(_rk4_step(*h, pumped, hi * remaining, p), p)
        remaining *= 1.0 - hi
        new = h
    # Clipping also removes round-off overshoot at the tank bottoms.
    return _clip_levels(new, p)


def _integrate_levels(
    u: np.ndarray, h0: Any, ts: float, p: TankParameters, substeps: int
) -> np.ndarray:
    """Fixed-step RK4 over ``u`` ``(N,)`` from ``h0`` -> levels ``(N, 2)`` at ``k ts``.

    ``u[k]`` is held over ``[k ts, (k + 1) ts)`` and integrated in ``substeps``
    steps. Plain Python floats: for this 2-state system they are much faster
    than NumPy arrays.
    """
    dt = ts / substeps
    h = _clip_levels((float(h0[0]), float(h0[1])), p)
    out = np.empty((u.shape[0], 2))
    for k, uk in enumerate(u.tolist()):
        out[k] = h
        pumped = p.k2 * max(uk, 0.0)
        for _ in range(substeps):
            h = _substep(h, pumped, dt, p)
    return out


def _check_substeps(substeps: Any) -> int:
    if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
        raise ValueError(f"`substeps` must be a positive integer; received {substeps!r}.")
    return substeps


def simulate_tank_levels(
    u: np.ndarray,
    ts: float = 4.0,
    parameters: TankParameters | None = None,
    initial_levels: tuple[float, float] = (0.0, 0.0),
    substeps: int = 8,
) -> np.ndarray:
    """Tank levels for a pump-voltage sequence (noise-free, no sensor).

    Integrates the equations of :class:`TankParameters` by fixed-step
    fourth-order Runge-Kutta with ``substeps`` steps per sample period, the
    input held constant over each period (zero-order hold); a step in which a
    tank fills up is split at that instant.

    Args:
        u: ``(N,)`` or ``(N, 1)`` pump voltages; ``u[k]`` acts on
            ``[k ts, (k + 1) ts)``.
        ts: Sampling period (s).
        parameters: Plant constants; ``TankParameters()`` if None.
        initial_levels: ``(h1, h2)`` at ``t = 0`` (clipped to the tanks).
        substeps: RK4 steps per sample period.

    Returns:
        ``(N, 2)`` array of ``(h1, h2)`` at the instants ``k ts`` (row 0 is
        the initial state, row ``k`` depends on ``u[:k]``).
    """
    p = TankParameters() if parameters is None else parameters
    u = np.asarray(u, dtype=np.float64)
    if u.ndim == 2 and u.shape[1] == 1:
        u = u[:, 0]
    if u.ndim != 1 or u.shape[0] < 1 or not np.all(np.isfinite(u)):
        raise ValueError(f"`u` must be a finite (N,) or (N, 1) array; received shape {u.shape}.")
    h0 = np.asarray(initial_levels, dtype=np.float64)
    if h0.shape != (2,) or not np.all(np.isfinite(h0)):
        raise ValueError(f"`initial_levels` must be an (h1, h2) pair; got {initial_levels!r}.")
    return _integrate_levels(u, h0, _check_ts(ts), p, _check_substeps(substeps))


def _multisine(
    rng: np.random.Generator,
    n: int,
    ts: float,
    flat_band_hz: float,
    max_frequency_hz: float,
    high_band_ratio: float,
) -> np.ndarray:
    """Random-phase multisine of unit standard deviation, one period over ``n`` samples."""
    f0 = 1.0 / (n * ts)
    k_max = min(int(math.floor(max_frequency_hz / f0 + 1e-9)), (n - 1) // 2)
    if k_max < 1:
        raise ValueError(
            f"The record ({n} samples of {ts} s) is too short for a multisine below "
            f"{max_frequency_hz} Hz: the first harmonic is at {f0:.3g} Hz."
        )
    k = np.arange(1, k_max + 1)
    amp = np.where(k * f0 <= flat_band_hz + 1e-12, 1.0, high_band_ratio)
    phase = rng.uniform(0.0, 2.0 * np.pi, size=k_max)
    t = np.arange(n)[:, None]
    s = (amp * np.cos(2.0 * np.pi * k * t / n + phase)).sum(axis=1)
    return s / s.std()


def _random_steps(rng: np.random.Generator, n: int, hold_samples: tuple[int, int]) -> np.ndarray:
    """Piecewise-constant ``U(-sqrt 3, sqrt 3)`` levels (unit std), random hold times."""
    lo, hi = hold_samples
    out = np.empty(n)
    k = 0
    while k < n:
        hold = int(rng.integers(lo, hi + 1))
        out[k : k + hold] = rng.uniform(-math.sqrt(3.0), math.sqrt(3.0))
        k += hold
    return out


def simulate_cascaded_tanks(
    n_samples: int = 1024,
    ts: float = 4.0,
    excitation: str = "multisine",
    seed: int | None = 0,
    noise_std: float = 0.02,
    parameters: TankParameters | None = None,
    u_mean: float = 2.8,
    u_std: float = 1.0,
    u_range: tuple[float, float] = (0.0, 10.0),
    flat_band_hz: float = 0.0047,
    max_frequency_hz: float = 0.0145,
    high_band_ratio: float = 0.1,
    hold_samples: tuple[int, int] = (10, 60),
    initial_levels: str | tuple[float, float] | None = None,
    substeps: int = 8,
) -> SysIdData:
    """Simulated Cascaded Tanks data: estimation, validation and test records.

    Plant (see :class:`TankParameters` for the overflow term ``s`` and the
    default constants)::

        dh1/dt = -k1 sqrt(h1) + k2 u - s,            0 <= h1 <= h1_max
        dh2/dt =  k3 sqrt(h1) - k4 sqrt(h2) + overflow_fraction (k3/k1) s,
                                                     0 <= h2 <= h2_max
        y[k]   = clip(sensor_gain h2(k ts) + e[k], 0, sensor_max),
                 e[k] ~ N(0, noise_std^2)

    integrated by fixed-step RK4 (``substeps`` steps per sample, zero-order
    hold on ``u``); a step in which a tank fills up is split at that instant
    (found by bisection) so the overflow switch does not spoil the accuracy.
    Levels are clipped to ``[0, h_max]`` after every step (round-off). Each
    record gets its own excitation (same plant):

    * ``"multisine"``: one period of a random-phase multisine over the record,
      amplitude 1 on the harmonics up to ``flat_band_hz`` and
      ``high_band_ratio`` above, up to ``max_frequency_hz`` (the real
      benchmark's input has this shape: 19 harmonics flat, the next 40 at
      -20 dB), scaled to mean ``u_mean`` and standard deviation ``u_std``.
    * ``"steps"``: levels drawn uniformly with the same mean and standard
      deviation, each held for a random number of samples in
      ``hold_samples`` (inclusive).

    Both are clipped to ``u_range`` (volts). With the defaults ``y`` lies
    mostly between 2 and 10 V and saturates at 10 V a few percent of the time,
    like the measured benchmark.

    Args:
        n_samples: Samples per record.
        ts: Sampling period (s).
        excitation: ``"multisine"`` or ``"steps"``.
        seed: Seed of ``np.random.default_rng`` (excitations, noise and
            random initial levels); equal seeds give equal data.
        noise_std: Standard deviation of the additive sensor noise (V).
        parameters: Plant constants; ``TankParameters()`` if None.
        u_mean, u_std, u_range: Excitation mean, standard deviation and
            clipping range (V).
        flat_band_hz, max_frequency_hz, high_band_ratio: Multisine band.
        hold_samples: ``(min, max)`` hold time of a step, in samples.
        initial_levels: None (default): every record starts from the same
            state, the steady state for a constant ``u_mean`` (as in the real
            benchmark, whose records share their initial state); ``"random"``:
            each record starts from independent uniform levels in
            ``[0, h_max]``; or an ``(h1, h2)`` pair used for every record.
        substeps: RK4 steps per sample period.

    Returns:
        :class:`SysIdData` with records named ``"cascaded_tanks_sim/<part>"``,
        input ``"u"`` (V) and output ``"y"`` (V).
    """
    p = TankParameters() if parameters is None else parameters
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 2:
        raise ValueError(f"`n_samples` must be an integer >= 2; received {n_samples!r}.")
    ts = _check_ts(ts)
    substeps = _check_substeps(substeps)
    if excitation not in ("multisine", "steps"):
        raise ValueError(f"`excitation` must be 'multisine' or 'steps'; received {excitation!r}.")
    if not (noise_std >= 0.0 and math.isfinite(noise_std)):
        raise ValueError(f"`noise_std` must be >= 0; received {noise_std!r}.")
    u_lo, u_hi = (float(v) for v in u_range)
    if not u_lo < u_hi:
        raise ValueError(f"`u_range` must be (low, high) with low < high; received {u_range!r}.")
    if not (
        isinstance(hold_samples, (tuple, list))
        and len(hold_samples) == 2
        and 1 <= int(hold_samples[0]) <= int(hold_samples[1])
    ):
        raise ValueError(
            f"`hold_samples` must be (min, max) with 1 <= min <= max; received {hold_samples!r}."
        )

    rng = np.random.default_rng(seed)
    parts = ("estimation", "validation", "test")
    columns = []
    for _ in parts:
        if excitation == "multisine":
            s = _multisine(rng, n_samples, ts, flat_band_hz, max_frequency_hz, high_band_ratio)
        else:
            s = _random_steps(rng, n_samples, (int(hold_samples[0]), int(hold_samples[1])))
        columns.append(np.clip(u_mean + u_std * s, u_lo, u_hi))
    u = np.stack(columns, axis=1)  # (N, 3)

    if initial_levels is None:
        h0 = np.repeat(np.array(p.steady_state(u_mean))[:, None], len(parts), axis=1)
    elif isinstance(initial_levels, str):
        if initial_levels != "random":
            raise ValueError(
                "`initial_levels` must be None, 'random' or an (h1, h2) pair; "
                f"received {initial_levels!r}."
            )
        h0 = rng.uniform(0.0, 1.0, size=(2, len(parts))) * np.array([[p.h1_max], [p.h2_max]])
    else:
        pair = np.asarray(initial_levels, dtype=np.float64)
        if pair.shape != (2,) or not np.all(np.isfinite(pair)):
            raise ValueError(f"`initial_levels` must be an (h1, h2) pair; got {initial_levels!r}.")
        h0 = np.repeat(pair[:, None], len(parts), axis=1)

    h2 = np.stack(
        [_integrate_levels(u[:, i], h0[:, i], ts, p, substeps)[:, 1] for i in range(len(parts))],
        axis=1,
    )
    noise = noise_std * rng.standard_normal(size=(n_samples, len(parts)))
    y = np.clip(p.sensor_gain * h2 + noise, 0.0, p.sensor_max)

    records = [
        Record(u[:, i : i + 1], y[:, i : i + 1], ts, ("u",), ("y",), f"cascaded_tanks_sim/{part}")
        for i, part in enumerate(parts)
    ]
    return SysIdData(*records)
