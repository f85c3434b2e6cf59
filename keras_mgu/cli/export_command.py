"""``keras-mgu export``: a saved model as a standalone ONNX simulator.

Reads the model file (``.kmgu``) and writes one ONNX file that simulates in
physical units: the standardisation, the linear model (when the model has
one), the network(s) and the average of averaged runs are all in it
(:func:`keras_mgu.sysid.files.onnx_export.export_simulator`; docs/deployment.md).

Inputs of the file (float32, batch first): learned-state models take ``u``
(batch, N, n_inputs) and simulate from the learned state (fitting the state
to measured outputs is an optimisation that stays in Python); encoder models
take ``u_initial`` (batch, n, n_inputs) and ``y_initial`` (batch, n,
n_outputs), the first n measured samples, and ``u`` (batch, M, n_inputs),
the inputs after them. The output is the simulation (batch, N or M,
n_outputs), named after the model's output channels: ``y`` for an output
``y``, ``y1_y2`` for outputs ``y1`` and ``y2``. The n an encoder model's file
takes is fixed (its encoder's lag): ``export`` says it, the file's metadata
(``keras_mgu.measured_samples``) and graph name carry it, and without
``--out`` the file is named after it (``mgu_from20.onnx`` beside ``mgu.kmgu``).
An ``--out`` whose name does not end in ``.onnx`` is refused: the file is
what its name says.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from keras_mgu.cli.backends import BACKENDS, configured_backend
from keras_mgu.cli.errors import MissingExtra, OptionError, check_out_file
from keras_mgu.cli.model_file import read_model_info
from keras_mgu.cli.simulate import load_model

__all__ = ["add_arguments", "check_arguments", "check_exporter", "read_inputs", "run_command"]

HELP = "write a saved model (.kmgu) as a standalone ONNX simulator"
DESCRIPTION = (
    __doc__.split("\n\n", 1)[1]
    + """
examples:
  keras-mgu export --format onnx --out mgu.onnx \\
      --model outputs/system_identification/network_mgu_h32_lr0.01/network_mgu.kmgu
  keras-mgu export --model mgu.kmgu --out mgu.onnx --backend tensorflow
  keras-mgu export --model mgu.kmgu       # writes mgu.onnx, or mgu_from20.onnx (encoder)
"""
)
FORMATS = ("onnx",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``export``."""
    parser.add_argument("--model", required=True, metavar="FILE",
                        help="model file (.kmgu) from keras-mgu identify")  # fmt: skip
    parser.add_argument("--format", choices=FORMATS, default="onnx", help="file format")
    parser.add_argument("--out", metavar="FILE",
                        help="the file to write, its name ending in the format's suffix (.onnx) "
                        "(default: beside the model file, named after it and the measured "
                        "samples the file starts from: mgu.onnx, mgu_from20.onnx)")  # fmt: skip
    parser.add_argument("--backend", choices=tuple(BACKENDS),
                        help="Keras backend whose exporter writes the file (default: "
                        "$KERAS_BACKEND, else Keras' configured one)")  # fmt: skip


def check_arguments(args: argparse.Namespace) -> None:
    """``--out`` named for the format (``.onnx``), the format's exporter installed
    (:func:`check_exporter`), the model file there.

    :class:`OptionError`, :class:`MissingExtra` otherwise; before any other work.
    """
    if args.out is not None:
        check_out_file("--out", args.out, f".{args.format}", "export", args.format.upper())
    check_exporter(args)
    if not os.path.isfile(args.model):
        raise OptionError(f"--model: no such file: {args.model!r}")


def check_exporter(args: argparse.Namespace) -> None:
    """Refuse at once (:class:`MissingExtra`, one line) where the backend's exporter is missing.

    The backend is ``--backend``, else the one Keras would load
    (:func:`~keras_mgu.cli.backends.configured_backend`); its ONNX route's
    packages are looked up without importing them, and the message names
    the extra that installs them (``pip install "keras-mgu[export-jax]"``).
    """
    from keras_mgu._onnx_extras import install_command, missing_onnx_packages

    if args.format != "onnx":
        return
    backend = args.backend or configured_backend()
    missing = missing_onnx_packages(backend)
    if missing:
        command, note = install_command(backend, missing)
        them = "it" if len(missing) == 1 else "them"
        raise MissingExtra(
            f"ONNX export on the {backend} backend needs {', '.join(missing)} (not installed); "
            f"install {them} with: {command}{note}"
        )


def read_inputs(args: argparse.Namespace) -> None:
    """``args.info``: the model file's manifest, checked before the backend loads.

    A file that is not a model file is refused at once (:class:`OptionError`).
    """
    args.info = read_model_info(args.model)


def run_command(args: argparse.Namespace) -> int:
    """Load the model, write the ONNX file, print its inputs and outputs; exit status 0."""
    import keras

    from keras_mgu.sysid.files.onnx_export import (
        conversion_backend,
        describe_start,
        export_simulator,
        import_exporters,
        onnx_output_name,
        unconvertible,
    )

    import_exporters(args.format)  # before loading: Keras's serialisation imports TensorFlow
    found = load_model(args.model)
    args.out = args.out or default_out(args.model, found, args.format)
    try:
        elsewhere = conversion_backend(found, args.format)
        if elsewhere is not None:
            print(
                f"converted on the {elsewhere} backend: the {keras.backend.backend()} backend's "
                f"exporter cannot convert this model ({unconvertible(found)})",
                flush=True,
            )
        model = export_simulator(found, args.out, format=args.format)
    except (ValueError, ImportError, RuntimeError) as err:
        raise OptionError(f"cannot export: {err}") from err
    inputs = ", ".join(f"{x.name} {_shape(x.shape)}" for x in model.inputs)
    print(f"inputs: {inputs} (physical units: {', '.join(found.input_names)})")
    output = f"{onnx_output_name(found)} {_shape(model.output.shape)}"
    print(f"output: {output} (physical units: {', '.join(found.output_names)})")
    print(describe_start(found))
    print(f"{args.format}: {args.out}")
    return 0


def default_out(model_path: str, found: Any, format: str = "onnx") -> str:
    """The file ``export`` writes without ``--out``: beside the model file, named after it and,
    for an encoder model, the measured samples its file starts from (``mgu_from20.onnx``)."""
    from keras_mgu.sysid.files.onnx_export import measured_samples

    n = measured_samples(found)
    stem = os.path.splitext(model_path)[0]
    return f"{stem}{'' if n is None else f'_from{n}'}.{format}"


def _shape(shape: tuple) -> str:
    names = iter(("batch", "N"))
    return "(" + ", ".join(str(d) if d is not None else next(names) for d in shape) + ")"
