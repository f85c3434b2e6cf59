"""A polynomial NARX model on the zoo's plants: within and beyond the estimation range.

Would a model class that grows with its inputs (a polynomial in the lagged
outputs and inputs) carry on where a tanh network saturates? This fits, by
least squares on the estimation record (standardised with its statistics),

    y[k] = sum_{p=1..degree} sum_{j=1..na} a_pj y[k-j]^p + sum_{p} sum_{j=0..na} b_pj u[k-j]^p + c

for each ``na`` and ``degree`` given, runs it free (its own outputs fed back)
from the first ``na`` measured outputs, and prints its RMSE, in the output's
unit, on the validation record and on the zoo's ``beyond`` record before and
after ``beyond_start`` (both scored from sample 50), as a Markdown table. A
simulation that leaves ``|y| > 1e6`` (standardised) counts as diverged: its
RMSE is infinite. No network is trained; the script needs only NumPy.

    python benchmarks/zoo_polynomial_narx.py duffing two_mass_drive bouc_wen overflowing_tanks

Its own-class fits (:func:`own_class_reference`) are the floors the suite
sets beside each zoo plant (``sysid_suite.py --floors PLANT ...``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable

import numpy as np

from keras_mgu.datasets import zoo_plant

SKIP = 50  # samples the suite's protocol leaves out of the score
DIVERGED = 1e6


def features(y_lags: np.ndarray, u_lags: np.ndarray, degree: int) -> np.ndarray:
    """``[y_lags^p, u_lags^p for p = 1..degree, 1]`` for rows of lags."""
    columns = [part**p for p in range(1, degree + 1) for part in (y_lags, u_lags)]
    return np.concatenate([*columns, np.ones((len(y_lags), 1))], axis=1)


#: Regressors of rows of lags: ``(y_lags (K, na), u_lags (K, na + 1)) -> (K, n_features)``.
Basis = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _basis(degree: int, basis: Basis | None) -> Basis:
    if basis is not None:
        return basis
    return lambda y_lags, u_lags: features(y_lags, u_lags, degree)


def fit(
    u: np.ndarray,
    y: np.ndarray,
    na: int,
    degree: int,
    ridge: float = 1e-6,
    basis: Basis | None = None,
) -> np.ndarray:
    """Least-squares coefficients of one-step prediction on a standardised record.

    ``theta = argmin sum_k (y[k] - phi_k theta)^2 + ridge |theta|^2`` with
    ``phi_k`` the row of :func:`features` (or of ``basis``) for the lags
    ``y[k-1..k-na]`` and ``u[k..k-na]``; ``u``, ``y``: ``(N,)``.
    """
    n, phi = len(y), _basis(degree, basis)
    y_lags = np.column_stack([y[na - j : n - j] for j in range(1, na + 1)])
    u_lags = np.column_stack([u[na - j : n - j] for j in range(0, na + 1)])
    x = phi(y_lags, u_lags)
    return np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ y[na:])


def simulate(
    theta: np.ndarray,
    u: np.ndarray,
    y: np.ndarray,
    na: int,
    degree: int,
    basis: Basis | None = None,
) -> np.ndarray:
    """Free run ``(N,)`` from the first ``na`` measured outputs; NaN from where it diverges."""
    phi = _basis(degree, basis)
    out = np.full(len(u), np.nan)
    out[:na] = y[:na]
    for k in range(na, len(u)):
        y_lags, u_lags = out[k - na : k][::-1][None], u[k - na : k + 1][::-1][None]
        out[k] = (phi(y_lags, u_lags) @ theta)[0]
        if not abs(out[k]) < DIVERGED:
            out[k:] = np.nan
            break
    return out


def rmse(y: np.ndarray, y_sim: np.ndarray) -> float:
    if not np.all(np.isfinite(y_sim)):
        return math.inf
    return float(np.sqrt(np.mean((y - y_sim) ** 2)))


def sine_basis(mean_y: float, std_y: float) -> Basis:
    """``[y_lags, u_lags, sin(mean_y + std_y y_lags), 1]``: ``sin`` of the physical output.

    The pendulum's Euler-discretised equation is linear in these regressors:
    ``theta[k] = 2 theta[k-1] - theta[k-2] - h c / (m l^2) (theta[k-1] - theta[k-2])
    - h^2 (g / l) sin(theta[k-2]) + h^2 u[k-2] / (m l^2)`` (``h = ts``).
    """

    def phi(y_lags: np.ndarray, u_lags: np.ndarray) -> np.ndarray:
        sines = np.sin(mean_y + std_y * y_lags)
        return np.concatenate([y_lags, u_lags, sines, np.ones((len(y_lags), 1))], axis=1)

    return phi


def van_der_pol_basis(mean_y: float, std_y: float) -> Basis:
    """``[y_lags, u_lags, x_i^2 x_j for i, j = 1..na, 1]``, ``x_i``: ``y[k-i]`` about its zero.

    The cubic monomials ``x_i^2 x_j`` of the output lags (``x_i^3`` among
    them), cross terms included, with ``x_i = y_lags[:, i-1] + mean_y / std_y``
    (the output in units of its standard deviation, not shifted by its mean).
    The Van der Pol oscillator's Euler-discretised equation is linear in these
    regressors: ``x[k] = 2 x[k-1] - x[k-2] + h mu (1 - x[k-2]^2) (x[k-1] - x[k-2])
    - h^2 omega^2 x[k-2] + h^2 u[k-2]`` (``h = ts``); more lags than two let
    least squares average the output noise over a longer difference.
    """
    shift = mean_y / std_y

    def phi(y_lags: np.ndarray, u_lags: np.ndarray) -> np.ndarray:
        x = y_lags + shift
        cubes = (x[:, :, None] ** 2 * x[:, None, :]).reshape(len(x), -1)  # column i na + j
        return np.concatenate([y_lags, u_lags, cubes, np.ones((len(y_lags), 1))], axis=1)

    return phi


#: Each plant's own class, where it is linear in its parameters: a label and
#: the regressors from the estimation output's ``(mean, std)``. The Duffing
#: oscillators' Euler-discretised equation is a cubic polynomial NARX; the
#: pendulum's is linear in ``sin(theta)``; the Van der Pol oscillator's in
#: the cubic monomials ``y[k-i]^2 y[k-j]``, cross terms included. The others have none
#: (hysteresis, sticking friction, overflow, a filter after the nonlinearity).
OWN_CLASSES: dict[str, tuple[str, Callable[[float, float], Basis]]] = {
    "duffing": ("cubic NARX", lambda mean_y, std_y: _basis(3, None)),
    "hardening_oscillator": ("cubic NARX", lambda mean_y, std_y: _basis(3, None)),
    "pendulum": ("sine NARX", sine_basis),
    "van_der_pol": ("cubic NARX with cross terms", van_der_pol_basis),
}
#: Orders ``na`` an own-class reference chooses from on validation.
REFERENCE_ORDERS = (2, 3, 4, 6, 8)


@dataclasses.dataclass(frozen=True, eq=False)
class OwnClassModel:
    """A NARX model fitted by least squares, simulated and scored like ``Identification``.

    Standardised with the estimation record's statistics: ``y[k] = phi(y[k-1..k-na],
    u[k..k-na]) theta`` (``phi``: :data:`Basis`), run free from the first ``na``
    given outputs.
    """

    label: str
    na: int
    theta: np.ndarray
    basis: Basis
    mean_u: float
    std_u: float
    mean_y: float
    std_y: float

    @property
    def name(self) -> str:
        return f"{self.label} (na={self.na})"

    def simulate(self, u: np.ndarray, y_initial: np.ndarray) -> np.ndarray:
        """Outputs ``(N, 1)`` for ``u`` ``(N, 1)``: ``y_initial`` ``(n, 1)``, then the run."""
        us = (np.asarray(u)[:, 0] - self.mean_u) / self.std_u
        ys = (np.asarray(y_initial)[:, 0] - self.mean_y) / self.std_y
        out = simulate(self.theta, us, ys, self.na, 0, self.basis)
        y_sim = (self.mean_y + self.std_y * out)[:, None]
        y_sim[: len(y_initial)] = y_initial
        return y_sim

    def score(self, record, convention: str, n: int) -> float:
        """RMSE of the simulation of ``record`` from its first ``n`` outputs (inf: diverged)."""
        from keras_mgu import sysid

        y_sim = self.simulate(record.u, record.y[:n])
        if not np.all(np.isfinite(y_sim)):
            return math.inf
        return sysid.score(record.y, y_sim, convention, n)


def own_class_reference(plant) -> OwnClassModel | None:
    """The plant's own class fitted by least squares, ``na`` chosen on validation; None if none.

    Fitted on the estimation record, each order of :data:`REFERENCE_ORDERS`
    runs free on the validation record from its first ``na`` outputs; the
    least RMSE from sample :data:`SKIP` on keeps its order.
    """
    if plant.name not in OWN_CLASSES:
        return None
    label, make_basis = OWN_CLASSES[plant.name]
    est = plant.data.estimation
    stats = (float(est.u.mean()), float(est.u.std()), float(est.y.mean()), float(est.y.std()))
    basis = make_basis(stats[2], stats[3])
    u_est, y_est = (est.u[:, 0] - stats[0]) / stats[1], (est.y[:, 0] - stats[2]) / stats[3]
    best, best_rmse = None, math.inf
    for na in REFERENCE_ORDERS:
        model = OwnClassModel(label, na, fit(u_est, y_est, na, 0, basis=basis), basis, *stats)
        score = model.score(plant.data.validation, "benchmark", SKIP)
        if best is None or score < best_rmse:
            best, best_rmse = model, score
    return best


def rows(name: str, orders: list[int], degrees: list[int]) -> list[str]:
    plant = zoo_plant(name, seed=0)
    est = plant.data.estimation
    mean_u, std_u, mean_y, std_y = est.u.mean(), est.u.std(), est.y.mean(), est.y.std()

    def scaled(record):
        return (record.u[:, 0] - mean_u) / std_u, (record.y[:, 0] - mean_y) / std_y

    (u_est, y_est), (u_val, y_val), (u_b, y_b) = map(
        scaled, (est, plant.data.validation, plant.beyond)
    )
    start, lines = plant.beyond_start, []
    for degree in degrees:
        for na in orders:
            theta = fit(u_est, y_est, na, degree)
            val = simulate(theta, u_val, y_val, na, degree)
            beyond = simulate(theta, u_b, y_b, na, degree)
            before = rmse(y_b[SKIP:start], beyond[SKIP:start]) * std_y
            after = rmse(y_b[start:], beyond[start:]) * std_y
            ratio = after / before if math.isfinite(after) else math.inf
            lines.append(
                f"| {name} | {degree} | {na} | {rmse(y_val[SKIP:], val[SKIP:]) * std_y:.4g} | "
                f"{before:.4g} | {after:.4g} | {ratio:.3g} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plants", nargs="+")
    parser.add_argument("--orders", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--degrees", type=int, nargs="+", default=[1, 3])
    args = parser.parse_args()
    print("| plant | degree | na | validation | beyond, before | beyond, after | after / before |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.plants:
        for line in rows(name, args.orders, args.degrees):
            print(line, flush=True)


if __name__ == "__main__":
    main()
