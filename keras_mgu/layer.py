"""The MGU recurrent layer: a :class:`keras_mgu.FusedRNN` over :class:`MGUCell`.

``MGU`` adds only its constructor (the cell's arguments, flat), properties and
``get_config``; the dispatch, masking and checks are ``FusedRNN``'s. Its cell
brings the hand-written MGU kernels (the native loops, else the backend's
fused kernel of :mod:`keras_mgu.kernels`), so ``implementation="auto"`` runs
them whenever they can serve the configuration, else the generic fused
engine, else the cell loop; all give the same numbers.
"""

from __future__ import annotations

from typing import Any

import keras

from keras_mgu.cell import _CELL_ARGS, MGUCell
from keras_mgu.checks import check_implementation
from keras_mgu.fused.layer import FusedRNN


@keras.saving.register_keras_serializable(package="keras_mgu")
class MGU(FusedRNN):
    """Minimal Gated Unit layer (Zhou et al., 2016).

    Equations, for input ``x_t`` of ``D`` features and state ``h`` of ``H``
    units (``W``: ``kernel`` ``(D, 2H)``, ``U``: ``recurrent_kernel``
    ``(H, 2H)``, ``b``: ``bias`` ``(2H,)``; forget gate first, candidate
    second)::

        f_t = recurrent_activation(x_t W[:, :H] + h_{t-1} U[:, :H] + b[:H])
        c_t = activation(x_t W[:, H:] + (f_t * h_{t-1}) U[:, H:] + b[H:])
        h_t = (1 - f_t) * h_{t-1} + f_t * c_t

    Args:
        units: Positive integer, the state size ``H``.
        activation, recurrent_activation, use_bias, kernel_initializer,
        recurrent_initializer, bias_initializer, unit_forget_bias,
        kernel_regularizer, recurrent_regularizer, bias_regularizer,
        kernel_constraint, recurrent_constraint, bias_constraint, dropout,
        recurrent_dropout, seed: As in :class:`keras_mgu.MGUCell`.
        activity_regularizer: Regularizer on the layer output.
        return_sequences: Return the whole output sequence ``(B, T, H)``
            instead of the last output ``(B, H)``.
        return_state: Also return the final state ``(B, H)``.
        go_backwards: Process the sequence backwards; the returned sequence
            is then in reversed time order, as in Keras.
        stateful: Carry the final state of batch ``i`` over as the initial
            state of batch ``i`` in the next call (``reset_state()`` clears it).
        unroll: Unroll the cell loop (cell path only).
        implementation: ``"auto"`` (default), ``"fused"`` or ``"cell"``, as
            in :class:`keras_mgu.FusedRNN`.
        zero_output_for_mask: (keyword of ``keras.layers.RNN``) Emit zeros at
            masked steps (leading ones included) instead of the carried
            state; the state is carried all the same. Every path serves it;
            ``keras.layers.Bidirectional`` sets it to ``return_sequences``.

    Call arguments:
        sequences: ``(batch, steps, features)`` tensor.
        initial_state: Optional ``(batch, units)`` tensor or list of one.
        mask: Optional ``(batch, steps)`` boolean tensor; masked steps carry
            the state forward and emit it (before the first real step: the
            initial state).
        training: Whether dropout is active.
    """

    def __init__(
        self,
        units: int,
        activation: Any = "tanh",
        recurrent_activation: Any = "sigmoid",
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        unit_forget_bias: bool = True,
        kernel_regularizer: Any = None,
        recurrent_regularizer: Any = None,
        bias_regularizer: Any = None,
        activity_regularizer: Any = None,
        kernel_constraint: Any = None,
        recurrent_constraint: Any = None,
        bias_constraint: Any = None,
        dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        seed: int | None = None,
        return_sequences: bool = False,
        return_state: bool = False,
        go_backwards: bool = False,
        stateful: bool = False,
        unroll: bool = False,
        implementation: str = "auto",
        **kwargs: Any,
    ) -> None:
        check_implementation(implementation)
        cell = MGUCell(
            units,
            activation=activation,
            recurrent_activation=recurrent_activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            unit_forget_bias=unit_forget_bias,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=dropout,
            recurrent_dropout=recurrent_dropout,
            seed=seed,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="mgu_cell",
        )
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            activity_regularizer=activity_regularizer,
            implementation=implementation,
            **kwargs,
        )

    # ------------------------------------------------------------- properties
    @property
    def units(self) -> int:
        return self.cell.units

    @property
    def activation(self) -> Any:
        return self.cell.activation

    @property
    def recurrent_activation(self) -> Any:
        return self.cell.recurrent_activation

    @property
    def use_bias(self) -> bool:
        return self.cell.use_bias

    @property
    def kernel_initializer(self) -> Any:
        return self.cell.kernel_initializer

    @property
    def recurrent_initializer(self) -> Any:
        return self.cell.recurrent_initializer

    @property
    def bias_initializer(self) -> Any:
        return self.cell.bias_initializer

    @property
    def unit_forget_bias(self) -> bool:
        return self.cell.unit_forget_bias

    @property
    def kernel_regularizer(self) -> Any:
        return self.cell.kernel_regularizer

    @property
    def recurrent_regularizer(self) -> Any:
        return self.cell.recurrent_regularizer

    @property
    def bias_regularizer(self) -> Any:
        return self.cell.bias_regularizer

    @property
    def kernel_constraint(self) -> Any:
        return self.cell.kernel_constraint

    @property
    def recurrent_constraint(self) -> Any:
        return self.cell.recurrent_constraint

    @property
    def bias_constraint(self) -> Any:
        return self.cell.bias_constraint

    @property
    def dropout(self) -> float:
        return self.cell.dropout

    @property
    def recurrent_dropout(self) -> float:
        return self.cell.recurrent_dropout

    @property
    def seed(self) -> int | None:
        return self.cell.seed

    # ----------------------------------------------------------------- config
    def get_config(self) -> dict:
        cell_config = self.cell.get_config()
        config = {arg: cell_config[arg] for arg in _CELL_ARGS}
        base_config = super().get_config()  # with "implementation"
        del base_config["cell"]
        return {**base_config, **config}

    @classmethod
    def from_config(cls, config: dict) -> MGU:
        return cls(**config)
