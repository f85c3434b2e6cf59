"""The search space of a sweep: ``RecipeConfig`` fields and their values, as KerasTuner choices."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from keras_mgu.sysid.config import RecipeConfig

__all__ = [
    "DEFAULT_SPACE",
    "check_space",
    "hyperparameters",
    "import_keras_tuner",
    "trial_settings",
]

#: The space searched when none is given.
DEFAULT_SPACE: dict[str, list] = {
    "cell": ["mgu", "gru", "lstm"],
    "units": [(16,), (32,), (64,)],
    "learning_rate": [0.003, 0.01, 0.03],
    "weight_decay": [0.01, 0.1],
}

_FIELDS = {f.name for f in dataclasses.fields(RecipeConfig)}


def import_keras_tuner():
    """``keras_tuner``; an ``ImportError`` naming the extra to install when it is missing."""
    try:
        import keras_tuner
    except ImportError as err:
        raise ImportError(
            "keras_mgu.sysid.tune needs KerasTuner (keras-tuner), which is not installed; "
            'install it with: pip install "keras-mgu[tune]"'
        ) from err
    return keras_tuner


def check_space(space: Mapping[str, Sequence[Any]]) -> dict[str, list]:
    """The search space, checked: ``{field: [values]}`` with valid ``RecipeConfig`` values.

    Raises ``ValueError`` naming the field for an unknown field, an empty or
    non-list choice, a repeated value or a value ``RecipeConfig`` refuses.
    """
    if not isinstance(space, Mapping) or not space:
        raise ValueError(
            f"`space` must be a non-empty dict of RecipeConfig fields to lists of values; "
            f"received {space!r}."
        )
    checked = {}
    for name, values in space.items():
        if name not in _FIELDS:
            raise ValueError(
                f"`space` has {name!r}, which is not a RecipeConfig field; fields: "
                f"{sorted(_FIELDS)}."
            )
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(
                f"`space[{name!r}]` must be a non-empty list of values; received {values!r}."
            )
        values = [tuple(v) if isinstance(v, list) else v for v in values]
        if len({_encode(v) for v in values}) != len(values):
            raise ValueError(f"`space[{name!r}]` repeats a value: {values!r}.")
        for value in values:
            try:
                RecipeConfig(**{name: value})
            except (TypeError, ValueError) as err:
                message = f"`space[{name!r}]` has a value RecipeConfig refuses: {err}"
                raise ValueError(message) from err
        checked[name] = values
    return checked


def _encode(value: Any) -> Any:
    """A KerasTuner choice value (int, float, str or bool) for a setting."""
    return json.dumps(value) if isinstance(value, (tuple, dict, type(None))) else value


def _choices(values: list) -> list:
    """The KerasTuner choices of ``values``: one type for all (JSON text where types mix)."""
    encoded = [_encode(v) for v in values]
    if len({type(e) for e in encoded}) > 1:
        encoded = [json.dumps(v) for v in values]
    return encoded


def hyperparameters(space: dict[str, list]):
    """KerasTuner's ``HyperParameters``: one unordered choice per field of ``space``."""
    kt = import_keras_tuner()
    hps = kt.HyperParameters()
    for name, values in space.items():
        hps.Choice(name, _choices(values), ordered=False)
    return hps


def trial_settings(values: Mapping[str, Any], space: dict[str, list]) -> dict:
    """The settings of a trial's KerasTuner values (each choice mapped back to its value)."""
    return {
        name: dict(zip(_choices(choices), choices, strict=True))[values[name]]
        for name, choices in space.items()
    }
