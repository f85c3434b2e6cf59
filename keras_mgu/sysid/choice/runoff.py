"""The run-off guard: a run whose free run leaves the estimation outputs' range is never kept.

The box of output ``j`` is ``[min_j - r_j / 2, max_j + r_j / 2]``, ``r_j``
the span ``max_j - min_j`` of the estimation record's output ``j``
(:class:`OutputBox`). A run *runs off* where a free run of it leaves that
box, or is not finite, on:

1. the estimation record, simulated from its first measured samples;
2. the validation record, simulated from its first measured samples;
3. a stress experiment (:func:`stress_input`): the estimation inputs, then
   the same inputs in reverse order, from the estimation record's first
   measured samples (a learned-state network: from its learned state, the
   record's start, which spares fitting a state): as
   long again, the same amplitudes, another order, so that a run that holds
   on the record it was fitted to but is unstable elsewhere in its range
   shows. Where the least-squares ARX model leaves the box on it (a plant
   that integrates its input can go anywhere on reordered inputs), the
   experiment says nothing of the runs and is left out;
4. a stretched experiment (:func:`stretched_input`): the estimation inputs,
   their deviations from their mean :data:`STRETCH` times as large, from the
   same start: what a run does beyond its input range. A linear model's
   output deviations from their mean grow by the same factor, which the box
   (the range widened by half its span on each side) holds where the mean is
   not far from the middle of the range; a model whose law stays close to
   linear out there stays in, one whose terms blow up as their arguments
   leave the range (a polynomial's cubic cross terms) leaves it. It is left
   out where the least-squares ARX model leaves the box on it.

:class:`~keras_mgu.sysid.choice.restarts.Restarts` neither chooses nor
averages such a run, and its progress line and the report say why
(:func:`describe_exit`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

__all__ = ["STRETCH", "OutputBox", "describe_exit", "stress_input", "stretched_input"]

#: How much larger the stretched experiment's input deviations are than the estimation's
#: (:func:`stretched_input`): half as large again, so that a linear response (1.5 times the
#: estimation's deviations from the mean) stays inside the box, which reaches twice the
#: deviations of an output whose mean is at the middle of its range.
STRETCH = 1.5


@dataclasses.dataclass(frozen=True)
class OutputBox:
    """The range a free run must stay in: ``lower``, ``upper`` ``(n_outputs,)``, physical units."""

    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def of(cls, y: np.ndarray) -> OutputBox:
        """The box of the outputs ``y`` ``(N, n_outputs)``: their range widened by half its span."""
        y = np.asarray(y, dtype=np.float64)
        if y.ndim != 2 or len(y) == 0:
            raise ValueError(f"`y` must have shape (N >= 1, n_outputs); received {y.shape}.")
        low, high = y.min(axis=0), y.max(axis=0)
        half = (high - low) / 2
        return cls(low - half, high + half)

    def first_exit(self, y: np.ndarray) -> tuple[int, int] | None:
        """The first ``(sample, output)`` of ``y`` ``(N, n_outputs)`` outside the box or not
        finite; None where every sample is inside."""
        y = np.asarray(y, dtype=np.float64)
        outside = ~np.isfinite(y) | (y < self.lower) | (y > self.upper)
        rows = np.flatnonzero(outside.any(axis=1))
        if len(rows) == 0:
            return None
        row = int(rows[0])
        return row, int(np.flatnonzero(outside[row])[0])


def stress_input(u: np.ndarray) -> np.ndarray:
    """The stress experiment's inputs ``(2N, n_inputs)``: ``u`` ``(N, n_inputs)``, then reversed."""
    u = np.asarray(u)
    return np.concatenate([u, u[::-1]], axis=0)


def stretched_input(u: np.ndarray, factor: float = STRETCH) -> np.ndarray:
    """The stretched experiment's inputs ``(N, n_inputs)``: ``m + factor (u - m)``, ``m`` the
    mean of each input channel of ``u`` ``(N, n_inputs)``."""
    u = np.asarray(u, dtype=np.float64)
    mean = u.mean(axis=0)
    return mean + factor * (u - mean)


def describe_exit(
    experiment: str,
    y: np.ndarray,
    box: OutputBox,
    offset: int = 0,
    output_names: Sequence[str] = (),
) -> str | None:
    """Where the free run ``y`` of ``experiment`` leaves ``box``, in words; None where it does not.

    ``offset`` is added to the sample numbers (``y`` starting after the
    measured samples that set the state): ``"left [-0.5, 1.5] on the
    validation record at sample 812 (y = 7.31)"``.
    """
    found = box.first_exit(y)
    if found is None:
        return None
    sample, j = found
    name = output_names[j] if j < len(output_names) else f"output {j}"
    value = float(np.asarray(y)[sample, j])
    return (
        f"left [{box.lower[j]:.4g}, {box.upper[j]:.4g}] on {experiment} at sample "
        f"{sample + offset} ({name} = {value:.4g})"
    )
