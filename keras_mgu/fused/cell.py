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
"""

from __future__ import annotations

from typing import Any

import keras


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
    """

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
        """Why the fused path cannot run this cell, or None if it can.

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
