"""A model file to run the commands on without identifying one, and its data."""

from __future__ import annotations

import os

import numpy as np

from keras_mgu.cli import main

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
#: A stored model file (encoder state; its input ``force``, its output ``displacement``).
MODEL = os.path.join(ROOT, "tests", "fixtures", "model_files", "every_class_before_rooms.kmgu")


def write_inputs(path: os.PathLike, n_samples: int = 100) -> str:
    """A CSV file of the model's input (``force``) alone: ``simulate`` runs it unscored."""
    force = np.sin(np.arange(n_samples) / 7.0)
    np.savetxt(path, force[:, None], header="force", comments="", fmt="%.6g")
    return str(path)


def exit_status(argv: list[str]) -> int:
    """:func:`keras_mgu.cli.main`'s status, also where argparse exits."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code
