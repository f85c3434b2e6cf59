"""Reading a model file: the fields of a saved :class:`~keras_mgu.sysid.Identification`.

The format is :mod:`~keras_mgu.sysid.files.kmgu`'s (which writes it and hands
on :func:`read_model_file`). :func:`read_model_file` returns the fields as a
dict; :func:`keras_mgu.sysid.load` makes the identification of them.

Loading reads every entry but makes no network: each run holds its
network's bytes (:class:`~keras_mgu.sysid.training.run.DeferredModel`) and
makes it when a simulation, a prediction or an export first reads
``run.model``, so simulating an average of two runs makes those two networks
of a file that keeps ten. A network is made without running its variables'
initializers, which the file's values would overwrite (on JAX each is a
compiled program); a network that does not read then is a
:class:`ModelFileError` as a damaged file is.

:func:`read_model_file` refuses a file that is not a model file (a plain zip
archive, a ``.keras`` model), a truncated or corrupted one, and one of a
newer format version, each with a :class:`ModelFileError` that says which.
Entries added to the format after its first files (the band, the ARX
reference, the ranges, the prediction mix, the tables; a run's noise model,
window horizon and polynomial) read as absent (None, or an empty table)
where a file lacks them.
"""

from __future__ import annotations

import dataclasses
import io
import os
import tempfile
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np

from keras_mgu._manifest import ModelFileError, read_model_archive
from keras_mgu.datasets import Normalizer, Protocol
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.judging.band import Band
from keras_mgu.sysid.judging.extrapolation import EstimationRange
from keras_mgu.sysid.judging.noise_model import NoiseModel
from keras_mgu.sysid.judging.prediction_mix import PredictionMix
from keras_mgu.sysid.models.arx import LinearModel
from keras_mgu.sysid.models.signals import SignalPath
from keras_mgu.sysid.training.run import DeferredModel, RunResult

__all__ = ["ARRAYS", "ModelFileError", "config_from_dict", "network_from_bytes", "read_model_file"]

#: The arrays' entry of the archive (the manifest's: ``keras_mgu._manifest.MANIFEST``).
ARRAYS = "arrays.npz"


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
    delay = tuple(int(nk) for nk in entry.get("input_delay", ()))  # none in older files
    path = SignalPath(Normalizer(**entry["outer"]), linear, inner, delay)
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
    """Undo the writing's ``_json_float``: the strings of non-finite floats back to floats."""
    return float(value) if isinstance(value, str) else value


def _float(value: Any) -> float:
    return float(value)
