"""Residual analysis and fit % against NumPy loops written from their definitions."""

import numpy as np
import pytest

from keras_mgu.sysid import fit_percent, residual_analysis


def loop_correlation(a, b, lag):
    """``sum_t a~[t] b~[t - lag] / sqrt(sum a~^2 sum b~^2)`` over the t where both exist."""
    a, b = a - a.mean(), b - b.mean()
    total = sum(a[t] * b[t - lag] for t in range(len(a)) if 0 <= t - lag < len(b))
    return total / np.sqrt(np.sum(a * a) * np.sum(b * b))


def test_correlations_and_band_follow_their_definitions(rng):
    e, u = rng.normal(size=(60, 2)), rng.normal(size=(60, 3))
    result = residual_analysis(e, u, max_lag=7)
    assert result.autocorrelation.shape == (2, 8) and result.cross_correlation.shape == (2, 3, 15)
    for i in range(2):
        for lag in range(8):
            want = loop_correlation(e[:, i], e[:, i], lag)
            assert result.autocorrelation[i, lag] == pytest.approx(want, abs=1e-12)
        for j in range(3):
            for m, lag in enumerate(range(-7, 8)):
                want = loop_correlation(e[:, i], u[:, j], lag)
                assert result.cross_correlation[i, j, m] == pytest.approx(want, abs=1e-12)
    assert result.band == pytest.approx(2.5758293 / np.sqrt(60), rel=1e-6)
    outside = np.sum(np.abs(result.autocorrelation[:, 1:]) > result.band, axis=1)
    np.testing.assert_array_equal(result.autocorrelation_outside, outside)
    assert (
        result.to_dict()["cross_correlation_outside"] == result.cross_correlation_outside.tolist()
    )


def test_a_coloured_residual_or_one_that_follows_the_input_leaves_the_band(rng):
    u = rng.normal(size=(2000, 1))
    white = residual_analysis(rng.normal(size=(2000, 1)), u)
    assert white.autocorrelation_outside.sum() <= 2 and white.cross_correlation_outside.sum() <= 2
    coloured = np.convolve(rng.normal(size=2000), np.ones(5), "same")[:, None]
    assert residual_analysis(coloured, u).autocorrelation_outside[0] >= 4
    follows = 0.5 * np.roll(u, 3, axis=0) + rng.normal(size=(2000, 1))  # e[t] ~ u[t - 3]
    result = residual_analysis(follows, u)
    assert abs(result.cross_correlation[0, 0, list(result.cross_lags).index(3)]) > 5 * result.band


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_lag": 0}, "max_lag"),
        ({"max_lag": 50}, "max_lag"),
        ({"confidence": 1.0}, "confidence"),
    ],
)
def test_bad_analysis_arguments_are_refused(rng, kwargs, match):
    with pytest.raises(ValueError, match=match):
        residual_analysis(rng.normal(size=(50, 1)), rng.normal(size=(50, 1)), **kwargs)
    with pytest.raises(ValueError, match="same N"):
        residual_analysis(rng.normal(size=(50, 1)), rng.normal(size=(40, 1)))


def test_fit_percent_follows_its_definition(rng):
    y = rng.normal(size=(80, 2)) + [3.0, -1.0]
    y_sim = y + rng.normal(scale=0.3, size=y.shape)
    want = [
        100 * (1 - np.sqrt(np.sum((y[:, i] - y_sim[:, i]) ** 2))
               / np.sqrt(np.sum((y[:, i] - np.mean(y[:, i])) ** 2)))
        for i in range(2)
    ]  # fmt: skip
    np.testing.assert_allclose(fit_percent(y, y_sim), want, rtol=1e-12)
    np.testing.assert_allclose(fit_percent(y, y), [100.0, 100.0])
    np.testing.assert_allclose(
        fit_percent(y, np.tile(y.mean(axis=0), (80, 1))), [0.0, 0.0], atol=1e-9
    )
    with pytest.raises(ValueError, match="constant"):
        fit_percent(np.ones((10, 1)), np.zeros((10, 1)))
    with pytest.raises(ValueError, match="same"):
        fit_percent(y, y[:-1])


def test_summary_counts_each_output_by_name(rng):
    """Two outputs: each output's count of its own lags, not one pooled count of both."""
    u = rng.normal(size=(400, 1))
    coloured = np.convolve(rng.normal(size=400), np.ones(6), "same")
    result = residual_analysis(
        np.stack([rng.normal(size=400), coloured], axis=1), u, max_lag=10,
        output_names=("level", "level2"),
    )  # fmt: skip
    auto, cross = result.autocorrelation_outside, result.cross_correlation_outside[:, 0]
    assert auto[1] > auto[0]
    text = result.summary()
    for name, a, c in zip(("level", "level2"), auto, cross, strict=True):
        want = f"{name}: autocorrelation at {a} of 10 lags (1..10), input cross-correlation at {c}"
        assert f"{want} of 21 (-10..10)" in text
    assert "of 20 lags" not in text  # not the two outputs' lags pooled
    unnamed = residual_analysis(np.stack([coloured, coloured], axis=1), u, max_lag=10)
    assert "y0: autocorrelation" in unnamed.summary() and "y1: " in unnamed.summary()


def test_summary_of_one_output_says_its_lags(rng):
    u = rng.normal(size=(300, 2))
    result = residual_analysis(rng.normal(size=(300, 1)), u, max_lag=5)
    auto = int(result.autocorrelation_outside[0])
    cross = int(result.cross_correlation_outside.sum())
    assert result.summary() == (
        f"residual autocorrelation outside the 99% band at {auto} of 5 lags (1..5); input "
        f"cross-correlation at {cross} of 22 (2 inputs x lags -5..5)"
    )
