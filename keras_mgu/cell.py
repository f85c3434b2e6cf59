"""The Minimal Gated Unit cell: one time step of the recurrence.

For input ``x_t`` (``D`` features) and state ``h_{t-1}`` (``H`` units), with
``kernel`` ``W`` of shape ``(D, 2H)``, ``recurrent_kernel`` ``U`` of shape
``(H, 2H)`` and ``bias`` ``b`` of shape ``(2H,)``::

    f_t = recurrent_activation(x_t W[:, :H] + h_{t-1} U[:, :H] + b[:H])
    c_t = activation(x_t W[:, H:] + (f_t * h_{t-1}) U[:, H:] + b[H:])
    h_t = (1 - f_t) * h_{t-1} + f_t * c_t

The first ``H`` columns of every weight belong to the forget gate ``f``, the
last ``H`` to the candidate ``c``. The output and the new state are ``h_t``.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import activations, constraints, initializers, ops, regularizers
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell

from keras_mgu import checks, kernels
from keras_mgu.fused.cell import FusedCell

#: Keras's activation functions by their name (others are named by ``activations.serialize``).
_BUILT_IN_ACTIVATIONS = {
    fn.__name__: fn
    for fn in vars(activations).values()
    if getattr(fn, "__module__", None) == "keras.src.activations.activations"
}

_CELL_ARGS = (
    "units",
    "activation",
    "recurrent_activation",
    "use_bias",
    "kernel_initializer",
    "recurrent_initializer",
    "bias_initializer",
    "unit_forget_bias",
    "kernel_regularizer",
    "recurrent_regularizer",
    "bias_regularizer",
    "kernel_constraint",
    "recurrent_constraint",
    "bias_constraint",
    "dropout",
    "recurrent_dropout",
    "seed",
)


def activation_name(fn: Any) -> str | None:
    """The registered name of an activation function, or None for a custom callable.

    Keras's own activations are named by their function's name, as
    ``keras.activations.serialize`` names them, without calling it: its
    serialisation imports TensorFlow where it is installed, seconds on another
    backend.
    """
    name = getattr(fn, "__name__", None)
    if isinstance(name, str) and _BUILT_IN_ACTIVATIONS.get(name) is fn:
        return name
    try:
        name = activations.serialize(fn)
    except Exception:  # noqa: BLE001 - any unserializable callable is "custom"
        return None
    return name if isinstance(name, str) else None


def _check_units(units: Any) -> int:
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise ValueError(
            "`units` must be a positive integer (the size of the hidden state); "
            f"received units={units!r}."
        )
    return units


def _check_rate(name: str, value: Any) -> float:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"`{name}` must be a float in [0, 1]; received {name}={value!r}.")
    return rate


@keras.saving.register_keras_serializable(package="keras_mgu")
class MGUCell(FusedCell, DropoutRNNCell):
    """Cell class for the Minimal Gated Unit (Zhou et al., 2016).

    A :class:`keras_mgu.FusedCell` with its own hand-written sequence
    kernels (:mod:`keras_mgu.kernels`, the native loops of
    :mod:`keras_mgu.native`): :class:`keras_mgu.FusedRNN` (and
    :class:`keras_mgu.MGU`, which builds one) runs them where they serve,
    else the generic fused engine, else the cell loop. It also runs in a plain
    ``keras.layers.RNN`` (alone or stacked in a list).

    Args:
        units: Positive integer, dimensionality ``H`` of the state and output.
        activation: Activation of the candidate ``c_t``. Default ``"tanh"``.
        recurrent_activation: Activation of the forget gate ``f_t``.
            Default ``"sigmoid"``.
        use_bias: Whether the cell uses the bias vector ``b``.
        kernel_initializer: Initializer of ``kernel`` ``(D, 2H)``.
        recurrent_initializer: Initializer of ``recurrent_kernel`` ``(H, 2H)``.
        bias_initializer: Initializer of ``bias`` ``(2H,)``.
        unit_forget_bias: If True, add 1.0 to the forget-gate half of the bias
            at initialisation (forces ``bias_initializer="zeros"`` semantics
            plus one on ``b[:H]`` when the initializer is zeros).
        kernel_regularizer, recurrent_regularizer, bias_regularizer:
            Regularizers of the three weights.
        kernel_constraint, recurrent_constraint, bias_constraint:
            Constraints of the three weights.
        dropout: Fraction of the inputs ``x_t`` to drop (training only).
        recurrent_dropout: Fraction of the state ``h_{t-1}`` entering the
            recurrent matmuls to drop (training only).
        seed: Random seed for dropout.

    Call arguments:
        inputs: ``(batch, D)`` tensor, the input at one step.
        states: ``[(batch, H)]``, the previous state.
        training: Whether dropout is active.

    Returns:
        ``(h_t, [h_t])``, both ``(batch, H)``.
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
        kernel_constraint: Any = None,
        recurrent_constraint: Any = None,
        bias_constraint: Any = None,
        dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units = _check_units(units)
        self.activation = activations.get(activation)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.recurrent_constraint = constraints.get(recurrent_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.dropout = _check_rate("dropout", dropout)
        self.recurrent_dropout = _check_rate("recurrent_dropout", recurrent_dropout)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed=seed)
        self.state_size = self.units
        self.output_size = self.units
        if not keras.backend.is_float_dtype(self.dtype_policy.variable_dtype):
            raise ValueError(
                "MGU needs a floating dtype policy (e.g. 'float32', 'mixed_float16'); "
                f"received dtype={self.dtype_policy.name!r}."
            )

    def build(self, input_shape: tuple) -> None:
        if len(input_shape) != 2:
            raise ValueError(
                "MGUCell expects step inputs of shape (batch, features); "
                f"received shape {tuple(input_shape)}."
            )
        features = input_shape[-1]
        if features is None:
            raise ValueError("MGUCell needs a known feature size (last axis of the inputs).")
        self.kernel = self.add_weight(
            shape=(features, 2 * self.units),
            name="kernel",
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.units, 2 * self.units),
            name="recurrent_kernel",
            initializer=self.recurrent_initializer,
            regularizer=self.recurrent_regularizer,
            constraint=self.recurrent_constraint,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                shape=(2 * self.units,),
                name="bias",
                initializer=self._bias_initializer_with_forget(),
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )

    def _bias_initializer_with_forget(self) -> Any:
        if not self.unit_forget_bias:
            return self.bias_initializer
        base = self.bias_initializer
        units = self.units

        def initializer(shape, dtype=None):
            forget = ops.add(base((units,), dtype=dtype), ops.ones((units,), dtype=dtype))
            return ops.concatenate([forget, base((units,), dtype=dtype)])

        return initializer

    def call(self, inputs: Any, states: Any, training: bool = False) -> tuple:
        h_tm1 = states[0] if isinstance(states, (list, tuple)) else states
        if training and 0.0 < self.dropout < 1.0:
            inputs = inputs * self.get_dropout_mask(inputs)
        h_rec = h_tm1
        if training and 0.0 < self.recurrent_dropout < 1.0:
            h_rec = h_tm1 * self.get_recurrent_dropout_mask(h_tm1)
        h = self._update(self.project_inputs(inputs), h_tm1, h_rec)
        return h, [h]

    # ------------------------------------------------------- FusedCell parts
    def project_inputs(self, inputs: Any) -> Any:
        """``x W + b``: ``(..., D)`` to ``(..., 2H)``, forget-gate columns first."""
        projected = ops.matmul(inputs, self.kernel)
        return projected + self.bias if self.use_bias else projected

    def step(self, projected: Any, states: list) -> tuple[Any, list]:
        """One MGU update from ``x_t W + b`` ``(batch, 2H)`` and ``[h_{t-1}]``: ``(h_t, [h_t])``."""
        h_tm1 = states[0]
        h = self._update(projected, h_tm1, h_tm1)
        return h, [h]

    def _update(self, x_proj: Any, h_tm1: Any, h_rec: Any) -> Any:
        """``h_t`` from the projected input ``(batch, 2H)`` and the state ``(batch, H)``.

        ``h_rec`` is the state as seen by the recurrent matmuls (``h_tm1`` with
        recurrent dropout applied).
        """
        units = self.units
        u_f = self.recurrent_kernel[:, :units]
        u_c = self.recurrent_kernel[:, units:]
        f = self.recurrent_activation(x_proj[:, :units] + ops.matmul(h_rec, u_f))
        c = self.activation(x_proj[:, units:] + ops.matmul(f * h_rec, u_c))
        return h_tm1 + f * (c - h_tm1)

    def fused_unsupported_reason(self) -> str | None:
        """Why the generic fused engine cannot run this cell (dropout), or None.

        ``call`` is ``step(project_inputs(x), states)`` whenever no dropout is
        active, so only dropout keeps the engine out.
        """
        for rate in ("dropout", "recurrent_dropout"):
            if getattr(self, rate) > 0.0:
                return f"{rate} > 0 draws random numbers at every step"
        return None

    # ------------------------------------------------- the hand-written kernel
    def sequence_kernel_name(self, dtype: str, batch: int | None) -> str:
        """``"native"`` or ``"fused"``; NotImplementedError where the MGU kernels cannot serve."""
        if self.recurrent_dropout > 0:
            raise NotImplementedError(
                "recurrent_dropout > 0 needs a fresh mask inside the recurrence "
                "(use implementation='cell' or 'auto')"
            )
        for arg in ("activation", "recurrent_activation"):
            name = activation_name(getattr(self, arg))
            if name not in checks.KERNEL_ACTIVATIONS:
                raise NotImplementedError(
                    f"{arg}={name or getattr(self, arg)!r} is not one of the MGU kernels' "
                    f"activations {checks.KERNEL_ACTIVATIONS}"
                )
        return kernels.kernel_name(dtype, self.units, batch)

    def sequence_kernel(
        self, sequences: Any, states: list, mask: Any, *, go_backwards: bool, training: bool
    ) -> tuple[Any, list, str]:
        """The MGU kernels of :mod:`keras_mgu.kernels` over ``(B, T, D)``; see :class:`FusedCell`.

        Input dropout draws one mask per sequence, as the cell loop does.
        """
        dtype = keras.backend.standardize_dtype(sequences.dtype)
        batch = sequences.shape[0] if isinstance(sequences.shape[0], int) else None
        name = self.sequence_kernel_name(dtype, batch)
        if training and 0.0 < self.dropout < 1.0:
            step_mask = self.get_dropout_mask(sequences[:, 0, :])
            sequences = sequences * ops.expand_dims(step_mask, axis=1)
        bias = ops.cast(self.bias, dtype) if self.use_bias else None
        outputs, h_last = kernels.mgu_sequence(
            sequences,
            ops.cast(states[0], dtype),
            ops.cast(self.kernel, dtype),
            ops.cast(self.recurrent_kernel, dtype),
            bias,
            mask,
            activation=activation_name(self.activation),
            recurrent_activation=activation_name(self.recurrent_activation),
            go_backwards=go_backwards,
        )
        return outputs, [h_last], name

    def get_config(self) -> dict:
        config = {
            "units": self.units,
            "activation": activations.serialize(self.activation),
            "recurrent_activation": activations.serialize(self.recurrent_activation),
            "use_bias": self.use_bias,
            "kernel_initializer": initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": initializers.serialize(self.recurrent_initializer),
            "bias_initializer": initializers.serialize(self.bias_initializer),
            "unit_forget_bias": self.unit_forget_bias,
            "kernel_regularizer": regularizers.serialize(self.kernel_regularizer),
            "recurrent_regularizer": regularizers.serialize(self.recurrent_regularizer),
            "bias_regularizer": regularizers.serialize(self.bias_regularizer),
            "kernel_constraint": constraints.serialize(self.kernel_constraint),
            "recurrent_constraint": constraints.serialize(self.recurrent_constraint),
            "bias_constraint": constraints.serialize(self.bias_constraint),
            "dropout": self.dropout,
            "recurrent_dropout": self.recurrent_dropout,
            "seed": self.seed,
        }
        return {**super().get_config(), **config}

    def get_initial_state(self, batch_size: Any = None) -> list:
        return [ops.zeros((batch_size, self.units), dtype=self.compute_dtype)]
