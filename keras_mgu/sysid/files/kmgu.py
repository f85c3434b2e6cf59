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
  statistics and the archive path of its network.
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

Loading reads every entry but makes no network: each run holds its
network's bytes (:class:`~keras_mgu.sysid.training.run.DeferredModel`) and
makes it when a simulation, a prediction or an export first reads
``run.model``, so simulating an average of two runs makes those two networks
of a file that keeps ten. A network is made without running its variables'
initializers, which the file's values would overwrite (on JAX each is a
compiled program); a network that does not read then is a
:class:`ModelFileError` as a damaged file is. A loaded identification saved
again copies the networks it has not made as they were read.

:func:`write_model_file` writes a temporary file in the target's folder and
renames it over the target, so an earlier file survives a save that fails.
:func:`read_model_file` refuses a file that is not a model file (a plain zip archive, a ``.keras``
model), a truncated or corrupted one, and one of a newer format version, each
with a :class:`ModelFileError` that says which.
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
from collections.abc import Callable
from typing import Any

import numpy as np

from keras_mgu._atomic import write_atomically
from keras_mgu._manifest import FORMAT, FORMAT_VERSION, MANIFEST, ModelFileError, read_model_archive
from keras_mgu._version import __version__
from keras_mgu.datasets import Normalizer, Protocol
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.judging.band import Band
from keras_mgu.sysid.judging.extrapolation import EstimationRange
from keras_mgu.sysid.judging.noise_model import NoiseModel
from keras_mgu.sysid.judging.prediction_mix import PredictionMix
from keras_mgu.sysid.models.arx import LinearModel
from keras_mgu.sysid.models.signals import SignalPath
from keras_mgu.sysid.training.run import DeferredModel, RunResult, deferred_source

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "SUFFIX",
    "ModelFileError",
    "read_model_file",
    "write_model_file",
]

#: The suggested suffix of model files.
SUFFIX = ".kmgu"
#: The arrays' entry of the archive (the manifest's: ``keras_mgu._manifest.MANIFEST``).
ARRAYS = "arrays.npz"


# ------------------------------------------------------------------------------------- saving
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


# ------------------------------------------------------------------------------------ loading
def read_model_file(filepath: str | os.PathLike) -> dict[str, Any]:
    """The fields of the :class:`~keras_mgu.sysid.Identification` saved in ``filepath``.

    Reads on any Keras backend. The runs have no early-stopping history
    (``RunResult.stopper`` is None); everything else is as saved.

    Raises:
        FileNotFoundError: no file at ``filepath``.
        ModelFileError: (a ``ValueError``) not a keras-mgu model file (a
            plain zip archive, a ``.keras`` model, anything else), a truncated
            or corrupted one, or one of a newer format version.
    """
    return read_model_archive(filepath, _fields, "an entry is missing or")


def _fields(archive: zipfile.ZipFile, manifest: dict) -> dict[str, Any]:
    with np.load(io.BytesIO(archive.read(ARRAYS)), allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    runs = [_run(archive, entry, k, arrays) for k, entry in enumerate(manifest["runs"])]
    start = (arrays["start_u"], arrays["start_y"]) if manifest["has_start"] else None
    protocol, band = manifest["protocol"], manifest.get("band")  # none in files before bands
    if band is not None:
        band = Band(np.array(band["horizons"]), arrays["band_quantiles"], np.array(band["counts"]))
    table = [{k: _from_json(v) for k, v in row.items()} for row in manifest["linear_table"]]
    return dict(
        runs=runs,
        best=int(manifest["best"]),
        n_initial=manifest["n_initial"],
        start=start,
        linear_table=table,
        members=tuple(int(k) for k in manifest["members"]),
        input_names=tuple(manifest["input_names"]),
        output_names=tuple(manifest["output_names"]),
        ts=manifest["ts"],
        protocol=None if protocol is None else Protocol(**protocol),
        capacity_table=[
            {k: _from_json(v) for k, v in row.items()}
            for row in manifest.get("capacity_table", [])  # absent from files saved before it
        ],
        class_table=[
            {k: v if k == "class" else _from_json(v) for k, v in row.items()}
            for row in manifest.get("class_table", [])  # absent from files saved before it
        ],
        band=band,
        arx=None if manifest.get("arx") is None else _run(archive, manifest["arx"], "arx", arrays),
        ranges=_ranges(manifest.get("ranges")),  # none in files saved before ranges
        prediction_mix=_prediction_mix(manifest.get("prediction_mix")),  # nor before the mix
    )


def _prediction_mix(entry: dict | None) -> PredictionMix | None:
    return None if entry is None else PredictionMix.from_config(entry)


def _ranges(entry: dict | None) -> EstimationRange | None:
    return None if entry is None else EstimationRange.from_config(entry)


def _run(archive: zipfile.ZipFile, entry: dict, k: int | str, arrays: dict) -> RunResult:
    linear = None
    if entry["has_linear"]:
        linear = LinearModel(*(arrays[f"run{k}_linear_{name}"] for name in ("a", "b", "c")))
    inner = None if entry["inner"] is None else Normalizer(**entry["inner"])
    path = SignalPath(Normalizer(**entry["outer"]), linear, inner)
    error = arrays[f"run{k}_validation_error"] if entry["has_validation_error"] else None
    has_noise = entry.get("has_noise", False)  # absent from files saved before it
    noise = None
    if has_noise:
        noise = NoiseModel(arrays[f"run{k}_noise"], arrays.get(f"run{k}_noise_gains"))
    return RunResult(
        model=_deferred_network(archive, entry["network"]),
        seed=int(entry["seed"]),
        validation_score=_float(entry["validation_score"]),
        best_iteration=int(entry["best_iteration"]),
        seconds=float(entry["seconds"]),
        stopper=None,
        config=config_from_dict(entry["config"]),
        validation_rmse=_float(entry["validation_rmse"]),
        validation_error=error,
        structure=entry["structure"],
        path=path,
        noise=noise,
        window_horizon=entry.get("window_horizon"),  # absent from files saved before it
        polynomial=_polynomial(entry.get("polynomial")),  # absent from files saved before it
    )


def _deferred_network(archive: zipfile.ZipFile, name: str) -> DeferredModel:
    """The network ``name`` of ``archive``, read now and made when first used.

    One that does not make then is a :class:`ModelFileError`, as it was
    when every network was made on loading.
    """
    filepath = archive.filename

    def make(data: bytes) -> Any:
        try:
            return network_from_bytes(data)
        except (KeyError, TypeError, ValueError, OSError, EOFError) as err:
            raise ModelFileError(
                f"{filepath!r} is a damaged keras-mgu model file (its network {name!r} does not "
                f"read: {type(err).__name__}: {err})."
            ) from None

    return DeferredModel(make, archive.read(name))


def _polynomial(config: dict | None) -> Any:
    if config is None:
        return None
    from keras_mgu.sysid.models.polynomial import PolynomialNarx

    return PolynomialNarx.from_config(config)


def network_from_bytes(data: bytes) -> Any:
    """The Keras model of a ``.keras`` archive's bytes (``safe_mode=True``, not compiled).

    Its variables take the archive's values without their initializers run
    first (:func:`_without_initializers`).
    """
    import keras

    import keras_mgu.sysid.models.loop_cell  # noqa: F401 - registers ArxLoopCell, LagState
    import keras_mgu.sysid.models.network  # noqa: F401 - registers LearnedInitialState

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "network.keras")
        with open(path, "wb") as f:
            f.write(data)
        return _without_initializers(
            lambda: keras.saving.load_model(path, compile=False, safe_mode=True)
        )


def _without_initializers(load: Callable[[], Any]) -> Any:
    """``load()``, a Keras model read from a file, without running its variables' initializers.

    Every variable the model makes is made inside a ``keras.StatelessScope``,
    where Keras defers its initializer, and then takes the value the file
    assigned it; one the file has no value for (a dropout's seed) is
    initialized as usual. The values are the same; the initializers' work is
    saved, which on JAX is one compiled program per initializer and weight
    shape (seconds for a network in a fresh process). Where Keras's internals
    differ from what this expects, or a stateless scope is already open, the
    model is read as usual.
    """
    try:
        from keras.src.backend.common import global_state
        from keras.src.backend.common.stateless_scope import StatelessScope, in_stateless_scope
    except ImportError:  # pragma: no cover - another Keras
        return load()
    if in_stateless_scope():
        return load()
    key = "uninitialized_variables"
    before = {id(v) for v in global_state.get_global_attribute(key) or []}
    with StatelessScope(initialize_variables=False) as scope:
        model = load()
    pending = global_state.get_global_attribute(key) or []
    global_state.set_global_attribute(key, [v for v in pending if id(v) in before])
    for variable in pending:
        if id(variable) in before:
            continue
        value = scope.get_current_value(variable)
        if value is None:
            variable._deferred_initialize()
        else:
            variable._initialize(value)
            variable._initializer = None
    return model


def config_from_dict(values: dict) -> RecipeConfig:
    """A :class:`RecipeConfig` from ``dataclasses.asdict`` of one, read back from JSON."""
    fields = {f.name for f in dataclasses.fields(RecipeConfig)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ModelFileError(f"The saved settings have fields this keras-mgu lacks: {unknown}.")
    values = dict(values)
    for name in ("units", "decay_points", "model_classes"):
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    return RecipeConfig(**values)


def _from_json(value: Any) -> Any:
    """Undo :func:`_json_float`: the strings of non-finite floats back to floats."""
    return float(value) if isinstance(value, str) else value


def _float(value: Any) -> float:
    return float(value)
