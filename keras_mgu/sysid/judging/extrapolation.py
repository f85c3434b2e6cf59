"""Where an experiment leaves the estimation range, and what the band does there.

A model is fitted on the range of signals its estimation record spans; an
experiment whose inputs, or whose simulated outputs, leave that range asks
it to extrapolate, where its error and its band say less. :class:`EstimationRange`
holds the range (each input's and each output's minimum and maximum over the
estimation record, physical units; every class keeps one), and
:func:`extrapolation` measures, on the scored samples of an experiment:

* ``share``: the fraction of the samples where some input, or some
  simulated output, is outside the range (``inputs_share``,
  ``outputs_share``: each alone);
* ``coverage``: the fraction of the measured outputs of those samples
  inside the band, where a band is drawn (None where no sample is outside).

``sample t`` is outside where ``u[t, i] < u_lower[i]`` or ``u[t, i] >
u_upper[i]`` for some input ``i``, or the same of the simulation ``y_sim[t, j]``
against ``y_lower[j]``, ``y_upper[j]``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["EstimationRange", "describe_extrapolation", "extrapolation"]


@dataclasses.dataclass(frozen=True)
class EstimationRange:
    """Each input's and output's range over the estimation record ``(n_channels,)`` arrays."""

    u_lower: np.ndarray
    u_upper: np.ndarray
    y_lower: np.ndarray
    y_upper: np.ndarray

    @classmethod
    def of(cls, u: Any, y: Any) -> EstimationRange:
        """The range of ``u`` ``(N, n_inputs)`` and ``y`` ``(N, n_outputs)``."""
        u, y = np.asarray(u, dtype=np.float64), np.asarray(y, dtype=np.float64)
        if u.ndim != 2 or y.ndim != 2 or len(u) == 0 or len(u) != len(y):
            raise ValueError(
                "`u` and `y` must have shapes (N, n_inputs) and (N, n_outputs) with the same "
                f"N >= 1; received {u.shape} and {y.shape}."
            )
        return cls(u.min(axis=0), u.max(axis=0), y.min(axis=0), y.max(axis=0))

    def outside(self, u: Any, y_sim: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(inputs, outputs)``: ``(N,)`` masks of the samples whose inputs, and whose
        simulated outputs, leave the range."""
        u, y_sim = np.asarray(u, dtype=np.float64), np.asarray(y_sim, dtype=np.float64)
        inputs = ((u < self.u_lower) | (u > self.u_upper)).any(axis=1)
        outputs = (~np.isfinite(y_sim) | (y_sim < self.y_lower) | (y_sim > self.y_upper)).any(1)
        return inputs, outputs

    def to_config(self) -> dict[str, list[float]]:
        """Plain lists, for a model file."""
        return {k: np.asarray(v).tolist() for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> EstimationRange:
        return cls(**{k: np.asarray(config[k], dtype=np.float64) for k in cls.__annotations__})


def extrapolation(
    ranges: EstimationRange,
    u: Any,
    y: Any,
    y_sim: Any,
    first: int = 0,
    band: tuple[Any, Any] | None = None,
) -> dict[str, Any]:
    """How much of an experiment leaves ``ranges``, and the band's coverage there (module).

    Args:
        ranges: The estimation range.
        u, y: The experiment ``(N, n_inputs)``, ``(N, n_outputs)``.
        y_sim: Its simulation ``(N, n_outputs)``.
        first: The first scored sample (the ones before set the state).
        band: ``(lower, upper)`` around ``y_sim``, each ``(N, n_outputs)``, or None.

    Returns:
        ``{"share", "inputs_share", "outputs_share", "samples", "coverage"}``
        (``samples``: how many scored samples are outside; ``coverage``: None
        without a band or where none is), and ``"mask"``: the ``(N,)``
        boolean mask of the samples outside (False before ``first``).
    """
    inputs, outputs = ranges.outside(u, y_sim)
    inputs[:first] = outputs[:first] = False
    mask = inputs | outputs
    scored = max(len(mask) - first, 1)
    cover = None
    if band is not None and mask.any():
        y = np.asarray(y, dtype=np.float64)[mask]
        lower, upper = (np.asarray(b, dtype=np.float64)[mask] for b in band)
        cover = float(np.mean((y >= lower) & (y <= upper)))
    return {
        "share": float(mask.sum() / scored),
        "inputs_share": float(inputs.sum() / scored),
        "outputs_share": float(outputs.sum() / scored),
        "samples": int(mask.sum()),
        "coverage": cover,
        "mask": mask,
    }


def describe_extrapolation(entry: dict[str, Any], first: int = 0) -> str:
    """:func:`extrapolation`'s figures in words (scored from sample ``first``)."""
    since = f", from sample {first}" if first else ""
    if entry["samples"] == 0:
        return f"outside the estimation range{since}: none of the samples (inputs and simulation)"
    line = (
        f"outside the estimation range{since}: {entry['share']:.1%} of the samples (inputs "
        f"{entry['inputs_share']:.1%}, simulated outputs {entry['outputs_share']:.1%})"
    )
    if entry["coverage"] is not None:
        line += f"; the band holds {entry['coverage']:.3f} of them"
    return line
