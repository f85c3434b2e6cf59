"""The k-step prediction mixed with the ARX reference's, the last sample and the free run.

A model that simulates well can predict one step ahead worse than the
least-squares ARX model, or than repeating the last sample: a network class
predicts by correcting its simulation with a noise model, and on a record
sampled fast (EMPS: 0.32 mm one step ahead against the last sample's
0.088 mm and the ARX model's 0.0012 mm) the measured outputs say more about
the next sample than any simulation. A few steps further the correction can
hurt instead: an encoder that reads a short history sets a worse state than
the free run carried through the whole record (the zoo's two-mass drive: 10
steps ahead 5 % above its free run). So each horizon ``k`` predicts with a
convex mix of four predictors, per output ``j``: the model's ``k``-step
prediction ``p_k``, the ARX reference's ``r_k``, the last measured sample
``l_k`` (``l_k[t] = y[s - 1]``, ``s = max(n, t - k + 1)``: the sample the
prediction of ``y[t]`` starts after) and the model's free run ``f`` from the
same first ``n`` measured samples (it reads no later output, so it is a
``k``-step predictor of every horizon)::

    y_pred_k[t] = a_kj p_k[t] + b_kj l_k[t] + c_kj f[t] + (1 - a_kj - b_kj - c_kj) r_k[t],
    a_kj, b_kj, c_kj >= 0,  a_kj + b_kj + c_kj <= 1

The shares minimise the squared error of the mix on the calibration record
(the validation record, scored after its first ``n`` samples), so that there
no horizon's mix errs more than any of the four alone, the free run
included. The error is a convex quadratic on a simplex: its minimum is the
least of the equality-constrained least-squares minima on the simplex's
faces that lie inside them (:func:`fit_prediction_mix`, every face tried).
Where several are as good the model's own prediction is kept (``a = 1``
where it is as good as any mix); ``a = 0`` where the model's prediction is
not finite. Horizons between those fitted take the shares of the next
longer one; longer ones, and the free run, the model alone. A mix saved
before the last sample or the free run joined it gives them no share.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from itertools import combinations
from typing import Any

import numpy as np

__all__ = [
    "MIX_HORIZONS",
    "PredictionMix",
    "best_on_simplex",
    "fit_prediction_mix",
    "last_sample_predictions",
]

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
    """The model's, the last sample's and the free run's shares of each horizon's prediction
    (module docstring); the ARX reference has the rest.

    Attributes:
        horizons: ``(H,)`` the fitted horizons, increasing.
        weights: ``(H, n_outputs)`` the model's share ``a``, in ``[0, 1]``.
        last: ``(H, n_outputs)`` the last sample's share ``b``, or None: none (a mix saved
            before the last sample joined it).
        free: ``(H, n_outputs)`` the free run's share ``c`` (``a + b + c <= 1``), or None:
            none (a mix saved before the free run joined it).
    """

    horizons: np.ndarray
    weights: np.ndarray
    last: np.ndarray | None = None
    free: np.ndarray | None = None

    def weight(self, steps_ahead: int) -> np.ndarray:
        """The model's share ``(n_outputs,)`` at horizon ``steps_ahead``."""
        return self._share(np.asarray(self.weights), steps_ahead, 1.0)

    def last_weight(self, steps_ahead: int) -> np.ndarray:
        """The last sample's share ``(n_outputs,)`` at horizon ``steps_ahead``."""
        last = np.zeros_like(self.weights) if self.last is None else np.asarray(self.last)
        return self._share(last, steps_ahead, 0.0)

    def free_weight(self, steps_ahead: int) -> np.ndarray:
        """The free run's share ``(n_outputs,)`` at horizon ``steps_ahead``."""
        free = np.zeros_like(self.weights) if self.free is None else np.asarray(self.free)
        return self._share(free, steps_ahead, 0.0)

    @property
    def reads_free_run(self) -> bool:
        """Whether some horizon gives the free run a share (:meth:`mixed` then needs it)."""
        return self.free is not None and bool(np.any(np.asarray(self.free) > 0))

    def _share(self, table: np.ndarray, steps_ahead: int, beyond: float) -> np.ndarray:
        longer = np.flatnonzero(np.asarray(self.horizons) >= int(steps_ahead))
        return table[longer[0]] if len(longer) else np.full(table.shape[1], beyond)

    def mixed(
        self,
        model: Mapping[int, np.ndarray],
        reference: Mapping[int, np.ndarray],
        last: Mapping[int, np.ndarray] | None = None,
        free: np.ndarray | None = None,
    ) -> dict[int, np.ndarray]:
        """Each horizon's mix ``(N, n_outputs)`` of the model's, the reference's, the last
        sample's and the free run's predictions (``last``: :func:`last_sample_predictions`;
        ``free``: the model's free run ``(N, n_outputs)`` from the same first samples; each
        needed where the mix gives it a share)."""
        out = {}
        for k, p in model.items():
            a, b, c = self.weight(k), self.last_weight(k), self.free_weight(k)
            if np.any(b > 0) and last is None:
                raise ValueError("This mix gives the last sample a share: pass `last`.")
            if np.any(c > 0) and free is None:
                raise ValueError("This mix gives the free run a share: pass `free`.")
            mix = (1.0 - a - b - c) * np.asarray(reference[k])
            mix = np.where(a > 0, mix + a * np.asarray(p), mix)  # a = 0: never reads p
            if last is not None:
                mix = mix + b * np.asarray(last[k])
            if free is not None:
                mix = np.where(c > 0, mix + c * np.asarray(free), mix)
            out[k] = mix
        return out

    def to_config(self) -> dict[str, list]:
        zeros = np.zeros_like(self.weights)
        return {
            "horizons": np.asarray(self.horizons).tolist(),
            "weights": np.asarray(self.weights).tolist(),
            "last": (zeros if self.last is None else np.asarray(self.last)).tolist(),
            "free": (zeros if self.free is None else np.asarray(self.free)).tolist(),
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PredictionMix:
        last, free = config.get("last"), config.get("free")
        return cls(
            np.asarray(config["horizons"], int),
            np.asarray(config["weights"], float),
            None if last is None else np.asarray(last, float),
            None if free is None else np.asarray(free, float),
        )


def fit_prediction_mix(
    model: Mapping[int, np.ndarray],
    reference: Mapping[int, np.ndarray],
    y: np.ndarray,
    n: int,
    last: Mapping[int, np.ndarray] | None = None,
    free: np.ndarray | None = None,
) -> PredictionMix:
    """The mix of ``model``'s, ``reference``'s, ``last``'s and ``free``'s predictions (by
    horizon; ``free`` one free run ``(N, n_outputs)`` for all) that errs least on the
    measured ``y`` ``(N, n_outputs)`` after its first ``n`` samples (module docstring).
    ``last`` defaults to :func:`last_sample_predictions` of ``y``; without ``free`` the free
    run gets no share."""
    horizons = sorted(model)
    last = last_sample_predictions(y, horizons, n) if last is None else last
    y = np.asarray(y, dtype=np.float64)
    f = None if free is None else np.asarray(free, dtype=np.float64)[n:]
    shares = np.array([
        _fit_horizon(y[n:], np.asarray(model[k])[n:], np.asarray(reference[k])[n:],
                     np.asarray(last[k])[n:], f)
        for k in horizons
    ])  # fmt: skip
    return PredictionMix(
        np.array(horizons, dtype=int), shares[:, 0], shares[:, 1],
        None if free is None else shares[:, 2],
    )  # fmt: skip


def _fit_horizon(
    y: np.ndarray, p: np.ndarray, r: np.ndarray, last: np.ndarray, free: np.ndarray | None
) -> np.ndarray:
    """``(3, n_outputs)``: the shares ``a``, ``b``, ``c`` of one horizon (module docstring)."""
    finite = np.isfinite(p).all(axis=0)
    p = np.where(finite, p, r)  # a model that diverges: its share is 0
    f = r if free is None else np.where(np.isfinite(free).all(axis=0), free, r)
    shares = np.zeros((3, y.shape[1]))
    for j in range(y.shape[1]):
        allowed = (bool(finite[j]), True, free is not None and bool(np.isfinite(free[:, j]).all()))
        columns = np.stack([p[:, j], last[:, j], f[:, j], r[:, j]], axis=1)
        shares[:, j] = best_on_simplex(columns, y[:, j], (*allowed, True))[:3]
    return shares


def best_on_simplex(
    columns: np.ndarray, y: np.ndarray, allowed: tuple[bool, ...] | None = None
) -> np.ndarray:
    """``argmin_w |y - columns w|^2`` over ``w >= 0``, ``sum w = 1``, ``(m,)``.

    ``columns`` ``(N, m)``: the predictors; ``allowed``: which may have a
    share (default all). The minimum of a convex quadratic on the simplex is
    the minimum of its restriction to the affine hull of some face, lying
    inside that face: each face's equality-constrained least squares
    (the KKT system, solved in the least-squares sense where singular) is
    tried, those inside kept, the least error chosen; among equals the face
    tried first (the smaller faces first, each size in the predictors' order:
    the first predictor alone first).
    """
    m = columns.shape[1]
    allowed = (True,) * m if allowed is None else allowed
    gram, moment = columns.T @ columns, columns.T @ y
    base = float(y @ y)

    def loss(w: np.ndarray) -> float:
        return base - 2.0 * float(w @ moment) + float(w @ gram @ w)

    best, best_loss = None, np.inf
    scale = max(base, 1e-300)
    for face in _faces([i for i in range(m) if allowed[i]]):
        w = np.zeros(m)
        w[list(face)] = _on_face(gram, moment, face)
        if np.any(w < -1e-9):
            continue
        w = np.clip(w, 0.0, None)
        w /= w.sum()
        value = loss(w)
        if value < best_loss - 1e-12 * scale:
            best, best_loss = w, value
    return best


def _faces(indices: list[int]) -> list[tuple[int, ...]]:
    """Every non-empty subset of ``indices``: the shortest first, each size in ``indices``'
    order (the first index alone first)."""
    return [face for size in range(1, len(indices) + 1) for face in combinations(indices, size)]


def _on_face(gram: np.ndarray, moment: np.ndarray, face: tuple[int, ...]) -> np.ndarray:
    """The weights on ``face`` (summing to 1) of the least squared error there."""
    idx = list(face)
    size = len(idx)
    kkt = np.zeros((size + 1, size + 1))
    kkt[:size, :size] = gram[np.ix_(idx, idx)]
    kkt[:size, size] = kkt[size, :size] = 1.0
    rhs = np.append(moment[idx], 1.0)
    return np.linalg.lstsq(kkt, rhs, rcond=None)[0][:size]
