"""The cell's ``step`` as a pure function of tensors, with the package's masking rule.

The engines (:mod:`keras_mgu.fused.engines`) run and differentiate a
recurrence ``carry_t = f(p_t, m_t, carry_{t-1}, weights)``; this module builds
``f`` from a :class:`~keras_mgu.fused.cell.FusedCell`. The cell's variables are
read from the explicit ``weights`` list (a ``keras.StatelessScope``), so an
engine can differentiate a step with respect to them.

Masking: on a masked step (``m_t`` False) every state keeps its previous
value and the output is the previous output, which travels as an extra first
carry; before the first real step it is the cell's
:meth:`~keras_mgu.fused.cell.FusedCell.initial_output`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras
from keras import ops
from keras.src.backend import AutocastScope

#: ``step(p_t, m_t, carry, weights) -> (output_t, new_carry)``.
StepFn = Callable[[Any, Any, list, list], tuple[Any, list]]


def make_step(cell: Any, masked: bool, project: bool = False) -> StepFn:
    """The pure, mask-aware step of ``cell`` over ``cell.variables``.

    Args:
        cell: A built :class:`~keras_mgu.fused.cell.FusedCell`.
        masked: Whether steps get a ``(batch,)`` boolean ``m_t``; the carry
            then starts with the previous output.
        project: Whether ``p_t`` is the raw input ``x_t``, projected inside the
            step (for engines that measured faster without hoisting).

    Returns:
        ``step(p_t, m_t, carry, weights)``: ``p_t`` ``(batch, P)``, ``m_t``
        ``(batch,)`` booleans or None, ``carry`` the list of states (the
        previous output first when ``masked``), ``weights`` the values of
        ``cell.variables`` in order.
    """
    variables = list(cell.variables)
    cast_to = cell.compute_dtype if cell.autocast else None

    def step(p_t: Any, m_t: Any, carry: Sequence, weights: Sequence) -> tuple[Any, list]:
        states = list(carry[1:] if masked else carry)
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
            previous = ops.cast(carry[0], output.dtype)
            output = ops.where(_expand(m_t, output), output, previous)
        if masked:
            new_states = [ops.cast(output, carry[0].dtype), *new_states]
        return output, new_states

    step.projects_inputs = project  # engines may choose their loops by it
    return step


def initial_carry(states: list, initial_output: Any, masked: bool) -> list:
    """The engines' first carry: ``states``, after the initial output when ``masked``."""
    return [initial_output, *states] if masked else list(states)


def _expand(m_t: Any, like: Any) -> Any:
    """``m_t`` ``(batch,)`` reshaped to broadcast against ``like`` ``(batch, ...)``."""
    return ops.reshape(m_t, (-1,) + (1,) * (len(like.shape) - 1))
