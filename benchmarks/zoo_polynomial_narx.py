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
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from keras_mgu.datasets import zoo_plant

SKIP = 50  # samples the suite's protocol leaves out of the score
DIVERGED = 1e6


def features(y_lags: np.ndarray, u_lags: np.ndarray, degree: int) -> np.ndarray:
    """``[y_lags^p, u_lags^p for p = 1..degree, 1]`` for rows of lags."""
    columns = [part**p for p in range(1, degree + 1) for part in (y_lags, u_lags)]
    return np.concatenate([*columns, np.ones((len(y_lags), 1))], axis=1)


def fit(u: np.ndarray, y: np.ndarray, na: int, degree: int, ridge: float = 1e-6) -> np.ndarray:
    """Least-squares coefficients of one-step prediction on a standardised record."""
    n = len(y)
    y_lags = np.column_stack([y[na - j : n - j] for j in range(1, na + 1)])
    u_lags = np.column_stack([u[na - j : n - j] for j in range(0, na + 1)])
    x = features(y_lags, u_lags, degree)
    return np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ y[na:])


def simulate(theta: np.ndarray, u: np.ndarray, y: np.ndarray, na: int, degree: int) -> np.ndarray:
    """Free run from the first ``na`` measured outputs; NaN from where it diverges."""
    out = np.full(len(u), np.nan)
    out[:na] = y[:na]
    for k in range(na, len(u)):
        y_lags, u_lags = out[k - na : k][::-1][None], u[k - na : k + 1][::-1][None]
        out[k] = (features(y_lags, u_lags, degree) @ theta)[0]
        if not abs(out[k]) < DIVERGED:
            out[k:] = np.nan
            break
    return out


def rmse(y: np.ndarray, y_sim: np.ndarray) -> float:
    if not np.all(np.isfinite(y_sim)):
        return math.inf
    return float(np.sqrt(np.mean((y - y_sim) ** 2)))


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
