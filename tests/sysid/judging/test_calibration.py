"""The calibration on the validation record: the prediction mix and the band from one set of
k-step predictions, with the numbers of the three calibrations made one after the other."""

import collections
import dataclasses

import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.sysid import identify
from keras_mgu.sysid.judging.calibration import calibrate
from keras_mgu.sysid.judging.prediction import RunSimulator
from tests.sysid.judging.test_evaluation import TINY


@pytest.fixture(scope="module")
def counted():
    """``(data, found, calls)``: an identification, and how often each of its runs
    (``RunSimulator.predictions``, by run) made k-step predictions while it was made."""
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    calls = collections.Counter()
    plain = RunSimulator.predictions

    def predictions(self, u, y, horizons, n):
        calls[id(self.run)] += 1
        return plain(self, u, y, horizons, n)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunSimulator, "predictions", predictions)
        found = identify(data, TINY, restarts=1, seed=0)
    return data, found, calls


def test_identify_predicts_the_validation_record_once_for_the_mix_and_the_band(counted):
    _, found, calls = counted
    assert found.arx is not None and found.prediction_mix is not None and found.band is not None
    predicting = {id(found.runs[k]) for k in found.kept} | {id(found.arx)}
    assert dict(calls) == dict.fromkeys(predicting, 1)  # each run once: the model's, the ARX's


@pytest.mark.parametrize("n_initial", [None, 0])  # 0: no mix, the band's own predictions from 1
def test_the_numbers_are_those_of_the_three_calibrations_one_after_the_other(counted, n_initial):
    data, found, _ = counted
    bare, record = dataclasses.replace(found, band=None, prediction_mix=None), data.validation
    together = calibrate(bare, record, n_initial)
    apart = bare.with_window_horizons(record, n_initial)
    apart = apart.with_prediction_mix(record, n_initial).with_band(record, n_initial)
    assert _mix(together) == _mix(apart) and (_mix(together) is None) == (n_initial == 0)
    for part in ("horizons", "quantiles", "counts"):
        np.testing.assert_array_equal(getattr(together.band, part), getattr(apart.band, part))
    assert [run.window_horizon for run in together.runs] == [
        run.window_horizon for run in apart.runs
    ]


def _mix(found) -> list | None:
    """The prediction mix's shares as nested lists (compared exactly), or None."""
    return None if found.prediction_mix is None else found.prediction_mix.weights.tolist()
