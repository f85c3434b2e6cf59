"""``FusedCell``: a recurrent cell split into a sequence-wide projection and a step.

A cell computes, for the input ``x_t`` ``(batch, features)`` and the states
``s_{t-1}`` (a list of ``(batch, state_size[i])`` tensors)::

    p_t = project_inputs(x_t)                  # the part that needs no state
    y_t, s_t = step(p_t, s_{t-1})              # the recurrence

``project_inputs`` must work on any leading axes, so that
:class:`keras_mgu.FusedRNN` can call it once on the whole ``(batch, steps,
features)`` sequence; ``step`` then runs once per time step. ``call`` is
``step(project_inputs(inputs), states)``, so the same cell also runs in a plain
``keras.layers.RNN``.

A cell may also bring its own hand-written sequence kernel
(:meth:`FusedCell.sequence_kernel`, as :class:`keras_mgu.MGUCell` does);
:class:`keras_mgu.FusedRNN` runs it first, and falls back on the generic
engine, then on the cell loop, when it raises ``NotImplementedError``.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_mgu")
class FusedCell(keras.layers.Layer):
    """Base class of recurrent cells that :class:`keras_mgu.FusedRNN` runs fused.

    Subclasses set ``state_size`` (an int or a list of ints) and
    ``output_size`` in ``__init__``, create their weights in
    ``build(input_shape)`` (``input_shape`` is ``(batch, features)``) and
    implement two methods:

    * ``project_inputs(inputs)``: ``(..., features) -> (..., P)``, the
      state-independent part of a step (typically ``x W + b``). It is called
      once on the whole sequence. The default is the identity.
    * ``step(projected, states)``: ``projected`` ``(batch, P)`` and the list
      of states ``[(batch, state_size[i]), ...]`` to ``(output, new_states)``,
      ``output`` ``(batch, output_size)``.

    On the fused path ``step`` is traced once and run inside a compiled loop,
    and its backward pass is derived from it by automatic differentiation:
    it must be written with ``keras.ops`` (or backend ops) only, must not
    branch in Python on tensor values, and must not draw random numbers.

    Call arguments (``call``, used by ``keras.layers.RNN``):
        inputs: ``(batch, features)``, the input of one step.
        states: list of state tensors.
        training: Unused by the base class.

    Returns:
        ``(output, new_states)``.

    Attributes:
        own_kernel: Whether :class:`keras_mgu.FusedRNN` may run the cell's
            hand-written sequence kernel (if it has one). Set it to False on
            an instance to run the generic fused engine instead.
    """

    own_kernel: bool = True

    def sequence_kernel_name(self, dtype: str, batch: int | None) -> str:
        """The name of the hand-written kernel that would run (e.g. ``"native"``, ``"fused"``).

        Decided from static facts only: the compute ``dtype``, the ``batch``
        size where known (None otherwise) and the cell's settings. Raises
        ``NotImplementedError`` (saying why) when the cell's own kernel cannot
        serve; the base class has none.
        """
        raise NotImplementedError(f"{type(self).__name__} has no hand-written sequence kernel")

    def sequence_kernel(
        self, sequences: Any, states: list, mask: Any, *, go_backwards: bool, training: bool
    ) -> tuple[Any, list, str]:
        """Run the whole sequence with the cell's own kernel.

        Args:
            sequences: ``(batch, steps, features)``.
            states: the initial states ``[(batch, state_size[i]), ...]``.
            mask: ``(batch, steps)`` booleans or None. A masked step keeps
                every state and emits the previous output (before the first
                real step: :meth:`initial_output` of ``states``).
            go_backwards: Process the steps in reverse time order.
            training: Whether dropout is active.

        Returns:
            ``(outputs, final_states, name)``: ``outputs`` ``(batch, steps,
            output_size)`` in processing order, and the name of the kernel
            that ran (:meth:`sequence_kernel_name`). Raises
            ``NotImplementedError`` at trace time when it cannot serve.
        """
        raise NotImplementedError(f"{type(self).__name__} has no hand-written sequence kernel")

    def initial_output(self, states: list) -> Any:
        """The output that masked steps before the first real one emit, ``(batch, output_size)``.

        The default is the initial state's output part: the first state when
        it has the size of the output, else zeros.
        """
        return output_part_of(states, self.output_size, self.compute_dtype)

    def project_inputs(self, inputs: Any) -> Any:
        """State-independent part of a step, ``(..., features) -> (..., P)``; identity here."""
        return inputs

    def step(self, projected: Any, states: list) -> tuple[Any, list]:
        """One recurrence step on projected inputs ``(batch, P)``; see the class docstring."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement `step(projected, states) -> "
            "(output, new_states)`."
        )

    def call(self, inputs: Any, states: Any, training: bool = False) -> tuple[Any, list]:
        states = list(states) if isinstance(states, (list, tuple)) else [states]
        output, new_states = self.step(self.project_inputs(inputs), states)
        if not isinstance(new_states, (list, tuple)):
            new_states = [new_states]
        return output, list(new_states)

    def fused_unsupported_reason(self) -> str | None:
        """Why the generic fused engine cannot run this cell, or None if it can.

        The base class refuses cells that override ``call`` (the fused path
        would skip the override) and cells with dropout (per-step randomness);
        subclasses may add their own reasons.
        """
        if type(self).call is not FusedCell.call:
            return (
                f"{type(self).__name__} overrides `call`; the fused path runs "
                "`step(project_inputs(x), states)` instead"
            )
        for rate in ("dropout", "recurrent_dropout"):
            if float(getattr(self, rate, 0.0) or 0.0) > 0.0:
                return f"{rate} > 0 draws random numbers at every step"
        return None


def output_part_of(states: list, output_size: Any, dtype: Any) -> Any:
    """The first of ``states`` when it is ``(batch, output_size)``, else zeros of that shape."""
    first = states[0]
    if isinstance(first, (list, tuple)):  # stacked cells: the last cell's first state
        first = states[-1]
        while isinstance(first, (list, tuple)):
            first = first[0]
    if isinstance(output_size, int) and first.shape[-1] == output_size:
        return ops.cast(first, dtype)
    size = output_size if isinstance(output_size, int) else first.shape[-1]
    return ops.zeros((ops.shape(first)[0], size), dtype)
