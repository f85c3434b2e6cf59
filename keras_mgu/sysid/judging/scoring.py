"""Free-run simulation and the two scoring conventions of simulation benchmarks.

* ``"all"``: RMSE of ``y - y_sim`` over every sample of the record, the model
  simulating from ``u`` alone.
* ``"benchmark"`` (the rule of the ``nonlinear-benchmarks`` package): the model
  may use the input and the first ``n_initial`` (default 50) measured outputs
  to set its state, and the RMSE is taken over samples ``n_initial`` onward.
  The simulators here use no measured output at all (their initial state is
  learned on the estimation record), so this is the same simulation scored
  without its first ``n_initial`` samples.

:func:`fit_percent` is the normalised fit of the System Identification
Toolbox, ``100 (1 - |y - y_sim| / |y - mean(y)|)`` per output: 100 for a
perfect simulation, 0 for one no better than the output's mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CONVENTIONS", "equal_weights", "error_rmse", "fit_percent", "rmse", "score"]

CONVENTIONS = ("all", "benchmark")


def rmse(y: Any, y_sim: Any) -> float:
    """Root mean square of ``y - y_sim`` over all samples and channels."""
    y, y_sim = np.asarray(y, dtype=np.float64), np.asarray(y_sim, dtype=np.float64)
    if y.shape != y_sim.shape:
        raise ValueError(f"`y` {y.shape} and `y_sim` {y_sim.shape} must have the same shape.")
    if y.size == 0:
        raise ValueError("Cannot score an empty record.")
    return float(np.sqrt(np.mean((y - y_sim) ** 2)))


def score(y: Any, y_sim: Any, convention: str = "all", n_initial: int = 50) -> float:
    """RMSE of a simulation ``y_sim`` of the measured ``y`` ``(N, n_outputs)``.

    Args:
        y, y_sim: Measured and simulated outputs, same shape.
        convention: ``"all"`` (every sample) or ``"benchmark"`` (samples
            ``n_initial`` onward).
        n_initial: Samples the ``"benchmark"`` convention leaves out.
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"`convention` must be one of {CONVENTIONS}; received {convention!r}.")
    if convention == "all":
        return rmse(y, y_sim)
    n = len(np.asarray(y))
    if isinstance(n_initial, bool) or not isinstance(n_initial, (int, np.integer)):
        raise ValueError(f"`n_initial` must be an integer; received {n_initial!r}.")
    if not 0 <= n_initial < n:
        raise ValueError(
            f"`n_initial` must be in [0, N={n}) to leave samples to score; received {n_initial}."
        )
    return rmse(np.asarray(y)[n_initial:], np.asarray(y_sim)[n_initial:])


def fit_percent(y: Any, y_sim: Any) -> np.ndarray:
    """Normalised fit per output ``(n_outputs,)``, in percent.

    ``fit_i = 100 (1 - ||y_i - y_sim_i|| / ||y_i - mean(y_i)||)`` over the
    samples given (2-norms over time): 100 is a perfect simulation, 0 one no
    better than the constant mean, negative worse than that.

    Args:
        y, y_sim: Measured and simulated outputs ``(N, n_outputs)``, same shape.

    Raises:
        ValueError: different shapes, no samples, or a constant output channel
            (its fit is undefined).
    """
    y, y_sim = np.asarray(y, dtype=np.float64), np.asarray(y_sim, dtype=np.float64)
    if y.ndim == 1:
        y, y_sim = y[:, None], y_sim.reshape(-1, 1)
    if y.shape != y_sim.shape or y.ndim != 2:
        raise ValueError(
            f"`y` {y.shape} and `y_sim` {y_sim.shape} must have the same shape (N, n_outputs)."
        )
    if len(y) == 0:
        raise ValueError("Cannot score an empty record.")
    spread = np.linalg.norm(y - y.mean(axis=0), axis=0)
    if np.any(spread == 0):
        flat = [int(i) for i in np.flatnonzero(spread == 0)]
        raise ValueError(f"Output channel(s) {flat} are constant: the fit % is undefined there.")
    return 100.0 * (1.0 - np.linalg.norm(y - y_sim, axis=0) / spread)


def error_rmse(error: np.ndarray) -> float:
    """The RMSE of a simulation error; ``inf`` where it is not finite."""
    value = float(np.sqrt(np.mean(np.square(error))))
    return value if np.isfinite(value) else float("inf")


def equal_weights(*errors: np.ndarray) -> np.ndarray:
    """The errors flattened into one, each scaled so that it weighs the same in the RMSE.

    ``error_rmse(result) ** 2`` is the mean of the errors' mean squares (empty
    ones left out); an average of runs' results is the result of their average.
    """
    parts = [np.asarray(e, dtype=np.float64).reshape(-1) for e in errors]
    parts = [p for p in parts if p.size]
    total = sum(p.size for p in parts)
    return np.concatenate([p * np.sqrt(total / (len(parts) * p.size)) for p in parts])
