"""The k-step prediction mixed with the ARX reference's and the last sample, as validation says.

A model that simulates well can predict one step ahead worse than the
least-squares ARX model, or than repeating the last sample: a network class
predicts by correcting its simulation with a noise model, and on a record
sampled fast (EMPS: 0.32 mm one step ahead against the last sample's
0.088 mm and the ARX model's 0.0012 mm) the measured outputs say more about
the next sample than any simulation. So each horizon ``k`` predicts with a
convex mix of three predictors, per output ``j``: the model's ``k``-step
prediction ``p_k``, the ARX reference's ``r_k`` and the last measured sample
``l_k`` (``l_k[t] = y[s - 1]``, ``s = max(n, t - k + 1)``: the sample the
prediction of ``y[t]`` starts after)::

    y_pred_k[t] = a_kj p_k[t] + b_kj l_k[t] + (1 - a_kj - b_kj) r_k[t],
    a_kj >= 0,  b_kj >= 0,  a_kj + b_kj <= 1

``(a_kj, b_kj)`` minimises the squared error of the mix on the calibration
record (the validation record, scored after its first ``n`` samples): with
``e = y - r_k``, ``d1 = p_k - r_k`` and ``d2 = l_k - r_k`` the error
``|e - a d1 - b d2|^2`` is a convex quadratic on a triangle, so its minimum
is the unconstrained one where that lies inside, else the least of the
minima on the three edges (:func:`fit_prediction_mix`). Where several are as
good the model's own prediction is kept (``a = 1`` where ``d1`` is zero);
``a = 0`` where the model's prediction is not finite. Horizons between those
fitted take the weights of the next longer one; longer ones, and the free
run, the model alone. A mix saved before the last sample joined it has
``b = 0``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["MIX_HORIZONS", "PredictionMix", "fit_prediction_mix", "last_sample_predictions"]

#: The horizons whose mix is fitted.
MIX_HORIZONS = (1, 2, 5, 10, 20, 50, 100)


def last_sample_predictions(
    y: np.ndarray, horizons: Iterable[int], n: int
) -> dict[int, np.ndarray]:
    """The last-sample predictor ``l_k`` ``(N, n_outputs)`` of each horizon ``k`` (module
    docstring): ``y[max(n, t - k + 1) - 1]`` for ``t >= n``, ``y[t]`` for the first ``n``."""
    y = np.asarray(y, dtype=np.float64)
    t = np.arange(len(y))
    out = {}
    for k in horizons:
        source = np.where(t < n, t, np.maximum(n, t - int(k) + 1) - 1)
        out[int(k)] = y[source]
    return out


@dataclasses.dataclass(frozen=True)
class PredictionMix:
    """The model's and the last sample's shares of each horizon's prediction (module docstring).

    Attributes:
        horizons: ``(H,)`` the fitted horizons, increasing.
        weights: ``(H, n_outputs)`` the model's share ``a``, in ``[0, 1]``.
        last: ``(H, n_outputs)`` the last sample's share ``b`` (``a + b <= 1``), or None:
            none (a mix saved before the last sample joined it).
    """

    horizons: np.ndarray
    weights: np.ndarray
    last: np.ndarray | None = None

    def weight(self, steps_ahead: int) -> np.ndarray:
        """The model's share ``(n_outputs,)`` at horizon ``steps_ahead``."""
        return self._share(np.asarray(self.weights), steps_ahead, 1.0)

    def last_weight(self, steps_ahead: int) -> np.ndarray:
        """The last sample's share ``(n_outputs,)`` at horizon ``steps_ahead``."""
        last = np.zeros_like(self.weights) if self.last is None else np.asarray(self.last)
        return self._share(last, steps_ahead, 0.0)

    def _share(self, table: np.ndarray, steps_ahead: int, beyond: float) -> np.ndarray:
        longer = np.flatnonzero(np.asarray(self.horizons) >= int(steps_ahead))
        return table[longer[0]] if len(longer) else np.full(table.shape[1], beyond)

    def mixed(
        self,
        model: Mapping[int, np.ndarray],
        reference: Mapping[int, np.ndarray],
        last: Mapping[int, np.ndarray] | None = None,
    ) -> dict[int, np.ndarray]:
        """Each horizon's mix ``(N, n_outputs)`` of the model's, the reference's and the last
        sample's predictions (``last``: :func:`last_sample_predictions`; needed where the
        mix gives the last sample a share)."""
        out = {}
        for k, p in model.items():
            a, b, r = self.weight(k), self.last_weight(k), np.asarray(reference[k])
            if np.any(b > 0) and last is None:
                raise ValueError("This mix gives the last sample a share: pass `last`.")
            mix = (1.0 - a - b) * r
            mix = np.where(a > 0, mix + a * np.asarray(p), mix)  # a = 0: never reads p
            if last is not None:
                mix = mix + b * np.asarray(last[k])
            out[k] = mix
        return out

    def to_config(self) -> dict[str, list]:
        last = np.zeros_like(self.weights) if self.last is None else np.asarray(self.last)
        return {
            "horizons": np.asarray(self.horizons).tolist(),
            "weights": np.asarray(self.weights).tolist(),
            "last": last.tolist(),
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PredictionMix:
        last = config.get("last")
        return cls(
            np.asarray(config["horizons"], int),
            np.asarray(config["weights"], float),
            None if last is None else np.asarray(last, float),
        )


def fit_prediction_mix(
    model: Mapping[int, np.ndarray],
    reference: Mapping[int, np.ndarray],
    y: np.ndarray,
    n: int,
    last: Mapping[int, np.ndarray] | None = None,
) -> PredictionMix:
    """The mix of ``model``'s, ``reference``'s and ``last``'s predictions (by horizon) that errs
    least on the measured ``y`` ``(N, n_outputs)`` after its first ``n`` samples (module
    docstring). ``last`` defaults to :func:`last_sample_predictions` of ``y``."""
    horizons = sorted(model)
    last = last_sample_predictions(y, horizons, n) if last is None else last
    y = np.asarray(y, dtype=np.float64)[n:]
    shares = [_fit_horizon(y, *(np.asarray(m[k])[n:] for m in (model, reference, last)))
              for k in horizons]  # fmt: skip
    return PredictionMix(
        np.array(horizons, dtype=int),
        np.array([a for a, _ in shares], dtype=np.float64),
        np.array([b for _, b in shares], dtype=np.float64),
    )


def _fit_horizon(
    y: np.ndarray, p: np.ndarray, r: np.ndarray, last: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` ``(n_outputs,)`` of one horizon (module docstring)."""
    finite = np.isfinite(p).all(axis=0)
    p = np.where(finite, p, r)  # a model that diverges: its share is 0
    e, d1, d2 = y - r, p - r, last - r
    sums = [np.sum(u * v, axis=0) for u, v in ((e, d1), (e, d2), (d1, d1), (d1, d2), (d2, d2))]
    a, b = np.ones(y.shape[1]), np.zeros(y.shape[1])
    for j in range(y.shape[1]):
        a[j], b[j] = _best_on_triangle(*(s[j] for s in sums), allow_model=bool(finite[j]))
    return a, b


def _best_on_triangle(
    e1: float, e2: float, d11: float, d12: float, d22: float, allow_model: bool = True
) -> tuple[float, float]:
    """``argmin -2 a e1 - 2 b e2 + a^2 d11 + 2 a b d12 + b^2 d22`` over ``a, b >= 0``,
    ``a + b <= 1``; the model alone (``a = 1``) first among equals; ``a = 0`` if not
    ``allow_model``."""

    def loss(a: float, b: float) -> float:
        return -2 * a * e1 - 2 * b * e2 + a * a * d11 + 2 * a * b * d12 + b * b * d22

    def clip(x: float) -> float:
        return min(1.0, max(0.0, x))

    def ratio(num: float, den: float, empty: float) -> float:
        return clip(num / den) if den > 0 else empty

    candidates = [(1.0, 0.0), (0.0, ratio(e2, d22, 0.0))]
    if allow_model:
        candidates.append((ratio(e1, d11, 1.0), 0.0))
        # a + b = 1: the error is |(e - d2) - a (d1 - d2)|^2.
        along = ratio(e1 - e2 - d12 + d22, d11 - 2 * d12 + d22, 1.0)
        candidates.append((along, 1.0 - along))
        det = d11 * d22 - d12 * d12
        if det > 1e-12 * max(d11 * d22, 1e-300):
            a, b = (e1 * d22 - e2 * d12) / det, (e2 * d11 - e1 * d12) / det
            if a >= 0 and b >= 0 and a + b <= 1:
                candidates.append((a, b))
    else:
        candidates = candidates[1:]
    losses = [loss(a, b) for a, b in candidates]
    best = min(losses)
    scale = max(abs(best), 1e-300)
    return next(c for c, v in zip(candidates, losses) if v <= best + 1e-12 * scale)
