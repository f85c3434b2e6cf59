"""One Keras model that simulates in physical units, for export: :func:`standalone_simulator`.

:meth:`Identification.simulate <keras_mgu.sysid.Identification.simulate>`
standardises in NumPy, runs the linear model with SciPy and the network with
Keras. :func:`standalone_simulator` puts all of it into one Keras model of
the same numbers (float32), so that ``model.export(path, format="onnx")``
writes a simulator that needs nothing else:

* :class:`ChannelAffine`: ``x * scale + offset`` per channel (the
  standardisation and its inverse);
* :class:`ARXCell` in a ``keras.layers.RNN`` (:class:`LinearSimulation`): the
  linear model's recursion, at rest at its first sample as
  :meth:`LinearModel.simulate <keras_mgu.sysid.LinearModel.simulate>`;
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
In the file written by :func:`export_simulator` the output is named after
the model's output channels (:func:`onnx_output_name`), and the file's
metadata carries the simulation's band (:func:`band_metadata`: its
half-width per output at a few levels; the band is ``y -+ w``, so the graph
itself needs no second output).
"""

from __future__ import annotations

import collections
import json
import re
from typing import Any

import keras
import numpy as np
from keras import ops

__all__ = [
    "ARXCell",
    "ChannelAffine",
    "LinearSimulation",
    "export_simulator",
    "import_exporters",
    "onnx_output_name",
    "standalone_simulator",
]

#: The names of the simulator's inputs (see the module).
INPUT_NAMES = ("u", "u_initial", "y_initial")


@keras.saving.register_keras_serializable(package="keras_mgu")
class ChannelAffine(keras.layers.Layer):
    """``x * scale + offset`` over the last axis (``scale``, ``offset``: one float per channel)."""

    def __init__(self, scale: Any, offset: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scale = [float(v) for v in np.reshape(scale, -1)]
        self.offset = [float(v) for v in np.reshape(offset, -1)]
        if len(self.scale) != len(self.offset):
            raise ValueError(
                f"`scale` and `offset` must have one entry per channel; received "
                f"{len(self.scale)} and {len(self.offset)}."
            )

    def call(self, x):
        scale = ops.convert_to_tensor(np.float32(self.scale), dtype=self.compute_dtype)
        offset = ops.convert_to_tensor(np.float32(self.offset), dtype=self.compute_dtype)
        return x * scale + offset

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return input_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "scale": self.scale, "offset": self.offset}


def _arx_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``W`` with ``y[k] = r[k] W + c``, ``r[k] = [y[k-1..k-na], u[k], u[k-1..k-nb+1]]``.

    Block ``j`` of the output part holds ``y[k-j]`` (all outputs), block
    ``j`` of the input part ``u[k-j]`` (all inputs).
    """
    n_out, na = a.shape
    _, n_in, nb = b.shape
    w = np.zeros((na * n_out + nb * n_in, n_out))
    for i in range(n_out):
        for j in range(na):
            w[j * n_out + i, i] = -a[i, j]
        for j in range(nb):
            for m in range(n_in):
                w[na * n_out + j * n_in + m, i] = b[i, m, j]
    return w


@keras.saving.register_keras_serializable(package="keras_mgu")
class ARXCell(keras.layers.Layer):
    """One step of a multi-input ARX model (:class:`~keras_mgu.sysid.LinearModel`).

    Input ``u[k]`` ``(batch, n_inputs)``; states: the past outputs
    ``(batch, na * n_outputs)`` (``y[k-1]`` first) and, when ``nb > 1``, the
    past inputs ``(batch, (nb - 1) * n_inputs)`` (``u[k-1]`` first). Output
    ``y[k]`` ``(batch, n_outputs)``.

    Args:
        a, b, c: The ARX coefficients, ``(n_outputs, na)``,
            ``(n_outputs, n_inputs, nb)`` and ``(n_outputs,)``.
    """

    def __init__(self, a: Any, b: Any, c: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.a, self.b, self.c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
        if self.a.ndim != 2 or self.b.ndim != 3 or self.c.shape != (len(self.a),):
            raise ValueError(
                "ARX coefficients must be a (n_outputs, na), b (n_outputs, n_inputs, nb) and "
                f"c (n_outputs,); received {self.a.shape}, {self.b.shape}, {self.c.shape}."
            )
        (self.n_outputs, self.na), (_, self.n_inputs, self.nb) = self.a.shape, self.b.shape
        self.state_size = [self.na * self.n_outputs]
        if self.nb > 1:
            self.state_size.append((self.nb - 1) * self.n_inputs)
        self.output_size = self.n_outputs
        self._w = _arx_matrix(self.a, self.b).astype("float32")

    def call(self, u, states):
        y_past = states[0]
        u_past = states[1:]
        r = ops.concatenate([y_past, u, *u_past], axis=-1)
        w = ops.convert_to_tensor(self._w, dtype=self.compute_dtype)
        c = ops.convert_to_tensor(self.c.astype("float32"), dtype=self.compute_dtype)
        y = ops.matmul(r, w) + c
        new = [ops.concatenate([y, y_past[:, : (self.na - 1) * self.n_outputs]], axis=-1)]
        if self.nb > 1:
            new.append(ops.concatenate([u, u_past[0][:, : (self.nb - 2) * self.n_inputs]], -1))
        return y, new

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "a": self.a.tolist(),
            "b": self.b.tolist(),
            "c": self.c.tolist(),
        }


@keras.saving.register_keras_serializable(package="keras_mgu")
class LinearSimulation(keras.layers.Layer):
    """The ARX model run free on ``u`` ``(batch, N, n_inputs)``; ``(batch, N, n_outputs)`` out.

    ``layer(u, y0=y0)``, or ``layer(u)`` when ``y0`` is given here: at rest
    at the first sample, the output held at ``y0`` ``(batch, n_outputs)``
    and the input at ``u[:, 0]`` before sample 0, as :meth:`LinearModel.simulate
    <keras_mgu.sysid.LinearModel.simulate>` (in float32). ``layer(u,
    initial_state=states)``: continued from the ``states`` a layer with
    ``return_state=True`` returned after the samples before ``u``.
    """

    def __init__(
        self, a: Any, b: Any, c: Any, y0: Any = None, return_state: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.cell = ARXCell(a, b, c, name="arx")
        self.y0 = None if y0 is None else [float(v) for v in np.reshape(y0, -1)]
        self.return_state = bool(return_state)
        self.rnn = keras.layers.RNN(
            self.cell, return_sequences=True, return_state=self.return_state, name="arx_loop"
        )

    def call(self, u, y0=None, initial_state=None):
        if initial_state is None:
            initial_state = self.rest_state(u, y0)
        if keras.backend.backend() == "torch":  # keras.layers.RNN would trace at one length
            return self._torch_loop(u, list(initial_state))
        return self.rnn(u, initial_state=list(initial_state))

    def _torch_loop(self, u, states):
        import torch

        cell = self.cell
        w = torch.as_tensor(cell._w, device=u.device)
        c = torch.as_tensor(cell.c.astype("float32"), device=u.device)
        u_past = states[1] if cell.nb > 1 else u[:, 0, :0]
        y, y_past, u_past = _arx_script()(u, w, c, states[0], u_past)
        if not self.return_state:
            return y
        return [y, y_past, *([u_past] if cell.nb > 1 else [])]

    def rest_state(self, u, y0=None) -> list:
        """The states at rest at ``y0`` (or the layer's) and ``u[:, 0]``."""
        if y0 is None:
            if self.y0 is None:
                raise ValueError("LinearSimulation needs `y0` or `initial_state`.")
            y0 = ops.zeros_like(u[:, 0, :1]) + np.float32(self.y0)
        states = [ops.tile(y0, (1, self.cell.na))]
        if self.cell.nb > 1:
            states.append(ops.tile(u[:, 0, :], (1, self.cell.nb - 1)))
        return states

    def compute_output_shape(self, u_shape, y0_shape=None, initial_state_shape=None):
        out = (*u_shape[:2], self.cell.n_outputs)
        if not self.return_state:
            return out
        return [out, *((u_shape[0], size) for size in self.cell.state_size)]

    def get_config(self) -> dict:
        cell = self.cell
        return {
            **super().get_config(),
            "a": cell.a.tolist(),
            "b": cell.b.tolist(),
            "c": cell.c.tolist(),
            "y0": self.y0,
            "return_state": self.return_state,
        }


_ARX_SCRIPT: list = []


def _arx_script():
    """The ARX loop as a TorchScript function: one ONNX ``Loop`` over any number of steps."""
    if not _ARX_SCRIPT:
        import torch

        def arx_loop(u, w, c, y_past, u_past):
            n_y, n_u = y_past.shape[1], u_past.shape[1]
            outputs = []
            for k in range(u.shape[1]):
                u_k = u[:, k]
                y = torch.matmul(torch.cat([y_past, u_k, u_past], dim=1), w) + c
                y_past = torch.cat([y, y_past], dim=1)[:, :n_y]
                u_past = torch.cat([u_k, u_past], dim=1)[:, :n_u]
                outputs.append(y)
            return torch.stack(outputs, dim=1), y_past, u_past

        _ARX_SCRIPT.append(torch.jit.script(arx_loop))
    return _ARX_SCRIPT[0]


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
    counts = collections.Counter(found.members or (found.best,))
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
    outputs = [
        ChannelAffine([w / total] * n_out, [0.0] * n_out, name=f"run{k}_weight")(
            _run_outputs(found.runs[k], k, inputs, y0)
        )
        for k, w in counts.items()
    ]
    y = outputs[0] if len(outputs) == 1 else keras.layers.Add()(outputs)
    y = keras.layers.Identity(name="y")(y)
    inputs = list(inputs.values())
    return keras.Model(inputs if len(inputs) > 1 else inputs[0], y, name="standalone_simulator")


def _exported_runs(found: Any) -> list:
    return [found.runs[k] for k in sorted(set(found.members or (found.best,)))]


def onnx_output_name(found: Any) -> str:
    """The name of the output of :func:`export_simulator`'s ONNX file for ``found``.

    ``found.output_names`` joined with ``_`` (``"y"`` for one output ``y``;
    ``"y1_y2"`` for two), each reduced to letters, digits and ``_``; ``"y"``
    when the model names no outputs; prefixed with ``y_`` when it would start
    with a digit, and suffixed with ``_sim`` when it would be the name of an
    input (:data:`INPUT_NAMES`).
    """
    parts = [re.sub(r"[^A-Za-z0-9_]+", "_", str(n)).strip("_") for n in found.output_names]
    name = "_".join(p for p in parts if p) or "y"
    if name[0].isdigit():
        name = f"y_{name}"
    return f"{name}_sim" if name in INPUT_NAMES else name


def import_exporters(format: str = "onnx") -> list[str]:
    """Import the modules an export imports, their start-up lines kept off stderr.

    Keras's serialisation (the networks' ``get_config``, as a model is
    loaded or copied) imports TensorFlow wherever it is installed, on every
    backend, and tf2onnx imports it on the TensorFlow backend; TensorFlow's
    native libraries then print their start-up lines (oneDNN, CUDA drivers)
    on file descriptor 2. Imported here first with that descriptor sent
    aside (:func:`keras_mgu._quiet.import_quietly`), they stay quiet later.
    Modules not installed, or whose import fails, are left to the export to
    report (:func:`keras_mgu.export.check_exportable` names the missing
    ones). Returns the modules that are loaded.
    """
    from keras_mgu._quiet import import_quietly
    from keras_mgu.export import ONNX_PACKAGES

    routes = ONNX_PACKAGES.get(keras.backend.backend(), ()) if format == "onnx" else ()
    return import_quietly("tensorflow", *routes)


def export_simulator(found: Any, filepath: str, format: str = "onnx") -> keras.Model:
    """Write :func:`standalone_simulator` of ``found`` to ``filepath`` with ``model.export``.

    Goes through :func:`keras_mgu.export.export` (its checks, the native
    loops off); the exporters are imported by :func:`import_exporters`. An
    ONNX file's output is then renamed :func:`onnx_output_name` (the
    exporters name it after an internal tensor). Returns the exported Keras
    model (its ``inputs`` name the file's inputs).

    Raises:
        ValueError: GRU or LSTM runs on the PyTorch backend, whose Keras
            layers the ONNX route traces at one sequence length (export on
            the TensorFlow or JAX backend instead).
    """
    from keras_mgu.export import export

    cells = sorted({run.config.cell for run in _exported_runs(found)} - {"mgu"})
    if cells and format == "onnx" and keras.backend.backend() == "torch":
        raise ValueError(
            f"Cannot export {'/'.join(c.upper() for c in cells)} networks to ONNX on the PyTorch "
            "backend: Keras traces its GRU and LSTM layers there at one sequence length, so the "
            "file would simulate no other length. Export on the TensorFlow or JAX backend "
            "(KERAS_BACKEND=tensorflow or jax, or keras-mgu export --backend tensorflow); the "
            "model file loads on any backend."
        )
    import_exporters(format)
    model = standalone_simulator(found)
    # Keras exports only models that were called; 8 steps of zeros.
    zeros = [np.zeros((1, *(d or 8 for d in x.shape[1:])), "float32") for x in model.inputs]
    model(zeros if len(zeros) > 1 else zeros[0])
    export(model, filepath, format=format, verbose=False)
    if format == "onnx":
        _rename_onnx_output(str(filepath), onnx_output_name(found))
        if getattr(found, "band", None) is not None:
            _write_band_metadata(str(filepath), found.band)
    return model


#: The levels whose free-run band half-widths an ONNX file's metadata carries.
METADATA_LEVELS = (0.9, 0.95, 0.99)


def band_metadata(band: Any) -> dict[str, str]:
    """The ONNX metadata of a band: ``keras_mgu.band_half_width.<level>`` per level.

    Each value is a JSON list, one half-width per output in physical units,
    of the simulation's band (:mod:`~keras_mgu.sysid.judging.band`): the standalone
    simulator's output ``y`` lies within ``y -+ w`` with about that
    probability, after the samples that set its state.
    """
    return {
        f"keras_mgu.band_half_width.{level:g}": json.dumps(
            [float(w) for w in band.half_width(level)]
        )
        for level in METADATA_LEVELS
    }


def _write_band_metadata(filepath: str, band: Any) -> None:
    """Add :func:`band_metadata` to the ONNX file ``filepath``'s metadata, in place."""
    import onnx

    proto = onnx.load(filepath, load_external_data=False)
    props = {prop.key: prop.value for prop in proto.metadata_props}
    onnx.helper.set_model_props(proto, {**props, **band_metadata(band)})
    onnx.save(proto, filepath)


def _rename_onnx_output(filepath: str, name: str) -> None:
    """Name the single output of the ONNX file ``filepath`` ``name``, in place.

    A value of the graph (or of a subgraph) that already has the name is
    renamed first; the output takes the name everywhere it is read. Tensors
    stored beside the file stay where they are.
    """
    import onnx

    proto = onnx.load(filepath, load_external_data=False)
    graph = proto.graph
    if len(graph.output) != 1:
        raise ValueError(f"Expected one output in {filepath!r}; found {len(graph.output)}.")
    old = graph.output[0].name
    if old == name:
        return
    taken = _value_names(graph)
    if name in taken:
        spare = next(f"{name}_{i}" for i in range(len(taken) + 1) if f"{name}_{i}" not in taken)
        _rename_value(graph, name, spare)
    if old in {x.name for x in graph.input}:  # the output is an input: pass it on instead
        graph.node.append(onnx.helper.make_node("Identity", [old], [name], name=f"{name}_out"))
        graph.output[0].name = name
    else:
        _rename_value(graph, old, name)
    onnx.save(proto, filepath)


def _subgraphs(node: Any) -> list:
    """The graphs in ``node``'s attributes (the bodies of ``Loop``, ``If``, ``Scan``)."""
    graphs = []
    for attribute in node.attribute:
        if attribute.HasField("g"):
            graphs.append(attribute.g)
        graphs.extend(attribute.graphs)
    return graphs


def _value_names(graph: Any) -> set[str]:
    """Every value name in ``graph`` and its subgraphs."""
    names = {v.name for v in (*graph.input, *graph.output, *graph.value_info)}
    names |= {t.name for t in graph.initializer}
    for node in graph.node:
        names |= {*node.input, *node.output} - {""}
        for sub in _subgraphs(node):
            names |= _value_names(sub)
    return names


def _rename_value(graph: Any, old: str, new: str) -> None:
    """Rename the value ``old`` to ``new`` (a name used nowhere) in ``graph`` and its subgraphs."""
    for value in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        if value.name == old:
            value.name = new
    for node in graph.node:
        for names in (node.input, node.output):
            for i, value in enumerate(names):
                if value == old:
                    names[i] = new
        for sub in _subgraphs(node):
            _rename_value(sub, old, new)
