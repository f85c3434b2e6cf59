"""The cell's ``step`` as a pure function of tensors, with Keras masking.

The engines (:mod:`keras_mgu.fused.engines`) run and differentiate a
recurrence ``carry_t = f(p_t, m_t, carry_{t-1}, weights)``; this module builds
``f`` from a :class:`~keras_mgu.fused.cell.FusedCell`. The cell's variables are
read from the explicit ``weights`` list (a ``keras.StatelessScope``), so an
engine can differentiate a step with respect to them.

Masking follows the Keras cell loop: on a masked step (``m_t`` False) every
state keeps its previous value, and the output is (``masked_output``)

* ``"previous"``: the previous output, zeros before the first real step (the
  TensorFlow and PyTorch cell loops); it travels as an extra first carry;
* ``"first_state"``: the first state ``s_{t-1}[0]`` (the JAX cell loop, for
  cells whose output has the size of their first state);
* ``"zeros"``: zeros (``zero_output_for_mask=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras
from keras import ops
from keras.src.backend import AutocastScope

#: ``step(p_t, m_t, carry, weights) -> (output_t, new_carry)``.
StepFn = Callable[[Any, Any, list, list], tuple[Any, list]]


MASKED_OUTPUTS = ("previous", "first_state", "zeros")


def carries_output(masked: bool, masked_output: str) -> bool:
    """Whether the carry starts with the previous output."""
    return masked and masked_output == "previous"


def make_step(
    cell: Any, masked: bool, masked_output: str = "previous", project: bool = False
) -> StepFn:
    """The pure, mask-aware step of ``cell`` over ``cell.variables``.

    Args:
        cell: A built :class:`~keras_mgu.fused.cell.FusedCell`.
        masked: Whether steps get a ``(batch,)`` boolean ``m_t``.
        masked_output: What a masked step emits, one of :data:`MASKED_OUTPUTS`.
        project: Whether ``p_t`` is the raw input ``x_t``, projected inside the
            step (for engines that measured faster without hoisting).

    Returns:
        ``step(p_t, m_t, carry, weights)``: ``p_t`` ``(batch, P)``, ``m_t``
        ``(batch,)`` booleans or None, ``carry`` the list of states (the
        previous output first when :func:`carries_output`), ``weights`` the
        values of ``cell.variables`` in order.
    """
    variables = list(cell.variables)
    if masked_output not in MASKED_OUTPUTS:
        raise ValueError(f"`masked_output` must be one of {MASKED_OUTPUTS}; got {masked_output!r}.")
    keep_output = carries_output(masked, masked_output)
    cast_to = cell.compute_dtype if cell.autocast else None

    def step(p_t: Any, m_t: Any, carry: Sequence, weights: Sequence) -> tuple[Any, list]:
        states = list(carry[1:] if keep_output else carry)
        with keras.StatelessScope(state_mapping=list(zip(variables, weights))):
            with AutocastScope(cast_to):
                if project:
                    p_t = cell.project_inputs(p_t)
                output, new_states = cell.step(p_t, states)
        if not isinstance(new_states, (list, tuple)):
            new_states = [new_states]
        new_states = [ops.cast(n, s.dtype) for n, s in zip(new_states, states)]
        if m_t is not None:
            new_states = [ops.where(_expand(m_t, s), n, s) for n, s in zip(new_states, states)]
            previous = {
                "previous": carry[0],
                "first_state": states[0],
                "zeros": ops.zeros_like(output),
            }[masked_output]
            output = ops.where(_expand(m_t, output), output, ops.cast(previous, output.dtype))
        if keep_output:
            new_states = [ops.cast(output, carry[0].dtype), *new_states]
        return output, new_states

    step.projects_inputs = project  # engines may choose their loops by it
    return step


def initial_carry(states: list, output_zeros: Any, masked: bool, masked_output: str) -> list:
    """The engines' first carry: ``states``, after zero outputs when the output is carried."""
    return [output_zeros, *states] if carries_output(masked, masked_output) else list(states)


def _expand(m_t: Any, like: Any) -> Any:
    """``m_t`` ``(batch,)`` reshaped to broadcast against ``like`` ``(batch, ...)``."""
    return ops.reshape(m_t, (-1,) + (1,) * (len(like.shape) - 1))
