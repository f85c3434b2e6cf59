"""Tests of keras_mgu.datasets.preprocessing: Normalizer and make_windows."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from keras_mgu.datasets import (
    Normalizer,
    Record,
    make_windows,
    simulate_cascaded_tanks,
)
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT

# --------------------------------------------------------------------------- Normalizer


def test_normalizer_fits_estimation_only_and_round_trips():
    data = simulate_cascaded_tanks(n_samples=256, seed=1)
    norm = Normalizer.fit(data)
    same = Normalizer.fit(data.estimation)
    assert norm.get_config() == same.get_config()
    np.testing.assert_allclose(norm.u_mean, data.estimation.u.mean(axis=0))
    np.testing.assert_allclose(norm.y_std, data.estimation.y.std(axis=0))
    assert norm.y_mean[0] != pytest.approx(data.test.y.mean())

    scaled = norm.transform(data)
    np.testing.assert_allclose(scaled.estimation.u.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(scaled.estimation.y.std(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(
        scaled.test.y, (data.test.y - norm.y_mean[0]) / norm.y_std[0], rtol=1e-12
    )
    assert scaled.test.name == data.test.name
    windows = norm.transform_y(make_windows(data.test.u, data.test.y, 16, 16)[1])
    assert windows.shape == (16, 16, 1)
    np.testing.assert_allclose(norm.inverse_transform_y(windows)[3], data.test.y[48:64])


def test_normalizer_config_is_plain_and_restores():
    rec = Record(np.array([[1.0, 5.0], [3.0, 9.0], [2.0, 4.0]]), np.array([[0.0], [1.0], [5.0]]))
    norm = Normalizer.fit(rec)
    config = json.loads(json.dumps(norm.get_config()))
    assert all(isinstance(v, float) for vals in config.values() for v in vals)
    restored = Normalizer.from_config(config)
    keras = pytest.importorskip("keras")
    revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(norm))
    assert isinstance(revived, Normalizer) and revived.get_config() == norm.get_config()
    np.testing.assert_array_equal(restored.transform(rec).u, norm.transform(rec).u)
    np.testing.assert_array_equal(
        restored.inverse_transform_y([[0.5]]), [[0.5 * math.sqrt(14.0 / 3.0) + 2.0]]
    )


def test_normalizer_errors():
    constant = Record(np.ones((5, 1)), np.arange(5.0)[:, None], input_names=("pump",))
    with pytest.raises(ValueError, match="'pump'.*constant"):
        Normalizer.fit(constant)
    with pytest.raises(ValueError, match="u_std.*positive"):
        Normalizer(u_mean=[0.0], u_std=[0.0], y_mean=[0.0], y_std=[1.0])
    norm = Normalizer(u_mean=[0.0], u_std=[1.0], y_mean=[0.0, 1.0], y_std=[1.0, 2.0])
    with pytest.raises(ValueError, match="2 channel"):
        norm.inverse_transform_y(np.zeros((4, 3)))
    with pytest.raises(TypeError, match="Record or SysIdData"):
        Normalizer.fit(np.zeros((3, 1)))


# --------------------------------------------------------------------------- windows


def test_make_windows_shapes_and_content():
    u = np.arange(20.0).reshape(10, 2)
    y = -np.arange(10.0)
    uw, yw = make_windows(u, y, window=4)
    assert uw.shape == (7, 4, 2) and yw.shape == (7, 4, 1)
    for i in range(7):
        np.testing.assert_array_equal(uw[i], u[i : i + 4])
        np.testing.assert_array_equal(yw[i, :, 0], y[i : i + 4])
    uw, yw = make_windows(u, y, window=4, stride=3)
    assert uw.shape == (3, 4, 2)
    np.testing.assert_array_equal(uw[2], u[6:10])
    np.testing.assert_array_equal(yw[1, :, 0], y[3:7])
    uw, _ = make_windows(u, y, window=10, stride=5)
    assert uw.shape == (1, 10, 2)
    uw[0, 0, 0] = 99.0
    assert u[0, 0] == 0.0  # windows are copies


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"window": 0}, "window"),
        ({"window": 11}, r"window.*N=10"),
        ({"window": 3, "stride": 0}, "stride"),
        ({"window": 2.0}, "window"),
    ],
)
def test_make_windows_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_windows(np.zeros((10, 1)), np.zeros((10, 1)), **kwargs)
    with pytest.raises(ValueError, match="same length"):
        make_windows(np.zeros((10, 1)), np.zeros((9, 1)), 3)
