"""The standalone simulator written to an ONNX file: its output named, its band in the metadata.

In the file written by :func:`export_simulator` the output is named after
the model's output channels (:func:`onnx_output_name`), and the file's
metadata carries the simulation's band (:func:`band_metadata`: its
half-width per output at a few levels; the band is ``y -+ w``, so the graph
itself needs no second output) and what the file starts from
(:func:`start_metadata`): an encoder model's file takes a fixed number ``n``
of measured samples (:func:`measured_samples`), said in the metadata, the
graph's name and its doc string.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

import keras
import numpy as np

from keras_mgu.export import onnx_subgraphs
from keras_mgu.sysid.files.standalone import INPUT_NAMES, exported_runs, standalone_simulator
from keras_mgu.sysid.training.lag_run import LAG_CLASSES

__all__ = [
    "METADATA_LEVELS",
    "band_metadata",
    "conversion_backend",
    "describe_start",
    "export_simulator",
    "import_exporters",
    "measured_samples",
    "onnx_output_name",
    "start_metadata",
]

#: The backend every class converts on.
CONVERTING_BACKEND = "jax"


def unconvertible(found: Any, backend: str | None = None) -> str | None:
    """Why ``backend``'s ONNX route (default: the active one) cannot convert ``found``; or None.

    TensorFlow's route leaves a lag class's fused loop as a ``PartitionedCall``,
    which onnxruntime does not run; PyTorch's traces the loop, and Keras's GRU
    and LSTM layers, at one sequence length. JAX's converts every class.
    """
    backend = backend or keras.backend.backend()
    runs = exported_runs(found)
    loops = sorted({run.structure for run in runs if run.structure in LAG_CLASSES})
    cells = sorted({run.config.cell for run in runs if run.structure not in LAG_CLASSES} - {"mgu"})
    if backend == "tensorflow" and loops:
        return f"its exporter cannot convert the {'/'.join(loops)} class's loop"
    if backend == "torch" and (loops or cells):
        what = [f"the {'/'.join(loops)} class's loop"] if loops else []
        what += [f"{'/'.join(c.upper() for c in cells)} layers"] if cells else []
        return f"its exporter traces {' and '.join(what)} at one sequence length"
    return None


def conversion_backend(found: Any, format: str = "onnx") -> str | None:
    """The backend :func:`export_simulator` converts ``found`` on, where not the active one.

    None where the active backend's ONNX route converts it (or for other
    formats). Raises a ``ValueError`` (one line, what to do) where it cannot
    and the JAX route (jax2onnx) is not installed.
    """
    from keras_mgu._onnx_extras import install_command, missing_onnx_packages

    reason = unconvertible(found) if format == "onnx" else None
    if reason is None:
        return None
    missing = missing_onnx_packages(CONVERTING_BACKEND) + (
        [] if _installed(CONVERTING_BACKEND) else [CONVERTING_BACKEND]
    )
    if missing:
        command, note = install_command(CONVERTING_BACKEND, missing)
        raise ValueError(
            f"the {keras.backend.backend()} backend cannot write this model's ONNX file "
            f"({reason}), and the conversion on JAX needs {', '.join(missing)}: "
            f"{command.replace(']', ',jax]')}{note}"
        )
    return CONVERTING_BACKEND


def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


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

    Where the active backend's ONNX route cannot convert the model
    (:func:`conversion_backend`: a lag class's loop on TensorFlow or PyTorch,
    GRU or LSTM layers on PyTorch), the file is written by the same function
    on the JAX backend, in a child process given the model as a model file;
    the model returned is then this backend's (not exported) simulator.

    Raises:
        ValueError: the conversion needs the JAX route and it is not
            installed (the message names the extra).
    """
    from keras_mgu.export import export

    if conversion_backend(found, format) is not None:
        _export_on(CONVERTING_BACKEND, found, str(filepath))
        return standalone_simulator(found)
    import_exporters(format)
    model = standalone_simulator(found)
    # Keras exports only models that were called; 8 steps of zeros.
    zeros = [np.zeros((1, *(d or 8 for d in x.shape[1:])), "float32") for x in model.inputs]
    model(zeros if len(zeros) > 1 else zeros[0])
    export(model, filepath, format=format, verbose=False)
    if format == "onnx":
        _rename_onnx_output(str(filepath), onnx_output_name(found))
        metadata = start_metadata(found)
        if getattr(found, "band", None) is not None:
            metadata.update(band_metadata(found.band))
        _write_metadata(str(filepath), metadata, measured_samples(found))
    return model


def measured_samples(found: Any) -> int | None:
    """The ``n`` measured samples (``u_initial``, ``y_initial``) the simulator of ``found``
    starts from: its encoder's lag; None for a learned-state model (input ``u`` alone)."""
    runs = exported_runs(found)
    if runs[0].config.initial_state != "encoder":
        return None
    return int(runs[0].config.n_initial)


def describe_start(found: Any) -> str:
    """What the simulator of ``found`` starts from, and the ``keras-mgu simulate`` column
    that holds the same simulation (one sentence)."""
    n = measured_samples(found)
    if n is None:
        return (
            "the file simulates u from the learned state, as the y_sim column of keras-mgu simulate"
        )
    return (
        f"the file starts from the first {n} measured samples (u_initial, y_initial) and "
        f"simulates the inputs u after them, as the y_sim_from{n} column of keras-mgu "
        f"simulate --n-initial {n} (from sample {n} on); other n give other simulations"
    )


def start_metadata(found: Any) -> dict[str, str]:
    """The ONNX metadata of what the simulator starts from.

    ``keras_mgu.measured_samples``: ``n`` (:func:`measured_samples`; ``0``
    for a learned-state model), and ``keras_mgu.start``: :func:`describe_start`.
    """
    n = measured_samples(found)
    return {
        "keras_mgu.measured_samples": str(n or 0),
        "keras_mgu.start": describe_start(found),
    }


def _export_on(backend: str, found: Any, filepath: str) -> None:
    """:func:`export_simulator` of ``found`` on ``backend``, in a child process."""
    code = (
        "import sys\n"
        "from keras_mgu import sysid\n"
        "from keras_mgu.sysid.files.onnx_export import export_simulator\n"
        "export_simulator(sysid.load(sys.argv[1]), sys.argv[2])\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        model_file = found.save(os.path.join(folder, "model.kmgu"))
        env = {**os.environ, "KERAS_BACKEND": backend}
        done = subprocess.run(
            [sys.executable, "-c", code, model_file, os.path.abspath(filepath)],
            env=env, capture_output=True, text=True,
        )  # fmt: skip
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"The ONNX conversion on the {backend} backend failed: {last}")


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


def _write_metadata(filepath: str, metadata: dict[str, str], n: int | None) -> None:
    """Add ``metadata`` to the ONNX file ``filepath``'s, and name its graph after ``n``
    (``simulator_from_<n>_measured_samples``, or ``simulator_from_the_learned_state``); in place.
    """
    import onnx

    proto = onnx.load(filepath, load_external_data=False)
    props = {prop.key: prop.value for prop in proto.metadata_props}
    onnx.helper.set_model_props(proto, {**props, **metadata})
    start = "the_learned_state" if n is None else f"{n}_measured_samples"
    proto.graph.name = f"simulator_from_{start}"
    proto.graph.doc_string = metadata["keras_mgu.start"]
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


def _value_names(graph: Any) -> set[str]:
    """Every value name in ``graph`` and its subgraphs."""
    names = {v.name for v in (*graph.input, *graph.output, *graph.value_info)}
    names |= {t.name for t in graph.initializer}
    for node in graph.node:
        names |= {*node.input, *node.output} - {""}
        for sub in onnx_subgraphs(node):
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
        for sub in onnx_subgraphs(node):
            _rename_value(sub, old, new)
