"""A free-run band whose width follows where the model's members disagree.

The band of :mod:`~keras_mgu.sysid.judging.band` has one width per output
for the whole simulation. This one widens where the model is unsure: where
the simulations of its members part. The members of an identification
(``found``) are the runs of the class it kept (its restarts, averaged or not,
but none that ran off) and its ARX reference, each run free from the same
start; at sample ``t``, output ``j``, their disagreement with the model's
simulation ``y_hat`` is::

    D_j(t) = max over members m of |y_m,j(t) - y_hat_j(t)|

It grows where the experiment leaves what the estimation record showed (a
nonlinear class and its linear reference part ways outside the estimation
range) and where the members' fits differ. Calibrated on a record no run
fitted (normalised split conformal prediction), with ``Dbar_j`` the mean of
``D_j`` over that record's scored samples::

    s_j(t) = 1 + D_j(t) / Dbar_j                (1 where Dbar_j = 0)
    r_j(t) = |y_j(t) - y_hat_j(t)| / s_j(t)      the calibration scores
    y_hat_j(t) -+ q_j s_j(t),   q_j = the ceil((m + 1) L)-th smallest of the m scores r_j

so the band is ``q_j`` wide where the members agree and twice that where
they part by their mean on the calibration record. For scores exchangeable
with the calibration record's, ``y_j(t)`` is inside with probability at least
``L``; the free run's errors are correlated in time, so coverage on a new
record is measured, not promised.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_mgu.sysid.judging.band import QUANTILE_GRID, Trajectory, check_level

__all__ = [
    "ScaledBand",
    "calibrate_scaled_band",
    "disagreement",
    "member_disagreement",
    "scaled_simulation",
]


@dataclasses.dataclass
class ScaledBand:
    """The calibrated scores of a band that follows the members' disagreement (module).

    Attributes:
        quantiles: ``(len(QUANTILE_GRID), n_outputs)`` the scores' quantiles.
        count: ``m``, the scores behind them.
        mean_disagreement: ``(n_outputs,)`` ``Dbar``, physical units.
    """

    quantiles: np.ndarray
    count: int
    mean_disagreement: np.ndarray

    def scale(self, disagreement: np.ndarray) -> np.ndarray:
        """``s`` ``(N, n_outputs)`` of a disagreement ``D`` ``(N, n_outputs)``."""
        mean = np.asarray(self.mean_disagreement, dtype=np.float64)
        safe = np.where(mean > 0, mean, 1.0)
        return 1.0 + np.where(mean > 0, np.asarray(disagreement) / safe, 0.0)

    def score_quantile(self, level: float) -> np.ndarray:
        """``q`` ``(n_outputs,)``: the scores' conformal quantile at ``level``."""
        level = check_level(level)
        if self.count == 0:
            return np.full(self.quantiles.shape[1], np.inf)
        p = min(1.0, math.ceil((self.count + 1) * level) / self.count)
        return np.array([np.interp(p, QUANTILE_GRID, column) for column in self.quantiles.T])

    def around(
        self, y: np.ndarray, disagreement: np.ndarray, level: float, measured: int = 0
    ) -> Trajectory:
        """``y`` ``(N, n_outputs)`` with its band; the first ``measured`` rows get width zero."""
        width = self.score_quantile(level) * self.scale(disagreement)
        width[:measured] = 0.0
        return Trajectory(y, y - width, y + width)


def calibrate_scaled_band(
    y: np.ndarray, y_hat: np.ndarray, disagreement: np.ndarray, n: int
) -> ScaledBand:
    """The :class:`ScaledBand` of a simulation ``y_hat`` of a calibration record ``y``.

    Args:
        y, y_hat, disagreement: ``(N, n_outputs)`` each: the measured
            outputs, the model's simulation from the first ``n`` of them and
            the members' disagreement with it (:func:`member_disagreement`).
        n: The measured outputs the simulation starts from; rows ``n`` on
            are scored.
    """
    y, y_hat, d = (np.asarray(a, dtype=np.float64) for a in (y, y_hat, disagreement))
    if not (y.shape == y_hat.shape == d.shape and y.ndim == 2):
        raise ValueError(
            "`y`, `y_hat` and `disagreement` must have one shape (N, n_outputs); received "
            f"{y.shape}, {y_hat.shape} and {d.shape}."
        )
    if not 0 <= int(n) < len(y):
        raise ValueError(f"`n` must be in [0, {len(y) - 1}]; received {n}.")
    mean = np.mean(d[n:], axis=0)
    band = ScaledBand(np.zeros((len(QUANTILE_GRID), y.shape[1])), len(y) - n, mean)
    scores = np.abs(y[n:] - y_hat[n:]) / band.scale(d[n:])
    scores = np.where(np.isfinite(scores), scores, np.inf)
    band.quantiles = np.quantile(scores, QUANTILE_GRID, axis=0, method="inverted_cdf")
    return band


def member_disagreement(
    found: Any, u: np.ndarray, y_initial: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(y_hat, D)``: ``found``'s simulation of ``u`` and its members' disagreement with it.

    The members: every run of the class ``found`` kept that the choice may keep,
    and its ARX reference (where it has one), simulated from the same ``y_initial``
    (:meth:`~keras_mgu.sysid.Identification.simulate`); ``(N, n_outputs)`` each.
    A model without members besides itself disagrees with nothing (``D = 0``).
    More members (the free runs of a polynomial's drawn coefficients, say:
    :func:`~keras_mgu.sysid.models.polynomial_uncertainty.drawn_simulations`)
    join as ``np.maximum(D, disagreement(y_hat, more))``.
    """
    y_hat = found.simulate(u, y_initial)
    chosen = found.runs[found.best].structure
    runs = [k for k, run in enumerate(found.runs) if run.structure == chosen and not run.not_kept]
    members = [found.run_alone(k).simulate(u, y_initial) for k in runs]
    if getattr(found, "arx", None) is not None:
        members.append(found.reference().simulate(u, y_initial))
    return y_hat, disagreement(y_hat, members)


def disagreement(y_hat: np.ndarray, members: Sequence[np.ndarray]) -> np.ndarray:
    """``D`` ``(N, n_outputs)``: the largest distance of a member's simulation from ``y_hat``
    (``inf`` where one is not finite; zero without members)."""
    if not len(members):
        return np.zeros_like(y_hat)
    d = np.max([np.abs(m - y_hat) for m in members], axis=0)
    return np.where(np.isfinite(d), d, np.inf)


def scaled_simulation(
    found: Any, band: ScaledBand, u: np.ndarray, y_initial: np.ndarray, level: float
) -> Trajectory:
    """``found``'s simulation of ``u`` from ``y_initial`` with the :class:`ScaledBand` around it."""
    y_hat, d = member_disagreement(found, u, y_initial)
    return band.around(y_hat, d, level, measured=len(y_initial))
