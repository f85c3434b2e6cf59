"""The simulation residual's own dynamics: an autoregressive noise model per output.

A recurrent network's simulation ``y_sim`` from an experiment's first ``n``
measured outputs leaves a residual ``e = y - y_sim`` that is correlated in
time (a slow drift, an unmodelled mode). :class:`NoiseModel` describes it,
per output ``j``, as an autoregression of order ``p_j``::

    e_j(t) = sum_{i=1..p_j} a_ij e_j(t - i) + w_j(t)

and the ``k``-step prediction of a network class (the Box-Jenkins predictor,
a deterministic part simulated and a noise part predicted) is::

    y_pred(t) = y_sim(t) + g_jk e_hat(t | t - k)

``e_hat(t | t - k)`` runs the recursion ``k`` steps from the measured
residuals up to ``t - k`` (``e_hat(tau) = e(tau)`` for ``tau <= t - k``).
``k = 1`` corrects by the last residual's prediction; as ``k`` grows the
correction fades (the model is kept stable) and the prediction becomes the
simulation itself. :func:`fit_noise_model` fits the coefficients by least
squares on the estimation record's residual, chooses each output's order
(``0``: no correction) on the validation record's residual, and there sets
the gain ``g_jk`` in ``[0, 1]`` of each horizon of :data:`GAIN_HORIZONS` by
least squares (a horizon takes the gain of the smallest of them at least
as long, the last one's beyond): where the recursion's prediction does not
hold ``k`` steps ahead, its gain shrinks it, so a correction that helps one
step ahead does not hurt ten steps ahead.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["GAIN_HORIZONS", "NOISE_ORDERS", "NoiseModel", "fit_noise_model"]

#: The orders tried for each output's autoregression (``0``: none).
NOISE_ORDERS = (0, 1, 2, 4, 8)
#: The prediction horizons whose validation errors choose the order.
CHOICE_HORIZONS = (1, 10)
#: Largest root modulus allowed: the fitted recursion is shrunk inside it.
MAX_ROOT = 0.999
#: Ridge on the least-squares fit, relative to the regressors' mean square.
RIDGE = 1e-6
#: The horizons whose gains are set on validation.
GAIN_HORIZONS = (1, 2, 5, 10, 20, 50, 100)


@dataclasses.dataclass
class NoiseModel:
    """Per-output autoregression of a simulation residual (see the module).

    Attributes:
        coefficients: ``(p, n_outputs)``, ``a_ij`` in row ``i - 1``; an
            output of order ``p_j < p`` has zeros below row ``p_j``.
        gains: ``(len(GAIN_HORIZONS), n_outputs)``, the gain ``g_jk`` of
            each horizon of :data:`GAIN_HORIZONS`; None: 1 at every horizon.
    """

    coefficients: np.ndarray
    gains: np.ndarray | None = None

    def gain(self, steps_ahead: int) -> np.ndarray | float:
        """``g_k`` ``(n_outputs,)``: the smallest gain horizon ``>= k``'s (beyond: the last's)."""
        if self.gains is None:
            return 1.0
        row = int(np.searchsorted(GAIN_HORIZONS, int(steps_ahead)))
        return self.gains[min(row, len(GAIN_HORIZONS) - 1)]

    @property
    def orders(self) -> list[int]:
        """Each output's order ``p_j``."""
        nonzero = np.abs(self.coefficients) > 0
        return [int(np.max(np.flatnonzero(col)) + 1) if col.any() else 0 for col in nonzero.T]

    def predict(self, residual: np.ndarray, steps_ahead: int) -> np.ndarray:
        """``g_k e_hat(t | t - k)`` ``(N, n_outputs)`` from the residual ``e`` ``(N, n_outputs)``.

        Rows ``t < k`` have no origin and get zero (the prediction is the
        simulation there).
        """
        return self.recursion(residual, steps_ahead) * self.gain(steps_ahead)

    def recursion(self, residual: np.ndarray, steps_ahead: int) -> np.ndarray:
        """``e_hat(t | t - k)``, the recursion alone (no gain)."""
        e = np.asarray(residual, dtype=np.float64)
        a, k = self.coefficients, int(steps_ahead)
        out = np.zeros_like(e)
        if k >= len(e) or not a.size or not np.any(a):
            return out
        p = len(a)
        # history[i]: e at origin - i, for every origin tau = 0 .. N - k - 1
        padded = np.concatenate([np.zeros((p, e.shape[1])), e])
        origins = np.arange(len(e) - k)
        history = np.stack([padded[origins + p - i] for i in range(p)])  # (p, M, n_out)
        for _ in range(k):
            step = np.einsum("ij,imj->mj", a, history)
            history = np.concatenate([step[None], history[:-1]])
        out[k:] = history[0]
        return out


def fit_noise_model(
    estimation: list[np.ndarray], validation: np.ndarray, orders: tuple[int, ...] = NOISE_ORDERS
) -> NoiseModel:
    """The noise model of a simulation residual (see the module).

    Args:
        estimation: The estimation record's residuals, one ``(N_i, n_outputs)``
            array per experiment (each simulated from its first samples).
        validation: The validation record's residual ``(N_v, n_outputs)``.
        orders: The orders tried per output.

    Each output's order is the one whose ``k``-step predictions of the
    validation residual, ``k`` in :data:`CHOICE_HORIZONS`, have the least
    summed mean square relative to no correction (order ``0`` scores 1 per
    horizon, so a correction that does not help on validation is not kept).
    """
    n_out = validation.shape[1]
    best = np.zeros((max(orders), n_out))
    for j in range(n_out):
        scores = {}
        for p in orders:
            coef = _fit_one([e[:, j] for e in estimation], p)
            scores[p] = (_validation_score(coef, validation[:, j : j + 1]), coef)
        coef = min(scores.values(), key=lambda entry: entry[0])[1]
        best[: len(coef), j] = coef
    return NoiseModel(best, _gains(NoiseModel(best), validation))


def _gains(model: NoiseModel, residual: np.ndarray) -> np.ndarray:
    """The least-squares gain in ``[0, 1]`` of each horizon and output on ``residual``.

    ``g = <e, e_hat> / <e_hat, e_hat>`` over the rows that have an origin; 0
    where the record is too short for the horizon or nothing is predicted.
    """
    gains = np.zeros((len(GAIN_HORIZONS), residual.shape[1]))
    for row, k in enumerate(GAIN_HORIZONS):
        if len(residual) <= k:
            continue
        e, e_hat = residual[k:], model.recursion(residual, k)[k:]
        power = np.sum(e_hat**2, axis=0)
        ratio = np.divide(np.sum(e * e_hat, axis=0), power, out=np.zeros_like(power),
                          where=power > 0)  # fmt: skip
        gains[row] = np.clip(ratio, 0.0, 1.0)
    return gains


def _fit_one(series: list[np.ndarray], p: int) -> np.ndarray:
    """Least-squares, stable AR(p) coefficients of one output (``(p,)``; empty for ``p = 0``)."""
    rows, targets = [], []
    for e in series:
        if p == 0 or len(e) <= p:
            continue
        rows.append(np.stack([e[p - i : len(e) - i] for i in range(1, p + 1)], axis=1))
        targets.append(e[p:])
    if not rows:
        return np.zeros(0)
    x, y = np.concatenate(rows), np.concatenate(targets)
    gram = x.T @ x
    ridge = RIDGE * max(np.trace(gram) / p, 1e-300)
    coef = np.linalg.solve(gram + ridge * np.eye(p), x.T @ y)
    return _stable(coef)


def _stable(coef: np.ndarray) -> np.ndarray:
    """``coef`` with its recursion's roots pulled inside :data:`MAX_ROOT` (``a_i c^i``)."""
    if not coef.size or not np.all(np.isfinite(coef)):
        return np.zeros(len(coef))
    radius = np.max(np.abs(np.roots(np.concatenate([[1.0], -coef]))))
    if radius <= MAX_ROOT:
        return coef
    scale = MAX_ROOT / radius
    return coef * scale ** np.arange(1, len(coef) + 1)


def _validation_score(coef: np.ndarray, residual: np.ndarray) -> float:
    """Summed mean square of the corrected predictions relative to none (0 = perfect)."""
    if not coef.size:
        return float(len(CHOICE_HORIZONS))
    model = NoiseModel(coef[:, None])
    total = 0.0
    for k in CHOICE_HORIZONS:
        if len(residual) <= k:
            total += 1.0
            continue
        err = residual - model.predict(residual, k)
        total += float(np.mean(err[k:] ** 2)) / (float(np.mean(residual[k:] ** 2)) or 1e-300)
    return total
