"""The band that follows the members' disagreement: its scores, scale and width by hand, the
members it reads, and its coverage where errors grow with the disagreement."""

import math

import numpy as np
import pytest

from keras_mgu.sysid.judging.band import coverage
from keras_mgu.sysid.judging.scaled_band import (
    ScaledBand,
    calibrate_scaled_band,
    member_disagreement,
    scaled_simulation,
)


def test_the_scores_scale_and_width_follow_the_equations():
    """One output, n = 1: four scored rows; Dbar = (0 + 2 + 4 + 2) / 4 = 2."""
    y = np.array([[5.0], [1.0], [3.0], [-6.0], [2.5]])
    y_hat = np.zeros_like(y)
    d = np.array([[9.0], [0.0], [2.0], [4.0], [2.0]])
    band = calibrate_scaled_band(y, y_hat, d, n=1)
    assert band.count == 4 and band.mean_disagreement.tolist() == [2.0]
    scale = 1 + d[1:] / 2.0  # 1, 2, 3, 2
    np.testing.assert_allclose(band.scale(d[1:]), scale)
    scores = sorted((np.abs(y[1:]) / scale).ravel())  # 1, 1.5, 2, 1.25
    assert scores == [1.0, 1.25, 1.5, 2.0]
    # L = 0.5: the ceil(5 * 0.5) = 3rd smallest score; L = 0.7: the 4th; L = 0.9: the largest.
    for level, k in ((0.5, 3), (0.7, 4), (0.9, 4)):
        assert k == min(4, math.ceil(5 * level))
        np.testing.assert_allclose(band.score_quantile(level), [scores[k - 1]])
    drawn = band.around(y_hat, d, 0.5, measured=1)
    np.testing.assert_allclose(drawn.upper[1:], 1.5 * scale)
    np.testing.assert_allclose(drawn.lower[1:], -1.5 * scale)
    assert drawn.upper[0, 0] == drawn.lower[0, 0] == 0.0  # the measured row


def test_no_disagreement_on_the_calibration_record_leaves_a_constant_band():
    y = np.arange(12.0).reshape(6, 2)
    band = calibrate_scaled_band(y, np.zeros_like(y), np.zeros_like(y), n=2)
    assert band.mean_disagreement.tolist() == [0.0, 0.0]
    np.testing.assert_array_equal(band.scale(np.full((3, 2), 7.0)), np.ones((3, 2)))


def test_bad_shapes_and_starts_say_what_was_expected():
    y = np.zeros((5, 1))
    with pytest.raises(ValueError, match=r"one shape \(N, n_outputs\)"):
        calibrate_scaled_band(y, np.zeros((5, 2)), y, 1)
    with pytest.raises(ValueError, match=r"`n` must be in \[0, 4\]"):
        calibrate_scaled_band(y, y, y, 5)
    with pytest.raises(ValueError, match="level in"):
        ScaledBand(np.zeros((201, 1)), 3, np.ones(1)).score_quantile(1.5)


class _Run:
    def __init__(self, offset, structure="narx", not_kept=None):
        self.offset, self.structure, self.not_kept = offset, structure, not_kept

    def simulate(self, u, y_initial=None):
        return u + self.offset


class _Found:
    """Runs of the class kept at offsets 1 and 3 (the model: 2), one of another class (offset
    9), one that ran off (offset 50), and an ARX reference (offset -1)."""

    best = 1
    arx = object()
    runs = [_Run(1.0), _Run(3.0), _Run(9.0, "loop"), _Run(50.0, not_kept="ran off (validation)")]

    def simulate(self, u, y_initial=None):
        return u + 2.0

    def run_alone(self, k):
        return self.runs[k]

    def reference(self):
        return _Run(-1.0)


def test_the_disagreement_is_the_largest_distance_of_a_member_from_the_model():
    u = np.array([[0.0], [1.0], [2.0]])
    y_hat, d = member_disagreement(_Found(), u)
    np.testing.assert_array_equal(y_hat, u + 2.0)
    np.testing.assert_array_equal(d, np.full((3, 1), 3.0))  # the reference, 3 below
    without = _Found()
    without.arx = None
    np.testing.assert_array_equal(member_disagreement(without, u)[1], np.ones((3, 1)))
    band = ScaledBand(np.linspace(0, 1, 201)[:, None], 100, np.array([1.5]))
    drawn = scaled_simulation(_Found(), band, u, u[:1], 0.5)
    q = band.score_quantile(0.5)
    np.testing.assert_allclose(drawn.upper[1:] - drawn.y[1:], np.full((2, 1), q * (1 + 3.0 / 1.5)))


def test_where_errors_grow_with_the_disagreement_it_covers_both_halves():
    """Errors ~ N(0, (1 + D / Dbar)^2): the scaled band holds about L where the members agree
    and where they part; one width for all holds too much in one half and too little in the
    other."""
    rng = np.random.default_rng(0)
    m, level = 4000, 0.9

    def record():
        d = rng.exponential(1.0, size=(m, 1))
        return d, rng.normal(size=(m, 1)) * (1 + d)

    d_cal, e_cal = record()
    band = calibrate_scaled_band(e_cal, np.zeros_like(e_cal), d_cal, n=0)
    d, e = record()
    scaled = band.around(np.zeros_like(e), d, level)
    width = np.quantile(np.abs(e_cal), level)  # the constant band's half-width
    wide = d[:, 0] > np.median(d)
    for half in (wide, ~wide):
        inside = (e[half] >= scaled.lower[half]) & (e[half] <= scaled.upper[half])
        assert abs(inside.mean() - level) < 0.03
    inside = (np.abs(e) <= width)[:, 0]
    assert inside[wide].mean() < level - 0.05 and inside[~wide].mean() > level + 0.05
    assert abs(coverage(e, scaled) - level) < 0.02
