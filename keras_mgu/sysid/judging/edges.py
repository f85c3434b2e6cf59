"""The record's edges: the samples where a model is nearest to extrapolating, scored out of sample.

A nonlinear model and the linear one part ways first at the largest
excursions of its signals, where the estimation record holds the fewest
samples. :func:`edge_mask` marks the samples of a record (the validation
record, which no run fitted) where some input or measured output lies in the
outer ``share`` of the estimation record's values of that channel::

    edge[t] = any_c  x_c[t] < q_c(share / 2)  or  x_c[t] > q_c(1 - share / 2)

with ``q_c(p)`` the ``p`` quantile of channel ``c`` (each input, each
output) over the estimation record (strict inequalities: an input of a few
levels marks no sample at its levels). :func:`edge_check` compares a run's
RMSE on those samples with the least-squares ARX model's, on the samples both
score. The recipe (:mod:`~keras_mgu.sysid.choice.restarts`) reports it for
every run, and with ``RecipeConfig(edge_guard=True)`` keeps no nonlinear run
whose edge error is above the linear model's, where the record has at least
:data:`MIN_EDGE_SAMPLES` edge samples.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from keras_mgu.sysid.judging.scoring import error_rmse

__all__ = ["EDGE_SHARE", "MIN_EDGE_SAMPLES", "ROUNDING", "EdgeCheck", "edge_check", "edge_mask"]

#: The outer share of each channel's estimation values that marks an edge sample (half each side).
EDGE_SHARE = 0.1
#: The fewest edge samples a comparison with the linear model needs to decide anything.
MIN_EDGE_SAMPLES = 20
#: How far above the linear model's a run's edge RMSE must be to count as above it
#: (relative): a lag run at its ARX start simulates the same model in another order of sums.
ROUNDING = 1e-4


def edge_mask(estimation: Any, record: Any, share: float = EDGE_SHARE) -> np.ndarray:
    """``(N,)``: True where a sample of ``record`` is at the edges of ``estimation`` (module).

    Args:
        estimation, record: Records (``u`` ``(N, n_inputs)``, ``y`` ``(N, n_outputs)``,
            the same channels).
        share: The outer share of each channel's estimation values, in ``(0, 1)``.
    """
    if not 0 < share < 1:
        raise ValueError(f"`share` must be in (0, 1); received {share!r}.")
    mask = np.zeros(record.n_samples, dtype=bool)
    for fitted, scored in ((estimation.u, record.u), (estimation.y, record.y)):
        fitted, scored = np.asarray(fitted, np.float64), np.asarray(scored, np.float64)
        low, high = np.quantile(fitted, [share / 2, 1 - share / 2], axis=0)
        mask |= ((scored < low) | (scored > high)).any(axis=1)
    return mask


@dataclasses.dataclass(frozen=True)
class EdgeCheck:
    """A run's error on the edge samples beside the linear model's (standardised RMSEs)."""

    samples: int
    rmse: float
    linear_rmse: float

    @property
    def decides(self) -> bool:
        """Whether there are enough edge samples (:data:`MIN_EDGE_SAMPLES`) to decide."""
        return self.samples >= MIN_EDGE_SAMPLES

    @property
    def worse(self) -> bool:
        """Whether the run errs more than the linear model there, beyond rounding
        (:data:`ROUNDING`; a non-finite error does)."""
        return self.decides and not self.rmse <= self.linear_rmse * (1 + ROUNDING)

    def describe(self) -> str:
        """The comparison in words."""
        return (
            f"edge RMSE {self.rmse:.4f} against the ARX model's {self.linear_rmse:.4f} on the "
            f"validation record's {self.samples} samples at the estimation record's edges "
            "(standardised)"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers, for results.json (a non-finite RMSE as its string)."""
        return {
            "samples": self.samples,
            "rmse": self.rmse if np.isfinite(self.rmse) else str(self.rmse),
            "linear_rmse": self.linear_rmse,
            "worse": self.worse,
        }


def edge_check(
    mask: np.ndarray,
    error: np.ndarray,
    offset: int,
    reference: np.ndarray,
    reference_offset: int,
) -> EdgeCheck:
    """A run's edge error beside the reference's, on the edge samples both score.

    Args:
        mask: ``(N,)`` the record's edge samples (:func:`edge_mask`).
        error: The run's error ``(N - offset, n_outputs)``: the record's
            samples from ``offset`` on.
        offset: The first sample ``error`` scores.
        reference, reference_offset: The same of the linear model.
    """
    mask = np.asarray(mask, dtype=bool)
    first = max(offset, reference_offset)
    for e, o in ((error, offset), (reference, reference_offset)):
        if len(e) != len(mask) - o:
            raise ValueError(
                f"An error from sample {o} of a {len(mask)}-sample record must have "
                f"{len(mask) - o} rows; received {len(e)}."
            )
    keep = mask[first:]
    mine = np.asarray(error)[first - offset :][keep]
    theirs = np.asarray(reference)[first - reference_offset :][keep]
    count = int(keep.sum())
    if count == 0:
        return EdgeCheck(0, float("nan"), float("nan"))
    return EdgeCheck(count, error_rmse(mine), error_rmse(theirs))
