"""System-identification data: records, a cascaded-tanks simulator and loaders.

Everything here is plain NumPy (no backend code), so the arrays can be fed to
any Keras backend.

* :class:`Record`: one input/output experiment, ``u`` ``(N, n_inputs)`` and
  ``y`` ``(N, n_outputs)`` sampled every ``ts`` seconds; :class:`SysIdData`
  groups the estimation, validation and test records.
* :func:`simulate_cascaded_tanks`: a simulated two-tank plant resembling the
  public Cascaded Tanks benchmark (equations in its docstring and in
  :class:`TankParameters`).
* :func:`load_csv_records`, :func:`load_cascaded_tanks`,
  :func:`load_nonlinear_benchmark`: readers for measured data.
* :class:`Normalizer`: per-channel standardisation fitted on estimation data.
* :func:`make_windows`: paired ``(u, y)`` training windows from a long record.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

__all__ = [
    "Normalizer",
    "Record",
    "SysIdData",
    "TankParameters",
    "load_cascaded_tanks",
    "load_csv_records",
    "load_nonlinear_benchmark",
    "make_windows",
    "simulate_cascaded_tanks",
    "simulate_tank_levels",
]


# --------------------------------------------------------------------------- records


def _as_signal(name: str, value: Any) -> np.ndarray:
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`{name}` must be a numeric array; could not convert it: {err}") from None
    if arr.ndim != 2:
        raise ValueError(
            f"`{name}` must be a 2-D array of shape (N, channels); received shape {arr.shape} "
            f"(reshape a single channel with `.reshape(-1, 1)`)."
        )
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(
            f"`{name}` must have at least one sample and one channel; shape {arr.shape}."
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"`{name}` must contain only finite values; found {arr[row, col]} at sample {row}, "
            f"channel {col} ({int(bad.sum())} non-finite values in all)."
        )
    return arr


def _as_names(field: str, names: Any, count: int, prefix: str) -> tuple[str, ...]:
    if names is None or (isinstance(names, (tuple, list)) and len(names) == 0):
        return tuple(f"{prefix}{i}" for i in range(count))
    if isinstance(names, str):
        names = (names,)
    names = tuple(names)
    if len(names) != count or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"`{field}` must be {count} string(s), one per channel; received {names!r}."
        )
    return names


def _check_ts(ts: Any) -> float:
    try:
        value = float(ts)
    except (TypeError, ValueError):
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"`ts` (the sampling period in seconds) must be positive; received {ts!r}."
        )
    return value


@dataclasses.dataclass(frozen=True, eq=False)
class Record:
    """One input/output experiment sampled with period ``ts``.

    Attributes:
        u: ``(N, n_inputs)`` float64 array; ``u[k]`` is held over
            ``[k ts, (k + 1) ts)``.
        y: ``(N, n_outputs)`` float64 array; ``y[k]`` is measured at ``k ts``.
        ts: Sampling period in seconds (positive).
        input_names, output_names: One name per channel; empty means
            ``("u0", "u1", ...)`` / ``("y0", ...)``.
        name: Free-form label.

    The arrays are converted to float64 copies. Raises ``ValueError`` when an
    array is not 2-D, the lengths differ, a value is not finite, ``ts`` is not
    positive or the names do not match the channels.
    """

    u: np.ndarray
    y: np.ndarray
    ts: float = 1.0
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        u = _as_signal("u", self.u)
        y = _as_signal("y", self.y)
        if u.shape[0] != y.shape[0]:
            raise ValueError(
                f"`u` and `y` must have the same number of samples; received u with {u.shape[0]} "
                f"and y with {y.shape[0]}."
            )
        object.__setattr__(self, "u", u)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "ts", _check_ts(self.ts))
        object.__setattr__(
            self, "input_names", _as_names("input_names", self.input_names, u.shape[1], "u")
        )
        object.__setattr__(
            self, "output_names", _as_names("output_names", self.output_names, y.shape[1], "y")
        )
        object.__setattr__(self, "name", str(self.name))

    @property
    def n_samples(self) -> int:
        return int(self.u.shape[0])

    @property
    def n_inputs(self) -> int:
        return int(self.u.shape[1])

    @property
    def n_outputs(self) -> int:
        return int(self.y.shape[1])

    @property
    def time(self) -> np.ndarray:
        """Sample instants ``k * ts``, shape ``(N,)``."""
        return np.arange(self.n_samples) * self.ts

    def slice(self, start: int | None = None, stop: int | None = None, name: str | None = None):
        """The samples ``[start:stop]`` as a new :class:`Record`."""
        return dataclasses.replace(
            self,
            u=self.u[start:stop],
            y=self.y[start:stop],
            name=self.name if name is None else name,
        )

    def split(self, validation_fraction: float) -> tuple[Record, Record]:
        """Split into ``(first part, last validation_fraction of the samples)``."""
        fraction = float(validation_fraction)
        if not 0.0 < fraction < 1.0:
            raise ValueError(
                f"`validation_fraction` must be in (0, 1); received {validation_fraction!r}."
            )
        n_val = int(round(self.n_samples * fraction))
        if n_val < 1 or n_val >= self.n_samples:
            raise ValueError(
                f"validation_fraction={fraction} of {self.n_samples} samples leaves an empty part."
            )
        cut = self.n_samples - n_val
        return self.slice(0, cut), self.slice(cut, None)


@dataclasses.dataclass(frozen=True, eq=False)
class SysIdData:
    """Estimation (training), validation and test records of one system.

    All three must have the same input/output channels. The validation record
    may be carved from the end of the estimation experiment (see
    :meth:`Record.split`).
    """

    estimation: Record
    validation: Record
    test: Record

    def __post_init__(self) -> None:
        records = {"estimation": self.estimation, "validation": self.validation, "test": self.test}
        for field, rec in records.items():
            if not isinstance(rec, Record):
                raise TypeError(f"`{field}` must be a Record; received {type(rec).__name__}.")
        ref = self.estimation
        for field, rec in records.items():
            if (rec.n_inputs, rec.n_outputs) != (ref.n_inputs, ref.n_outputs):
                raise ValueError(
                    f"The {field} record has {rec.n_inputs} input(s) and {rec.n_outputs} "
                    f"output(s) but the estimation record has {ref.n_inputs} and {ref.n_outputs}."
                )


# --------------------------------------------------------------------------- simulator


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


# --------------------------------------------------------------------------- CSV files


def _read_table(path: str | os.PathLike) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and non-blank rows ``(line number, cells)`` of a CSV file."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No such data file: {path!r}.")
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = None
        rows = []
        for cells in reader:
            cells = [c.strip() for c in cells]
            if not any(cells):
                continue
            if header is None:
                header = cells
            else:
                rows.append((reader.line_num, cells))
    if header is None:
        raise ValueError(f"The CSV file {path!r} is empty (expected a header row).")
    return header, rows


def _column_index(header: list[str], column: str, path: str) -> int:
    matches = [i for i, h in enumerate(header) if h == column]
    available = ", ".join(repr(h) for h in header if h)
    if not matches:
        raise ValueError(
            f"Column {column!r} not found in {path!r}; available columns: {available}."
        )
    if len(matches) > 1:
        raise ValueError(
            f"Column {column!r} appears {len(matches)} times in the header of {path!r}."
        )
    return matches[0]


def _numeric_columns(
    header: list[str], rows: list[tuple[int, list[str]]], columns: Sequence[str], path: str
) -> np.ndarray:
    """``(N, len(columns))`` float array; every column must fill the same leading rows."""
    if not rows:
        raise ValueError(f"The CSV file {path!r} has a header but no data rows.")
    values, lengths = [], {}
    for column in columns:
        idx = _column_index(header, column, path)
        cells = [(line, c[idx] if idx < len(c) else "") for line, c in rows]
        filled = [i for i, (_, c) in enumerate(cells) if c]
        if not filled:
            raise ValueError(f"Column {column!r} of {path!r} has no values (all cells are empty).")
        length = filled[-1] + 1
        col = np.empty(length)
        for i, (line, cell) in enumerate(cells[:length]):
            if not cell:
                raise ValueError(f"Empty cell in column {column!r} of {path!r} at line {line}.")
            try:
                col[i] = float(cell)
            except ValueError:
                raise ValueError(
                    f"Non-numeric value {cell!r} in column {column!r} of {path!r} at line {line}."
                ) from None
            if not math.isfinite(col[i]):
                raise ValueError(
                    f"Non-finite value {cell!r} in column {column!r} of {path!r} at line {line}."
                )
        values.append(col)
        lengths[column] = length
    if len(set(lengths.values())) > 1:
        listing = ", ".join(f"{c!r}: {n}" for c, n in lengths.items())
        raise ValueError(
            f"Columns of {path!r} have different lengths (number of values): {listing}."
        )
    return np.stack(values, axis=1)


def _as_column_list(field: str, columns: Any) -> list[str]:
    if isinstance(columns, str):
        columns = [columns]
    columns = list(columns)
    if not columns or not all(isinstance(c, str) and c for c in columns):
        raise ValueError(
            f"`{field}` must be a non-empty list of column names; received {columns!r}."
        )
    return columns


def load_csv_records(
    path: str | os.PathLike,
    inputs: Sequence[str],
    outputs: Sequence[str],
    ts: float = 1.0,
    name: str | None = None,
) -> Record:
    """Read a :class:`Record` from a CSV file with a header row.

    One row per sample; ``inputs`` and ``outputs`` name the columns that form
    ``u`` ``(N, len(inputs))`` and ``y`` ``(N, len(outputs))``. Other columns
    are ignored; blank lines are skipped; cells are stripped of spaces.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is empty or has no data rows; a column is missing
            (the message lists the available ones); a value is not a finite
            number (message gives column and line); a selected column has an
            empty cell before its last value, or the selected columns have
            different numbers of values.
    """
    inputs = _as_column_list("inputs", inputs)
    outputs = _as_column_list("outputs", outputs)
    header, rows = _read_table(path)
    data = _numeric_columns(header, rows, inputs + outputs, os.fspath(path))
    if name is None:
        name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return Record(
        u=data[:, : len(inputs)],
        y=data[:, len(inputs) :],
        ts=ts,
        input_names=tuple(inputs),
        output_names=tuple(outputs),
        name=name,
    )


CASCADED_TANKS_FILE = "dataBenchmark.csv"


def load_cascaded_tanks(path: str | os.PathLike, validation_fraction: float = 0.2) -> SysIdData:
    """The measured Cascaded Tanks benchmark from its ``dataBenchmark.csv``.

    The file has columns ``uEst, uVal, yEst, yVal, Ts`` (``Ts``, 4 s, only in
    the first data row). Following the benchmark protocol, ``(uVal, yVal)`` is
    the test record (report results on it only) and the estimation data is
    ``(uEst, yEst)``; the validation record is the last
    ``validation_fraction`` of the estimation experiment and the estimation
    record keeps the rest. Both measured experiments start from the same
    unknown initial state; the validation record, being a continuation, starts
    from wherever the plant was at the cut.

    Args:
        path: The CSV file, or a folder containing ``dataBenchmark.csv``.
        validation_fraction: Fraction of ``(uEst, yEst)`` (from its end) used
            for validation, in ``(0, 1)``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: a column is missing, a value is malformed, the columns have
            different lengths or ``Ts`` is missing or not positive.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, CASCADED_TANKS_FILE)
    header, rows = _read_table(path)
    data = _numeric_columns(header, rows, ["uEst", "yEst", "uVal", "yVal"], path)
    ts_idx = _column_index(header, "Ts", path)
    line, first = rows[0]
    ts_cell = first[ts_idx] if ts_idx < len(first) else ""
    try:
        ts = float(ts_cell)
    except ValueError:
        raise ValueError(
            f"The sampling period 'Ts' of {path!r} must be a number in the first data row "
            f"(line {line}); found {ts_cell!r}."
        ) from None
    if not (math.isfinite(ts) and ts > 0):
        raise ValueError(
            f"The sampling period 'Ts' of {path!r} must be positive; found {ts_cell!r}."
        )
    names = {"input_names": ("u",), "output_names": ("y",)}
    full = Record(data[:, 0:1], data[:, 1:2], ts, name="cascaded_tanks/estimation", **names)
    estimation, validation = full.split(validation_fraction)
    validation = dataclasses.replace(validation, name="cascaded_tanks/validation")
    test = Record(data[:, 2:3], data[:, 3:4], ts, name="cascaded_tanks/test", **names)
    return SysIdData(estimation, validation, test)


# --------------------------------------------------------------------------- nonlinear-benchmarks

_BENCHMARK_LOADERS = {
    "cascaded_tanks": "Cascaded_Tanks",
    "silverbox": "Silverbox",
    "wiener_hammerstein": "WienerHammerBenchMark",
    "emps": "EMPS",
}


def _record_from_benchmark(data: Any, name: str | None = None) -> Record:
    """Map an object with ``u``, ``y`` and ``sampling_time`` attributes to a Record.

    1-D signals become one channel; a missing ``sampling_time`` (a
    discrete-time record) becomes ``ts = 1``.
    """
    try:
        u, y, ts = data.u, data.y, data.sampling_time
    except AttributeError:
        raise TypeError(
            "Expected a data object with `u`, `y` and `sampling_time` attributes; received "
            f"{type(data).__name__}."
        ) from None
    u = np.asarray(u, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    u = u[:, None] if u.ndim == 1 else u
    y = y[:, None] if y.ndim == 1 else y
    label = name if name is not None else str(getattr(data, "name", "") or "")
    return Record(u, y, 1.0 if ts is None else float(ts), name=label)


def _single(part: Any, index: int, what: str) -> Any:
    if isinstance(part, (tuple, list)):
        if not -len(part) <= index < len(part):
            raise ValueError(f"`{what}` must index one of the {len(part)} records; got {index}.")
        return part[index]
    return part


def load_nonlinear_benchmark(
    name: str,
    validation_fraction: float = 0.2,
    test_index: int = 0,
    dir_placement: str | None = None,
    force_download: bool = False,
) -> SysIdData:
    """A benchmark from the optional ``nonlinear-benchmarks`` package.

    ``name`` is one of ``"cascaded_tanks"``, ``"silverbox"``,
    ``"wiener_hammerstein"`` or ``"emps"``. The package's own train/test split
    is kept: the validation record is the last ``validation_fraction`` of its
    training record, the estimation record the rest; ``test_index`` picks the
    test record where the package gives several (Silverbox: 0 multisine,
    1 full arrow, 2 arrow without extrapolation). The package downloads the
    data on first use into its cache (``dir_placement`` overrides the cache
    folder).

    Raises:
        ImportError: the package is not installed
            (``pip install nonlinear-benchmarks``).
        ValueError: unknown ``name``.
    """
    if name not in _BENCHMARK_LOADERS:
        raise ValueError(
            f"Unknown benchmark {name!r}; expected one of {sorted(_BENCHMARK_LOADERS)}."
        )
    try:
        import nonlinear_benchmarks
    except ImportError as err:
        raise ImportError(
            "load_nonlinear_benchmark needs the optional `nonlinear-benchmarks` package: "
            "pip install nonlinear-benchmarks"
        ) from err
    loader = getattr(nonlinear_benchmarks, _BENCHMARK_LOADERS[name])
    train, test = loader(
        train_test_split=True,
        dir_placement=dir_placement,
        force_download=force_download,
        atleast_2d=True,
    )
    full = _record_from_benchmark(_single(train, 0, "train"), name=f"{name}/estimation")
    estimation, validation = full.split(validation_fraction)
    validation = dataclasses.replace(validation, name=f"{name}/validation")
    test = _record_from_benchmark(_single(test, test_index, "test_index"), name=f"{name}/test")
    return SysIdData(estimation, validation, test)


# --------------------------------------------------------------------------- preprocessing


def _check_stats(field: str, values: Any, positive: bool) -> list[float]:
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or (positive and np.any(arr <= 0)):
        kind = "positive finite" if positive else "finite"
        raise ValueError(f"`{field}` must be a non-empty list of {kind} numbers; got {values!r}.")
    return [float(v) for v in arr]


@keras.saving.register_keras_serializable(package="keras_mgu")
class Normalizer:
    """Per-channel standardisation ``(x - mean) / std`` of inputs and outputs.

    Fit it on the estimation record only (``Normalizer.fit(data.estimation)``
    or ``Normalizer.fit(data)``, which uses ``data.estimation``) and apply the
    same statistics to validation and test data. A channel whose estimation
    standard deviation is below ``min_std`` (constant channel) is refused with
    a ``ValueError`` rather than scaled by a tiny number.

    Args:
        u_mean, u_std: One float per input channel.
        y_mean, y_std: One float per output channel.
    """

    def __init__(
        self,
        u_mean: Sequence[float],
        u_std: Sequence[float],
        y_mean: Sequence[float],
        y_std: Sequence[float],
    ) -> None:
        self.u_mean = _check_stats("u_mean", u_mean, positive=False)
        self.u_std = _check_stats("u_std", u_std, positive=True)
        self.y_mean = _check_stats("y_mean", y_mean, positive=False)
        self.y_std = _check_stats("y_std", y_std, positive=True)
        if len(self.u_mean) != len(self.u_std) or len(self.y_mean) != len(self.y_std):
            raise ValueError("Means and standard deviations must have one entry per channel.")

    @classmethod
    def fit(cls, data: Record | SysIdData, min_std: float = 1e-8) -> Normalizer:
        """Statistics of ``data`` (a Record, or the estimation record of a SysIdData)."""
        record = data.estimation if isinstance(data, SysIdData) else data
        if not isinstance(record, Record):
            raise TypeError(
                f"Normalizer.fit expects a Record or SysIdData; got {type(data).__name__}."
            )
        stats = {}
        for kind, arr, names in (
            ("u", record.u, record.input_names),
            ("y", record.y, record.output_names),
        ):
            mean, std = arr.mean(axis=0), arr.std(axis=0)
            scale = np.maximum(1.0, np.abs(mean))
            for i in np.nonzero(std < min_std * scale)[0]:
                raise ValueError(
                    f"Channel {names[i]!r} of {record.name or 'the record'} is constant "
                    f"(std {std[i]:.3g}); it cannot be standardised. Drop it or add variation."
                )
            stats[f"{kind}_mean"], stats[f"{kind}_std"] = mean, std
        return cls(**stats)

    @staticmethod
    def _apply(x: Any, mean: list[float], std: list[float], what: str, inverse: bool) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim < 1 or x.shape[-1] != len(mean):
            raise ValueError(
                f"`{what}` must have {len(mean)} channel(s) in its last axis; got shape {x.shape}."
            )
        m, s = np.asarray(mean), np.asarray(std)
        return x * s + m if inverse else (x - m) / s

    def transform_u(self, u: Any) -> np.ndarray:
        """``(u - u_mean) / u_std`` over the last axis, any leading shape."""
        return self._apply(u, self.u_mean, self.u_std, "u", inverse=False)

    def transform_y(self, y: Any) -> np.ndarray:
        """``(y - y_mean) / y_std`` over the last axis, any leading shape."""
        return self._apply(y, self.y_mean, self.y_std, "y", inverse=False)

    def inverse_transform_y(self, y: Any) -> np.ndarray:
        """``y * y_std + y_mean``: model outputs back in physical units."""
        return self._apply(y, self.y_mean, self.y_std, "y", inverse=True)

    def transform(self, data: Record | SysIdData) -> Record | SysIdData:
        """Normalised copy of a Record (or of every record of a SysIdData)."""
        if isinstance(data, SysIdData):
            return SysIdData(
                *(self.transform(r) for r in (data.estimation, data.validation, data.test))
            )
        if not isinstance(data, Record):
            raise TypeError(f"transform expects a Record or SysIdData; got {type(data).__name__}.")
        return dataclasses.replace(data, u=self.transform_u(data.u), y=self.transform_y(data.y))

    def get_config(self) -> dict[str, list[float]]:
        return {
            "u_mean": list(self.u_mean),
            "u_std": list(self.u_std),
            "y_mean": list(self.y_mean),
            "y_std": list(self.y_std),
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Normalizer:
        return cls(**config)


def make_windows(
    u: np.ndarray, y: np.ndarray, window: int, stride: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Cut paired ``(u, y)`` sequences into training windows.

    Window ``i`` covers samples ``[i * stride, i * stride + window)`` of both
    signals; trailing samples that do not fill a window are dropped. Each
    window is an independent copy. ``keras.utils.timeseries_dataset_from_array``
    is not used because it pairs each input window with a single target
    (sample-aligned), not with the output sequence of the same window.

    Args:
        u: ``(N, n_in)`` inputs (a 1-D ``(N,)`` array is one channel).
        y: ``(N, n_out)`` outputs, same ``N``.
        window: Samples per window, ``1 <= window <= N``.
        stride: Offset between consecutive window starts (default 1: every
            possible window, overlapping).

    Returns:
        ``(n_windows, window, n_in)`` and ``(n_windows, window, n_out)``
        arrays, ``n_windows = (N - window) // stride + 1``.
    """
    u = np.asarray(u)
    y = np.asarray(y)
    u = u[:, None] if u.ndim == 1 else u
    y = y[:, None] if y.ndim == 1 else y
    if u.ndim != 2 or y.ndim != 2 or u.shape[0] != y.shape[0]:
        raise ValueError(
            "`u` and `y` must be (N, channels) arrays of the same length; "
            f"received shapes {u.shape} and {y.shape}."
        )
    n = u.shape[0]
    if (
        isinstance(window, bool)
        or not isinstance(window, (int, np.integer))
        or not 1 <= window <= n
    ):
        raise ValueError(f"`window` must be an integer in [1, N={n}]; received {window!r}.")
    stride = 1 if stride is None else stride
    if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or stride < 1:
        raise ValueError(f"`stride` must be a positive integer; received {stride!r}.")
    starts = np.arange(0, n - window + 1, stride)
    idx = starts[:, None] + np.arange(window)[None, :]
    return u[idx], y[idx]
