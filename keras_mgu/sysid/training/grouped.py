"""``K`` simulators of one structure computed as one: the group axis in every product.

A population of runs with the same settings holds ``K`` simulators of
:func:`~keras_mgu.sysid.models.network.build_simulator` that differ only in their
weights. :class:`GroupedSimulators` applies all of them in one pass in which
every product carries a group axis ``k`` (the run)::

    h0_k        = s_k                      or  E_k(u_past_k, y_past_k)
    h_k         = MGU_k(u_k, h0_k)         (one loop for all k, see below)
    y_k         = h_k V_k + u_k L_k + c_k

The MGU layers run through :func:`keras_mgu.kernels.grouped_sequence`: where
the native loops serve, one loop call with a recurrent kernel per group runs
every run's sequences, so ``K`` runs cost one dispatch, one loop and one
backward pass per layer instead of ``K``.

The layer holds each weight of the simulators once, stacked: a ``(K, *shape)``
variable per weight of one simulator, initialised from the ``K`` simulators'
values. An optimiser then keeps ``K`` times fewer variables (and a graph
backend traces ``K`` times fewer updates); an elementwise optimiser such as
Adam(W) updates slice ``k`` exactly as it would update run ``k``'s own weight,
but a norm clip (``clipnorm``) would see all ``K`` slices at once.
:meth:`GroupedSimulators.member` is run ``k``'s view of the stacked weights
(``get_weights`` / ``set_weights``, as early stopping uses them) and
:meth:`GroupedSimulators.write_back` copies the trained values into the ``K``
simulators, which remain models of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from keras_mgu import kernels
from keras_mgu.cell import activation_name
from keras_mgu.layer import MGU
from keras_mgu.sysid.models.network import LearnedInitialState

__all__ = ["GroupedSimulators", "RunView", "grouped_unsupported_reason"]

_KNOWN = (keras.layers.InputLayer, keras.layers.Dense, keras.layers.Add,
          keras.layers.Concatenate, keras.layers.Flatten, LearnedInitialState, MGU)  # fmt: skip


def _mgu_reason(layer: MGU) -> str | None:
    if layer.go_backwards or not layer.return_sequences or layer.stateful:
        return f"{layer.name} is not a forward, sequence-returning, stateless MGU"
    if layer.cell.dropout > 0 or layer.cell.recurrent_dropout > 0:
        return f"{layer.name} has dropout"
    if layer.unroll:
        return f"{layer.name} unrolls its loop"
    try:
        layer.cell.sequence_kernel_name(keras.backend.standardize_dtype(layer.compute_dtype), None)
    except NotImplementedError as error:  # the grouped loops are the MGU kernels'
        return f"{layer.name}: {error}"
    return None


def grouped_unsupported_reason(simulators: Sequence[keras.Model]) -> str | None:
    """Why ``simulators`` cannot be grouped, or None when they can.

    They can when each is a built :func:`~keras_mgu.sysid.models.network.build_simulator`
    model with MGU layers (no dropout, fused activations) and all share one
    structure: the same layers, by name, with weights of the same shapes.
    """
    if not simulators:
        return "there are no simulators"
    first = simulators[0]
    for model in simulators:
        for layer in model.layers:
            if not isinstance(layer, _KNOWN):
                return f"layer {layer.name!r} ({type(layer).__name__}) has no grouped form"
            if isinstance(layer, MGU) and _mgu_reason(layer):
                return _mgu_reason(layer)
        if [layer.name for layer in model.layers] != [layer.name for layer in first.layers]:
            return "the simulators' layers differ"
        shapes = [tuple(w.shape) for w in model.weights]
        if shapes != [tuple(w.shape) for w in first.weights]:
            return "the simulators' weights differ in shape"
    names = {layer.name for layer in first.layers}
    if "u" not in names or "head" not in names:
        return "the simulators were not built by build_simulator"
    return None


class GroupedSimulators(keras.layers.Layer):
    """``K`` simulators of one structure (see the module), applied at once.

    Args:
        simulators: ``K >= 1`` built models of
            :func:`~keras_mgu.sysid.models.network.build_simulator` with one structure
            (:func:`grouped_unsupported_reason` says why not, if not).

    Call it on the ``K`` runs' inputs stacked on axis 1: ``u``
    ``(batch, K, steps, n_inputs)``, or with an encoder the list
    ``[u_past (batch, K, n, n_inputs), y_past (batch, K, n, n_outputs), u]``.
    It returns ``(batch, K, steps, n_outputs)``; slice ``[:, k]`` equals
    ``simulators[k]`` on slice ``[:, k]`` of the inputs, up to float rounding.
    """

    def __init__(self, simulators: Sequence[keras.Model], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        simulators = list(simulators)
        reason = grouped_unsupported_reason(simulators)
        if reason is not None:
            raise ValueError(f"These simulators cannot be grouped: {reason}.")
        self._source = _Models(simulators)  # not tracked: their weights are not this layer's
        first = simulators[0]
        self._slot = {id(w): i for i, w in enumerate(first.trainable_weights)}
        self.stacked = []
        for i, w in enumerate(first.trainable_weights):
            values = np.stack([ops.convert_to_numpy(m.trainable_weights[i]) for m in simulators])
            stacked = self.add_weight(
                shape=values.shape, initializer="zeros", dtype=w.dtype,
                name=f"{i}_{w.path.split('/', 1)[-1].replace('/', '_')}",
            )  # fmt: skip
            stacked.assign(values)
            self.stacked.append(stacked)
        names = [layer.name for layer in first.layers]
        self._names = set(names)
        self._mgu = [n for n in names if isinstance(simulators[0].get_layer(n), MGU)]
        self._encoder = "encoder_hidden" in names
        self._linear = "linear" in names
        self.built = True

    @property
    def simulators(self) -> list[keras.Model]:
        """The ``K`` simulators, in order."""
        return self._source.models

    def member(self, index: int) -> RunView:
        """Run ``index``'s view of the stacked weights."""
        return RunView(self, index)

    def write_back(self) -> None:
        """Copy each run's slice of the stacked weights into its own simulator."""
        values = [ops.convert_to_numpy(v) for v in self.stacked]
        for k, model in enumerate(self.simulators):
            for w, stacked in zip(model.trainable_weights, values, strict=True):
                w.assign(stacked[k])

    def _stack(self, name: str, attr: str, cell: bool = False) -> Any:
        """The stacked ``(K, ...)`` variable of the first simulator's weight ``name.attr``."""
        layer = self.simulators[0].get_layer(name)
        return self.stacked[self._slot[id(getattr(layer.cell if cell else layer, attr))]]

    def _dense(self, name: str, x: Any) -> Any:
        """Each group's ``Dense`` ``name`` on ``x`` ``(K, batch, ..., features)``."""
        layer = self.simulators[0].get_layer(name)
        pattern = "kbti,kio->kbto" if len(x.shape) == 4 else "kbi,kio->kbo"
        y = ops.einsum(pattern, x, self._stack(name, "kernel"))
        if layer.use_bias:
            bias = self._stack(name, "bias")
            y = y + ops.reshape(bias, (bias.shape[0],) + (1,) * (len(y.shape) - 2) + (-1,))
        return layer.activation(y)

    def _initial_states(self, u: Any, past: Any) -> list:
        """Per MGU layer, the ``(K, batch, units)`` initial states."""
        if past is not None:
            z = ops.concatenate([ops.transpose(p, (1, 0, 2, 3)) for p in past], axis=-1)
            z = ops.reshape(z, (ops.shape(z)[0], ops.shape(z)[1], -1))
            z = self._dense("encoder_hidden", z)
            return [self._dense(f"encoder_state_{i}_0", z) for i in range(len(self._mgu))]
        batch = ops.shape(u)[1]
        states = []
        for i, name in enumerate(self._mgu):
            units = self.simulators[0].get_layer(name).units
            state_name = f"initial_state_{i}_0"
            if state_name in self._names:
                s = ops.cast(self._stack(state_name, "state"), u.dtype)
                states.append(ops.broadcast_to(s[:, None, :], (len(self.simulators), batch, units)))
            else:
                states.append(ops.zeros((len(self.simulators), batch, units), u.dtype))
        return states

    def call(self, inputs: Any) -> Any:
        if self._encoder:
            u_past, y_past, u = inputs
            past = (u_past, y_past)
        else:
            u, past = inputs, None
        u = ops.transpose(u, (1, 0, 2, 3))  # (K, batch, steps, n_inputs)
        h = u
        for name, h0 in zip(self._mgu, self._initial_states(u, past), strict=True):
            layer = self.simulators[0].get_layer(name)
            bias = self._stack(name, "bias", cell=True) if layer.use_bias else None
            h = kernels.grouped_sequence(
                h, h0, self._stack(name, "kernel", cell=True),
                self._stack(name, "recurrent_kernel", cell=True), bias,
                activation=activation_name(layer.cell.activation),
                recurrent_activation=activation_name(layer.cell.recurrent_activation),
            )  # fmt: skip
        y = self._dense("head", h)
        if self._linear:
            y = y + self._dense("linear", u)
        return ops.transpose(y, (1, 0, 2, 3))

    def compute_output_shape(self, input_shape: Any) -> tuple:
        u_shape = input_shape[-1] if self._encoder else input_shape
        n_outputs = self.simulators[0].outputs[0].shape[-1]
        return (*tuple(u_shape)[:3], n_outputs)


class _Models:
    """The simulators, held where Keras's tracking does not count their weights as the layer's."""

    def __init__(self, models: list[keras.Model]) -> None:
        self.models = models


class RunView:
    """Run ``index`` of a :class:`GroupedSimulators`: its slice of every stacked weight.

    ``get_weights()`` and ``set_weights(values)`` read and write that slice,
    in the order of the run's simulator's ``trainable_weights``; ``name`` is
    the simulator's name. Early stopping keeps and restores a run's best
    weights through it.
    """

    def __init__(self, layer: GroupedSimulators, index: int) -> None:
        self.layer, self.index = layer, index
        self.name = layer.simulators[index].name
        self.stop_training = False

    def get_weights(self) -> list[np.ndarray]:
        return [ops.convert_to_numpy(v)[self.index] for v in self.layer.stacked]

    def set_weights(self, values: list[np.ndarray]) -> None:
        for v, value in zip(self.layer.stacked, values, strict=True):
            full = ops.convert_to_numpy(v).copy()
            full[self.index] = value
            v.assign(full)
