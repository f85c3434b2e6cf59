"""The k-step prediction mixed with the ARX reference's, in the proportions validation gives.

A model that simulates well can predict one step ahead worse than the
least-squares ARX model, or than repeating the last sample: a network class
predicts by correcting its simulation with a noise model, and on a record
sampled fast (EMPS: 0.32 mm one step ahead against the last sample's
0.088 mm and the ARX model's 0.0012 mm) the measured outputs say more about
the next sample than any simulation. So each horizon ``k`` predicts with a
convex mix of the model's ``k``-step prediction ``p_k`` and the ARX
reference's ``r_k``, per output ``j``::

    y_pred_k[t] = a_kj p_k[t] + (1 - a_kj) r_k[t],        0 <= a_kj <= 1

``a_kj`` minimises the squared error of the mix on the calibration record
(the validation record, scored after its first ``n`` samples): with ``d = p_k
- r_k`` and ``e = y - r_k``, ``a = clip(sum(d e) / sum(d d), 0, 1)`` (``1``
where ``d`` is zero, ``0`` where the model's prediction is not finite).
Horizons between those fitted take the weights of the next longer one;
longer ones, and the free run, the model alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["MIX_HORIZONS", "PredictionMix", "fit_prediction_mix"]

#: The horizons whose mix is fitted.
MIX_HORIZONS = (1, 2, 5, 10, 20, 50, 100)


@dataclasses.dataclass(frozen=True)
class PredictionMix:
    """The model's share ``a`` of each horizon's prediction (module docstring).

    Attributes:
        horizons: ``(H,)`` the fitted horizons, increasing.
        weights: ``(H, n_outputs)`` the model's share, in ``[0, 1]``.
    """

    horizons: np.ndarray
    weights: np.ndarray

    def weight(self, steps_ahead: int) -> np.ndarray:
        """The model's share ``(n_outputs,)`` at horizon ``steps_ahead``."""
        longer = np.flatnonzero(np.asarray(self.horizons) >= int(steps_ahead))
        if not len(longer):
            return np.ones(np.shape(self.weights)[1])
        return np.asarray(self.weights)[longer[0]]

    def mixed(
        self, model: Mapping[int, np.ndarray], reference: Mapping[int, np.ndarray]
    ) -> dict[int, np.ndarray]:
        """Each horizon's mix of the model's and the reference's predictions ``(N, n_outputs)``."""
        out = {}
        for k, p in model.items():
            a, r = self.weight(k), np.asarray(reference[k])
            out[k] = np.where(a > 0, a * np.asarray(p) + (1.0 - a) * r, r)  # a = 0: r alone
        return out

    def to_config(self) -> dict[str, list]:
        return {"horizons": np.asarray(self.horizons).tolist(), "weights": self.weights.tolist()}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PredictionMix:
        return cls(np.asarray(config["horizons"], int), np.asarray(config["weights"], float))


def fit_prediction_mix(
    model: Mapping[int, np.ndarray], reference: Mapping[int, np.ndarray], y: np.ndarray, n: int
) -> PredictionMix:
    """The mix of ``model``'s and ``reference``'s predictions (by horizon) that errs least on
    the measured ``y`` ``(N, n_outputs)`` after its first ``n`` samples (module docstring)."""
    horizons = sorted(model)
    y = np.asarray(y, dtype=np.float64)[n:]
    weights = []
    for k in horizons:
        d = np.asarray(model[k])[n:] - np.asarray(reference[k])[n:]
        e = y - np.asarray(reference[k])[n:]
        finite = np.isfinite(d).all(axis=0) & np.isfinite(e).all(axis=0)
        d, e = np.where(finite, d, 0.0), np.where(finite, e, 0.0)
        dd, de = np.sum(d * d, axis=0), np.sum(d * e, axis=0)
        a = np.divide(de, dd, out=np.ones_like(dd), where=dd > 0)
        weights.append(np.where(finite, np.clip(a, 0.0, 1.0), 0.0))  # a model that diverges: 0
    return PredictionMix(np.array(horizons, dtype=int), np.array(weights, dtype=np.float64))
