"""Process plants of the simulated zoo: a heated tank fed through a pipe, with dead time.

* :class:`HeatedTankParameters`, :func:`simulate_heated_tank`: a stirred tank
  fed through a pipe from a heater that saturates, losing heat faster than
  linearly above ambient, read by a lagging sensor (fixed-step RK4).

As in ``plants``, the simulator takes an input ``u`` ``(N,)`` held constant
over each sample period (zero-order hold) and returns the noise-free states;
the experiment design (excitation, noise, records) is in ``zoo``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from keras_mgu.datasets.plants import (
    _as_input,
    _as_state,
    _check_positive,
    _check_substeps,
    _integrate_rk4,
)
from keras_mgu.datasets.records import _check_ts

__all__ = ["WATER_HEAT_CAPACITY", "HeatedTankParameters", "simulate_heated_tank"]

#: Volumetric heat capacity of water, ``rho c`` (J/(L K)): 1 kg/L times 4186 J/(kg K).
WATER_HEAT_CAPACITY = 4186.0


@dataclasses.dataclass(frozen=True)
class HeatedTankParameters:
    """A stirred tank fed through a pipe from a saturating heater, read by a lagging sensor.

    Water at ambient temperature ``t_ambient`` (degC) flows at ``flow`` (L/s)
    through a heater driven by ``u`` in ``[0, 1]`` (the fraction of its
    drive), then along a pipe for ``delay`` seconds (plug flow, no loss), into
    a stirred tank of ``volume`` (L) that overflows at the same rate. The
    tank's temperature ``T`` (degC) loses heat to the room faster than
    linearly above ambient (convection and evaporation off the open surface),
    and a sensor reads it with a first-order lag: the output is ``T_m``
    (degC). With ``C = rho c V`` (J/K), ``G = rho c q`` (W/K) and
    ``rho c`` = :data:`WATER_HEAT_CAPACITY`::

        P(u)    = p_max tanh(u / u_sat)                            heater power (W)
        T_f(t)  = t_ambient + P(u(t - delay)) / G                  feed entering the tank
        C T'    = G (T_f - T) - k1 (T - t_ambient) - k2 (T - t_ambient) |T - t_ambient|
        tau_s T_m' = T - T_m

    Steady state for a constant ``u`` (``d = T - t_ambient >= 0``)::

        k2 d^2 + (G + k1) d - P(u) = 0

    With the defaults (2 L, 0.02 L/s, 14 kW, ``u_sat = 0.7``, 20 + 2 d W/K of
    loss, 12 s of pipe, a 5 s sensor): ``C = 8372 J/K``, ``G = 83.7 W/K``;
    the tank settles at 20 degC for ``u = 0``, 34.9 degC for 0.1, 59.6 degC
    for 0.4, 71.6 degC for 0.7 and 77.2 degC for 1; its time constant
    ``C / (G + k1 + 2 k2 d)`` falls from 81 s at ambient to 51 s at 35 degC
    and 27 s at 72 degC. The heater's gain ``P'(u)`` at ``u = 0.7`` is 42 %
    of that at 0, 21 % at 1.
    """

    volume: float = 2.0
    flow: float = 0.02
    p_max: float = 14_000.0
    u_sat: float = 0.7
    k1: float = 20.0
    k2: float = 2.0
    delay: float = 12.0
    tau_s: float = 5.0
    t_ambient: float = 20.0

    def __post_init__(self) -> None:
        _check_positive(
            self,
            ("volume", "flow", "p_max", "u_sat", "k1", "k2", "delay", "tau_s"),
            allow_zero=("k1", "k2", "delay"),
        )
        if not (isinstance(self.t_ambient, (int, float)) and math.isfinite(self.t_ambient)):
            raise ValueError(f"HeatedTankParameters.t_ambient must be a finite number; "
                             f"got {self.t_ambient!r}.")  # fmt: skip

    @property
    def heat_capacity(self) -> float:
        """The tank's ``C = rho c V`` (J/K)."""
        return WATER_HEAT_CAPACITY * self.volume

    @property
    def flow_conductance(self) -> float:
        """Heat carried by the flow per kelvin, ``G = rho c q`` (W/K)."""
        return WATER_HEAT_CAPACITY * self.flow

    def heater_power(self, u: Any) -> Any:
        """``P(u) = p_max tanh(u / u_sat)`` (W), for a number or an array."""
        return self.p_max * np.tanh(np.asarray(u, dtype=np.float64) / self.u_sat)

    def steady_state(self, u: float) -> float:
        """The tank's (and the sensor's) temperature (degC) for a constant ``u >= 0``.

        The positive root ``d`` of ``k2 d^2 + (G + k1) d - P(u) = 0``, plus ``t_ambient``.
        """
        power, linear = float(self.heater_power(u)), self.flow_conductance + self.k1
        if self.k2 == 0.0:
            return self.t_ambient + power / linear
        # The root in the form that keeps its digits for a small power.
        rise = 2.0 * power / (linear + math.sqrt(linear * linear + 4.0 * self.k2 * power))
        return self.t_ambient + rise


def _delay_samples(delay: float, ts: float) -> int:
    samples = delay / ts
    if abs(samples - round(samples)) > 1e-9 * max(1.0, samples):
        raise ValueError(f"The pipe's delay ({delay} s) must be a whole number of sample periods "
                         f"({ts} s).")  # fmt: skip
    return int(round(samples))


def simulate_heated_tank(
    u: Any,
    ts: float = 1.0,
    parameters: HeatedTankParameters | None = None,
    initial_input: float = 0.0,
    initial_state: tuple[float, float] | None = None,
    substeps: int = 4,
) -> np.ndarray:
    """Tank and sensor temperatures (degC) of the heated tank for a heater sequence.

    The pipe delays the heated feed by ``D = delay / ts`` whole samples: over
    ``[k ts, (k + 1) ts)`` the tank receives the feed heated by ``u[k - D]``
    (``initial_input`` before sample 0, the pipe's content at ``t = 0``).
    Fixed-step classical RK4 of the equations of
    :class:`HeatedTankParameters`, ``substeps`` steps per sample period. With
    the hold, ``u[k]`` first moves the tank and the sensor at sample
    ``k + D + 1``: a discrete dead time of ``D + 1`` samples (13 with the
    defaults).

    Args:
        u: ``(N,)`` or ``(N, 1)`` heater drive, a fraction of full drive (``u < 0``
            is read through the same ``tanh``: the zoo keeps it in ``[0, 1]``).
        ts: Sampling period (s); ``delay`` must be a whole number of them.
        parameters: Plant constants; ``HeatedTankParameters()`` if None.
        initial_input: The drive held before sample 0, in the pipe at ``t = 0``.
        initial_state: ``(T, T_m)`` at ``t = 0``; None for the steady state of
            ``initial_input`` (:meth:`HeatedTankParameters.steady_state`).
        substeps: RK4 steps per sample period.

    Returns:
        ``(N, 2)`` array of ``(T, T_m)`` at ``k ts`` (row 0 is the initial state).
    """
    p = HeatedTankParameters() if parameters is None else parameters
    u = _as_input(u)
    ts = _check_ts(ts)
    initial_input = float(_as_state("initial_input", [initial_input], 1)[0])
    if initial_state is None:
        level = p.steady_state(initial_input)
        initial_state = (level, level)
    x0 = _as_state("initial_state", initial_state, 2)
    lag = _delay_samples(p.delay, ts)
    delayed = np.concatenate([np.full(lag, initial_input), u])[: u.shape[0]]
    g = p.flow_conductance
    feed = p.t_ambient + p.heater_power(delayed) / g  # T_f over each sample period
    c, k1, k2, tau, ambient = p.heat_capacity, p.k1, p.k2, p.tau_s, p.t_ambient

    def rates(x, feed_k):
        tank, sensor = x
        rise = tank - ambient
        loss = k1 * rise + k2 * rise * abs(rise)
        return [(g * (feed_k - tank) - loss) / c, (tank - sensor) / tau]

    return _integrate_rk4(rates, feed, x0, ts, _check_substeps(substeps))
