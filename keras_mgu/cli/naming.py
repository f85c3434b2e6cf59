"""What ``keras-mgu identify`` names its outputs after: the model class and cell kept.

A folder and a ``results.json`` entry per model kept, named by
:func:`model_name` (``network_mgu_h32_lr0.01``, ``narx_mlp_h64-64_lr0.01``,
``polynomial``), holding the model file :func:`model_file_stem` names
(``network_mgu.kmgu``). :func:`run_name` names the settings asked for
(``mgu_h32_lr0.01``), which ``results.json`` keeps as ``requested``.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "RECIPE_UNITS",
    "UsedNames",
    "kept_cell",
    "model_file_stem",
    "model_name",
    "run_name",
    "save_model_file",
]

#: Settings ``RecipeConfig`` fixes rather than derives (``units=None`` is one 32-unit layer).
RECIPE_UNITS = (32,)


def run_name(config: Any) -> str:
    """The settings asked for, as a name: ``mgu_h32_lr0.01``.

    Cell, units (stacked layers joined by ``-``: ``gru_h32-16_lr0.003``;
    ``None``: the recipe's 32) and learning rate, the settings a grid over
    models varies. The outputs are named after the model kept instead
    (:func:`model_name`); ``results.json`` keeps this one as ``requested``.
    """
    units = "-".join(str(n) for n in config.units or RECIPE_UNITS)
    cell = config.cell.rpartition(":")[2].lower()  # a user's cell by its class name
    return f"{cell}_h{units}_lr{config.learning_rate:g}"


def kept_cell(found: Any) -> str | None:
    """The cell of the kept model's network, lower case (``"mgu"``; ``"mlp"`` for NARX's);
    ``None`` for the classes without a network (polynomial, linear)."""
    run = found.runs[found.best]
    if not run.config.units:
        return None
    return run.config.cell.rpartition(":")[2].lower()


def model_file_stem(found: Any) -> str:
    """The model file's name without its suffix: the class kept and its cell,
    ``network_mgu``, ``narx_mlp``, ``polynomial``."""
    cell = kept_cell(found)
    structure = found.runs[found.best].structure
    return structure if cell is None else f"{structure}_{cell}"


def model_name(found: Any) -> str:
    """The name of the kept model's outputs (folder, ``results.json`` entry), after its class
    and cell: ``network_mgu_h32_lr0.01``, ``narx_mlp_h64-64_lr0.01``, ``polynomial``.

    A class with a network adds its units (stacked layers joined by ``-``) and
    learning rate; the polynomial and linear classes have no network to name.
    """
    run = found.runs[found.best]
    if kept_cell(found) is None:
        return model_file_stem(found)
    units = "-".join(str(n) for n in run.config.units)
    return f"{model_file_stem(found)}_h{units}_lr{run.config.learning_rate:g}"


def save_model_file(found: Any, out: str, stem: str | None = None) -> str:
    """Save ``found`` as ``<out>/<stem>.kmgu``; the path written. ``stem`` defaults to
    :func:`model_file_stem` (``network_mgu.kmgu``); a sweep names its best ``best``."""
    from keras_mgu.sysid.files.kmgu import SUFFIX

    return found.save(os.path.join(out, f"{stem or model_file_stem(found)}{SUFFIX}"))


class UsedNames:
    """The output names given in one call, so that two models never share a folder.

    ``--compare`` identifies once per cell; where two keep the same model
    class without a network (a polynomial, say), the second's name gets the
    cell it was asked for: ``polynomial_for_gru``.
    """

    def __init__(self) -> None:
        self.names: set[str] = set()

    def unique(self, name: str, kind: str) -> str:
        """``name``, or ``name_for_<kind>`` where this call gave ``name`` already."""
        if name in self.names:
            name = f"{name}_for_{kind.lower()}"
        self.names.add(name)
        return name
