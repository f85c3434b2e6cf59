"""Where an experiment leaves the estimation range: the share, the band there, the words."""

import json

import numpy as np
import pytest

from keras_mgu import datasets
from keras_mgu.sysid import evaluate, identify
from keras_mgu.sysid.judging.extrapolation import (
    EstimationRange,
    describe_extrapolation,
    extrapolation,
)
from tests.helpers import BACKEND_INDEPENDENT
from tests.sysid.judging.test_evaluation import TINY


@BACKEND_INDEPENDENT
def test_the_share_outside_and_the_band_there_on_a_hand_made_case():
    ranges = EstimationRange.of(np.array([[0.0], [1.0]]), np.array([[10.0, 0.0], [20.0, 1.0]]))
    u = np.array([[0.5], [1.5], [0.5], [0.5], [-0.1], [0.5]])  # samples 1 and 4: inputs out
    y_sim = np.array([[15, 0.5], [15, 0.5], [25, 0.5], [15, 0.5], [15, 0.5], [15, 1.2]])
    y = y_sim + 0.1  # samples 2 and 5: simulated outputs out
    lower, upper = y_sim - 0.2, y_sim + 0.2
    upper[4] = y_sim[4]  # the band misses sample 4's measured outputs
    got = extrapolation(ranges, u, y, y_sim, first=2, band=(lower, upper))
    np.testing.assert_array_equal(got.pop("mask"), [0, 0, 1, 0, 1, 1])  # 1 is before `first`
    assert got == {"share": 3 / 4, "inputs_share": 1 / 4, "outputs_share": 2 / 4,
                   "samples": 3, "coverage": pytest.approx(2 / 3)}  # fmt: skip
    assert describe_extrapolation(got, 2) == (
        "outside the estimation range, from sample 2: 75.0% of the samples (inputs 25.0%, "
        "simulated outputs 50.0%); the band holds 0.667 of them"
    )
    inside = extrapolation(ranges, u[:1], y[:1], y_sim[:1])
    assert inside["samples"] == 0 and inside["coverage"] is None
    assert describe_extrapolation(inside).endswith("none of the samples (inputs and simulation)")
    again = EstimationRange.from_config(json.loads(json.dumps(ranges.to_config())))
    np.testing.assert_array_equal(again.y_upper, ranges.y_upper)
    with pytest.raises(ValueError, match="same N >= 1"):
        EstimationRange.of(np.zeros((3, 1)), np.zeros((2, 1)))


def test_evaluate_says_how_much_of_an_experiment_leaves_the_range():
    """The identified model keeps its estimation range; a test scaled past it is flagged."""
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    found = identify(data, TINY, restarts=1, seed=0)
    est = data.estimation
    np.testing.assert_array_equal(found.ranges.u_upper, est.u.max(axis=0))
    np.testing.assert_array_equal(found.ranges.y_lower, est.y.min(axis=0))
    u, y, n = 1.3 * data.test.u, data.test.y, 6
    ev = evaluate(found, u, y, n)
    y_sim = found.simulate(u, y[:n])
    out_u = ((u < est.u.min(0)) | (u > est.u.max(0))).any(1)
    out_y = ((y_sim < est.y.min(0)) | (y_sim > est.y.max(0))).any(1)
    out_u[:n] = out_y[:n] = False
    assert ev.extrapolation["inputs_share"] == pytest.approx(out_u.sum() / (len(u) - n))
    assert ev.extrapolation["share"] == pytest.approx((out_u | out_y).sum() / (len(u) - n))
    assert ev.extrapolation["share"] > 0
    np.testing.assert_array_equal(ev.outside, out_u | out_y)
    assert json.loads(json.dumps(ev.to_dict()))["extrapolation"]["samples"] == (out_u | out_y).sum()
