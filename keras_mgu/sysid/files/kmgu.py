"""Model files: the format of an :class:`~keras_mgu.sysid.Identification` saved as a ``.kmgu`` file.

This module knows the file, not the class: :func:`write_model_file` takes any
object with an identification's fields and :func:`read_model_file` returns
them as a dict; :meth:`Identification.save` and :func:`keras_mgu.sysid.load`
(in :mod:`~keras_mgu.sysid.identification`) are the public ends.

A model file is a zip archive (suffix :data:`SUFFIX`) holding:

* ``keras_mgu_identification.json``, the manifest: :data:`FORMAT` and
  :data:`FORMAT_VERSION`; provenance (keras-mgu and Keras versions, the
  backend it was saved on, the time); the chosen run and the averaged
  members; the record's input and output names, sampling period and scoring
  protocol; and per run its seed, validation scores, best iteration,
  training seconds, structure, resolved :class:`RecipeConfig`, standardisation
  statistics, input delay (``input_delay``, samples per input; a file
  without it has none) and the archive path of its network.
* ``arrays.npz`` (read with ``allow_pickle=False``): the estimation record's
  first samples (``start_u``, ``start_y``, where encoder models start),
  the band's error quantiles (``band_quantiles``; its horizons and counts
  in the manifest's ``band``), and per run ``k`` its linear model
  (``run{k}_linear_a``/``_b``/``_c``), validation error
  (``run{k}_validation_error``) and noise model
  (``run{k}_noise``, ``run{k}_noise_gains``).
* ``runs/run_{k}.keras``: run ``k``'s network, a Keras ``.keras`` archive
  without optimizer state, loaded with ``safe_mode=True``; the ARX reference
  (``Identification.arx``) is saved as a run named ``arx`` (its entry in the
  manifest's ``arx``, its network ``runs/run_arx.keras``).

Every run is kept (not only the chosen one and the averaged members), so
``validation_scores`` and :meth:`~keras_mgu.sysid.Identification.run_alone`
work after loading. Loading runs no pickled code, and works on any backend:
the networks are float32 Keras models and the rest is JSON and NumPy arrays.
What is not saved: the runs' early stopping and training history
(``RunResult.stopper`` is None after loading).

Reading a file back is :mod:`~keras_mgu.sysid.files.kmgu_reading`'s
(:func:`read_model_file`, handed on here): it makes no network until a run's
is first used, and refuses a file that is not a model file, a damaged one
and one of a newer format version with a :class:`ModelFileError` that says
which. A loaded identification saved again copies the networks it has not
made as they were read.

:func:`write_model_file` writes a temporary file in the target's folder and
renames it over the target, so an earlier file survives a save that fails.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import math
import os
import tempfile
import zipfile
from typing import Any

import numpy as np

from keras_mgu._atomic import write_atomically
from keras_mgu._manifest import FORMAT, FORMAT_VERSION, MANIFEST
from keras_mgu._version import __version__
from keras_mgu.sysid.files.kmgu_reading import (
    ARRAYS,
    ModelFileError,
    config_from_dict,
    network_from_bytes,
    read_model_file,
)
from keras_mgu.sysid.judging.band import Band
from keras_mgu.sysid.training.run import deferred_source

__all__ = [
    "ARRAYS",
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "SUFFIX",
    "ModelFileError",
    "config_from_dict",
    "network_bytes",
    "network_from_bytes",
    "read_model_file",
    "write_model_file",
]

#: The suggested suffix of model files.
SUFFIX = ".kmgu"


def write_model_file(found: Any, filepath: str | os.PathLike) -> str:
    """Write the identification ``found`` to ``filepath`` (one zip archive); returns the path.

    The archive is written to a temporary file in the same folder, flushed to
    disk and renamed over ``filepath``: a save that fails leaves an earlier
    file at ``filepath`` as it was, and no temporary file behind.
    """
    if any(run.path is None or run.config is None for run in found.runs):
        raise ValueError(
            "Every run to save needs its signal path and settings (`path`, `config`), as the "
            "runs of keras_mgu.sysid.identify have."
        )
    filepath = os.fspath(filepath)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            _write_archive(found, f)
            f.flush()
            os.fsync(f.fileno())

    write_atomically(filepath, write)
    return filepath


def _write_archive(found: Any, f: io.IOBase) -> None:
    manifest, arrays = _manifest(found), _arrays(found)
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(MANIFEST, json.dumps(manifest, indent=1))
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        archive.writestr(ARRAYS, buffer.getvalue())
        for k, run in _named_runs(found):
            data = deferred_source(run)  # a loaded run's network not made yet: its bytes as read
            archive.writestr(_network_name(k), network_bytes(run.model) if data is None else data)


def _named_runs(found: Any) -> list[tuple[int | str, Any]]:
    """``(k, run)`` of every run, and ``("arx", run)`` of the ARX reference where there is one."""
    arx = getattr(found, "arx", None)
    return [*enumerate(found.runs), *([("arx", arx)] if arx is not None else [])]


def _network_name(k: int | str) -> str:
    return f"runs/run_{k}.keras"


def network_bytes(model: Any) -> bytes:
    """``model`` as the bytes of a ``.keras`` archive, without its optimizer."""
    import keras

    clone = keras.models.clone_model(model)
    clone.set_weights(model.get_weights())
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "network.keras")
        clone.save(path)
        with open(path, "rb") as f:
            return f.read()


def _manifest(found: Any) -> dict:
    import keras

    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "keras_mgu_version": __version__,
        "keras_version": keras.__version__,
        "backend": keras.backend.backend(),
        "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "best": int(found.best),
        "members": [int(k) for k in found.members],
        "n_initial": found.n_initial,
        "has_start": found.start is not None,
        "input_names": list(found.input_names),
        "output_names": list(found.output_names),
        "ts": found.ts,
        "protocol": None if found.protocol is None else dataclasses.asdict(found.protocol),
        "linear_table": [{k: _json_float(v) for k, v in row.items()} for row in found.linear_table],
        "capacity_table": [
            {k: _json_float(v) for k, v in row.items()} for row in found.capacity_table
        ],
        "class_table": [{k: _json_float(v) for k, v in row.items()} for row in found.class_table],
        "runs": [_run_entry(run, k) for k, run in enumerate(found.runs)],
        "band": _band_entry(getattr(found, "band", None)),
        "arx": None if getattr(found, "arx", None) is None else _run_entry(found.arx, "arx"),
        "ranges": None if getattr(found, "ranges", None) is None else found.ranges.to_config(),
        "prediction_mix": _config_of(getattr(found, "prediction_mix", None)),
    }


def _config_of(part: Any) -> dict | None:
    return None if part is None else part.to_config()


def _band_entry(band: Band | None) -> dict | None:
    if band is None:
        return None
    return {"horizons": [int(h) for h in band.horizons], "counts": [int(c) for c in band.counts]}


def _run_entry(run: Any, k: int | str) -> dict:
    path = run.path
    return {
        "seed": int(run.seed),
        "validation_score": _json_float(run.validation_score),
        "validation_rmse": _json_float(run.validation_rmse),
        "best_iteration": int(run.best_iteration),
        "seconds": float(run.seconds),
        "structure": run.structure,
        "config": dataclasses.asdict(run.config),
        "outer": path.outer.get_config(),
        "inner": None if path.inner is None else path.inner.get_config(),
        "input_delay": [int(nk) for nk in path.input_delay],
        "has_linear": path.linear is not None,
        "has_validation_error": run.validation_error is not None,
        "has_noise": run.noise is not None,
        "window_horizon": run.window_horizon,
        "network": _network_name(k),
        "polynomial": None if run.polynomial is None else run.polynomial.to_config(),
    }


def _arrays(found: Any) -> dict[str, np.ndarray]:
    arrays = {}
    if found.start is not None:
        arrays["start_u"], arrays["start_y"] = (np.asarray(a) for a in found.start)
    for k, run in _named_runs(found):
        if run.path.linear is not None:
            for name in ("a", "b", "c"):
                arrays[f"run{k}_linear_{name}"] = np.asarray(getattr(run.path.linear, name))
        if run.validation_error is not None:
            arrays[f"run{k}_validation_error"] = np.asarray(run.validation_error)
        if run.noise is not None:
            arrays[f"run{k}_noise"] = np.asarray(run.noise.coefficients)
            if run.noise.gains is not None:
                arrays[f"run{k}_noise_gains"] = np.asarray(run.noise.gains)
    if getattr(found, "band", None) is not None:
        arrays["band_quantiles"] = np.asarray(found.band.quantiles)
    return arrays


def _json_float(value: Any) -> Any:
    """A float for JSON: non-finite values as the strings ``"inf"``, ``"-inf"``, ``"nan"``."""
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    return value
