"""Forward regression with orthogonal least squares (FROLS) over monomial candidates.

The candidates are the monomials ``m_k = r_a r_b r_c`` (``r_p = 1`` for the
constant index) of ``width`` regressors up to a degree (at most 3):
``(n + degree)! / (n! degree!)`` of them for ``n`` regressors
(:func:`candidate_terms`, their values :func:`term_values`). FROLS (Billings
2013, ch. 3; :func:`frols`) chooses them one at a time: at each step the
candidate whose part orthogonal to the terms already chosen explains the
largest share of the target's energy, its *error reduction ratio*::

    w_m = p_m - sum_s (q_s.p_m / q_s.q_s) q_s     p_m: the candidate's column, q_s: those chosen
    ERR_m = (w_m.y)^2 / ((w_m.w_m) (y.y))

and the coefficients of the first ``k`` terms by least squares (from the same
orthogonalisation: ``A theta = g``, ``A`` unit upper triangular). The
polynomial NARX class (:mod:`~keras_mgu.sysid.models.polynomial`) fits its
terms so.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.linalg import solve_triangular

__all__ = ["COLLINEAR", "candidate_terms", "frols", "term_values"]

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
