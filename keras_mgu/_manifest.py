"""The manifest of a model file (``.kmgu``), read without Keras or a backend.

A model file (:mod:`keras_mgu.sysid.files.kmgu`) is a zip archive whose
:data:`MANIFEST` entry, JSON, names its format and version, the record's
channels and every run's settings. This module reads and checks it with the
standard library alone, so ``keras-mgu simulate`` and ``export`` refuse a file
that is not a model file, or data without the model's columns, before they
import a backend; :mod:`~keras_mgu.sysid.files.kmgu` uses the same checks when it
loads the whole file.
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from keras_mgu._version import __version__

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "ModelFileError",
    "check_manifest",
    "read_manifest",
    "read_model_archive",
]

T = TypeVar("T")

#: The manifest's ``format`` value, and the newest format version this code reads and writes.
FORMAT, FORMAT_VERSION = "keras_mgu.identification", 1
MANIFEST = "keras_mgu_identification.json"


class ModelFileError(ValueError):
    """A file that is not a readable keras-mgu model file (the message says why)."""


def read_manifest(filepath: str | os.PathLike) -> dict[str, Any]:
    """The checked manifest of the model file ``filepath`` (:func:`check_manifest`).

    Raises:
        FileNotFoundError: no file at ``filepath``.
        ModelFileError: not a zip archive, no manifest, another format or a
            newer format version, or a manifest that is not JSON.
    """
    return read_model_archive(filepath, lambda archive, manifest: manifest, "its manifest")


def read_model_archive(
    filepath: str | os.PathLike, read: Callable[[zipfile.ZipFile, dict], T], what: str
) -> T:
    """``read(archive, manifest)`` of the model file ``filepath``, its manifest checked first.

    ``what`` names what ``read`` reads, for the message of a damaged file
    ("... (its manifest does not read: ...)").

    Raises:
        FileNotFoundError: no file at ``filepath``.
        ModelFileError: not a zip archive, a manifest :func:`check_manifest`
            refuses, or an entry that is missing or does not read.
    """
    filepath = os.fspath(filepath)
    if not os.path.isfile(filepath):
        raise FileNotFoundError(f"No such model file: {filepath!r}.")
    try:
        with zipfile.ZipFile(filepath) as archive:
            return read(archive, check_manifest(archive, filepath))
    except (zipfile.BadZipFile, zlib.error) as err:
        raise ModelFileError(
            f"{filepath!r} is not a keras-mgu model file, or it is truncated or corrupted "
            f"(not a readable zip archive: {err})."
        ) from None
    except (KeyError, TypeError, ValueError, OSError, EOFError) as err:
        if isinstance(err, ModelFileError):
            raise
        raise ModelFileError(
            f"{filepath!r} is a damaged keras-mgu model file ({what} does not read: "
            f"{type(err).__name__}: {err})."
        ) from None


def check_manifest(archive: zipfile.ZipFile, filepath: str) -> dict[str, Any]:
    """The manifest of the open ``archive``, checked: format and a version this code reads."""
    names = set(archive.namelist())
    if MANIFEST not in names:
        if {"config.json", "metadata.json"} <= names:
            raise ModelFileError(
                f"{filepath!r} is a Keras model archive (.keras), not a keras-mgu model file "
                "(an Identification saved with .save()); load it with keras.saving.load_model."
            )
        raise ModelFileError(
            f"{filepath!r} is a zip archive but not a keras-mgu model file (it has no "
            f"{MANIFEST!r})."
        )
    manifest = json.loads(archive.read(MANIFEST))
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ModelFileError(
            f"{filepath!r} is not a keras-mgu model file (its manifest's format is not {FORMAT!r})."
        )
    version = manifest.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise ModelFileError(f"{filepath!r} has a bad format version {version!r}.")
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"{filepath!r} was written by a newer keras-mgu ({manifest.get('keras_mgu_version')}, "
            f"format version {version}); this keras-mgu ({__version__}) reads format versions up "
            f"to {FORMAT_VERSION}. Upgrade keras-mgu to load it."
        )
    return manifest
