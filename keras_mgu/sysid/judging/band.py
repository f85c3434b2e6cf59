"""A band around every simulation and prediction, calibrated on data the model did not train on.

:class:`Band` holds, per prediction horizon and output, the distribution of
the absolute error of the identified model on calibration records it did not
fit (the validation record; for the free run also the estimation record's
held-out start, the errors pooled): for ``k`` in
:data:`BAND_HORIZONS` the errors of the ``k``-step prediction, and for the
free run those of the simulation from the record's first ``n`` measured
outputs, samples ``n`` onward. The band at level ``L`` around a trajectory
``y_hat`` is, per output ``j`` (split conformal prediction)::

    y_hat_j(t) -+ w_j,   w_j = the ceil((m + 1) L)-th smallest of the m errors |e_j|

(the largest error where ``(m + 1) L > m``): for errors exchangeable with
the calibration record's, ``y(t)`` falls inside with probability at least
``L``. A ``k``-step prediction takes the errors of the smallest calibrated
horizon ``>= k`` (the free run's beyond the last); the rows of measured
outputs a trajectory starts from have width zero. The free run's errors are
correlated in time, so the record holds fewer independent errors than ``m``
and the coverage on a new record is measured, not promised (``evaluate``
reports it).

The band keeps the quantiles of the errors at :data:`QUANTILE_GRID` (not the
errors), so any level can be asked for later, and is saved in the model file.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "BAND_HORIZONS",
    "Band",
    "Trajectory",
    "calibrate_band",
    "check_level",
    "coverage",
    "coverage_by_output",
    "joint_coverage",
]

#: The prediction horizons calibrated; longer ones take the free run's errors.
BAND_HORIZONS = (1, 2, 5, 10, 20, 50, 100)
#: The probabilities at which the absolute errors' quantiles are kept.
QUANTILE_GRID = np.linspace(0.0, 1.0, 201)
#: Horizon entry of the free run (the simulation from the first ``n`` outputs).
FREE_RUN = 0


class Trajectory(NamedTuple):
    """A simulation or prediction with its band, each ``(N, n_outputs)``, physical units."""

    y: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def check_level(level: Any) -> float:
    """``level`` as a float in ``(0, 1)``, or a ``ValueError`` that says so."""
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating, np.integer)):
        raise ValueError(f"`band` must be a level in (0, 1), such as 0.95; received {level!r}.")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"`band` must be a level in (0, 1), such as 0.95; received {level}.")
    return float(level)


@dataclasses.dataclass
class Band:
    """The calibrated absolute errors of an identified model (see the module).

    Attributes:
        horizons: ``(H,)`` the horizons calibrated, :data:`FREE_RUN` (``0``)
            for the free run.
        quantiles: ``(H, len(QUANTILE_GRID), n_outputs)`` the absolute
            errors' quantiles, physical units.
        counts: ``(H,)`` the errors behind each row (``m``).
    """

    horizons: np.ndarray
    quantiles: np.ndarray
    counts: np.ndarray

    def half_width(self, level: float, steps_ahead: int | None = None) -> np.ndarray:
        """``w`` ``(n_outputs,)`` at ``level`` for a ``steps_ahead`` prediction (None: free run)."""
        row = self._row(steps_ahead)
        m = int(self.counts[row])
        if m == 0:
            return np.full(self.quantiles.shape[2], np.inf)
        q = min(1.0, math.ceil((m + 1) * check_level(level)) / m)
        table = self.quantiles[row]
        return np.array([np.interp(q, QUANTILE_GRID, table[:, j]) for j in range(table.shape[1])])

    def around(
        self, y: np.ndarray, level: float, steps_ahead: int | None = None, measured: int = 0
    ) -> Trajectory:
        """``y`` ``(N, n_outputs)`` with its band; the first ``measured`` rows get width zero."""
        width = np.broadcast_to(self.half_width(level, steps_ahead), y.shape).copy()
        width[:measured] = 0.0
        return Trajectory(y, y - width, y + width)

    def _row(self, steps_ahead: int | None) -> int:
        horizons = np.asarray(self.horizons)
        free = int(np.flatnonzero(horizons == FREE_RUN)[0])
        if steps_ahead is None:
            return free
        longer = np.flatnonzero((horizons >= int(steps_ahead)) & (horizons != FREE_RUN))
        if not len(longer):
            return free
        return int(longer[np.argmin(horizons[longer])])


def calibrate_band(
    found: Any,
    u: np.ndarray,
    y: np.ndarray,
    n: int,
    predictions: Mapping[int, np.ndarray] | None = None,
    free_run_errors: Sequence[np.ndarray] = (),
) -> Band:
    """The :class:`Band` of ``found`` (an Identification) on a calibration record ``u``, ``y``.

    ``n`` measured outputs set the state of the free run and of each
    prediction (:meth:`~keras_mgu.sysid.Identification.predict`); horizons
    that leave no sample after ``n`` are calibrated with no errors (infinite
    width). ``predictions``: ``found``'s k-step predictions of ``y`` from
    ``n`` (by ``k``, ``(N, n_outputs)`` each) where they are made already,
    one for every horizon of :data:`BAND_HORIZONS` that leaves a sample, and
    the free run from ``n`` under :data:`FREE_RUN` where it is made already;
    None: made here. ``free_run_errors``: absolute free-run errors ``(m_i,
    n_outputs)`` of other records no run fitted (the estimation record's
    held-out start), physical units, pooled with the
    record's own in the free run's row.
    """
    n = max(1, min(int(n), len(y) - 1))
    horizons = [*BAND_HORIZONS, FREE_RUN]
    fits = [k for k in BAND_HORIZONS if k < len(y) - n]
    if predictions is None:
        predictions = found.predictions(u, y, fits, n_initial=n) if fits else {}
    rows, counts = [], []
    for k in horizons:
        if k == FREE_RUN and k not in predictions:
            y_hat = found.simulate(u, y[:n])
        elif k in predictions:
            y_hat = predictions[k]
        else:
            rows.append(np.zeros((len(QUANTILE_GRID), y.shape[1])))
            counts.append(0)
            continue
        errors = np.abs(y[n:] - y_hat[n:])
        if k == FREE_RUN and len(free_run_errors):
            errors = np.concatenate([errors, *free_run_errors])
        errors = np.where(np.isfinite(errors), errors, np.inf)
        rows.append(np.quantile(errors, QUANTILE_GRID, axis=0, method="inverted_cdf"))
        counts.append(len(errors))
    return Band(np.array(horizons), np.stack(rows), np.array(counts))


def coverage(y: np.ndarray, trajectory: Trajectory, first: int = 0) -> float:
    """The fraction of measured ``y`` inside the band, rows ``first`` onward, every output."""
    return float(np.mean(_inside(y, trajectory, first)))


def coverage_by_output(y: np.ndarray, trajectory: Trajectory, first: int = 0) -> list[float]:
    """Per output ``j``, the fraction of rows ``first`` onward where ``y[t, j]`` is inside."""
    return [float(share) for share in np.mean(_inside(y, trajectory, first), axis=0)]


def joint_coverage(y: np.ndarray, trajectory: Trajectory, first: int = 0) -> float:
    """The fraction of rows ``first`` onward where every output is inside at once.

    Each output's band holds about its level alone; all of them at once hold
    less where the outputs' errors are not tied together (as low as ``1 - n
    (1 - L)`` for ``n`` outputs).
    """
    return float(np.mean(_inside(y, trajectory, first).all(axis=1)))


def _inside(y: np.ndarray, trajectory: Trajectory, first: int) -> np.ndarray:
    """``(N - first, n_outputs)``: where measured ``y`` is inside the band, rows ``first`` on."""
    y = np.asarray(y)[first:]
    return (y >= trajectory.lower[first:]) & (y <= trajectory.upper[first:])
