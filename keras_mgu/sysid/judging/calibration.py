"""What an identification calibrates on a record it did not train on: horizons, mix, band.

:class:`Calibration` is a base of :class:`~keras_mgu.sysid.Identification`.
On the validation record (which no network trained on), each calibration
returns a new identification:

* :meth:`~Calibration.with_window_horizons`: the horizon up to which each
  lag-class run it keeps predicts from measured lags
  (:meth:`~keras_mgu.sysid.judging.prediction.RunSimulator.choose_window_horizon`);
* :meth:`~Calibration.with_prediction_mix`: each horizon's mix of its
  k-step prediction with the ARX reference's
  (:mod:`~keras_mgu.sysid.judging.prediction_mix`);
* :meth:`~Calibration.with_band`: the band around every simulation and
  prediction (:mod:`~keras_mgu.sysid.judging.band`).
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from keras_mgu.datasets import Record
from keras_mgu.sysid.config import NETWORK_CLASSES
from keras_mgu.sysid.judging.band import calibrate_band
from keras_mgu.sysid.judging.prediction import RunSimulator
from keras_mgu.sysid.judging.prediction_mix import MIX_HORIZONS, fit_prediction_mix

__all__ = ["Calibration"]

#: The identification calibrated (the host class), returned anew.
Found = TypeVar("Found", bound="Calibration")


class Calibration:
    """The calibrations of an identification on a record (module docstring).

    A base of :class:`~keras_mgu.sysid.Identification` (a dataclass), whose
    runs, ``kept``, ``start``, ``arx``, ``predictions``, ``reference`` and
    ``resolve_n_initial`` it reads.
    """

    def with_prediction_mix(self: Found, record: Record, n_initial: int | None = None) -> Found:
        """This identification with each horizon's mix of its prediction and the ARX
        reference's fitted on ``record`` (:mod:`~keras_mgu.sysid.judging.prediction_mix`).

        Unchanged without an ARX reference, or where ``record`` is too short.
        """
        n = min(self.resolve_n_initial(n_initial), record.n_samples - 1)
        fits = [k for k in MIX_HORIZONS if k < record.n_samples - n]
        if self.arx is None or not fits or n < 1:
            return self
        alone = dataclasses.replace(self, prediction_mix=None)
        model = alone.predictions(record.u, record.y, fits, n)
        reference = self.reference().predictions(record.u, record.y, fits, n)
        mix = fit_prediction_mix(model, reference, record.y, n)
        return dataclasses.replace(self, prediction_mix=mix)

    def with_window_horizons(self: Found, record: Record, n_initial: int | None = None) -> Found:
        """This identification with its lag-class members' window horizons chosen on ``record``.

        Each averaged (or the chosen) lag-class run predicts from the
        measured lags up to the horizon where, on ``record`` (one the networks
        did not train on), that errs less than its simulation with the noise
        model (:meth:`~keras_mgu.sysid.judging.prediction.RunSimulator.choose_window_horizon`).
        """
        n = min(self.resolve_n_initial(n_initial), record.n_samples - 1)
        runs = list(self.runs)
        for k in set(self.kept):
            if runs[k].structure in NETWORK_CLASSES or runs[k].noise is None:
                continue
            limit = RunSimulator(runs[k], self.start).choose_window_horizon(record.u, record.y, n)
            runs[k] = dataclasses.replace(runs[k], window_horizon=limit)
        return dataclasses.replace(self, runs=runs)

    def with_band(self: Found, record: Record, n_initial: int | None = None) -> Found:
        """This identification with its band calibrated on ``record``
        (:func:`~keras_mgu.sysid.judging.band.calibrate_band`).

        ``record`` should be one the networks did not train on (the
        validation record); ``n_initial`` as :meth:`~keras_mgu.sysid.Identification.predict`'s.
        """
        found = dataclasses.replace(self, band=None)
        n = self.resolve_n_initial(n_initial)
        return dataclasses.replace(self, band=calibrate_band(found, record.u, record.y, n))
