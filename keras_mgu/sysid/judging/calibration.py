"""What an identification calibrates on a record it did not train on: horizons, mix, band.

On the validation record (which no network trained on), each calibration
returns a new identification (``found``, an
:class:`~keras_mgu.sysid.Identification`, whose ``with_*`` methods these are):

* :func:`with_window_horizons`: the horizon up to which each lag-class run it
  keeps predicts from measured lags
  (:meth:`~keras_mgu.sysid.judging.prediction.RunSimulator.choose_window_horizon`);
* :func:`with_prediction_mix`: each horizon's mix of its k-step prediction
  with the ARX reference's, the last sample and its free run
  (:mod:`~keras_mgu.sysid.judging.prediction_mix`);
* :func:`with_band`: the band around every simulation and prediction
  (:mod:`~keras_mgu.sysid.judging.band`).

:func:`calibrate`, the recipe's last step, makes all three: the window
horizons first (the predictions depend on them), then the model's and the
ARX reference's k-step predictions of the record, once, from which both the
mix is fitted and the band calibrated. The band's predictions are the mixed
ones, as :meth:`~keras_mgu.sysid.Identification.predictions` gives them, so
the numbers are those of the three calibrations one after the other, at
about half the cost of the predictions.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from keras_mgu.datasets import Record
from keras_mgu.sysid.config import NETWORK_CLASSES
from keras_mgu.sysid.judging.band import BAND_HORIZONS, FREE_RUN, calibrate_band
from keras_mgu.sysid.judging.prediction import RunSimulator
from keras_mgu.sysid.judging.prediction_mix import (
    MIX_HORIZONS,
    fit_prediction_mix,
    last_sample_predictions,
)

__all__ = ["calibrate", "with_band", "with_prediction_mix", "with_window_horizons"]


def calibrate(
    found: Any,
    record: Record,
    n_initial: int | None = None,
    held_out: Record | None = None,
    held_out_model: Any = None,
) -> Any:
    """``found`` with its window horizons, prediction mix and band calibrated on ``record``.

    The same as ``with_band(with_prediction_mix(with_window_horizons(found,
    record), record), record)``, each k-step prediction of ``record`` made
    once (module docstring); ``n_initial`` as
    :meth:`~keras_mgu.sysid.Identification.predict`'s. ``held_out``, the
    estimation record's held-out start (:mod:`~keras_mgu.sysid.choice.held_out`),
    adds the free-run errors of ``held_out_model`` on it (an identification
    that did not fit it; default ``found``) to the band's free run.
    """
    found = with_window_horizons(found, record, n_initial)
    n = found.resolve_n_initial(n_initial)
    horizons = sorted(set(MIX_HORIZONS) | set(BAND_HORIZONS))
    fits = [k for k in horizons if k < record.n_samples - n] if n >= 1 else []
    model, reference = _predictions(found, record, fits, n)
    mix, predictions = found.prediction_mix, model  # no reference: the model's alone
    if reference is not None:
        free = _free_run(found, record, n)
        mix = fit_prediction_mix(
            _only(model, MIX_HORIZONS), _only(reference, MIX_HORIZONS), record.y, n, free=free
        )
        last = last_sample_predictions(record.y, fits, n)
        predictions = mix.mixed(model, reference, last, free)
    mixed = dataclasses.replace(found, prediction_mix=mix, band=None)
    given = _only(predictions, BAND_HORIZONS) if fits else None  # none to share: the band's own
    if given is not None and reference is not None:
        given[FREE_RUN] = free  # the mix's free run is the band's
    more = []
    if held_out is not None:
        model = found if held_out_model is None else held_out_model
        std = np.asarray(model.path.outer.y_std)  # its standardised errors, in physical units
        more = [np.abs(e) * std for e in model.horizon_errors(held_out)]
    band = calibrate_band(mixed, record.u, record.y, n, given, more)
    return dataclasses.replace(mixed, band=band)


def with_window_horizons(found: Any, record: Record, n_initial: int | None = None) -> Any:
    """``found`` with its lag-class members' window horizons chosen on ``record``.

    Each averaged (or the chosen) lag-class run predicts from the
    measured lags up to the horizon where, on ``record`` (one the networks
    did not train on), that errs less than its simulation with the noise
    model (:meth:`~keras_mgu.sysid.judging.prediction.RunSimulator.choose_window_horizon`).
    """
    n = min(found.resolve_n_initial(n_initial), record.n_samples - 1)
    runs = list(found.runs)
    for k in set(found.kept):
        if runs[k].structure in NETWORK_CLASSES or runs[k].noise is None:
            continue
        limit = RunSimulator(runs[k], found.start).choose_window_horizon(record.u, record.y, n)
        runs[k] = dataclasses.replace(runs[k], window_horizon=limit)
    return dataclasses.replace(found, runs=runs)


def with_prediction_mix(found: Any, record: Record, n_initial: int | None = None) -> Any:
    """``found`` with each horizon's mix of its prediction, the ARX reference's, the last
    sample and its free run fitted on ``record`` (:mod:`~keras_mgu.sysid.judging.prediction_mix`).

    Unchanged without an ARX reference, or where ``record`` is too short.
    """
    n = min(found.resolve_n_initial(n_initial), record.n_samples - 1)
    fits = [k for k in MIX_HORIZONS if k < record.n_samples - n]
    if found.arx is None or not fits or n < 1:
        return found
    model, reference = _predictions(found, record, fits, n)
    mix = fit_prediction_mix(model, reference, record.y, n, free=_free_run(found, record, n))
    return dataclasses.replace(found, prediction_mix=mix)


def with_band(found: Any, record: Record, n_initial: int | None = None) -> Any:
    """``found`` with its band calibrated on ``record``
    (:func:`~keras_mgu.sysid.judging.band.calibrate_band`).

    ``record`` should be one the networks did not train on (the validation
    record); ``n_initial`` as :meth:`~keras_mgu.sysid.Identification.predict`'s.
    """
    unbanded = dataclasses.replace(found, band=None)
    n = found.resolve_n_initial(n_initial)
    return dataclasses.replace(found, band=calibrate_band(unbanded, record.u, record.y, n))


def _predictions(found: Any, record: Record, horizons: list[int], n: int) -> tuple[dict, Any]:
    """The k-step predictions of ``record`` by ``found``'s model alone (without its mix) and
    by its ARX reference (None without one), each a dict by horizon (none: empty)."""
    if not horizons:
        return {}, None
    alone = dataclasses.replace(found, prediction_mix=None)
    model = alone.predictions(record.u, record.y, horizons, n)
    if found.arx is None:
        return model, None
    return model, found.reference().predictions(record.u, record.y, horizons, n)


def _free_run(found: Any, record: Record, n: int) -> np.ndarray:
    """``found``'s free run of ``record`` from its first ``n`` measured outputs."""
    return found.simulate(record.u, record.y[:n])


def _only(predictions: dict, horizons: tuple[int, ...]) -> dict:
    """The entries of ``predictions`` whose horizon is one of ``horizons``."""
    return {k: p for k, p in predictions.items() if k in horizons}
