"""A linear model fitted first, so that the network learns only what it leaves.

:class:`LinearModel` is a multi-input ARX model per output channel ``i``::

    y_i[k] = -sum_{j=1..na} a_ij y_i[k-j] + sum_{m} sum_{j=0..nb-1} b_imj u_m[k-j] + c_i

fitted by least squares on the estimation record and run free (its own past
outputs fed back) to simulate. A simulation starts *at rest at the first
sample*: before sample 0 the input is held at ``u[0]`` and the output at a
given level ``y0`` (the first measured output of the experiment), so the
result is a fixed function of ``u`` and ``y0``.

:func:`select_linear_model` fits the orders ``na`` (``nb = na + 1``) of
:data:`ORDERS` and keeps the one whose free-run simulation scores best on the
validation record. Where the validation error still falls at the largest of
them, the search goes on through :data:`WIDER_ORDERS` until it stops falling
or the record allows no more (:func:`largest_order`: at least
``ROWS_PER_COEFFICIENT`` samples per coefficient); :func:`order_search_note`
says where it ended at a ceiling. The inputs are those every class sees,
already delayed by the dead time (:mod:`~keras_mgu.sysid.models.delay`), so
``u[k-j]`` here is ``u(k - nk - j)`` of the plant.

It is a candidate only where it explains the validation record: an RMSE of
at most ``LINEAR_SHARE_MAX`` (70 %) of that of the constant
(estimation-mean) prediction, about half its variance. Whether the
network then trains on its residual is decided on validation by the restarts
(:func:`~keras_mgu.sysid.identify`).

:class:`~keras_mgu.sysid.models.signals.SignalPath` turns a record into what
the network trains on: inputs ``[u, y_lin]`` and target ``y - y_lin``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = [
    "ORDERS",
    "WIDER_ORDERS",
    "LinearModel",
    "largest_order",
    "order_search_note",
    "select_linear_model",
]

#: ARX orders ``na`` tried by :func:`select_linear_model` (``nb = na + 1``).
ORDERS = (1, 2, 3, 4, 6, 8)
#: Larger orders tried, in turn, while the validation error still falls at the largest so far.
WIDER_ORDERS = (12, 16, 24)
#: Estimation samples per ARX coefficient below which an order is not tried when widening.
ROWS_PER_COEFFICIENT = 10
#: The linear model is used only if its validation RMSE is at most this share of
#: the RMSE of the constant (estimation-mean) prediction.
LINEAR_SHARE_MAX = 0.7


def _lagged(x: np.ndarray, lags: range, n: int) -> np.ndarray:
    """Columns ``x[k - j]`` for ``j`` in ``lags`` and ``k`` in ``[n0, N)``, ``n0 = N - n``."""
    total = len(x)
    return np.column_stack([x[total - n - j : total - j] for j in lags])


@dataclasses.dataclass(frozen=True)
class LinearModel:
    """ARX coefficients: ``a`` ``(n_outputs, na)``, ``b`` ``(n_outputs, n_inputs, nb)``, ``c``."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray

    @property
    def orders(self) -> tuple[int, int]:
        return int(self.a.shape[1]), int(self.b.shape[2])

    @property
    def time_constant(self) -> float:
        """The slowest time constant in samples, ``-1 / ln|p|`` of the largest pole ``p``.

        ``inf`` for a pole on or outside the unit circle (an integrator).
        """
        radius = max(np.max(np.abs(np.roots(np.r_[1.0, a]))) for a in self.a)
        return float(-1.0 / np.log(radius)) if radius < 1.0 else float("inf")

    def padded(self, na: int, nb: int) -> LinearModel:
        """The same model with orders ``na >= self.na`` and ``nb >= self.nb`` (zeros added)."""
        (na0, nb0), n_outputs, n_inputs = self.orders, *self.b.shape[:2]
        if na < na0 or nb < nb0:
            raise ValueError(f"Cannot pad ARX{self.orders} to the lower orders ({na}, {nb}).")
        a = np.concatenate([self.a, np.zeros((n_outputs, na - na0))], axis=1)
        b = np.concatenate([self.b, np.zeros((n_outputs, n_inputs, nb - nb0))], axis=2)
        return LinearModel(a, b, self.c)

    @classmethod
    def fit(cls, u: Any, y: Any, na: int, nb: int | None = None) -> LinearModel:
        """Least-squares ARX fit on ``u`` ``(N, n_inputs)``, ``y`` ``(N, n_outputs)``."""
        u, y = np.asarray(u, dtype=np.float64), np.asarray(y, dtype=np.float64)
        nb = na + 1 if nb is None else nb
        if na < 1 or nb < 1:
            raise ValueError(f"ARX orders must be >= 1; received na={na}, nb={nb}.")
        lag = max(na, nb - 1)
        n = len(y) - lag
        if n <= na + nb * u.shape[1] + 1:
            raise ValueError(f"{len(y)} samples are too few for an ARX({na}, {nb}) fit.")
        inputs = [_lagged(u[:, m], range(nb), n) for m in range(u.shape[1])]
        a, b, c = [], [], []
        for i in range(y.shape[1]):
            regressors = np.column_stack(
                [-_lagged(y[:, i], range(1, na + 1), n), *inputs, np.ones(n)]
            )
            theta = np.linalg.lstsq(regressors, y[lag:, i], rcond=None)[0]
            a.append(theta[:na])
            b.append(theta[na:-1].reshape(u.shape[1], nb))
            c.append(theta[-1])
        return cls(np.array(a), np.array(b), np.array(c))

    def simulate(self, u: Any, y0: Any) -> np.ndarray:
        """Free-run outputs ``(N, n_outputs)`` for ``u`` ``(N, n_inputs)``, at rest before.

        ``y0`` ``(n_outputs,)`` is the output level held before sample 0, with
        the input held at ``u[0]``.
        """
        from scipy.signal import lfilter, lfiltic  # a second's import, for these runs alone

        u = np.asarray(u, dtype=np.float64)
        y0 = np.asarray(y0, dtype=np.float64).reshape(-1)
        na, nb = self.orders
        # Inputs held at u[0] before sample 0, so the FIR part starts at rest too.
        padded = np.concatenate([np.repeat(u[:1], nb - 1, axis=0), u])
        out = np.empty((len(u), len(self.c)))
        for i in range(len(self.c)):
            forcing = np.full(len(u), self.c[i])
            for m in range(u.shape[1]):
                forcing += np.convolve(padded[:, m], self.b[i, m], mode="valid")
            den = np.concatenate([[1.0], self.a[i]])
            zi = lfiltic([1.0], den, np.full(na, y0[i]))
            out[:, i] = lfilter([1.0], den, forcing, zi=zi)[0]
        return out


def _rmse(y: np.ndarray, y_sim: np.ndarray) -> float:
    err = y - y_sim
    return float(np.sqrt(np.mean(err**2))) if np.all(np.isfinite(err)) else np.inf


def largest_order(n_samples: int, n_inputs: int, n_outputs: int = 1) -> int:
    """The largest ``na`` (``nb = na + 1``) with ``ROWS_PER_COEFFICIENT`` samples per coefficient.

    One output's ARX model has ``na + n_inputs (na + 1) + 1`` coefficients.
    """
    del n_outputs  # each output is fitted on its own
    return max(0, (n_samples // ROWS_PER_COEFFICIENT - 1 - n_inputs) // (1 + n_inputs))


def order_search_note(table: list[dict]) -> str | None:
    """Where the order search ended at its ceiling, why, in words; None where it did not.

    The search is at a ceiling where the best order is the largest tried: the
    validation error still fell there.
    """
    if not table:
        return None
    best = min(table, key=lambda row: row["validation_rmse"])
    last = max(table, key=lambda row: row["na"])
    if best is not last or len(table) < 2:
        return None
    allowed = int(last.get("largest_allowed", last["na"]))
    if last["na"] >= WIDER_ORDERS[-1]:
        why = f"the largest order searched (na={WIDER_ORDERS[-1]})"
    else:
        why = (
            f"the largest order the record allows (na={allowed}: at least "
            f"{ROWS_PER_COEFFICIENT} samples per coefficient)"
        )
    return (
        f"the ARX validation error still falls at na={last['na']}, {why}; a longer or "
        "delayed response may be missing (see the input delay)"
    )


def select_linear_model(
    estimation: Any, validation: Any, continues: bool = True, orders: tuple[int, ...] = ORDERS,
    widen: bool = True,
) -> tuple[LinearModel | None, list[dict[str, float]]]:  # fmt: skip
    """The ARX order that simulates ``validation`` best, or None when it leaves too much.

    Args:
        estimation, validation: Records (``u``, ``y`` arrays) in any units.
        continues: The validation record continues the estimation record, so
            the two are simulated as one experiment from the start of the
            estimation record; otherwise validation is simulated on its own,
            at rest at its first output.
        orders: ``na`` values tried (``nb = na + 1``).
        widen: Where the best of ``orders`` is the largest, go on through
            :data:`WIDER_ORDERS` while the validation error falls, up to
            :func:`largest_order` of the estimation record.

    Returns:
        The chosen model (or None) and a table with one dict per order:
        ``na``, ``nb``, ``validation_rmse``, the constant prediction's
        ``baseline_rmse`` and ``largest_allowed`` (:func:`largest_order`).
    """
    baseline = _rmse(validation.y, np.mean(estimation.y, axis=0))
    allowed = largest_order(len(estimation.y), np.shape(estimation.u)[1])
    table, best, best_rmse = [], None, np.inf

    def tried(na: int) -> float | None:
        nonlocal best, best_rmse
        try:
            model = LinearModel.fit(estimation.u, estimation.y, na)
        except (ValueError, np.linalg.LinAlgError):
            return None
        with np.errstate(all="ignore"):
            if continues:
                u = np.concatenate([estimation.u, validation.u])
                y_sim = model.simulate(u, estimation.y[0])[-validation.n_samples :]
            else:
                y_sim = model.simulate(validation.u, validation.y[0])
        score = _rmse(validation.y, y_sim)
        table.append({
            "na": na, "nb": na + 1, "validation_rmse": score, "baseline_rmse": baseline,
            "largest_allowed": allowed,
        })  # fmt: skip
        if score < best_rmse:
            best, best_rmse = model, score
        return score

    for na in orders:
        tried(na)
    if widen and table and best_rmse == table[-1]["validation_rmse"] and len(table) > 1:
        for na in (o for o in WIDER_ORDERS if table[-1]["na"] < o <= allowed):
            previous = best_rmse
            score = tried(na)
            if score is None or not score < previous:
                break
    if best is None or not best_rmse <= LINEAR_SHARE_MAX * baseline:
        return None, table
    return best, table
