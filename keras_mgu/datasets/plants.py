"""Plants of the simulated zoo: parameters, equations and noise-free simulators.

* :class:`DuffingParameters`, :func:`simulate_duffing`: a cubic-stiffness
  oscillator like the Silverbox (fixed-step RK4).
* :class:`BoucWenParameters`, :func:`simulate_bouc_wen`: the Bouc-Wen
  hysteretic oscillator of the Noël & Schoukens benchmark (fixed-step RK4).
* :class:`WienerHammersteinParameters`, :func:`simulate_wiener_hammerstein`:
  linear filter, static nonlinearity, linear filter (discrete time).
* :class:`TwoMassParameters`, :func:`simulate_two_mass_drive`: a two-inertia
  drive with Coulomb friction that sticks (time-stepping scheme).
* :class:`PendulumParameters`, :func:`simulate_pendulum`: a forced, lightly
  damped pendulum whose restoring torque softens as ``sin`` (fixed-step RK4).
* :class:`VanDerPolParameters`, :func:`simulate_van_der_pol`: a forced Van der
  Pol oscillator, its damping negative near rest and positive at large
  amplitude (fixed-step RK4).

Every simulator takes an input ``u`` ``(N,)`` held constant over each sample
period (zero-order hold) and returns the noise-free states or output; the
experiment design (excitation, noise, records) is in ``zoo``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from keras_mgu.datasets.records import _check_ts

__all__ = [
    "BoucWenParameters",
    "DuffingParameters",
    "PendulumParameters",
    "TwoMassParameters",
    "VanDerPolParameters",
    "WienerHammersteinParameters",
    "simulate_bouc_wen",
    "simulate_duffing",
    "simulate_pendulum",
    "simulate_two_mass_drive",
    "simulate_van_der_pol",
    "simulate_wiener_hammerstein",
]


def _check_positive(owner: object, fields: tuple[str, ...], allow_zero: tuple[str, ...] = ()):
    for field in fields:
        value = getattr(owner, field)
        ok = isinstance(value, (int, float)) and math.isfinite(value)
        ok = ok and (value >= 0 if field in allow_zero else value > 0)
        if not ok:
            bound = ">= 0" if field in allow_zero else "positive"
            raise ValueError(
                f"{type(owner).__name__}.{field} must be a {bound} number; got {value!r}."
            )


def _as_input(u: Any) -> np.ndarray:
    """``u`` as a finite ``(N,)`` float64 array (``(N, 1)`` accepted)."""
    u = np.asarray(u, dtype=np.float64)
    if u.ndim == 2 and u.shape[1] == 1:
        u = u[:, 0]
    if u.ndim != 1 or u.shape[0] < 1 or not np.all(np.isfinite(u)):
        raise ValueError(f"`u` must be a finite (N,) or (N, 1) array; received shape {u.shape}.")
    return u


def _as_state(name: str, value: Any, size: int) -> list[float]:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (size,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must be {size} finite numbers; got {value!r}.")
    return arr.tolist()


def _check_substeps(substeps: Any) -> int:
    if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
        raise ValueError(f"`substeps` must be a positive integer; received {substeps!r}.")
    return substeps


def _rk4(rates, x: list[float], uk: float, h: float) -> list[float]:
    """One classical Runge-Kutta step of ``x' = rates(x, u)`` (plain floats, small state)."""
    a = rates(x, uk)
    b = rates([xi + 0.5 * h * ai for xi, ai in zip(x, a)], uk)
    c = rates([xi + 0.5 * h * bi for xi, bi in zip(x, b)], uk)
    d = rates([xi + h * ci for xi, ci in zip(x, c)], uk)
    return [
        xi + h / 6.0 * (ai + 2.0 * bi + 2.0 * ci + di) for xi, ai, bi, ci, di in zip(x, a, b, c, d)
    ]


def _integrate_rk4(rates, u: np.ndarray, x0: list[float], ts: float, substeps: int) -> np.ndarray:
    """States ``(N, n_states)`` at ``k ts``; ``u[k]`` held over ``[k ts, (k+1) ts)``."""
    h = ts / substeps
    x = list(x0)
    out = np.empty((u.shape[0], len(x)))
    for k, uk in enumerate(u.tolist()):
        out[k] = x
        for _ in range(substeps):
            x = _rk4(rates, x, uk, h)
    return out


@dataclasses.dataclass(frozen=True)
class DuffingParameters:
    """A mass on a spring that stiffens with the cube of its displacement (Silverbox-like).

    After the Silverbox electronic circuit (Wigren & Schoukens 2013, "Three free
    data sets for development and benchmarking in nonlinear system
    identification"), a forced Duffing oscillator: force ``u`` (N),
    displacement ``y`` (m), velocity ``v`` (m/s)::

        m y'' + c y' + k y + k3 y^3 = u

    With the defaults (``m = 1``, ``k = 1``) the small-signal resonance is at
    ``sqrt(k/m) = 1 rad/s`` (0.159 Hz) with damping ratio
    ``c / (2 sqrt(k m)) = 0.05``; at ``|y| = 1`` the cubic term adds half the
    linear stiffness.
    """

    m: float = 1.0
    c: float = 0.1
    k: float = 1.0
    k3: float = 0.5

    def __post_init__(self) -> None:
        _check_positive(self, ("m", "c", "k", "k3"), allow_zero=("c", "k3"))


def simulate_duffing(
    u: Any,
    ts: float = 0.4,
    parameters: DuffingParameters | None = None,
    initial_state: tuple[float, float] = (0.0, 0.0),
    substeps: int = 4,
) -> np.ndarray:
    """Displacement and velocity of the Duffing oscillator for a force sequence.

    Fixed-step classical RK4, ``substeps`` steps per sample period, ``u[k]``
    held over ``[k ts, (k + 1) ts)``.

    Args:
        u: ``(N,)`` or ``(N, 1)`` force (N).
        ts: Sampling period (s).
        parameters: Plant constants; ``DuffingParameters()`` if None.
        initial_state: ``(y, v)`` at ``t = 0``.
        substeps: RK4 steps per sample period.

    Returns:
        ``(N, 2)`` array of ``(y, v)`` at ``k ts`` (row 0 is the initial state).
    """
    p = DuffingParameters() if parameters is None else parameters
    m, c, k, k3 = p.m, p.c, p.k, p.k3

    def rates(x, uk):
        y, v = x
        return [v, (uk - c * v - k * y - k3 * y * y * y) / m]

    x0 = _as_state("initial_state", initial_state, 2)
    return _integrate_rk4(rates, _as_input(u), x0, _check_ts(ts), _check_substeps(substeps))


@dataclasses.dataclass(frozen=True)
class BoucWenParameters:
    """The Bouc-Wen hysteretic oscillator of the Noël & Schoukens (2016) benchmark.

    "Hysteretic benchmark with a dynamic nonlinearity" (Noël & Schoukens,
    Workshop on Nonlinear System Identification Benchmarks, 2016): force
    ``u`` (N), displacement ``y`` (m), hysteretic force ``z`` (N)::

        m y'' + c y' + k y + z = u
        z' = alpha y' - beta (gamma |y'| |z|^(nu - 1) z + delta y' |z|^nu)

    The defaults are the benchmark's (``m = 2 kg``, ``c = 10 N s/m``,
    ``k = alpha = 5e4 N/m``, ``beta = 1e3 m^-1``, ``gamma = 0.8``,
    ``delta = -1.1``, ``nu = 1``). With ``beta = 0`` and ``z(0) = alpha y(0)``
    the system is linear with stiffness ``k + alpha`` (resonance
    ``sqrt((k + alpha) / m) / 2 pi = 35.6 Hz``); ``beta > 0`` dissipates energy
    in a hysteresis loop of ``z`` against ``y``.
    """

    m: float = 2.0
    c: float = 10.0
    k: float = 5e4
    alpha: float = 5e4
    beta: float = 1e3
    gamma: float = 0.8
    delta: float = -1.1
    nu: float = 1.0

    def __post_init__(self) -> None:
        _check_positive(self, ("m", "c", "k", "alpha", "beta", "nu"), allow_zero=("c", "beta"))
        for field in ("gamma", "delta"):
            if not (
                isinstance(getattr(self, field), (int, float))
                and math.isfinite(getattr(self, field))
            ):
                raise ValueError(f"BoucWenParameters.{field} must be a finite number.")


def simulate_bouc_wen(
    u: Any,
    ts: float = 1.0 / 750.0,
    parameters: BoucWenParameters | None = None,
    initial_state: tuple[float, float, float] = (0.0, 0.0, 0.0),
    substeps: int = 4,
) -> np.ndarray:
    """Displacement, velocity and hysteretic force of the Bouc-Wen oscillator.

    Fixed-step classical RK4, ``substeps`` steps per sample period, ``u[k]``
    held over ``[k ts, (k + 1) ts)``.

    Args:
        u: ``(N,)`` or ``(N, 1)`` force (N).
        ts: Sampling period (s); the benchmark's 750 Hz by default.
        parameters: Plant constants; ``BoucWenParameters()`` if None.
        initial_state: ``(y, v, z)`` at ``t = 0``.
        substeps: RK4 steps per sample period.

    Returns:
        ``(N, 3)`` array of ``(y, v, z)`` at ``k ts`` (row 0 is the initial state).
    """
    p = BoucWenParameters() if parameters is None else parameters
    m, c, k, alpha, beta = p.m, p.c, p.k, p.alpha, p.beta
    gamma, delta, nu = p.gamma, p.delta, p.nu

    def rates(x, uk):
        _, v, z = x
        z_nu = abs(z) ** nu
        dz = alpha * v - beta * (gamma * abs(v) * math.copysign(z_nu, z) + delta * v * z_nu)
        return [v, (uk - c * v - k * x[0] - z) / m, dz]

    x0 = _as_state("initial_state", initial_state, 3)
    return _integrate_rk4(rates, _as_input(u), x0, _check_ts(ts), _check_substeps(substeps))


def _filter_coefficients(name: str, value: Any) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    if arr.ndim != 1 or arr.size < 1 or not np.all(np.isfinite(arr)):
        raise ValueError(f"WienerHammersteinParameters.{name} must be finite coefficients.")
    return arr


@dataclasses.dataclass(frozen=True, eq=False)
class WienerHammersteinParameters:
    """A Wiener-Hammerstein chain: linear filter, static nonlinearity, linear filter.

    After the electronic circuit of the Wiener-Hammerstein benchmark
    (Schoukens, Suykens & Ljung 2009, "Wiener-Hammerstein benchmark"): a
    third-order Chebyshev type I low-pass ``G1``, a static nonlinearity ``f``
    and a third-order Chebyshev type II (inverse Chebyshev) low-pass ``G2``,
    all in discrete time (``q^-1`` is the delay of one sample)::

        x[k] = G1(q) u[k],      G1 = b1(q^-1) / a1(q^-1)
        w[k] = f(x[k]) = saturation tanh(x[k] / saturation) + quadratic x[k]^2
        y[k] = G2(q) w[k],      G2 = b2(q^-1) / a2(q^-1)

    The default filters are ``scipy.signal.cheby1(3, 0.5, 0.25)`` and
    ``scipy.signal.cheby2(3, 40, 0.35)`` (cut-offs relative to the Nyquist
    frequency); ``f`` saturates (like the circuit's diodes) and is asymmetric.
    """

    b1: Any = None
    a1: Any = None
    b2: Any = None
    a2: Any = None
    saturation: float = 1.0
    quadratic: float = 0.1

    def __post_init__(self) -> None:
        from scipy import signal

        if self.b1 is None and self.a1 is None:
            b1, a1 = signal.cheby1(3, 0.5, 0.25)
            object.__setattr__(self, "b1", b1)
            object.__setattr__(self, "a1", a1)
        if self.b2 is None and self.a2 is None:
            b2, a2 = signal.cheby2(3, 40.0, 0.35)
            object.__setattr__(self, "b2", b2)
            object.__setattr__(self, "a2", a2)
        for b, a in (("b1", "a1"), ("b2", "a2")):
            if (getattr(self, b) is None) != (getattr(self, a) is None):
                raise ValueError(
                    f"WienerHammersteinParameters: give both {b} and {a}, or neither (the default)."
                )
        for name in ("b1", "a1", "b2", "a2"):
            object.__setattr__(self, name, _filter_coefficients(name, getattr(self, name)))
        if self.a1[0] == 0.0 or self.a2[0] == 0.0:
            raise ValueError("WienerHammersteinParameters: a1[0] and a2[0] must be nonzero.")
        _check_positive(self, ("saturation",))
        if not math.isfinite(self.quadratic):
            raise ValueError(
                f"WienerHammersteinParameters.quadratic must be finite; got {self.quadratic!r}."
            )

    def nonlinearity(self, x: np.ndarray) -> np.ndarray:
        """The static ``f(x) = saturation tanh(x / saturation) + quadratic x^2``."""
        x = np.asarray(x, dtype=np.float64)
        return self.saturation * np.tanh(x / self.saturation) + self.quadratic * x * x


def simulate_wiener_hammerstein(
    u: Any, parameters: WienerHammersteinParameters | None = None
) -> np.ndarray:
    """Noise-free output ``y`` ``(N,)`` of the Wiener-Hammerstein chain for input ``u``.

    Both filters start at rest (``scipy.signal.lfilter``); the chain has no
    continuous-time part, so no sampling period enters.
    """
    from scipy import signal

    p = WienerHammersteinParameters() if parameters is None else parameters
    x = signal.lfilter(p.b1, p.a1, _as_input(u))
    return signal.lfilter(p.b2, p.a2, p.nonlinearity(x))


@dataclasses.dataclass(frozen=True)
class TwoMassParameters:
    """A two-inertia drive: motor and load coupled by a flexible shaft, Coulomb friction.

    The resonant servo drive of Ellis & Lorenz (2000, "Resonant load control
    methods for industrial servo drives"), with Coulomb friction on both
    inertias that sticks (Karnopp 1985, "Computer simulation of stick-slip
    friction in mechanical dynamic systems"). Motor torque ``u`` (N m), motor
    and load angles ``qm``, ``ql`` (rad) and speeds ``wm``, ``wl`` (rad/s)::

        s   = k (qm - ql) + d (wm - wl)                       shaft torque
        Jm wm' = u - s - bm wm - Fm sgn(wm)
        Jl wl' =     s - bl wl - Fl sgn(wl)

    ``sgn`` is set-valued at zero speed: an inertia at rest stays at rest
    while the other torques on it are within ``[-F, F]`` (stick) and slips
    against a friction torque ``F`` otherwise. With the defaults the shaft
    resonance is at ``sqrt(k (1/Jm + 1/Jl)) = 24.5 rad/s`` (3.9 Hz); a constant
    torque ``u > Fm + Fl`` drives both at ``(u - Fm - Fl) / (bm + bl)``.
    """

    jm: float = 1.0
    jl: float = 2.0
    k: float = 400.0
    d: float = 0.4
    bm: float = 0.2
    bl: float = 0.3
    fm: float = 1.0
    fl: float = 1.5

    def __post_init__(self) -> None:
        _check_positive(
            self,
            ("jm", "jl", "k", "d", "bm", "bl", "fm", "fl"),
            allow_zero=("d", "bm", "bl", "fm", "fl"),
        )


def _friction_update(j: float, w: float, torque: float, friction: float, h: float) -> float:
    """Speed after a step ``h`` of ``j w' = torque - friction sgn(w)`` (implicit friction).

    The momentum ``j w + h torque`` that friction cannot overcome within the
    step leaves the inertia at rest (stick); otherwise friction takes
    ``h friction`` off it (slip).
    """
    momentum = j * w + h * torque
    if abs(momentum) <= h * friction:
        return 0.0
    return (momentum - math.copysign(h * friction, momentum)) / j


def simulate_two_mass_drive(
    u: Any,
    ts: float = 0.01,
    parameters: TwoMassParameters | None = None,
    initial_state: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
    substeps: int = 10,
) -> np.ndarray:
    """Angles and speeds of the two-mass drive for a motor-torque sequence.

    Time-stepping (Moreau's scheme: semi-implicit Euler with the friction
    implicit, first order), ``substeps`` steps per sample period, ``u[k]``
    held over ``[k ts, (k + 1) ts)``. Each step computes the shaft torque,
    updates the speeds with :func:`_friction_update` (stick when friction can
    hold the inertia) and then the angles with the new speeds.

    Args:
        u: ``(N,)`` or ``(N, 1)`` motor torque (N m).
        ts: Sampling period (s).
        parameters: Plant constants; ``TwoMassParameters()`` if None.
        initial_state: ``(qm, ql, wm, wl)`` at ``t = 0``.
        substeps: Steps per sample period.

    Returns:
        ``(N, 4)`` array of ``(qm, ql, wm, wl)`` at ``k ts`` (row 0 is the initial state).
    """
    p = TwoMassParameters() if parameters is None else parameters
    u = _as_input(u)
    h = _check_ts(ts) / _check_substeps(substeps)
    qm, ql, wm, wl = _as_state("initial_state", initial_state, 4)
    out = np.empty((u.shape[0], 4))
    for n, uk in enumerate(u.tolist()):
        out[n] = (qm, ql, wm, wl)
        for _ in range(substeps):
            shaft = p.k * (qm - ql) + p.d * (wm - wl)
            wm = _friction_update(p.jm, wm, uk - shaft - p.bm * wm, p.fm, h)
            wl = _friction_update(p.jl, wl, shaft - p.bl * wl, p.fl, h)
            qm += h * wm
            ql += h * wl
    return out


@dataclasses.dataclass(frozen=True)
class PendulumParameters:
    """A forced pendulum with viscous damping at its pivot: a softening restoring torque.

    A mass ``m`` (kg) on a massless rod of length ``l`` (m) swinging under
    gravity ``g`` (m/s^2), a torque ``u`` (N m) at the pivot, angle ``theta``
    from the hanging position (rad), angular velocity ``w`` (rad/s)::

        m l^2 theta'' + c theta' + m g l sin(theta) = u

    The restoring torque ``m g l sin(theta)`` falls behind the linear
    ``m g l theta`` as the swing grows (by 16 % at 1 rad): the resonance moves
    down with the amplitude. With the defaults the small-signal resonance is
    at ``sqrt(g / l) = 3.13 rad/s`` (0.498 Hz, a period of 2.01 s) with
    damping ratio ``c / (2 m l^2 sqrt(g / l)) = 0.08``; a constant torque
    beyond ``m g l = 9.81 N m`` has no equilibrium and swings it over the top.
    """

    m: float = 1.0
    l: float = 1.0  # noqa: E741 (the rod's length, as in the equation)
    g: float = 9.81
    c: float = 0.5

    def __post_init__(self) -> None:
        _check_positive(self, ("m", "l", "g", "c"), allow_zero=("c",))

    @property
    def natural_frequency(self) -> float:
        """Small-signal resonance ``sqrt(g / l)`` (rad/s)."""
        return math.sqrt(self.g / self.l)

    @property
    def damping_ratio(self) -> float:
        """Small-signal damping ratio ``c / (2 m l^2 sqrt(g / l))``."""
        return self.c / (2.0 * self.m * self.l**2 * self.natural_frequency)


def simulate_pendulum(
    u: Any,
    ts: float = 0.02,
    parameters: PendulumParameters | None = None,
    initial_state: tuple[float, float] = (0.0, 0.0),
    substeps: int = 4,
) -> np.ndarray:
    """Angle and angular velocity of the forced pendulum for a torque sequence.

    Fixed-step classical RK4 of ``theta' = w``,
    ``w' = (u - c w - m g l sin(theta)) / (m l^2)``, ``substeps`` steps per
    sample period, ``u[k]`` held over ``[k ts, (k + 1) ts)``. The angle is
    not wrapped: a swing over the top adds ``2 pi``.

    Args:
        u: ``(N,)`` or ``(N, 1)`` torque at the pivot (N m).
        ts: Sampling period (s); 0.02 s is about 100 samples per small-signal period.
        parameters: Plant constants; ``PendulumParameters()`` if None.
        initial_state: ``(theta, w)`` at ``t = 0``.
        substeps: RK4 steps per sample period.

    Returns:
        ``(N, 2)`` array of ``(theta, w)`` at ``k ts`` (row 0 is the initial state).
    """
    p = PendulumParameters() if parameters is None else parameters
    inertia, c, gravity = p.m * p.l**2, p.c, p.m * p.g * p.l
    sin = math.sin

    def rates(x, uk):
        theta, w = x
        return [w, (uk - c * w - gravity * sin(theta)) / inertia]

    x0 = _as_state("initial_state", initial_state, 2)
    return _integrate_rk4(rates, _as_input(u), x0, _check_ts(ts), _check_substeps(substeps))


@dataclasses.dataclass(frozen=True)
class VanDerPolParameters:
    """A forced Van der Pol oscillator: damping that pumps energy in near rest, out far from it.

    After Van der Pol's triode oscillator (Van der Pol 1926, "On relaxation-
    oscillations"), with a force ``u`` on the right: displacement ``x``,
    velocity ``v = x'``::

        x'' - mu (1 - x^2) x' + omega^2 x = u

    With ``mu > 0`` the damping ``-mu (1 - x^2)`` is negative within
    ``|x| < 1`` and positive beyond, so the state at rest is unstable and
    every trajectory stays bounded: unforced, it settles on a limit cycle of
    amplitude about 2 (for small ``mu``, a period near ``2 pi / omega``;
    6.66 s at the defaults ``mu = 1``, ``omega = 1``). A strong enough force
    entrains it. ``mu = 0`` is the undamped linear oscillator.
    """

    mu: float = 1.0
    omega: float = 1.0

    def __post_init__(self) -> None:
        _check_positive(self, ("mu", "omega"), allow_zero=("mu",))


def simulate_van_der_pol(
    u: Any,
    ts: float = 0.1,
    parameters: VanDerPolParameters | None = None,
    initial_state: tuple[float, float] = (0.0, 0.0),
    substeps: int = 4,
) -> np.ndarray:
    """Displacement and velocity of the forced Van der Pol oscillator for a force sequence.

    Fixed-step classical RK4 of ``x' = v``,
    ``v' = u + mu (1 - x^2) v - omega^2 x``, ``substeps`` steps per sample
    period, ``u[k]`` held over ``[k ts, (k + 1) ts)``.

    Args:
        u: ``(N,)`` or ``(N, 1)`` force.
        ts: Sampling period (s).
        parameters: Plant constants; ``VanDerPolParameters()`` if None.
        initial_state: ``(x, v)`` at ``t = 0``.
        substeps: RK4 steps per sample period.

    Returns:
        ``(N, 2)`` array of ``(x, v)`` at ``k ts`` (row 0 is the initial state).
    """
    p = VanDerPolParameters() if parameters is None else parameters
    mu, omega2 = p.mu, p.omega * p.omega

    def rates(state, uk):
        x, v = state
        return [v, uk + mu * (1.0 - x * x) * v - omega2 * x]

    x0 = _as_state("initial_state", initial_state, 2)
    return _integrate_rk4(rates, _as_input(u), x0, _check_ts(ts), _check_substeps(substeps))
