"""``FusedRNN``: the package's one sequence layer, a ``keras.layers.RNN`` with fused paths.

A call runs the first path that can serve it:

1. the cell's own hand-written kernel
   (:meth:`~keras_mgu.fused.cell.FusedCell.sequence_kernel`; for
   :class:`keras_mgu.MGUCell` the native loops, else the backend's fused
   kernel of :mod:`keras_mgu.kernels`);
2. the generic fused engine of the backend (:mod:`keras_mgu.fused.engines`)::

       p = cell.project_inputs(sequences)          # (B, T, P), once
       outputs, states = engine.run(step, p, ...)  # compiled loop over cell.step

3. the Keras cell loop.

A path that cannot serve raises ``NotImplementedError`` from static facts
(dtype, batch size, the cell's settings) and the next one runs; all give the
same numbers. ``kernel_in_use`` names the path.

Masking rule (every path, every backend): a masked step keeps every state and
emits the previous output; before the first real step, the initial state's
output part (:meth:`~keras_mgu.fused.cell.FusedCell.initial_output`). With
``zero_output_for_mask=True`` masked steps emit zeros instead.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops, tree
from keras.src import backend as keras_backend

from keras_mgu import checks
from keras_mgu.fused import engines
from keras_mgu.fused.cell import FusedCell, output_part_of
from keras_mgu.fused.step import StepFn, initial_carry, make_step

#: What ``kernel_in_use`` reports for the generic fused engine and the cell loop.
ENGINE, CELL = "engine", "cell"


@keras.saving.register_keras_serializable(package="keras_mgu")
class FusedRNN(keras.layers.RNN):
    """Recurrent layer over any cell, running the fastest path that serves it.

    Args:
        cell: A :class:`keras_mgu.FusedCell` (any other Keras cell runs the
            cell loop).
        return_sequences: Return the whole output sequence ``(B, T, O)``
            instead of the last output ``(B, O)``.
        return_state: Also return the final states.
        go_backwards: Process the sequence backwards (the returned sequence
            is then in reversed time order, as in Keras).
        stateful: Carry the final states of batch ``i`` over as the initial
            states of batch ``i`` in the next call.
        implementation: ``"auto"`` (default: the cell's own kernel, else the
            generic fused engine, else the cell loop), ``"fused"`` (one of the
            first two; an error names the reasons when neither can serve) or
            ``"cell"``.
        **kwargs: Other ``keras.layers.RNN`` arguments (``unroll``,
            ``zero_output_for_mask``, ``dtype``, ``name``...).

    Call arguments:
        sequences: ``(batch, steps, features)`` tensor (integers and booleans
            are cast to the compute dtype).
        initial_state: Optional list of ``(batch, state_size[i])`` tensors.
        mask: Optional ``(batch, steps)`` boolean tensor; see the masking rule
            in the module docstring.
        training: Whether dropout is active.
    """

    def __init__(
        self,
        cell: Any,
        return_sequences: bool = False,
        return_state: bool = False,
        go_backwards: bool = False,
        stateful: bool = False,
        implementation: str = "auto",
        **kwargs: Any,
    ) -> None:
        checks.check_implementation(implementation)
        super().__init__(
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            **kwargs,
        )
        self.implementation = implementation
        self._steps: dict = {}
        self._ran: str | None = None
        self._last_batch_size: int | None = None
        self._refuse_unservable_fused()

    # ---------------------------------------------------------------- dispatch
    def _choose(self, dtype: str, batch: int | None) -> tuple[str, list[str]]:
        """The path that runs, and why each faster one cannot (from static facts)."""
        if self.implementation == CELL:
            return CELL, ["implementation='cell'"]
        if self.unroll:
            return CELL, ["unroll=True needs the cell loop (use implementation='cell' or 'auto')"]
        reasons = []
        for check in (self._own_kernel_name, self._engine_name):
            try:
                return check(dtype, batch), reasons
            except NotImplementedError as error:
                reasons.append(str(error))
        return CELL, reasons

    def _own_kernel_name(self, dtype: str, batch: int | None) -> str:
        if not isinstance(self.cell, FusedCell):
            raise NotImplementedError(f"the {type(self.cell).__name__} has no own kernel")
        if not self.cell.own_kernel:
            raise NotImplementedError("the cell's own kernel is turned off (own_kernel=False)")
        return self.cell.sequence_kernel_name(dtype, batch)

    def _engine_name(self, dtype: str, batch: int | None) -> str:
        if not isinstance(self.cell, FusedCell):
            raise NotImplementedError(
                f"the cell is a {type(self.cell).__name__}, not a keras_mgu.FusedCell "
                "(it has no `project_inputs`/`step` to fuse)"
            )
        engines.engine_module()  # NotImplementedError on a backend without one
        if not all(isinstance(s, int) for s in _state_sizes(self.cell)):
            raise NotImplementedError(
                "the fused path needs `state_size` to be an int or a flat list of ints; "
                f"received {self.cell.state_size!r}"
            )
        reason = self.cell.fused_unsupported_reason()
        if reason:
            raise NotImplementedError(reason)
        return ENGINE

    def _refuse_unservable_fused(self, dtype: str | None = None) -> None:
        """With ``implementation="fused"``, a ValueError naming why no fused path serves."""
        if self.implementation != "fused":
            return
        dtype = dtype or keras.backend.standardize_dtype(self.compute_dtype)
        path, reasons = self._choose(dtype, self._last_batch_size)
        if path == CELL:
            raise ValueError(
                f"implementation='fused' cannot serve this layer: {'; '.join(reasons)}."
            )

    def fused_unsupported_reason(self) -> str | None:
        """Why no fused path (own kernel or engine) can run this layer, or None if one can."""
        path, reasons = self._choose(
            keras.backend.standardize_dtype(self.compute_dtype), self._last_batch_size
        )
        return "; ".join(reasons) if path == CELL else None

    @property
    def kernel_in_use(self) -> str:
        """Which code runs the time loop: the cell's kernel, ``"engine"`` or ``"cell"``.

        For :class:`keras_mgu.MGUCell` the cell's kernel is ``"native"`` (the
        compiled loops of :mod:`keras_mgu.native`) or ``"fused"`` (the
        backend's fused kernel of :mod:`keras_mgu.kernels`); ``"engine"`` is the
        generic fused engine and ``"cell"`` the Keras cell loop. After a call,
        the path that last call traced; before, the path a call of batch 32
        would take.
        """
        if self._ran is not None:
            return self._ran
        return self._choose(keras.backend.standardize_dtype(self.compute_dtype), None)[0]

    @property
    def uses_fused_path(self) -> bool:
        """Whether calls run a fused path (the cell's own kernel or the engine)."""
        return self.kernel_in_use != CELL

    # ------------------------------------------------------------------ build
    def build(self, sequences_shape: tuple, initial_state_shape: Any = None) -> None:
        checks.check_sequences_shape(sequences_shape, type(self).__name__)
        self._built_features = tuple(sequences_shape)[-1]
        super().build(sequences_shape, initial_state_shape)

    def call(
        self,
        sequences: Any,
        initial_state: Any = None,
        mask: Any = None,
        training: bool = False,
    ) -> Any:
        name = type(self).__name__
        built = getattr(self, "_built_features", None)
        checks.check_sequences_shape(sequences.shape, name, built_features=built)
        dtype = keras.backend.standardize_dtype(sequences.dtype)
        checks.check_real_dtype(dtype, name)
        if not keras.backend.is_float_dtype(dtype):
            sequences = ops.cast(sequences, self.compute_dtype)
        if isinstance(sequences.shape[0], int):
            self._last_batch_size = sequences.shape[0]
        if mask is not None and not isinstance(mask, (list, tuple)):
            mask = ops.convert_to_tensor(mask)
            checks.check_mask_shape(mask.shape, sequences.shape, name)
        if initial_state is not None:
            sizes = _state_sizes(self.cell)
            checks.check_initial_state(initial_state, sequences.shape, sizes, name)
        return super().call(sequences, mask=mask, training=training, initial_state=initial_state)

    # ------------------------------------------------------------------- loop
    def inner_loop(self, sequences: Any, initial_state: Any, mask: Any, training: bool = False):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        mask = None if mask is None else ops.cast(mask, "bool")
        states = (
            list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
        )
        dtype = keras.backend.standardize_dtype(sequences.dtype)
        self._refuse_unservable_fused(dtype)
        batch = sequences.shape[0] if isinstance(sequences.shape[0], int) else None
        path, _ = self._choose(dtype, batch)
        result = None
        if path not in (ENGINE, CELL):
            try:
                outputs, final, path = self.cell.sequence_kernel(
                    sequences, states, mask, go_backwards=self.go_backwards, training=training
                )
                result = outputs[:, -1], outputs, list(final)
            except NotImplementedError:
                path = self._engine_or_cell(dtype, batch)
        if result is None and path == ENGINE:
            result = self._engine_loop(sequences, states, mask)
        if result is None:
            path, result = CELL, self._cell_loop(sequences, states, mask, training)
        self._ran = path
        return self._zero_masked_outputs(result, mask)

    def _engine_or_cell(self, dtype: str, batch: int | None) -> str:
        try:
            return self._engine_name(dtype, batch)
        except NotImplementedError:
            return CELL

    def _engine_loop(self, sequences: Any, states: list, mask: Any) -> tuple:
        """``(last_output, outputs, final_states)`` from the backend's generic engine."""
        engine = engines.engine_module()
        hoist = getattr(engine, "HOIST_PROJECTION", True)
        if hoist == "auto":
            hoist = engine.hoist_projection(self.cell)
        projected = self.cell.project_inputs(sequences) if hoist else sequences
        masked = mask is not None
        carry = initial_carry(states, self._initial_output(states), masked)
        weights = [ops.convert_to_tensor(v.value) for v in self.cell.variables]
        outputs, final = engine.run(
            self._step_function(masked, project=not hoist),
            projected,
            carry,
            weights,
            mask,
            go_backwards=self.go_backwards,
        )
        final_states = final[len(final) - len(states) :]
        return outputs[:, -1], outputs, final_states

    def _step_function(self, masked: bool, project: bool = False) -> StepFn:
        """The cell's pure step for this setting (built once, so engines can cache it)."""
        key = (masked, project)
        if key not in self._steps:
            self._steps[key] = make_step(self.cell, masked, project)
        return self._steps[key]

    def _cell_loop(self, sequences: Any, states: list, mask: Any, training: bool) -> tuple:
        """The Keras cell loop, the previous output carried as a first state when masked.

        Keras's masked loop keeps that state through masked steps, so every
        backend emits it there (the JAX loop emits the first state; the
        TensorFlow and PyTorch loops the previous output, zeros before the
        first real step, which :meth:`_emit_initial_output_first` replaces).
        """
        cell_kwargs = {}
        if isinstance(self.cell, keras.layers.Layer) and self.cell._call_has_training_arg:
            cell_kwargs["training"] = training
        masked = mask is not None

        def step(inputs: Any, carry: list) -> tuple:
            if keras.backend.backend() == "torch" and self.stateful:
                carry = tree.map_structure(ops.copy, carry)  # keep autograd's saved tensors
            cell_states = list(carry[1:]) if masked else list(carry)
            output, new_states = self.cell(inputs, cell_states, **cell_kwargs)
            if not tree.is_nested(new_states):
                new_states = [new_states]
            return output, ([output, *new_states] if masked else list(new_states))

        initial_output = self._initial_output(states) if masked else None
        last_output, outputs, final = keras_backend.rnn(
            step,
            sequences,
            [initial_output, *states] if masked else states,
            go_backwards=self.go_backwards,
            mask=mask,
            unroll=self.unroll,
            input_length=sequences.shape[1],
            zero_output_for_mask=False,
            return_all_outputs=self.return_sequences,
        )
        if not masked:
            return last_output, outputs, final
        result = (last_output, outputs, list(final[1:]))
        return self._emit_initial_output_first(result, initial_output, mask)

    def _emit_initial_output_first(self, result: tuple, initial_output: Any, mask: Any) -> tuple:
        """Masked steps before the first real one emit ``initial_output`` ``(B, O)``."""
        last_output, outputs, states = result
        if self.go_backwards:
            mask = ops.flip(mask, axis=1)
        initial_output = ops.cast(initial_output, last_output.dtype)
        seen_any = ops.expand_dims(ops.any(mask, axis=1), -1)
        last_output = ops.where(seen_any, last_output, initial_output)
        if self.return_sequences:
            seen = ops.expand_dims(ops.cumsum(ops.cast(mask, "int32"), axis=1) > 0, -1)
            outputs = ops.where(seen, outputs, ops.expand_dims(initial_output, 1))
        return last_output, outputs, states

    def _initial_output(self, states: list) -> Any:
        """What masked steps before the first real one emit (see the masking rule)."""
        if isinstance(self.cell, FusedCell):
            return self.cell.initial_output(states)
        return output_part_of(states, getattr(self.cell, "output_size", None), self.compute_dtype)

    def _zero_masked_outputs(self, result: tuple, mask: Any) -> tuple:
        """With ``zero_output_for_mask``, emit zeros at every masked step.

        ``outputs`` ``(B, T, O)`` (processing order) become ``m_t * y_t`` and the
        last output is that of the last processed step, zero if it is masked,
        as in Keras's recurrent layers. The states are carried through masked
        steps all the same.
        """
        if not self.zero_output_for_mask or mask is None:
            return result
        last_output, outputs, states = result
        if self.go_backwards:
            mask = ops.flip(mask, axis=1)
        last_output = ops.where(mask[:, -1:], last_output, ops.zeros_like(last_output))
        if self.return_sequences:
            outputs = ops.where(ops.expand_dims(mask, -1), outputs, ops.zeros_like(outputs))
        return last_output, outputs, states

    # ----------------------------------------------------------------- config
    def get_config(self) -> dict:
        return {**super().get_config(), "implementation": self.implementation}


def _state_sizes(cell: Any) -> list:
    sizes = cell.state_size
    return list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]
