"""The polynomial NARX class: monomials of the lagged outputs and inputs, chosen by FROLS.

Per output ``i``, in the estimation record's standardised signals::

    r_t = [y_{t-1}, ..., y_{t-na}, u_{t-1}, ..., u_{t-nb+1}, u_t]   the regressors (ArxLoopCell's)
    y_i,t = sum_k theta_ik m_k(r_t)                                   m_k = r_a r_b r_c, r_p = 1

``m_k`` are monomials of degree 0 (the constant) to ``degree`` (at most 3):
``(n + degree)! / (n! degree!)`` candidates for ``n`` regressors. The terms
are chosen by forward regression with orthogonal least squares (FROLS,
Billings 2013, ch. 3; :func:`frols`): at each step the candidate whose part
orthogonal to the terms already chosen explains the largest share of the
target's energy, its *error reduction ratio*::

    w_m = p_m - sum_s (q_s.p_m / q_s.q_s) q_s     p_m: the candidate's column, q_s: those chosen
    ERR_m = (w_m.y)^2 / ((w_m.w_m) (y.y))

and the coefficients of the first ``k`` terms by least squares (from the same
orthogonalisation: ``A theta = g``, ``A`` unit upper triangular). Which ``k``,
lags and degree: :mod:`~keras_mgu.sysid.training.polynomial_run`, on the
free run of the validation record.

:class:`PolynomialNarx` holds one model; :meth:`PolynomialNarx.simulate_batch`
runs models free in NumPy (the selection's reference), and
:meth:`PolynomialNarx.keras_model` builds the same model as an
:class:`~keras_mgu.sysid.models.loop_cell.ArxLoopCell` with the
``"polynomial"`` branch (every term in the branch), which the library
simulates, predicts, saves and exports as it does every lag class.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

__all__ = [
    "PolynomialNarx",
    "candidate_terms",
    "frols",
    "lag_regressors",
    "regressor_names",
    "term_values",
]

#: A candidate whose orthogonal part keeps less than this share of its energy is collinear.
COLLINEAR = 1e-10


def candidate_terms(width: int, degree: int) -> np.ndarray:
    """Every monomial of ``width`` regressors up to ``degree``, ``(M, 3)`` index triples.

    Index ``width`` is the constant one, so ``(a, width, width)`` is the
    linear term ``r_a`` and ``(width, width, width)`` the constant. Ordered
    by degree, then lexicographically.
    """
    if not 1 <= degree <= 3:
        raise ValueError(f"`degree` must be 1, 2 or 3; received {degree!r}.")
    terms = [
        t
        for t in itertools.combinations_with_replacement(range(width + 1), 3)
        if sum(i < width for i in t) <= degree
    ]
    terms.sort(key=lambda t: (sum(i < width for i in t), t))
    return np.array(terms, dtype=np.int64).reshape(-1, 3)


def term_values(regressors: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """``(..., M)``: each term's product over ``[r, 1]``, ``regressors`` ``r`` ``(..., width)``."""
    ones = np.ones(regressors.shape[:-1] + (1,))
    extended = np.concatenate([regressors, ones], axis=-1)
    return extended[..., terms[:, 0]] * extended[..., terms[:, 1]] * extended[..., terms[:, 2]]


def lag_regressors(u: np.ndarray, y: np.ndarray, na: int, nb: int) -> np.ndarray:
    """``r_t`` ``(N - L, na n_y + nb n_u)`` for ``t`` in ``[L, N)``, ``L = max(na, nb - 1)``.

    In the order of :class:`~keras_mgu.sysid.models.loop_cell.ArxLoopCell`'s
    ``[z_t, u_t]``: output lags ``1..na`` (every channel of a lag together),
    input lags ``1..nb - 1``, then ``u_t``.
    """
    lag, n = max(na, nb - 1), len(y)
    outputs = [y[lag - j : n - j] for j in range(1, na + 1)]
    return np.concatenate([*outputs, _input_regressors(u, nb)[lag:]], axis=1)


def regressor_names(
    input_names: Sequence[str], output_names: Sequence[str], na: int, nb: int
) -> list[str]:
    """Names of the regressors ``r_t`` in their order, e.g. ``y(k-1)``, ``u(k)``."""
    names = [f"{o}(k-{j})" for j in range(1, na + 1) for o in output_names]
    names += [f"{i}(k-{j})" for j in range(1, nb) for i in input_names]
    return names + [f"{i}(k)" for i in input_names]


def term_name(term: Sequence[int], names: Sequence[str]) -> str:
    """``"y(k-1)^2 u(k)"`` for a term's index triple over ``names`` (the constant: ``"1"``)."""
    counts: dict[int, int] = {}
    for i in term:
        if i < len(names):
            counts[int(i)] = counts.get(int(i), 0) + 1
    if not counts:
        return "1"
    return " ".join(names[i] + (f"^{p}" if p > 1 else "") for i, p in sorted(counts.items()))


def frols(
    candidates: np.ndarray, target: np.ndarray, max_terms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Forward regression with orthogonal least squares (module docstring).

    Args:
        candidates: ``P`` ``(N, M)``, one column per candidate term.
        target: ``y`` ``(N,)``.
        max_terms: The most terms chosen (fewer where the others are collinear).

    Returns:
        ``(chosen, err, coefficients)``: the chosen columns in the order
        chosen ``(K,)``, their error reduction ratios ``(K,)``, and
        ``(K, K)`` whose row ``k - 1`` holds the least-squares coefficients
        of the first ``k`` terms (zeros after them).
    """
    p = np.asarray(candidates, dtype=np.float64)
    y = np.asarray(target, dtype=np.float64)
    energy = float(y @ y)
    norms0 = np.sum(p * p, axis=0)
    norms, projections = norms0.copy(), y @ p  # of each candidate's orthogonal part
    free = norms0 > 0
    chosen, err, g, basis, qqs = [], [], [], [], []
    alpha = np.zeros((max_terms, p.shape[1]))
    for step in range(max_terms):
        usable = free & (norms > COLLINEAR * norms0)
        if not np.any(usable) or energy == 0:
            break
        ratio = np.where(usable, projections**2 / np.where(usable, norms, 1.0), -1.0)
        m = int(np.argmax(ratio))
        if ratio[m] <= 0:  # nothing left that a candidate explains
            break
        q = p[:, m].copy()
        if basis:  # Gram-Schmidt twice, so that q stays orthogonal on nearly collinear lags
            chosen_q = np.stack(basis, axis=1)
            for _ in range(2):
                q -= chosen_q @ ((chosen_q.T @ q) / np.array(qqs))
        qq = float(q @ q)
        chosen.append(m)
        g.append(float(q @ y) / qq)
        err.append(g[-1] ** 2 * qq / energy)
        free[m] = False
        basis.append(q)
        qqs.append(qq)
        alpha[step] = (q @ p) / qq  # w_m's part along q is p_m's: q is orthogonal to the rest
        projections = projections - alpha[step] * (q @ y)
        norms = np.maximum(norms - alpha[step] ** 2 * qq, 0.0)
    k = len(chosen)
    upper = np.eye(k) + np.triu(alpha[:k][:, chosen], 1)
    coefficients = np.zeros((k, k))
    for j in range(1, k + 1):
        coefficients[j - 1, :j] = solve_triangular(
            upper[:j, :j], np.array(g[:j]), unit_diagonal=True
        )
    return np.array(chosen, dtype=np.int64), np.array(err), coefficients


@dataclasses.dataclass(frozen=True)
class PolynomialNarx:
    """One polynomial NARX model in standardised signals (module docstring).

    Attributes:
        na, nb: Output lags ``1..na`` and inputs ``u_t..u_{t-nb+1}``.
        degree: The largest degree its candidates had (1 to 3).
        terms: ``(K, 3)`` index triples into ``[r_t, 1]`` (every output's
            terms together).
        coefficients: ``(K, n_outputs)``, zero where a term is not an output's.
        err: ``(K, n_outputs)``, each term's error reduction ratio for an
            output (zero where it is not one of its terms).
        n_inputs, n_outputs: Channel counts.
        limits: ``(lower, upper)`` ``(n_outputs,)``: the free run's outputs
            are clamped to them (the guard; None: none).
    """

    na: int
    nb: int
    degree: int
    terms: np.ndarray
    coefficients: np.ndarray
    err: np.ndarray
    n_inputs: int
    n_outputs: int
    limits: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def lag(self) -> int:
        """Measured samples a free run starts from, ``max(na, nb - 1)``."""
        return max(self.na, self.nb - 1)

    @property
    def width(self) -> int:
        """Regressors in ``r_t``."""
        return self.na * self.n_outputs + self.nb * self.n_inputs

    def simulate_batch(
        self, u: np.ndarray, y_initial: np.ndarray, coefficients: np.ndarray | None = None
    ) -> np.ndarray:
        """Free runs ``(B, N, n_outputs)`` of ``B`` coefficient sets, in NumPy.

        Args:
            u: Inputs ``(N, n_inputs)``, standardised.
            y_initial: The first ``n >= lag`` measured outputs ``(n, n_outputs)``
                (the result's first ``n`` rows), standardised.
            coefficients: ``(B, K, n_outputs)`` (default: this model's, ``B = 1``).
        """
        theta = self.coefficients[None] if coefficients is None else coefficients
        n, total, batch, ny = len(y_initial), len(u), len(theta), self.n_outputs
        y = np.zeros((batch, total, ny))
        y[:, :n] = y_initial
        inputs = _input_regressors(u, self.nb)
        lower, upper = self.limits if self.limits is not None else (-np.inf, np.inf)
        lags = self.na * ny
        extended = np.ones((batch, self.width + 1))  # [r_t, 1], the past outputs shifted in
        extended[:, :lags] = y_initial[n - self.na : n][::-1].reshape(-1)
        a, b, c = self.terms.T
        for t in range(n, total):
            extended[:, lags : self.width] = inputs[t]
            values = extended[:, a] * extended[:, b]
            values *= extended[:, c]
            step = np.matmul(values[:, None, :], theta)[:, 0]
            np.clip(step, lower, upper, out=step)
            y[:, t] = step
            extended[:, ny:lags] = extended[:, : lags - ny].copy()
            extended[:, :ny] = step
        return y

    def keras_model(self, name: str = "polynomial") -> Any:
        """The model as a lag simulator ``[u_past, y_past, u] -> y`` (module docstring).

        Every term (the constant and linear ones too) is in the cell's
        ``"polynomial"`` branch, masked per output, and ``W``, ``c`` are zero
        and not trained: training moves the chosen terms' coefficients only.
        """
        from keras_mgu.sysid.models.lag_model import lag_simulator
        from keras_mgu.sysid.models.loop_cell import ArxLoopCell

        cell = ArxLoopCell(
            self.n_inputs, self.n_outputs, self.na, self.nb, None, None, "polynomial", (),
            terms=self.terms, output_limits=self.limits, term_outputs=self._mask(),
        )  # fmt: skip
        model = lag_simulator(cell, self.lag, name=name)
        cell.out_kernel.assign(self.coefficients.astype("float32"))
        return model

    def with_keras_coefficients(self, model: Any) -> PolynomialNarx:
        """This model with the coefficients of :meth:`keras_model`'s ``model`` (after training)."""
        import keras

        cell = model.get_layer("loop").cell
        values = keras.ops.convert_to_numpy(cell.out_kernel).astype(np.float64)
        return dataclasses.replace(self, coefficients=values * self._mask())

    def _mask(self) -> np.ndarray:
        return (self.coefficients != 0) | (self.err != 0)

    def to_config(self) -> dict:
        """A JSON-ready dict of every field (:meth:`from_config` reads it back)."""
        return {
            "na": self.na, "nb": self.nb, "degree": self.degree,
            "terms": self.terms.tolist(), "coefficients": self.coefficients.tolist(),
            "err": self.err.tolist(), "n_inputs": self.n_inputs, "n_outputs": self.n_outputs,
            "limits": None if self.limits is None else [b.tolist() for b in self.limits],
        }  # fmt: skip

    @classmethod
    def from_config(cls, config: dict) -> PolynomialNarx:
        values = dict(config)
        for name in ("coefficients", "err"):
            values[name] = np.asarray(values[name], dtype=np.float64).reshape(
                -1, values["n_outputs"]
            )
        values["terms"] = np.asarray(values["terms"], dtype=np.int64).reshape(-1, 3)
        if values.get("limits") is not None:
            values["limits"] = tuple(np.asarray(b, dtype=np.float64) for b in values["limits"])
        return cls(**values)

    def channel_names(
        self, input_names: Sequence[str] = (), output_names: Sequence[str] = ()
    ) -> tuple[list[str], list[str]]:
        """The given channel names, else ``u0, u1, ...`` and ``y0, y1, ...``."""
        inputs = list(input_names) or [f"u{m}" for m in range(self.n_inputs)]
        outputs = list(output_names) or [f"y{i}" for i in range(self.n_outputs)]
        return inputs, outputs

    def term_table(
        self, input_names: Sequence[str] = (), output_names: Sequence[str] = ()
    ) -> list[dict]:
        """Each output's terms in the order chosen: ``output``, ``term``, ``coefficient``, ``err``.

        Standardised signals (the term names use the channels' names).
        """
        inputs, outputs = self.channel_names(input_names, output_names)
        names = regressor_names(inputs, outputs, self.na, self.nb)
        rows = []
        for i, output in enumerate(outputs):
            order = np.argsort(-self.err[:, i], kind="stable")
            for k in order:
                if self.coefficients[k, i] == 0 and self.err[k, i] == 0:
                    continue
                rows.append({
                    "output": output, "term": term_name(self.terms[k], names),
                    "coefficient": float(self.coefficients[k, i]), "err": float(self.err[k, i]),
                })  # fmt: skip
        return rows


def describe_polynomial(
    model: PolynomialNarx,
    input_names: Sequence[str],
    output_names: Sequence[str],
    scaling: Any = None,
) -> str:
    """The model's equation as lines: each output's terms, coefficient and ERR, in the order chosen.

    ``scaling``: the :class:`~keras_mgu.datasets.Normalizer` whose standardised
    signals the terms are in (its means and deviations are printed).
    """
    inputs, outputs = model.channel_names(input_names, output_names)
    lines = [
        f"polynomial NARX: na={model.na}, nb={model.nb}, degree <= {model.degree}, "
        f"{len(model.terms)} terms; in standardised signals, x~ = (x - mean) / std:"
    ]
    if scaling is not None:
        stats = zip(
            [*inputs, *outputs],
            [*scaling.u_mean, *scaling.y_mean],
            [*scaling.u_std, *scaling.y_std],
        )
        lines.append("  " + ", ".join(f"{n}: mean {m:.6g}, std {s:.6g}" for n, m, s in stats))
    rows = model.term_table(inputs, outputs)
    for output in outputs:
        mine = [row for row in rows if row["output"] == output]
        lines.append(f"  {output}~(k) = sum of {len(mine)} terms:   coefficient   ERR")
        lines += [
            f"    {row['term']:<40} {row['coefficient']:+.6e}  {row['err']:.3e}" for row in mine
        ]
    return "\n".join(lines)


def _input_regressors(u: np.ndarray, nb: int) -> np.ndarray:
    """``(N, nb n_u)``: ``[u_{t-1}, ..., u_{t-nb+1}, u_t]`` per row ``t`` (``u_0`` held before)."""
    padded = np.concatenate([np.repeat(u[:1], nb - 1, axis=0), u]) if nb > 1 else u
    total = len(u)
    start = nb - 1
    parts = [padded[start - j : start - j + total] for j in range(1, nb)]
    return np.concatenate([*parts, u], axis=1)
