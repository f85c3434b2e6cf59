"""Dead time: the input delay estimated on hand-made records, the shift, the delayed ARX model."""

import types

import numpy as np
import pytest
from scipy.signal import lfilter

from keras_mgu.sysid import LinearModel, RecipeConfig
from keras_mgu.sysid.models.arx import order_search_note, select_linear_model
from keras_mgu.sysid.models.delay import (
    delay_inputs,
    estimate_input_delay,
    without_dead_samples,
)
from keras_mgu.sysid.models.signals import SignalPath
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def _record(u, y):
    return types.SimpleNamespace(u=np.asarray(u, float), y=np.asarray(y, float))


def _hand_shift(x, nk):
    """x(k - nk), the first sample held before the record: a loop, not the vectorised code."""
    out = np.empty_like(x)
    for k in range(len(x)):
        out[k] = x[max(k - nk, 0)]
    return out


def _plant(u, nk, rng, noise=0.0, feed_through=False):
    """y = q^-nk (0.3 q^-1 + 0.2 q^-2) / (1 - 1.2 q^-1 + 0.4 q^-2) u (+ 0.5 u(k - nk) direct)."""
    shifted = _hand_shift(u, nk)
    b = [0.5, 0.3, 0.2] if feed_through else [0.0, 0.3, 0.2]
    y = lfilter(b, [1.0, -1.2, 0.4], shifted)
    return y + noise * np.std(y) * rng.standard_normal(len(y))


def _split(u, y, n=1500):
    u, y = np.asarray(u).reshape(len(u), -1), np.asarray(y).reshape(len(y), -1)
    return _record(u[:n], y[:n]), _record(u[n:], y[n:])


@pytest.mark.parametrize("noise", [0.0, 0.2])
@pytest.mark.parametrize("nk", [1, 4, 13])
def test_one_input_delay_is_found(nk, noise):
    rng = np.random.default_rng(nk)
    u = rng.standard_normal(2500)
    # The plant's own b starts at lag 1: its delay is nk + 1 (a sampled plant without
    # feed-through has one sample of delay).
    assert estimate_input_delay(*_split(u, _plant(u, nk, rng, noise))) == (nk + 1,)


@pytest.mark.parametrize("noise", [0.0, 0.2])
def test_feed_through_gives_no_delay(noise):
    rng = np.random.default_rng(5)
    u = rng.standard_normal(2500)
    assert estimate_input_delay(*_split(u, _plant(u, 0, rng, noise, feed_through=True))) == (0,)


@pytest.mark.parametrize("noise", [0.0, 0.1])
def test_two_inputs_get_their_own_delays(noise):
    rng = np.random.default_rng(7)
    u = rng.standard_normal((2500, 2))
    y = _plant(u[:, 0], 4, rng, noise) + _plant(u[:, 1], 16, rng, noise)
    assert estimate_input_delay(*_split(u, y)) == (5, 17)


def test_an_input_without_effect_keeps_delay_zero():
    rng = np.random.default_rng(8)
    u = rng.standard_normal((2500, 2))
    y = _plant(u[:, 0], 6, rng, 0.05)  # the second input does nothing
    assert estimate_input_delay(*_split(u, y)) == (7, 0)


def test_the_shift_matches_a_hand_shifted_reference():
    rng = np.random.default_rng(0)
    u = rng.standard_normal((50, 2))
    shifted = delay_inputs(u, (3, 7))
    np.testing.assert_array_equal(shifted[:, 0], _hand_shift(u[:, 0], 3))
    np.testing.assert_array_equal(shifted[:, 1], _hand_shift(u[:, 1], 7))
    # Each experiment starts at rest at its own first input.
    joined = delay_inputs(u, (3, 7), boundaries=(20,))
    np.testing.assert_array_equal(joined[20:, 1], _hand_shift(u[20:, 1], 7))
    np.testing.assert_array_equal(joined[:20, 0], _hand_shift(u[:20, 0], 3))
    assert delay_inputs(u, (0, 0)) is u and delay_inputs(u, ()) is u
    path = SignalPath(None, input_delay=(3, 7))
    np.testing.assert_array_equal(path.delayed(u), shifted)


def test_each_experiment_loses_its_dead_samples_unless_it_is_short():
    from keras_mgu.datasets import Record

    u, y = np.arange(60.0).reshape(30, 2), np.arange(30.0)[:, None]
    record = Record(u, y, name="r", boundaries=(20, 27))  # experiments of 20, 7 and 3 samples
    trimmed = without_dead_samples(record, (3, 1))
    keep = [*range(3, 20), *range(23, 27), *range(27, 30)]  # the last, 3 <= 2 x 3, kept whole
    np.testing.assert_array_equal(trimmed.u, u[keep])
    np.testing.assert_array_equal(trimmed.y, y[keep])
    assert trimmed.experiments == [(0, 17), (17, 21), (21, 24)] and trimmed.name == "r"
    assert without_dead_samples(record, (0,)) is record
    assert without_dead_samples(record, ()) is record


def test_a_delayed_arx_regresses_on_the_delayed_inputs():
    # y(k) = -a1 y(k-1) + b0 u(k-nk) + b1 u(k-nk-1) + c by hand, against the fit on delayed u.
    rng = np.random.default_rng(1)
    nk, n = 6, 800
    u = rng.standard_normal(n)
    y = np.zeros(n)
    for k in range(1, n):
        y[k] = 0.8 * y[k - 1] + 0.5 * u[max(k - nk, 0)] + 0.25 * u[max(k - nk - 1, 0)] + 0.1
    model = LinearModel.fit(delay_inputs(u[:, None], (nk,)), y[:, None], na=1, nb=2)
    rows = np.arange(nk + 1, n)
    phi = np.column_stack([-y[rows - 1], u[rows - nk], u[rows - nk - 1], np.ones(len(rows))])
    theta = np.linalg.lstsq(phi, y[rows], rcond=None)[0]
    np.testing.assert_allclose(model.a[0], theta[:1], atol=1e-8)
    np.testing.assert_allclose(model.b[0, 0], theta[1:3], atol=1e-8)
    np.testing.assert_allclose([0.8, 0.5, 0.25], [-model.a[0, 0], *model.b[0, 0]], atol=1e-8)


def test_the_order_search_widens_and_says_where_it_stops():
    # Seven samples of delay not shifted: only ARX(8, 9) reaches u(k-7) and u(k-8).
    rng = np.random.default_rng(2)
    u = rng.standard_normal(1200)
    y = _plant(u, 6, rng, 0.01)
    est, val = _split(u, y, 900)
    _, table = select_linear_model(est, val, continues=False)
    assert max(row["na"] for row in table) == 12  # widened past the old ceiling, then worse
    assert order_search_note(table) is None  # the error stopped falling: no ceiling
    _, narrow = select_linear_model(est, val, continues=False, widen=False)
    assert max(row["na"] for row in narrow) == 8
    assert "still falls at na=8" in order_search_note(narrow)
    # With the delay shifted first, a low order suffices and there is no ceiling.
    shifted = _record(delay_inputs(est.u, (7,)), est.y), _record(delay_inputs(val.u, (7,)), val.y)
    _, table = select_linear_model(*shifted, continues=False)
    assert order_search_note(table) is None


@pytest.mark.parametrize("bad", [-1, 1.5, "2", (), True, (1, -2), [0, None]])
def test_a_bad_delay_is_refused(bad):
    with pytest.raises(ValueError, match="input_delay"):
        RecipeConfig(input_delay=bad)


def test_a_given_delay_is_kept_per_input():
    assert RecipeConfig(input_delay=3).input_delay == (3,)
    assert RecipeConfig(input_delay=[2, 0]).input_delay == (2, 0)
    assert RecipeConfig().input_delay is None


def test_a_long_response_that_starts_at_once_gets_no_delay():
    """Twelve taps from u(k) on, the first small: a window of NB_CHECK lags shifted later
    reaches more of the response and predicts better, but the response is there from lag 0
    (searched from the shifted window's start, the delay was 12)."""
    rng = np.random.default_rng(11)
    u = rng.standard_normal(2500)
    taps = np.full(12, 0.3)
    taps[0] = 0.09
    y = lfilter(taps, [1.0, -0.5], u)
    y = y + 0.05 * np.std(y) * rng.standard_normal(len(y))
    assert estimate_input_delay(*_split(u, y)) == (0,)


@pytest.mark.parametrize("nk", [0, 3, 13])
def test_a_response_of_one_input_tap_is_found(nk):
    """y(k) = 0.8 y(k-1) + 0.5 u(k - nk - 1): one input coefficient, the rest is the pole's."""
    rng = np.random.default_rng(20 + nk)
    u = rng.standard_normal(2500)
    y = lfilter([0.0, 0.5], [1.0, -0.8], _hand_shift(u, nk))
    y = y + 0.1 * np.std(y) * rng.standard_normal(len(y))
    assert estimate_input_delay(*_split(u, y)) == (nk + 1,)


@pytest.mark.parametrize(
    ("name", "allowed"),
    [("duffing", {0, 1}), ("wiener_hammerstein", {0, 1}), ("pendulum", {0, 1}),
     ("heated_tank", {12, 13, 14})],
)  # fmt: skip
def test_the_zoo_plants_get_their_delays(name, allowed):
    """No dead time: 0 or 1 (a sampled plant without feed-through answers one sample later);
    the heated tank: its 13 samples (12 of pipe, one of hold) within one."""
    from keras_mgu.datasets import zoo_plant

    data = zoo_plant(name, seed=0).data
    assert estimate_input_delay(data.estimation, data.validation)[0] in allowed
