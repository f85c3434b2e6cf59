"""Scoring conventions: all samples, and the n_initial rule."""

import numpy as np
import pytest

from keras_mgu.sysid import rmse, score
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def test_rmse_against_the_definition(rng):
    y, y_sim = rng.normal(size=(40, 2)), rng.normal(size=(40, 2))
    assert rmse(y, y_sim) == pytest.approx(np.sqrt(((y - y_sim) ** 2).mean()))


def test_benchmark_convention_leaves_out_the_first_samples():
    y = np.zeros((100, 1))
    y_sim = np.zeros((100, 1))
    y_sim[:50] = 10.0  # a bad start, outside the scored part
    y_sim[50:] = 1.0
    assert score(y, y_sim, "benchmark") == pytest.approx(1.0)
    assert score(y, y_sim, "benchmark", n_initial=10) == pytest.approx(
        np.sqrt((40 * 100 + 50) / 90)
    )
    assert score(y, y_sim, "all") == pytest.approx(np.sqrt((50 * 100 + 50) / 100))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"convention": "last"}, "convention"),
        ({"convention": "benchmark", "n_initial": 10}, "n_initial"),
        ({"convention": "benchmark", "n_initial": -1}, "n_initial"),
    ],
)
def test_bad_conventions_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        score(np.zeros((10, 1)), np.zeros((10, 1)), **kwargs)


def test_shape_mismatch_and_empty_records_are_refused():
    with pytest.raises(ValueError, match="same shape"):
        rmse(np.zeros((3, 1)), np.zeros((4, 1)))
    with pytest.raises(ValueError, match="empty"):
        rmse(np.zeros((0, 1)), np.zeros((0, 1)))
