"""One Keras model that simulates in physical units, for export: :func:`standalone_simulator`.

:meth:`Identification.simulate <keras_mgu.sysid.Identification.simulate>`
standardises in NumPy, runs the linear model with SciPy and the network with
Keras. :func:`standalone_simulator` puts all of it into one Keras model of
the same numbers (float32), so that ``model.export(path, format="onnx")``
writes a simulator that needs nothing else:

* the standardisation and its inverse, and the linear model's recursion
  (:mod:`~keras_mgu.sysid.files.standalone_layers`);
* each run's network, and the weighted average of the averaged runs.

Learned-state models: input ``u`` ``(batch, N, n_inputs)``, output ``y``
``(batch, N, n_outputs)``, simulated from the learned state, as
``simulate(u)``. Fitting the state to measured outputs
(``simulate(u, y_initial)`` for these models) is an optimisation in Python
and is not in the model. Encoder models: inputs ``[u_initial, y_initial, u]``:
the experiment's first ``n`` inputs ``(batch, n, n_inputs)`` and measured
outputs ``(batch, n, n_outputs)`` (``n`` the encoder's lag,
:attr:`RecipeConfig.n_initial`), then the ``M`` inputs after them ``(batch, M,
n_inputs)``; output ``y`` ``(batch, M, n_outputs)``, the simulation of those
``M`` samples: ``simulate(concatenate([u_initial, u]), y_initial)[n:]``.
A model with dead time (``path.input_delay``) delays its physical inputs at
the front of the graph, once (:class:`~keras_mgu.sysid.files.standalone_layers.InputDelay`:
``u`` alone, or ``u_initial`` and ``u`` as one sequence, ``u`` reading the
end of ``u_initial``), as
:meth:`~keras_mgu.sysid.Identification.simulate` does; the sequence must then
be longer than the longest delay.
Written to an ONNX file by :mod:`~keras_mgu.sysid.files.onnx_export`.
"""

from __future__ import annotations

import collections
from typing import Any

import keras
import numpy as np

from keras_mgu.sysid.files.standalone_layers import ChannelAffine, InputDelay, LinearSimulation

__all__ = ["INPUT_NAMES", "exported_runs", "standalone_simulator"]

#: The names of the simulator's inputs (see the module).
INPUT_NAMES = ("u", "u_initial", "y_initial")


def _standardise(normalizer: Any, kind: str, name: str) -> ChannelAffine:
    mean = np.asarray(getattr(normalizer, f"{kind}_mean"))
    std = np.asarray(getattr(normalizer, f"{kind}_std"))
    return ChannelAffine(1.0 / std, -mean / std, name=name)


def _unstandardise(normalizer: Any, name: str) -> ChannelAffine:
    return ChannelAffine(normalizer.y_std, normalizer.y_mean, name=name)


def _run_outputs(run: Any, k: int, inputs: dict, y0_start: np.ndarray) -> Any:
    """Run ``k``'s simulation in physical units; ``inputs``: the model's, by name."""
    path = run.path
    model = _renamed_network(run.model, k)
    u_s = _standardise(path.outer, "u", f"run{k}_u_standardised")(inputs["u"])
    if "y_initial" not in inputs:
        y_lin = None
        if path.linear is not None:
            y0 = path.outer.transform_y(y0_start)
            y_lin = _linear(path, k, "linear", y0=y0)(u_s)
        return _physical(path, model(_network_inputs(path, u_s, y_lin, k, "")), y_lin, k)
    # Encoder: the first n samples (static length), then the M simulated ones; the linear
    # model runs over the first and carries its state on over the others.
    u_init_s = _standardise(path.outer, "u", f"run{k}_u_initial_standardised")(inputs["u_initial"])
    y_init_s = _standardise(path.outer, "y", f"run{k}_y_initial_standardised")(inputs["y_initial"])
    y_hist, lin_hist, lin_future = y_init_s, None, None
    if path.linear is not None:
        lin_hist, *states = _linear(path, k, "linear_initial", return_state=True)(
            u_init_s, y0=y_init_s[:, 0, :]
        )
        lin_future = _linear(path, k, "linear")(u_s, initial_state=states)
        residual = keras.layers.Subtract(name=f"run{k}_residual")([y_init_s, lin_hist])
        y_hist = _standardise(path.inner, "y", f"run{k}_residual_standardised")(residual)
    x_hist = _network_inputs(path, u_init_s, lin_hist, k, "_initial")
    x = _network_inputs(path, u_s, lin_future, k, "")
    return _physical(path, model([x_hist, y_hist, x]), lin_future, k)


def _renamed_network(model: keras.Model, k: int) -> keras.Model:
    """A copy of ``model`` (same weights) whose model, layers and variables say ``run{k}_``.

    The runs' networks share their names; the PyTorch exporter keys the parameters by
    variable path, so two runs with the same paths would collide there.
    """

    def renamed(layer: keras.layers.Layer) -> keras.layers.Layer:
        return layer.__class__.from_config({**layer.get_config(), "name": f"run{k}_{layer.name}"})

    copy = keras.models.clone_model(model, clone_function=renamed)
    copy.set_weights(model.get_weights())
    return keras.Model(copy.inputs, copy.output, name=f"run{k}_network")


def _linear(path: Any, k: int, name: str, **kwargs: Any) -> LinearSimulation:
    linear = path.linear
    return LinearSimulation(linear.a, linear.b, linear.c, name=f"run{k}_{name}", **kwargs)


def _network_inputs(path: Any, u_s: Any, y_lin: Any, k: int, tag: str) -> Any:
    """``u_s``, or the standardised ``[u_s, y_lin]`` with the linear model."""
    if y_lin is None:
        return u_s
    both = keras.layers.Concatenate(name=f"run{k}_u_and_linear{tag}")([u_s, y_lin])
    return _standardise(path.inner, "u", f"run{k}_inner_standardised{tag}")(both)


def _physical(path: Any, y_net: Any, y_lin: Any, k: int) -> Any:
    if y_lin is not None:
        y_net = _unstandardise(path.inner, f"run{k}_residual_physical")(y_net)
        y_net = keras.layers.Add(name=f"run{k}_linear_plus_network")([y_net, y_lin])
    return _unstandardise(path.outer, f"run{k}_physical")(y_net)


def standalone_simulator(found: Any) -> keras.Model:
    """One Keras model of ``found``'s simulation, physical units in and out (see the module).

    Args:
        found: An :class:`~keras_mgu.sysid.Identification` (its averaged
            members are averaged in the model, with their weights).

    Returns:
        ``u -> y`` (learned state) or ``[u_initial, y_initial, u] -> y`` (encoder).
    """
    counts = collections.Counter(found.kept)
    states = {found.runs[k].config.initial_state for k in counts}
    if len(states) != 1:
        raise ValueError(f"The averaged runs mix initial states {sorted(states)}; cannot export.")
    outer = found.runs[next(iter(counts))].path.outer
    n_in, n_out = len(outer.u_mean), len(outer.y_mean)
    inputs = {"u": keras.Input((None, n_in), name="u")}
    if states == {"encoder"}:
        lags = {found.runs[k].config.n_initial for k in counts}
        if len(lags) != 1:
            raise ValueError(f"The averaged runs' encoders read different lags {sorted(lags)}.")
        n = lags.pop()
        inputs = {
            "u_initial": keras.Input((n, n_in), name="u_initial"),
            "y_initial": keras.Input((n, n_out), name="y_initial"),
            **inputs,
        }
    y0 = found.start[1][0] if found.start is not None else np.asarray(outer.y_mean)
    total = sum(counts.values())
    fed = _delayed(inputs, {tuple(found.runs[k].path.input_delay) for k in counts})
    outputs = [
        ChannelAffine([w / total] * n_out, [0.0] * n_out, name=f"run{k}_weight")(
            _run_outputs(found.runs[k], k, fed, y0)
        )
        for k, w in counts.items()
    ]
    y = outputs[0] if len(outputs) == 1 else keras.layers.Add()(outputs)
    y = keras.layers.Identity(name="y")(y)
    inputs = list(inputs.values())
    return keras.Model(inputs if len(inputs) > 1 else inputs[0], y, name="standalone_simulator")


def _delayed(inputs: dict, delays: set) -> dict:
    """``inputs`` with ``u`` (and ``u_initial`` before it, as one sequence) delayed."""
    if len(delays) != 1:
        raise ValueError(f"The averaged runs have different input delays {sorted(delays)}.")
    delay = delays.pop()
    if not any(delay):
        return inputs
    if "u_initial" not in inputs:
        return {**inputs, "u": InputDelay(delay, name="u_delayed")(inputs["u"])}
    u_initial = InputDelay(delay, name="u_initial_delayed")(inputs["u_initial"])
    u = InputDelay(delay, name="u_delayed")(inputs["u"], history=inputs["u_initial"])
    return {**inputs, "u_initial": u_initial, "u": u}


def exported_runs(found: Any) -> list:
    """The runs the simulator holds: the averaged ones, else the best."""
    return [found.runs[k] for k in sorted(set(found.kept))]
