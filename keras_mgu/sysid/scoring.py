"""Free-run simulation and the two scoring conventions of simulation benchmarks.

* ``"all"``: RMSE of ``y - y_sim`` over every sample of the record, the model
  simulating from ``u`` alone.
* ``"benchmark"`` (the rule of the ``nonlinear-benchmarks`` package): the model
  may use the input and the first ``n_initial`` (default 50) measured outputs
  to set its state, and the RMSE is taken over samples ``n_initial`` onward.
  The simulators here use no measured output at all (their initial state is
  learned on the estimation record), so this is the same simulation scored
  without its first ``n_initial`` samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CONVENTIONS", "rmse", "score"]

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
