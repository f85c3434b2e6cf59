"""The polynomial NARX model's parameter uncertainty, and free runs of coefficients drawn from it.

A polynomial NARX model (:class:`~keras_mgu.sysid.models.polynomial.PolynomialNarx`)
is linear in its coefficients: output ``j``'s one-step prediction on the
estimation record is ``V_j theta_j``, ``V_j`` ``(N, p_j)`` the values of its
``p_j`` terms. Least squares gives the coefficients' covariance::

    Sigma_j = s_j^2 (V_j^T V_j)^-1 (1 + rho_j) / (1 - rho_j)

with ``s_j^2`` the residual variance over ``N - p_j`` and ``rho_j >= 0`` the
residuals' lag-one correlation (residuals correlated in time carry less
information than their count says). :func:`coefficient_draws` draws
coefficient sets from ``N(theta, Sigma)``; their free runs
(:func:`drawn_simulations`) part little where the terms' values stay within
what the estimation record spanned, and more the further an experiment takes
them outside it, where a cubic term's small uncertainty grows with the cube
of the excursion. They are members whose disagreement a band can follow
(:mod:`~keras_mgu.sysid.judging.scaled_band`, ``benchmarks/band_width.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from keras_mgu.datasets import Record
from keras_mgu.sysid.models.frols import term_values
from keras_mgu.sysid.models.polynomial import PolynomialNarx, regression_rows

__all__ = ["coefficient_covariances", "coefficient_draws", "drawn_simulations"]


def coefficient_covariances(model: PolynomialNarx, estimation: Record) -> list[np.ndarray]:
    """``Sigma_j`` ``(p_j, p_j)`` of each output's used terms (module docstring), on
    ``estimation`` standardised as the model's fit was."""
    if not any(stop - first > model.lag for first, stop in estimation.experiments):
        raise ValueError(
            f"The estimation record has no experiment longer than {model.lag} samples."
        )
    regressors, targets = regression_rows(estimation, model.na, model.nb)
    values = term_values(regressors, model.terms)
    covariances = []
    for j in range(model.n_outputs):
        used = np.flatnonzero(model.coefficients[:, j] != 0)
        v = values[:, used]
        residual = targets[:, j] - v @ model.coefficients[used, j]
        s2 = float(residual @ residual) / max(len(residual) - len(used), 1)
        rho = np.corrcoef(residual[1:], residual[:-1])[0, 1] if len(residual) > 2 else 0.0
        rho = float(np.clip(rho, 0.0, 0.99)) if np.isfinite(rho) else 0.0
        covariances.append(s2 * (1 + rho) / (1 - rho) * np.linalg.pinv(v.T @ v))
    return covariances


def coefficient_draws(
    model: PolynomialNarx, estimation: Record, draws: int, seed: int = 0
) -> np.ndarray:
    """``(draws, K, n_outputs)`` coefficient sets from ``N(theta, Sigma)`` (module docstring);
    terms an output does not use stay zero. ``seed``: the draws' generator."""
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise ValueError(f"`draws` must be an integer >= 1; received {draws!r}.")
    rng = np.random.default_rng(seed)
    out = np.repeat(model.coefficients[None], int(draws), axis=0)
    for j, sigma in enumerate(coefficient_covariances(model, estimation)):
        used = np.flatnonzero(model.coefficients[:, j] != 0)
        out[:, used, j] += rng.standard_normal((int(draws), len(used))) @ _root(sigma).T
    return out


def _root(sigma: np.ndarray) -> np.ndarray:
    """``R`` with ``R R^T = sigma`` for a covariance that round-off may leave a little
    indefinite (its eigenvalues below zero taken as zero)."""
    values, vectors = np.linalg.eigh((sigma + sigma.T) / 2)
    return vectors * np.sqrt(np.clip(values, 0.0, None))


def drawn_simulations(
    run: Any, estimation: Record, u: np.ndarray, y_initial: np.ndarray, draws: int, seed: int = 0
) -> np.ndarray:
    """``(draws, N, n_outputs)``: free runs of a polynomial run's drawn coefficients, physical.

    ``run``: a :class:`~keras_mgu.sysid.training.run.RunResult` with a
    ``polynomial``; ``estimation``, ``u`` and ``y_initial`` physical (the
    run's signal path delays and standardises them as its simulation does; the
    estimation record without its dead samples, as the fit read it).
    """
    model, path = run.polynomial, run.path
    outer = path.outer
    sets = coefficient_draws(model, path.trimmed(estimation), draws, seed)  # as the fit saw it
    u_s = outer.transform_u(path.delayed(np.asarray(u, dtype=np.float64)))
    y_s = outer.transform_y(np.asarray(y_initial, dtype=np.float64))
    return np.stack([outer.inverse_transform_y(y) for y in model.simulate_batch(u_s, y_s, sets)])
