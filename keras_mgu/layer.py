"""The MGU recurrent layer: a ``keras.layers.RNN`` over :class:`MGUCell`.

``MGU`` runs a whole ``(batch, steps, features)`` sequence either through the
plain Keras cell loop (``implementation="cell"``) or through a fused,
backend-specific sequence kernel (``implementation="fused"``, see
:mod:`keras_mgu.kernels`) that hoists the input projection out of the time
loop and uses a hand-written backward pass. ``"auto"`` uses the fused kernel
whenever it can serve the configuration and the cell loop otherwise; both give
the same numbers.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import activations, ops

from keras_mgu import kernels
from keras_mgu.cell import _CELL_ARGS, MGUCell

IMPLEMENTATIONS = ("auto", "fused", "cell")


def check_implementation(implementation: Any) -> None:
    """Refuse an ``implementation`` other than ``"auto"``, ``"fused"`` or ``"cell"``."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(
            f"`implementation` must be one of {IMPLEMENTATIONS}; "
            f"received implementation={implementation!r}."
        )


def _activation_name(fn: Any) -> str | None:
    try:
        name = activations.serialize(fn)
    except Exception:  # noqa: BLE001 - any unserializable callable is "custom"
        return None
    return name if isinstance(name, str) else None


@keras.saving.register_keras_serializable(package="keras_mgu")
class MGU(keras.layers.RNN):
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
        implementation: ``"auto"`` (default), ``"fused"`` or ``"cell"``.
        zero_output_for_mask: (keyword of ``keras.layers.RNN``) Emit zeros at
            masked steps (leading ones included) instead of the carried
            state; the state is carried all the same. Both paths serve it;
            ``keras.layers.Bidirectional`` sets it to ``return_sequences``.

    Call arguments:
        sequences: ``(batch, steps, features)`` tensor.
        initial_state: Optional ``(batch, units)`` tensor or list of one.
        mask: Optional ``(batch, steps)`` boolean tensor; masked steps carry
            the state forward.
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
            **kwargs,
        )
        self.implementation = implementation
        reason = self.fused_unsupported_reason()
        if implementation == "fused" and reason:
            raise ValueError(f"implementation='fused' cannot serve this layer: {reason}.")

    # ------------------------------------------------------------------ paths
    def fused_unsupported_reason(self) -> str | None:
        """Why the fused kernel cannot run this configuration, or None if it can."""
        if self.unroll:
            return "unroll=True needs the cell loop (use implementation='cell' or 'auto')"
        if self.cell.recurrent_dropout > 0:
            return (
                "recurrent_dropout > 0 needs a fresh mask inside the recurrence "
                "(use implementation='cell' or 'auto')"
            )
        for arg in ("activation", "recurrent_activation"):
            name = _activation_name(getattr(self.cell, arg))
            if name not in kernels.FUSED_ACTIVATIONS:
                return (
                    f"{arg}={name or getattr(self.cell, arg)!r} is not one of the fused "
                    f"activations {kernels.FUSED_ACTIVATIONS}"
                )
        return None

    @property
    def uses_fused_path(self) -> bool:
        """Whether calls run the fused sequence kernel (else the cell loop)."""
        reason = self.fused_unsupported_reason()
        if self.implementation == "fused" and reason:
            # Attributes set after construction (e.g. by a wrapper) can make
            # the requested fused path impossible: say so rather than fall back.
            raise ValueError(f"implementation='fused' cannot serve this layer: {reason}.")
        if self.implementation == "cell" or reason:
            return False
        if self.implementation == "fused":
            return True
        try:
            module = kernels.backend_module()
        except (NotImplementedError, ImportError):
            return False
        return bool(getattr(module, "AVAILABLE", False))

    @property
    def kernel_in_use(self) -> str:
        """Which code runs the time loop: ``"native"``, ``"fused"`` or ``"cell"``.

        ``"native"``: the compiled loops of :mod:`keras_mgu.native`;
        ``"fused"``: the backend's fused kernel (:mod:`keras_mgu.kernels`);
        ``"cell"``: the Keras cell loop. The native loops run where a step's
        recurrent product (``batch * units**2``) is small enough for them to
        be faster; the answer is for the batch size of the last call (32
        before the first). On TensorFlow, a function compiled with XLA
        (``jit_compile=True``) runs the fused kernel instead of the native
        loops.
        """
        if not self.uses_fused_path:
            return "cell"
        module = kernels.backend_module()
        serves = getattr(module, "native_serves", None)
        dtype = keras.backend.standardize_dtype(self.compute_dtype)
        batch = getattr(self, "_last_batch_size", None)
        return "native" if serves is not None and serves(dtype, self.units, batch) else "fused"

    # ------------------------------------------------------------------ build
    def build(self, sequences_shape: tuple, initial_state_shape: Any = None) -> None:
        _check_sequences_shape(sequences_shape)
        super().build(sequences_shape, initial_state_shape)

    def call(
        self,
        sequences: Any,
        initial_state: Any = None,
        mask: Any = None,
        training: bool = False,
    ) -> Any:
        _check_sequences_shape(sequences.shape, built_features=self.cell.kernel.shape[0])
        if isinstance(sequences.shape[0], int):
            self._last_batch_size = sequences.shape[0]
        sequences = self._as_real_floats(sequences)
        if mask is not None and not isinstance(mask, (list, tuple)):
            mask = ops.convert_to_tensor(mask)
            _check_mask_shape(mask.shape, sequences.shape)
        if initial_state is not None:
            _check_initial_state(initial_state, sequences.shape, self.units)
        return super().call(sequences, mask=mask, training=training, initial_state=initial_state)

    def _as_real_floats(self, sequences: Any) -> Any:
        """Integer and boolean inputs are cast to the compute dtype; complex ones refused."""
        dtype = keras.backend.standardize_dtype(sequences.dtype)
        if "complex" in dtype:
            raise TypeError(
                f"MGU expects real inputs (floating, integer or bool); received dtype {dtype}. "
                "It computes with floating values."
            )
        if not keras.backend.is_float_dtype(dtype):
            sequences = ops.cast(sequences, self.compute_dtype)
        return sequences

    def inner_loop(self, sequences: Any, initial_state: Any, mask: Any, training: bool = False):
        h0 = initial_state[0] if isinstance(initial_state, (list, tuple)) else initial_state
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        if not self.uses_fused_path:
            result = super().inner_loop(sequences, initial_state, mask=mask, training=training)
            result = self._carry_state_through_leading_masked_steps(result, h0, mask)
        else:
            result = self._fused_inner_loop(sequences, h0, mask, training)
        return self._zero_masked_outputs(result, mask)

    def _fused_inner_loop(self, sequences: Any, h0: Any, mask: Any, training: bool) -> tuple:
        """``(last_output, outputs, [state])`` from the backend's fused kernel."""
        if training and 0.0 < self.cell.dropout < 1.0:
            step_mask = self.cell.get_dropout_mask(sequences[:, 0, :])
            sequences = sequences * ops.expand_dims(step_mask, axis=1)
        dtype = sequences.dtype
        bias = ops.cast(self.cell.bias, dtype) if self.cell.use_bias else None
        outputs, h_last = kernels.mgu_sequence(
            sequences,
            ops.cast(h0, dtype),
            ops.cast(self.cell.kernel, dtype),
            ops.cast(self.cell.recurrent_kernel, dtype),
            bias,
            None if mask is None else ops.cast(mask, "bool"),
            activation=_activation_name(self.cell.activation),
            recurrent_activation=_activation_name(self.cell.recurrent_activation),
            go_backwards=self.go_backwards,
        )
        return h_last, outputs, [h_last]

    def _zero_masked_outputs(self, result: tuple, mask: Any) -> tuple:
        """With ``zero_output_for_mask``, emit zeros at every masked step.

        ``outputs`` ``(B, T, H)`` (processing order) become ``m_t * h_t`` and the
        last output is that of the last processed step, zero if it is masked,
        as in Keras's recurrent layers. The state is carried through masked
        steps all the same, so the returned state is unchanged.
        """
        if not self.zero_output_for_mask or mask is None:
            return result
        last_output, outputs, states = result
        mask = ops.cast(mask, "bool")
        if self.go_backwards:
            mask = ops.flip(mask, axis=1)
        last_output = ops.where(mask[:, -1:], last_output, ops.zeros_like(last_output))
        if self.return_sequences:
            outputs = ops.where(ops.expand_dims(mask, -1), outputs, ops.zeros_like(outputs))
        return last_output, outputs, states

    def _carry_state_through_leading_masked_steps(self, result: tuple, h0: Any, mask: Any):
        """Make masked steps before the first real one emit the initial state.

        Some backends' cell loops emit zeros there instead of the carried
        state; for an MGU the output is the state, so it is the initial state.
        """
        if mask is None:
            return result
        last_output, outputs, states = result
        mask = ops.cast(mask, "int32")
        if self.go_backwards:
            mask = ops.flip(mask, axis=1)
        h0 = ops.cast(h0, last_output.dtype)
        seen_any = ops.expand_dims(ops.any(ops.cast(mask, "bool"), axis=1), -1)
        last_output = ops.where(seen_any, last_output, h0)
        if self.return_sequences:
            seen = ops.expand_dims(ops.cumsum(mask, axis=1) > 0, -1)
            outputs = ops.where(seen, outputs, ops.expand_dims(h0, 1))
        return last_output, outputs, states

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
        config["implementation"] = self.implementation
        base_config = super().get_config()
        del base_config["cell"]
        return {**base_config, **config}

    @classmethod
    def from_config(cls, config: dict) -> MGU:
        return cls(**config)


def _check_sequences_shape(shape: Any, built_features: int | None = None) -> None:
    shape = tuple(shape)
    if len(shape) != 3:
        raise ValueError(
            "MGU expects inputs of rank 3, (batch, steps, features); "
            f"received an input of rank {len(shape)} with shape {shape}."
        )
    if shape[1] == 0:
        raise ValueError(f"MGU needs at least one time step; received shape {shape}.")
    if built_features is not None and shape[-1] is not None and shape[-1] != built_features:
        raise ValueError(
            f"MGU was built for {built_features} input features but received "
            f"{shape[-1]} (input shape {shape})."
        )


def _check_mask_shape(mask_shape: Any, sequences_shape: Any) -> None:
    mask_shape, sequences_shape = tuple(mask_shape), tuple(sequences_shape)
    expected = sequences_shape[:2]
    if len(mask_shape) != 2 or any(
        m is not None and s is not None and m != s for m, s in zip(mask_shape, expected)
    ):
        raise ValueError(
            f"MGU expects a mask of shape (batch, steps) = {expected}; received a mask of "
            f"shape {mask_shape}."
        )


def _check_initial_state(initial_state: Any, sequences_shape: Any, units: int) -> None:
    states = initial_state if isinstance(initial_state, (list, tuple)) else [initial_state]
    batch = tuple(sequences_shape)[0]
    expected = (batch, units)
    if len(states) != 1:
        raise ValueError(
            f"MGU has one state; `initial_state` must be one tensor of shape (batch, units) = "
            f"{expected}; received {len(states)} tensors."
        )
    shape = tuple(ops.shape(states[0]))
    if len(shape) != 2 or shape[-1] != units or (
        batch is not None and shape[0] is not None and shape[0] != batch
    ):
        raise ValueError(
            f"`initial_state` must have shape (batch, units) = {expected}; received a state of "
            f"shape {shape}."
        )
