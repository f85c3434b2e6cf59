"""The linear-loop class: a recurrent cell inside the loop of the ARX model, starting at zero.

::

    z_t = [y_{t-1}, ..., y_{t-na}, u_{t-1}, ..., u_{t-nb+1}]    the linear model's state
    h_t = cell([z_t, u_t], h_{t-1})                               MGU (default), GRU, LSTM, any cell
    y_t = [z_t, u_t] W + c + h_t P                                W, c: the ARX; P = 0 at the start
    z_{t+1} = shift(z_t, y_t, u_t)

The linear state is a (non-minimal) state-space realisation of the ARX model
fitted first, and the cell's contribution to its update, ``P``, starts at
zero: a fresh model simulates exactly as the linear model does. A window
starts from the linear state its measured samples give and the cell's state
from an encoder of the same samples
(:func:`~keras_mgu.sysid.models.lag_model.lag_simulator`); it trains as
:func:`~keras_mgu.sysid.training.lag_run.train_lag_model` says. The loop is an
:class:`~keras_mgu.sysid.models.loop_cell.ArxLoopCell`, run by
:class:`keras_mgu.FusedRNN` on the fused path of every backend.
"""

from __future__ import annotations

import importlib
from typing import Any

import keras

from keras_mgu._quiet import set_random_seed
from keras_mgu.cell import MGUCell
from keras_mgu.sysid.models.arx import LinearModel
from keras_mgu.sysid.models.lag_model import arx_loop_model

__all__ = ["CELLS", "build_linear_loop", "make_cell"]

#: Named cells of the loop; any other cell is given as ``"package.module:Class"``.
CELLS = {"mgu": MGUCell, "gru": keras.layers.GRUCell, "lstm": keras.layers.LSTMCell}


def make_cell(cell: Any, units: int) -> keras.layers.Layer:
    """A recurrent cell of ``units``: a name of :data:`CELLS`, ``"module:Class"``, or a class.

    A class (or ``"module:Class"``) is called as ``Class(units)`` and must
    give a recurrent cell (with ``state_size``), e.g. a user's
    :class:`keras_mgu.FusedCell`.
    """
    if isinstance(cell, str) and cell in CELLS:
        cls = CELLS[cell]
        return cls(units, unit_forget_bias=False) if cell == "mgu" else cls(units)
    if isinstance(cell, str):
        module, _, name = cell.partition(":")
        if not module or not name:
            raise ValueError(
                f"`cell` must be one of {sorted(CELLS)} or 'package.module:Class'; "
                f"received {cell!r}."
            )
        try:
            cell = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as error:
            raise ValueError(f"cannot import the cell {cell!r}: {error}") from None
    made = cell(units) if callable(cell) else None
    if not hasattr(made, "state_size"):
        raise ValueError(f"`cell` must make a recurrent cell with `state_size`; {cell!r} does not.")
    return made


def build_linear_loop(
    linear: LinearModel,
    lag: int | None = None,
    cell: Any = "mgu",
    units: int = 32,
    seed: int | None = None,
    bounds: tuple | None = None,
    anchor: LinearModel | None = None,
) -> keras.Model:
    """The linear-loop simulator ``[u_past, y_past, u] -> y`` started at ``linear``.

    Args:
        linear: The ARX model (standardised signals) it starts from.
        lag: Measured samples read before a window (default ``max(na, nb -
            1)``); the cell's encoder reads them too.
        cell: The recurrent cell (:func:`make_cell`).
        units: The cell's units.
        seed: Seeds the initialisation.
        bounds, anchor: The regressors' estimation range, outside which the
            model fades to ARX model ``anchor`` (default ``linear``), as
            :func:`~keras_mgu.sysid.models.lag_model.arx_loop_model` takes them.
    """
    if seed is not None:
        set_random_seed(seed)
    branch = make_cell(cell, units)
    return arx_loop_model(linear, branch, (), lag, bounds, anchor, name="loop")
