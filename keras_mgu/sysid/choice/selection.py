"""Choosing among trained runs on validation: the best run, or an average of runs.

With ``K`` runs and a short validation record, the run with the lowest
validation RMSE is partly the luckiest one, and its test score can be far
from the validation score (``docs/sweeps.md`` measures this). Averaging the
simulations of several good runs trades that luck for the runs' agreement.

Rules (``RecipeConfig.selection``):

``"best"``
    The run with the lowest validation RMSE.
``"ensemble"``
    Forward selection with replacement (Caruana et al., 2004, "Ensemble
    selection from libraries of models"), on the same validation record:
    start from the best run; at each step add the run (possibly one already
    in) whose addition lowers the RMSE of the averaged simulation most; stop
    when no addition lowers it. The result is a multiset of runs, e.g.
    ``(3, 3, 0)``: the simulation ``(2 y_3 + y_0) / 3``. Its validation RMSE
    is never above the best run's.

Both work on each run's validation error ``e_k = y_sim_k - y`` (standardised
units, ``(N, n_outputs)``): the error of an average of simulations is the
average of their errors.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

import numpy as np

from keras_mgu.sysid.config_checks import SELECTION_RULES, check_rule
from keras_mgu.sysid.judging.scoring import error_rmse

__all__ = [
    "SELECTION_RULES",
    "describe_members",
    "greedy_ensemble",
    "member_weights",
    "select",
]


def _check_errors(errors: Sequence[np.ndarray]) -> list[np.ndarray]:
    errors = [np.asarray(e, dtype=np.float64) for e in errors]
    if not errors:
        raise ValueError("Selection needs at least one run's validation error.")
    shapes = {e.shape for e in errors}
    if len(shapes) != 1:
        raise ValueError(
            f"Every run's validation error must have the same shape; received {sorted(shapes)}."
        )
    return errors


def greedy_ensemble(errors: Sequence[np.ndarray], max_size: int = 64) -> tuple[int, ...]:
    """Runs whose averaged simulation minimises the validation RMSE, chosen greedily.

    Args:
        errors: Run ``k``'s validation error ``(N, n_outputs)`` (or any shape
            shared by all runs). Runs with a non-finite error are never added.
        max_size: At most this many picks (repeats counted).

    Returns:
        The picked runs in order of picking, repeats included (the weights of
        the average). The first is the best run.
    """
    errors = _check_errors(errors)
    scores = [error_rmse(e) for e in errors]
    first = int(np.argmin(scores))
    picked, total, current = [first], errors[first].copy(), scores[first]
    usable = [k for k, s in enumerate(scores) if np.isfinite(s)]
    while len(picked) < max_size and np.isfinite(current):
        m = len(picked) + 1
        trial = {k: error_rmse((total + errors[k]) / m) for k in usable}
        k = min(trial, key=trial.get)
        if not trial[k] < current * (1 - 1e-9):
            break
        picked.append(k)
        total += errors[k]
        current = trial[k]
    return tuple(picked)


def select(errors: Sequence[np.ndarray], rule: str) -> tuple[int, ...]:
    """The runs kept under ``rule`` (see the module docstring), repeats as weights."""
    check_rule(rule)
    errors = _check_errors(errors)
    if rule == "best":
        return (int(np.argmin([error_rmse(e) for e in errors])),)
    return greedy_ensemble(errors)


def member_weights(members: Sequence[int]) -> dict[int, float]:
    """Each averaged run's weight, in order of appearance: ``(3, 3, 0)`` -> ``{3: 2/3, 0: 1/3}``."""
    counts = collections.Counter(int(k) for k in members)
    return {k: c / len(members) for k, c in counts.items()}


def describe_members(members: Sequence[int], classes: Sequence[str] | None = None) -> str:
    """The selection in words, runs numbered from 1: ``"... run 4 (weight 2/3) and run 1 ..."``.

    ``classes[k]`` (optional) is run ``k``'s model class, named beside it:
    ``"run 4 (network, weight 2/3)"``.
    """
    counts = collections.Counter(int(k) for k in members)

    def run(k: int, weight: str = "") -> str:
        notes = [classes[k]] if classes is not None else []
        notes += [weight] if weight else []
        return f"run {k + 1}" + (f" ({', '.join(notes)})" if notes else "")

    if len(counts) == 1:
        return f"{run(next(iter(counts)))} alone"
    parts = [run(k, f"weight {c}/{len(members)}") for k, c in counts.items()]
    return "the weighted average of " + ", ".join(parts[:-1]) + f" and {parts[-1]}"
