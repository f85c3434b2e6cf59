"""``Ensemble``: ``K`` independent copies of a layer, trained at once.

Restarts of a recurrent model differ only in their random start, and small
models leave most of a machine idle. ``Ensemble(layer, size=K)`` holds ``K``
copies of ``layer`` (same configuration, weights drawn independently) and
applies them all in one call, so one ``fit`` trains ``K`` models: one
dispatch, one compiled step, one pass of Keras's loop.

Shapes, for a wrapped layer that maps ``(batch, *in_shape)`` to
``(batch, *out_shape)``::

    shared_inputs=True:   (batch, *in_shape)     -> (batch, K, *out_shape)
    shared_inputs=False:  (batch, K, *in_shape)  -> (batch, K, *out_shape)

Member ``k`` sees ``inputs`` (shared) or ``inputs[:, k]``, and its output is
``outputs[:, k]``. The members share no weights, so the gradient of a loss
``sum_k L_k(outputs[:, k])`` reaches member ``k`` from ``L_k`` alone: with an
elementwise optimiser (SGD, Adam, AdamW) every member follows the path it
would follow trained on its own. Keras's ``"mse"`` against targets repeated
along axis 1 is ``(1 / K) sum_k mse_k``.

Example: eight MGU restarts of a sequence-to-sequence model::

    x = keras.Input((None, 2))
    y = keras_mgu.Ensemble(keras_mgu.MGU(32, return_sequences=True), size=8)(x)
    y = keras_mgu.Ensemble(keras.layers.Dense(1), size=8, shared_inputs=False)(y)
    model = keras.Model(x, y)                       # (batch, 8, steps, 1)
    model.compile("adam", "mse")
    model.fit(x_train, np.repeat(y_train[:, None], 8, axis=1))
    model.predict(x_test).mean(axis=1)              # the ensemble's average
"""

from __future__ import annotations

import copy
from typing import Any

import keras
from keras import ops

__all__ = ["Ensemble"]


@keras.saving.register_keras_serializable(package="keras_mgu")
class Ensemble(keras.layers.Layer):
    """``size`` independent copies of ``layer``, outputs stacked on axis 1.

    Args:
        layer: The layer to copy (a ``keras.layers.Layer`` with one input
            and one output tensor). It is a template only, its weights are
            not copied: the members are new layers made from its
            configuration, named ``{name}_member_{k}``, so unseeded
            initialisers (Keras's default) give each member its own weights.
        size: Number of members ``K`` (a positive integer).
        shared_inputs: ``True``: every member sees the same
            ``(batch, *in_shape)`` input. ``False``: the input is
            ``(batch, K, *in_shape)`` and member ``k`` sees ``inputs[:, k]``.
        **kwargs: Base layer arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: ``(batch, *in_shape)`` or ``(batch, K, *in_shape)`` (see
            ``shared_inputs``).
        training: Passed to every member.
        mask: Passed to every member with shared inputs (a recurrent
            layer's ``(batch, steps)`` mask); with per-member inputs, an
            optional ``(batch, K, ...)`` mask whose slice ``[:, k]`` goes to
            member ``k``.

    Returns:
        ``(batch, K, *out_shape)``: member ``k``'s output at ``[:, k]``.
    """

    def __init__(
        self, layer: keras.layers.Layer, size: int, shared_inputs: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(layer, keras.layers.Layer):
            raise ValueError(
                f"`layer` must be a keras.layers.Layer instance; received {layer!r} "
                f"(of type {type(layer).__name__})."
            )
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"`size` must be a positive integer; received size={size!r}.")
        if getattr(layer, "return_state", False):
            raise ValueError(
                "Ensemble stacks one output tensor per member; the wrapped layer returns its "
                "states too (return_state=True). Wrap a layer with return_state=False."
            )
        self.size, self.shared_inputs = size, bool(shared_inputs)
        # The template's configuration, not the layer: it is never built or called.
        self._template = keras.saving.serialize_keras_object(layer)
        self.members = [self._copy(k) for k in range(size)]
        self.supports_masking = True

    def _copy(self, k: int) -> keras.layers.Layer:
        config = copy.deepcopy(self._template)
        config["config"]["name"] = f"{config['config']['name']}_member_{k}"
        return keras.saving.deserialize_keras_object(config)

    def _member_shape(self, input_shape: tuple) -> tuple:
        input_shape = tuple(input_shape)
        if self.shared_inputs:
            return input_shape
        if len(input_shape) < 2 or input_shape[1] not in (None, self.size):
            raise ValueError(
                f"With shared_inputs=False, Ensemble expects inputs of shape (batch, {self.size}, "
                f"...), one slice per member; received shape {input_shape}."
            )
        return (input_shape[0], *input_shape[2:])

    def build(self, input_shape: tuple) -> None:
        shape = self._member_shape(input_shape)
        for member in self.members:
            if not member.built:
                member.build(shape)

    def call(self, inputs: Any, training: bool | None = None, mask: Any = None) -> Any:
        outputs = []
        for k, member in enumerate(self.members):
            x, m = inputs, mask
            if not self.shared_inputs:
                self._member_shape(inputs.shape)
                x = inputs[:, k]
                m = None if mask is None else mask[:, k]
            kwargs = {"training": training} if member._call_has_training_arg else {}
            if m is not None and member._call_has_mask_arg:
                kwargs["mask"] = m
            out = member(x, **kwargs)
            if isinstance(out, (list, tuple, dict)):
                raise ValueError(
                    "Ensemble stacks one output tensor per member; the wrapped layer "
                    f"{member.__class__.__name__} returned {type(out).__name__}."
                )
            outputs.append(out)
        return ops.stack(outputs, axis=1)

    def compute_mask(self, inputs: Any, mask: Any = None) -> Any:
        """Each member's output mask, stacked on axis 1 (None where a member gives none)."""
        if mask is None:
            return None
        if self.shared_inputs:
            masks = [m.compute_mask(inputs, mask) for m in self.members]
        else:
            masks = [m.compute_mask(inputs[:, k], mask[:, k]) for k, m in enumerate(self.members)]
        return None if any(m is None for m in masks) else ops.stack(masks, axis=1)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        out = self.members[0].compute_output_shape(self._member_shape(input_shape))
        return (out[0], self.size, *out[1:])

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "layer": copy.deepcopy(self._template),
                "size": self.size,
                "shared_inputs": self.shared_inputs,
            }
        )
        return config

    @classmethod
    def from_config(cls, config: dict, custom_objects: dict | None = None) -> Ensemble:
        config = dict(config)
        config["layer"] = keras.saving.deserialize_keras_object(
            config["layer"], custom_objects=custom_objects
        )
        return cls(**config)
