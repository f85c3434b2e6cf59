"""Checks of the recipe's settings: each refuses a bad value, saying what is expected."""

from __future__ import annotations

import math
from collections.abc import Mapping

from keras_mgu.callbacks.decay import LearningRateDecayPoints

__all__ = [
    "HELD_OUT_PARTS",
    "SCORE_NAMES",
    "SELECTION_RULES",
    "check_decay",
    "check_held_out",
    "check_held_out_at",
    "check_rule",
    "check_score_weights",
    "non_negative",
    "positive_int",
]

#: The rules that choose among runs (:mod:`~keras_mgu.sysid.choice.selection`).
SELECTION_RULES = ("best", "ensemble")
#: Where a held-out part of the estimation record lies: its first experiment's start, or its
#: last experiment's end (:mod:`~keras_mgu.sysid.choice.held_out`).
HELD_OUT_PARTS = ("start", "end")


def check_rule(rule: object) -> None:
    """Refuse a selection rule other than those of :data:`SELECTION_RULES`."""
    if rule not in SELECTION_RULES:
        raise ValueError(f"`selection` must be one of {SELECTION_RULES}; received {rule!r}.")


#: Names :class:`RecipeConfig.score_weights` may weigh: validation RMSE, training MSE.
SCORE_NAMES = ("val_rmse", "loss")


def positive_int(name: str, value: object, allow_none: bool = False) -> None:
    """Refuse anything but an integer >= 1 (or None, where allowed)."""
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer; received {value!r}.")


def non_negative(name: str, value: object, allow_none: bool = True) -> None:
    """Refuse anything but a number >= 0 (or None, where allowed)."""
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"`{name}` must be a number >= 0; received {value!r}.")


def check_decay(points: object, rate: object) -> tuple[float, ...]:
    """``points`` as a tuple of fractions in ``(0, 1]``; ``rate`` a positive number.

    The checks of :class:`~keras_mgu.callbacks.LearningRateDecayPoints`, which
    runs the schedule they set, each failure a ``ValueError``.
    """
    try:
        return LearningRateDecayPoints(points, rate).decay_points
    except (TypeError, ValueError) as err:
        raise ValueError(str(err)) from None


def check_score_weights(weights: object) -> dict[str, float]:
    """``weights`` as a dict of :data:`SCORE_NAMES` to finite weights ``>= 0``, one positive.

    Raises:
        ValueError: not a mapping, an unknown name, a negative or non-finite
            weight, or all weights zero.
    """
    if not isinstance(weights, Mapping) or not weights:
        raise ValueError(
            f"`score_weights` must map {' and/or '.join(SCORE_NAMES)} to weights; "
            f"received {weights!r}."
        )
    unknown = sorted(str(name) for name in weights if name not in SCORE_NAMES)
    if unknown:
        raise ValueError(
            f"`score_weights` names must be among {list(SCORE_NAMES)}; received {unknown}."
        )
    checked = {}
    for name, weight in weights.items():
        ok = isinstance(weight, (int, float)) and not isinstance(weight, bool)
        if not ok or not 0 <= weight < math.inf:
            raise ValueError(
                f"The weight of '{name}' in `score_weights` must be a number >= 0; "
                f"received {weight!r}."
            )
        checked[name] = float(weight)
    if not any(checked.values()):
        raise ValueError(f"`score_weights` needs a positive weight; received {checked}.")
    return checked


def check_held_out(fraction: object) -> float:
    """``fraction`` as a float in ``[0, 0.5]``; a ``ValueError`` that says so otherwise."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise ValueError(
            f"`held_out` must be a number in [0, 0.5] (the share of the estimation record's "
            f"first experiment held out to score the choice); received {fraction!r}."
        )
    if not 0.0 <= float(fraction) <= 0.5:
        raise ValueError(
            f"`held_out` must be in [0, 0.5] (the share of the estimation record's first "
            f"experiment held out to score the choice); received {fraction!r}."
        )
    return float(fraction)


def check_held_out_at(at: object) -> str:
    """``at``, one of :data:`HELD_OUT_PARTS`; a ``ValueError`` that says so otherwise."""
    if at not in HELD_OUT_PARTS:
        raise ValueError(
            "`held_out_at` must be 'start' (the estimation record's first experiment's start "
            f"is held out) or 'end' (its last experiment's end); received {at!r}."
        )
    return at
