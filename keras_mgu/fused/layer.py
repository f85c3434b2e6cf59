"""``FusedRNN``: a ``keras.layers.RNN`` that runs a :class:`FusedCell` fused.

With the fused path, a call is::

    p = cell.project_inputs(sequences)          # (B, T, P), once, ordinary autodiff
    outputs, states = engine.run(step, p, ...)  # compiled loop over cell.step

where the engine (:mod:`keras_mgu.fused.engines`, one per backend) runs the
loop in its fastest compiled form and takes the backward pass through time
from ``cell.step`` (an engine may instead apply ``project_inputs`` inside each
step, where that measured faster). Otherwise the plain Keras cell loop runs;
both give the same numbers.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_mgu.fused import engines
from keras_mgu.fused.cell import FusedCell
from keras_mgu.fused.step import StepFn, initial_carry, make_step
from keras_mgu.layer import check_implementation


@keras.saving.register_keras_serializable(package="keras_mgu")
class FusedRNN(keras.layers.RNN):
    """Recurrent layer over any :class:`keras_mgu.FusedCell`, with a fused fast path.

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
        implementation: ``"auto"`` (default: the fused path whenever it can
            serve the layer, else the cell loop), ``"fused"`` (an error names
            the reason when it cannot) or ``"cell"``.
        **kwargs: Other ``keras.layers.RNN`` arguments (``unroll``,
            ``zero_output_for_mask``, ``dtype``, ``name``...).

    Call arguments:
        sequences: ``(batch, steps, features)`` tensor.
        initial_state: Optional list of ``(batch, state_size[i])`` tensors.
        mask: Optional ``(batch, steps)`` boolean tensor.
        training: Passed to the cell loop (the fused path has no
            training-dependent behaviour).
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
        check_implementation(implementation)
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
        reason = self.fused_unsupported_reason()
        if implementation == "fused" and reason:
            raise ValueError(f"implementation='fused' cannot serve this layer: {reason}.")

    # ------------------------------------------------------------------ paths
    def fused_unsupported_reason(self) -> str | None:
        """Why the fused path cannot run this layer, or None if it can."""
        if not isinstance(self.cell, FusedCell):
            return (
                f"the cell is a {type(self.cell).__name__}, not a keras_mgu.FusedCell "
                "(it has no `project_inputs`/`step` to fuse)"
            )
        if self.unroll:
            return "unroll=True needs the cell loop (use implementation='cell' or 'auto')"
        if not engines.has_engine():
            return f"the {keras.backend.backend()!r} backend has no fused engine"
        sizes = self.cell.state_size
        sizes = sizes if isinstance(sizes, (list, tuple)) else [sizes]
        if not all(isinstance(s, int) for s in sizes):
            return (
                "the fused path needs `state_size` to be an int or a flat list of ints; "
                f"received {self.cell.state_size!r}"
            )
        return self.cell.fused_unsupported_reason()

    @property
    def uses_fused_path(self) -> bool:
        """Whether calls run the fused engine (else the Keras cell loop)."""
        return self.implementation != "cell" and self.fused_unsupported_reason() is None

    # ------------------------------------------------------------------- loop
    def inner_loop(self, sequences: Any, initial_state: Any, mask: Any, training: bool = False):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        if not self.uses_fused_path:
            return super().inner_loop(sequences, initial_state, mask=mask, training=training)
        states = initial_state
        states = list(states) if isinstance(states, (list, tuple)) else [states]
        engine = engines.engine_module()
        hoist = getattr(engine, "HOIST_PROJECTION", True)
        if hoist == "auto":
            hoist = engine.hoist_projection(self.cell)
        projected = self.cell.project_inputs(sequences) if hoist else sequences
        masked = mask is not None
        zeros = ops.zeros((ops.shape(sequences)[0], self.cell.output_size), self.cell.compute_dtype)
        carry = initial_carry(states, zeros, masked, self._masked_output())
        weights = [ops.convert_to_tensor(v.value) for v in self.cell.variables]
        outputs, final = engine.run(
            self._step_function(masked, project=not hoist),
            projected,
            carry,
            weights,
            None if mask is None else ops.cast(mask, "bool"),
            go_backwards=self.go_backwards,
        )
        final_states = final[len(final) - len(states) :]
        return outputs[:, -1], outputs, final_states

    def _step_function(self, masked: bool, project: bool = False) -> StepFn:
        """The cell's pure step for this setting (built once, so engines can cache it)."""
        key = (masked, project)
        if key not in self._steps:
            self._steps[key] = make_step(self.cell, masked, self._masked_output(), project)
        return self._steps[key]

    def _masked_output(self) -> str:
        """What a masked step emits, as the backend's own cell loop does (see ``step``)."""
        if self.zero_output_for_mask:
            return "zeros"
        sizes = self.cell.state_size
        first = sizes[0] if isinstance(sizes, (list, tuple)) else sizes
        if keras.backend.backend() == "jax" and first == self.cell.output_size:
            return "first_state"
        return "previous"

    # ----------------------------------------------------------------- config
    def get_config(self) -> dict:
        return {**super().get_config(), "implementation": self.implementation}
