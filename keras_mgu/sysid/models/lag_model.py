"""The Keras model of a lag class: measured lags in, an :class:`ArxLoopCell`'s free run out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras

from keras_mgu.sysid.models.loop_cell import ArxLoopCell, LagState
from keras_mgu.sysid.models.loop_cell_arguments import anchor_arrays, arx_kernel

__all__ = ["arx_loop_model", "lag_simulator"]


def lag_simulator(
    cell: ArxLoopCell, lag: int, encoder_units: int = 64, name: str = "lag"
) -> keras.Model:
    """The free-run model ``[u_past, y_past, u] -> y`` of an :class:`ArxLoopCell`.

    Inputs (standardised units): ``u_past`` ``(B, lag, n_inputs)`` and
    ``y_past`` ``(B, lag, n_outputs)``, the measured samples before the
    simulated ones, and ``u`` ``(B, T, n_inputs)``; output ``y`` ``(B, T,
    n_outputs)``. ``z_0`` comes from the measured samples (:class:`LagState`);
    a recurrent branch's states from an encoder, a ``tanh`` layer of
    ``encoder_units`` on the flattened ``2 lag`` samples and a linear layer
    per state. These are the inputs of :func:`~keras_mgu.sysid.build_simulator`'s
    encoder models, so :class:`~keras_mgu.sysid.Identification` simulates,
    predicts and saves both alike.
    """
    from keras_mgu.fused.layer import FusedRNN  # the layer module imports the package's cells

    if lag < max(cell.na, cell.nb - 1):
        raise ValueError(
            f"`lag` must be at least max(na, nb - 1) = {max(cell.na, cell.nb - 1)}; received {lag}."
        )
    u_past = keras.Input((lag, cell.n_inputs), name="u_past")
    y_past = keras.Input((lag, cell.n_outputs), name="y_past")
    u = keras.Input((None, cell.n_inputs), name="u")
    states = [LagState(cell.na, cell.nb, name="lag_state")([u_past, y_past])]
    if cell.branch_sizes:
        past = keras.layers.Flatten(name="past_flat")(
            keras.layers.Concatenate(name="past")([u_past, y_past])
        )
        hidden = keras.layers.Dense(encoder_units, activation="tanh", name="encoder_hidden")(past)
        states += [
            keras.layers.Dense(n, name=f"encoder_state_{j}")(hidden)
            for j, n in enumerate(cell.branch_sizes)
        ]
    y = FusedRNN(cell, return_sequences=True, name="loop")(u, initial_state=states)
    return keras.Model([u_past, y_past, u], y, name=f"{name}_simulator")


def arx_loop_model(
    linear: Any,
    branch: Any = "mlp",
    hidden: Sequence[int] = (),
    lag: int | None = None,
    bounds: tuple | None = None,
    anchor: Any = None,
    name: str = "lag",
) -> keras.Model:
    """:func:`lag_simulator` of an :class:`ArxLoopCell` that starts at ARX model ``linear``.

    ``branch`` (``"mlp"`` with ``hidden`` layers, or a recurrent cell) is the
    nonlinear part in the loop; ``lag`` defaults to ``max(na, nb - 1)``;
    ``bounds`` and ``anchor`` as :class:`ArxLoopCell` takes them (``anchor`` a
    :class:`~keras_mgu.sysid.models.arx.LinearModel`, or None).
    """
    na, nb = linear.orders
    n_outputs, n_inputs = linear.b.shape[:2]
    cell = ArxLoopCell(
        n_inputs, n_outputs, na, nb, arx_kernel(linear.a, linear.b), linear.c, branch,
        tuple(hidden), bounds=bounds, anchor=anchor_arrays(anchor, linear),
    )  # fmt: skip
    return lag_simulator(cell, lag or max(na, nb - 1), name=name)
