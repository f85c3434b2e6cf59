"""The calibrated band: conformal half-widths from their order statistics, its horizons, its
coverage on errors like the calibration record's."""

import math

import numpy as np
import pytest

from keras_mgu.sysid.judging.band import (
    BAND_HORIZONS,
    FREE_RUN,
    QUANTILE_GRID,
    Band,
    Trajectory,
    calibrate_band,
    check_level,
    coverage,
    coverage_by_output,
    joint_coverage,
)


class Stub:
    """A model whose simulation is zero and whose k-step prediction errs by ``y k / (k + 1)``."""

    def simulate(self, u, y_initial):
        y = np.zeros((len(u), 1))
        y[: len(y_initial)] = y_initial
        return y

    def predictions(self, u, y, horizons, n_initial):
        out = {k: y / (1.0 + k) for k in horizons}
        for y_k in out.values():
            y_k[:n_initial] = y[:n_initial]
        return out


def test_half_width_is_the_conformal_order_statistic():
    """Errors 1 .. m: the ceil((m + 1) L)-th smallest (to the quantile grid's resolution)."""
    m = 400
    errors = np.arange(1.0, m + 1)
    table = np.quantile(errors, QUANTILE_GRID, method="inverted_cdf")[:, None]
    band = Band(np.array([FREE_RUN]), table[None], np.array([m]))
    for level in (0.5, 0.8, 0.9, 0.95):
        expected = math.ceil((m + 1) * level)
        assert abs(band.half_width(level)[0] - expected) <= m / (len(QUANTILE_GRID) - 1)
    assert band.half_width(0.999)[0] == m  # (m + 1) L > m: the largest error


def test_each_horizon_takes_the_smallest_calibrated_one_at_least_as_long(rng):
    y = rng.normal(size=(3000, 1))
    band = calibrate_band(Stub(), np.zeros((3000, 1)), y, n=10)
    assert list(band.horizons) == [*BAND_HORIZONS, FREE_RUN]
    widths = {k: band.half_width(0.9, k)[0] for k in (1, 3, 5, 100, 101, None)}
    assert widths[3] == widths[5] == band.half_width(0.9, 5)[0]
    assert widths[101] == widths[None]  # past the last horizon: the free run's
    assert widths[1] < widths[5] < widths[100] < widths[None]
    expected = np.quantile(np.abs(y[10:, 0]) / 2.0, 0.9)  # k = 1 errs by y / 2
    assert widths[1] == pytest.approx(expected, rel=0.03)


def test_band_covers_new_errors_at_its_level(rng):
    u = np.zeros((6000, 1))
    band = calibrate_band(Stub(), u, rng.standard_t(4, size=(6000, 1)), n=1)
    test = rng.standard_t(4, size=(6000, 1))
    for level in (0.8, 0.95):
        trajectory = band.around(np.zeros_like(test), level)
        assert coverage(test, trajectory) == pytest.approx(level, abs=0.015)


def test_measured_rows_get_no_width(rng):
    band = calibrate_band(Stub(), np.zeros((200, 1)), rng.normal(size=(200, 1)), n=5)
    y = rng.normal(size=(50, 1))
    drawn = band.around(y, 0.9, steps_ahead=2, measured=5)
    np.testing.assert_array_equal(drawn.lower[:5], y[:5])
    np.testing.assert_array_equal(drawn.upper[:5], y[:5])
    assert np.all(drawn.upper[5:] > drawn.lower[5:])


def test_a_record_too_short_for_a_horizon_gives_it_no_finite_width(rng):
    band = calibrate_band(Stub(), np.zeros((30, 1)), rng.normal(size=(30, 1)), n=10)
    assert band.counts[list(band.horizons).index(50)] == 0
    assert np.isinf(band.half_width(0.9, 50)[0])
    assert np.isfinite(band.half_width(0.9, 10)[0])


def test_free_run_errors_of_held_out_records_are_pooled(rng):
    """The stub's free run errs by |y| (it simulates zero): the free run's row holds the
    calibration record's errors after its first n and the held-out errors given; the
    k-step rows the calibration record's alone."""
    first, second = rng.normal(size=(300, 1)), 5.0 * rng.normal(size=(120, 1))
    held = [np.abs(second[10:])]  # a held-out record's free-run errors after its first 10
    band = calibrate_band(Stub(), np.zeros((300, 1)), first, n=10, free_run_errors=held)
    free = list(band.horizons).index(FREE_RUN)
    pooled = np.abs(np.concatenate([first[10:], second[10:]]))
    assert band.counts[free] == len(pooled) == 400
    expected = np.quantile(pooled, QUANTILE_GRID, axis=0, method="inverted_cdf")
    np.testing.assert_allclose(band.quantiles[free], expected)
    alone = calibrate_band(Stub(), np.zeros((300, 1)), first, n=10)
    assert band.half_width(0.95)[0] > alone.half_width(0.95)[0]  # the wider errors count
    assert band.half_width(0.95, 5)[0] == alone.half_width(0.95, 5)[0]
    assert band.counts[list(band.horizons).index(5)] == 290


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, "0.9", True, None])
def test_a_level_outside_zero_one_is_refused(level):
    with pytest.raises(ValueError, match=r"level in \(0, 1\)"):
        check_level(level)


def test_coverage_per_output_and_jointly_count_the_samples_inside():
    """Three rows after the first, two outputs: output 0 inside at rows 1, 2; output 1 at 1, 3."""
    y = np.array([[9.0, 9.0], [0.5, 0.5], [0.5, 2.0], [2.0, 0.5]])
    band = Trajectory(np.zeros_like(y), np.full_like(y, -1.0), np.full_like(y, 1.0))
    assert coverage_by_output(y, band, first=1) == [2 / 3, 2 / 3]
    assert joint_coverage(y, band, first=1) == 1 / 3  # row 1 alone has both inside
    assert coverage(y, band, first=1) == 4 / 6
    assert coverage_by_output(y, band) == [0.5, 0.5] and joint_coverage(y, band) == 0.25
