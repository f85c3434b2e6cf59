"""Derivatives of a model's outputs with respect to its inputs, as trainable tensors.

:func:`input_gradient` computes, for a model ``F`` and one of its inputs ``x``::

    G = d( sum of all outputs of F ) / d x            (same shape as x)

or, with ``output_index=k``, the derivative of ``sum(F[..., k])``. Samples of a
batch do not interact, so ``G[i]`` is sample ``i``'s own derivative. For
sequences ``x`` of shape ``(batch, steps, features)`` and outputs ``F_s`` per
step, ``G[:, t]`` is the *total* derivative ``d(sum_s F_s) / d x_t``: it
includes every path from ``x_t`` through the recurrence to later outputs.

The result stays differentiable with respect to the model's weights, so a loss
on it can be minimised with ``fit`` (see :class:`DerivativeTargetModel`): this is
"training ``F`` through its derivative", second-order differentiation handled
by the backend:

* TensorFlow: a nested ``tf.GradientTape``; the enclosing tape (e.g. the one of
  Keras's train step) records the inner gradient computation.
* JAX: ``jax.value_and_grad`` of a closure over the inputs; the weights are
  whatever values the enclosing trace holds (Keras's stateless train step).
* PyTorch: ``torch.autograd.grad`` with ``create_graph=True`` whenever grad
  mode is on, so ``loss.backward()`` reaches the weights.

All three work inside a model's ``call`` under ``fit``, and under
``jit_compile=True`` on TensorFlow and JAX.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import keras
from keras import ops, tree

__all__ = ["DerivativeTargetModel", "input_gradient"]


# ------------------------------------------------------------------ public API
def input_gradient(
    model: Callable,
    inputs: Any,
    wrt: int | str = 0,
    output_index: int | None = None,
    feature: int | Sequence[int] | None = None,
    training: bool | None = False,
) -> Any:
    """Gradient of the model's summed outputs with respect to one of its inputs.

    Computes ``G = d S / d x`` with ``x = inputs[wrt]`` and::

        S = sum over every element of every output of model(inputs)
        S = sum(model(inputs)[..., output_index])        if output_index is given

    Samples of a batch are independent, so ``G[i]`` is sample ``i``'s own
    derivative. For a sequence input ``x`` ``(batch, steps, features)`` and a
    sequence output ``F`` ``(batch, steps, units)``, ``G[:, t]`` is the total
    derivative ``d(sum_s F_s)/d x_t`` through the whole recurrence. To hold
    part of the network fixed (e.g. differentiate a head with its recurrent
    features as given), pass that sub-model and its own inputs instead.

    Slicing happens *after* differentiation: a feature of ``x`` selected before
    the call is a new tensor the model never saw, whose gradient would be zero.
    Use ``feature`` instead.

    Args:
        model: A built Keras model or layer (any callable ``model(inputs,
            training=...)`` made of backend operations).
        inputs: What the model is called with: one tensor, a list/tuple of
            tensors, or a dict of tensors keyed by input name.
        wrt: Which input to differentiate with respect to: an index into the
            model's inputs or an input name. Must be ``0`` (or the input's
            name) for a model with one input.
        output_index: If given, differentiate only channel ``output_index`` of
            the output's last axis. Only for models with a single output; for
            several outputs the sum over all of them is differentiated.
        feature: If given, keep only these features of the gradient's last
            axis: an int keeps the axis (shape ``(..., 1)``), a list of ints
            selects those features in that order.
        training: Passed to the model call (dropout etc.).

    Returns:
        A tensor with the shape of ``inputs[wrt]`` (last axis reduced to the
        selected features), differentiable with respect to the model weights.

    Raises:
        ValueError: ``wrt`` names no input, ``feature`` or ``output_index`` is
            out of range, or the selected input is not floating point.
    """
    _, gradient = _outputs_and_input_gradient(model, inputs, wrt, output_index, feature, training)
    return gradient


@keras.saving.register_keras_serializable(package="keras_mgu")
class DerivativeTargetModel(keras.Model):
    """A model whose prediction is the input derivative of another model.

    ``DerivativeTargetModel(F)(inputs)`` returns
    ``input_gradient(F, inputs, wrt, output_index, feature)``, so::

        dmodel = DerivativeTargetModel(F, wrt="x1")
        dmodel.compile(optimizer="adam", loss="mse")
        dmodel.fit(inputs, dF_dx1_targets)

    trains the weights of ``F`` so that its derivative matches the targets.
    With ``include_outputs=True`` the call returns ``(F(inputs), dF)`` so that
    losses on both can be combined (``loss=["mse", "mse"]``, Sobolev training).

    Args:
        model: The differentiated Keras model ``F`` (its weights are this
            model's weights).
        wrt, output_index, feature: As in :func:`input_gradient`.
        include_outputs: Return ``(outputs, gradient)`` instead of ``gradient``.
        **kwargs: Passed to ``keras.Model`` (``name``, ``dtype``...).

    Call arguments:
        inputs: What ``model`` is called with (a tensor, list or dict).
        training: Passed to ``model``.

    Returns:
        ``dF`` with the shape of ``inputs[wrt]`` (last axis reduced to the
        selected features), or ``(F(inputs), dF)`` with ``include_outputs``.
    """

    def __init__(
        self,
        model: keras.layers.Layer,
        wrt: int | str = 0,
        output_index: int | None = None,
        feature: int | Sequence[int] | None = None,
        include_outputs: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(model, keras.layers.Layer):
            raise TypeError(
                "`model` must be a Keras model or layer (the function F to differentiate); "
                f"received {type(model).__name__}."
            )
        self.model = model
        self.wrt = wrt
        self.output_index = output_index
        self.feature = list(feature) if isinstance(feature, (list, tuple)) else feature
        self.include_outputs = bool(include_outputs)
        _check_static_arguments(model, wrt, output_index, self.feature)

    def build(self, input_shape: Any = None) -> None:
        if not self.model.built and input_shape is not None:
            self.model.build(input_shape)
        self.built = True

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        outputs, gradient = _outputs_and_input_gradient(
            self.model, inputs, self.wrt, self.output_index, self.feature, training
        )
        if self.include_outputs:
            return outputs, gradient
        return gradient

    def compute_output_spec(self, inputs: Any, training: bool | None = None) -> Any:
        x, _, _, _ = _resolve_input(self.model, inputs, self.wrt)
        shape = tuple(x.shape)
        columns = _feature_columns(self.feature, shape[-1])
        if columns is not None:
            shape = shape[:-1] + (len(columns),)
        gradient = keras.KerasTensor(shape, dtype=x.dtype)
        if self.include_outputs:
            return self.model.compute_output_spec(inputs), gradient
        return gradient

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "model": keras.saving.serialize_keras_object(self.model),
                "wrt": self.wrt,
                "output_index": self.output_index,
                "feature": self.feature,
                "include_outputs": self.include_outputs,
            }
        )
        return config

    @classmethod
    def from_config(cls, config: dict) -> DerivativeTargetModel:
        config = dict(config)
        model = keras.saving.deserialize_keras_object(config.pop("model"))
        return cls(model=model, **config)


# ------------------------------------------------------------------ core
def _outputs_and_input_gradient(
    model: Callable,
    inputs: Any,
    wrt: int | str,
    output_index: int | None,
    feature: int | Sequence[int] | None,
    training: bool | None,
) -> tuple[Any, Any]:
    """``(model(inputs), input_gradient(...))`` computed in one forward pass."""
    inputs = _to_tensors(model, inputs)
    x, rebuild, label, declared = _resolve_input(model, inputs, wrt)
    x = _as_float_tensor(x, declared, label)
    columns = _feature_columns(feature, x.shape[-1])

    def target(x_wrt: Any) -> tuple[Any, Any]:
        outputs = model(rebuild(x_wrt), training=training)
        return _summed_output(outputs, output_index), outputs

    gradient_fn = _BACKEND_GRADIENTS.get(keras.backend.backend())
    if gradient_fn is None:
        raise NotImplementedError(
            f"input_gradient supports the backends {sorted(_BACKEND_GRADIENTS)}; "
            f"the active backend is {keras.backend.backend()!r}."
        )
    outputs, gradient = gradient_fn(target, x)
    if columns is not None:
        gradient = ops.take(gradient, columns, axis=-1)
    return outputs, gradient


def _summed_output(outputs: Any, output_index: int | None) -> Any:
    """The scalar ``S`` whose input gradient is taken."""
    flat = tree.flatten(outputs)
    if output_index is None:
        total = ops.sum(flat[0])
        for out in flat[1:]:
            total = total + ops.cast(ops.sum(out), total.dtype)
        return total
    if len(flat) != 1:
        raise ValueError(
            f"`output_index` selects a channel of a single output, but the model returns "
            f"{len(flat)} outputs. Differentiate a sub-model with the one output you want, "
            "e.g. keras.Model(model.inputs, model.outputs[k]), or leave output_index=None "
            "to differentiate the sum of all outputs."
        )
    _check_index("output_index", output_index, flat[0].shape[-1], "channels in the output")
    return ops.sum(flat[0][..., output_index])


# ------------------------------------------------------------------ backends
def _input_gradient_tensorflow(target: Callable, x: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(x)
        total, outputs = target(x)
    gradient = tape.gradient(total, x, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return outputs, gradient


def _input_gradient_jax(target: Callable, x: Any) -> tuple[Any, Any]:
    import jax

    (_, outputs), gradient = jax.value_and_grad(target, has_aux=True)(x)
    return outputs, gradient


def _input_gradient_torch(target: Callable, x: Any) -> tuple[Any, Any]:
    import torch

    # Keep the graph of the gradient only when the caller records one
    # (training); under no_grad (predict) return plain values.
    create_graph = torch.is_grad_enabled()
    with torch.enable_grad():
        if not x.requires_grad:
            x = x.detach().requires_grad_(True)
        total, outputs = target(x)
        gradient = None
        if total.requires_grad:
            (gradient,) = torch.autograd.grad(
                total, x, create_graph=create_graph, allow_unused=True
            )
    if gradient is None:
        gradient = torch.zeros_like(x)
    if not create_graph:
        outputs = tree.map_structure(lambda t: t.detach(), outputs)
        gradient = gradient.detach()
    return outputs, gradient


_BACKEND_GRADIENTS = {
    "tensorflow": _input_gradient_tensorflow,
    "jax": _input_gradient_jax,
    "torch": _input_gradient_torch,
}


# ------------------------------------------------------------------ arguments
def _declared_inputs(model: Any) -> list | None:
    """The model's declared inputs (``KerasTensor`` s) in order, if it has any."""
    try:
        declared = model.inputs
    except (AttributeError, ValueError):
        return None
    return tree.flatten(declared) if declared else None


def _input_names(model: Any) -> list[str] | None:
    """Names of the model's inputs in order, when the model declares them."""
    declared = _declared_inputs(model)
    return None if declared is None else [t.name for t in declared]


def _declared_input(model: Any, index: int) -> Any:
    declared = _declared_inputs(model)
    return declared[index] if declared and 0 <= index < len(declared) else None


def _check_wrt_type(wrt: Any) -> None:
    if isinstance(wrt, bool) or not isinstance(wrt, (int, str)):
        raise ValueError(
            f"`wrt` must be an input index (int) or input name (str); received {wrt!r}."
        )


def _name_error(wrt: Any, names: Sequence[str] | None) -> ValueError:
    known = (
        f"the model's inputs are named {list(names)}" if names else "the model has no input names"
    )
    return ValueError(f"`wrt`={wrt!r} names no input of the model; {known}.")


def _resolve_input(model: Any, inputs: Any, wrt: int | str) -> tuple[Any, Callable, str, Any]:
    """Pick ``x = inputs[wrt]``.

    Returns ``x``, a function putting a replacement for ``x`` back into the
    input structure, a label for error messages, and the model's declared
    input (a ``KerasTensor``) for ``x`` when the model declares its inputs.
    """
    names = _input_names(model)
    _check_wrt_type(wrt)
    if isinstance(inputs, dict):
        keys = list(inputs)
        if isinstance(wrt, int):
            order = names if names and set(names) <= set(keys) else keys
            _check_index("wrt", wrt, len(order), "inputs")
            key = order[wrt]
        elif wrt in inputs:
            key = wrt
        else:
            raise _name_error(wrt, keys)

        def rebuild(x: Any) -> dict:
            return {**inputs, key: x}

        declared = _declared_input(model, names.index(key)) if names and key in names else None
        return inputs[key], rebuild, f"input {key!r}", declared
    if isinstance(inputs, (list, tuple)):
        if isinstance(wrt, str):
            if not names or wrt not in names or len(names) != len(inputs):
                raise _name_error(wrt, names)
            index = names.index(wrt)
        else:
            _check_index("wrt", wrt, len(inputs), "inputs")
            index = wrt
        container = type(inputs)

        def rebuild(x: Any) -> Any:
            return container([x if i == index else v for i, v in enumerate(inputs)])

        declared = _declared_input(model, index) if names and len(names) == len(inputs) else None
        return inputs[index], rebuild, f"input {index}", declared
    if isinstance(wrt, str):
        if not names or names != [wrt]:
            raise _name_error(wrt, names)
    else:
        _check_index("wrt", wrt, 1, "inputs (a single tensor was passed)")
    declared = _declared_input(model, 0) if names and len(names) == 1 else None
    return inputs, lambda x: x, "the input", declared


def _check_static_arguments(
    model: Any, wrt: int | str, output_index: int | None, feature: Any
) -> None:
    """Validate ``wrt``, ``feature`` and ``output_index`` against a model that
    declares its inputs and outputs (functional models); otherwise they are
    checked at call time."""
    names = _input_names(model)
    if names is None:
        return
    _check_wrt_type(wrt)
    if isinstance(wrt, str):
        if wrt not in names:
            raise _name_error(wrt, names)
        index = names.index(wrt)
    else:
        _check_index("wrt", wrt, len(names), "inputs")
        index = wrt
    declared = _declared_input(model, index)
    _check_float_dtype(declared.dtype, f"input {names[index]!r}")
    _feature_columns(feature, declared.shape[-1])
    if output_index is not None:
        outputs = tree.flatten(model.outputs)
        if len(outputs) != 1:
            raise ValueError(
                f"`output_index` selects a channel of a single output, but the model has "
                f"{len(outputs)} outputs."
            )
        _check_index("output_index", output_index, outputs[0].shape[-1], "channels in the output")


def _to_tensors(model: Any, inputs: Any) -> Any:
    """Convert array inputs to backend tensors of the model's declared dtypes."""
    declared = _declared_inputs(model)

    def convert(value: Any, index: int | None) -> Any:
        if ops.is_tensor(value) or value is None:
            return value
        spec = declared[index] if declared and index is not None else None
        return ops.convert_to_tensor(value, dtype=None if spec is None else spec.dtype)

    if isinstance(inputs, dict):
        names = [t.name for t in declared] if declared else []
        return {
            key: convert(value, names.index(key) if key in names else None)
            for key, value in inputs.items()
        }
    if isinstance(inputs, (list, tuple)):
        aligned = declared is not None and len(declared) == len(inputs)
        return type(inputs)(
            convert(value, i if aligned else None) for i, value in enumerate(inputs)
        )
    return convert(inputs, 0 if declared and len(declared) == 1 else None)


def _as_float_tensor(x: Any, declared: Any, label: str) -> Any:
    """``x`` checked to be floating point, in the model's declared dtype if any."""
    if declared is not None:
        _check_float_dtype(declared.dtype, label)
    _check_float_dtype(x.dtype, label)
    if declared is not None and keras.backend.standardize_dtype(x.dtype) != declared.dtype:
        x = ops.cast(x, declared.dtype)
    return x


def _check_float_dtype(dtype: Any, label: str) -> None:
    name = keras.backend.standardize_dtype(dtype)
    if "float" not in name:
        raise ValueError(
            f"Cannot differentiate with respect to {label}: its dtype is {name}, and only "
            "floating-point inputs have derivatives. Choose a float input with `wrt`."
        )


def _check_index(arg: str, value: Any, size: int | None, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"`{arg}` must be an int; received {arg}={value!r}.")
    if size is not None and not 0 <= value < size:
        raise ValueError(
            f"`{arg}`={value} is out of range: there are {size} {what} (valid: 0 to {size - 1})."
        )


def _feature_columns(feature: Any, size: int | None) -> list[int] | None:
    """Validated feature indices (a list) or None for all features."""
    if feature is None:
        return None
    if isinstance(feature, int) and not isinstance(feature, bool):
        columns = [feature]
    elif isinstance(feature, (list, tuple)) and feature:
        columns = list(feature)
    else:
        raise ValueError(
            f"`feature` must be an int or a non-empty list of ints; received {feature!r}."
        )
    for column in columns:
        _check_index("feature", column, size, "features on the input's last axis")
    return columns
