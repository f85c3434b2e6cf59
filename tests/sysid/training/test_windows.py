"""Training windows: shapes, washout weights, whole-record mode, determinism, errors."""

import numpy as np
import pytest

from keras_mgu.sysid import TrainingWindows
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def record(n=100, n_in=2, n_out=1):
    t = np.arange(n, dtype="float32")
    return np.stack([t] * n_in, axis=1), np.stack([-t] * n_out, axis=1)


def test_windows_are_slices_of_the_record_with_washout_weights():
    u, y = record()
    windows = TrainingWindows(u, y, window=20, batch_size=8, washout=5, start_fraction=0.5)
    x, yy, w = windows[0]
    assert x.shape == (8, 20, 2) and yy.shape == (8, 20, 1) and w.shape == (8, 20)
    starts = windows.starts(0)
    for i, s in enumerate(starts):
        np.testing.assert_array_equal(x[i, :, 0], np.arange(s, s + 20))
        np.testing.assert_array_equal(yy[i, :, 0], -np.arange(s, s + 20))
        expected = np.ones(20)
        if s > 0:
            expected[:5] = 0
        np.testing.assert_array_equal(w[i], expected)
    assert (starts == 0).any() and (starts > 0).any()


def test_whole_record_mode_is_one_full_weight_sequence():
    u, y = record(50)
    windows = TrainingWindows(u, y, window=500, batch_size=8, washout=10)
    x, yy, w = windows[3]
    assert windows.whole_record and x.shape == (1, 50, 2)
    np.testing.assert_array_equal(w, np.ones((1, 50)))


def test_draws_repeat_for_a_seed_and_change_with_the_epoch():
    u, y = record()
    a = TrainingWindows(u, y, window=10, seed=3)
    b = TrainingWindows(u, y, window=10, seed=3)
    np.testing.assert_array_equal(a.starts(1), b.starts(1))
    before = a.starts(1)
    a.on_epoch_end()
    assert not np.array_equal(before, a.starts(1))
    assert len(a) == a.steps_per_epoch


def test_memory_is_the_record_not_the_windows():
    u, y = record(10_000)
    windows = TrainingWindows(u, y, window=1000, batch_size=4, steps_per_epoch=500)
    assert windows.u.nbytes == u.nbytes and windows.y.nbytes == y.nbytes


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"washout": 20}, "washout"),
        ({"window": 0}, "window"),
        ({"batch_size": 0}, "batch_size"),
        ({"start_fraction": 2.0}, "start_fraction"),
    ],
)
def test_bad_settings_are_refused(kwargs, match):
    u, y = record()
    with pytest.raises(ValueError, match=match):
        TrainingWindows(u, y, **{"window": 20, **kwargs})


def test_nan_and_short_records_are_refused():
    u, y = record()
    u[7, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        TrainingWindows(u, y, window=10)
    with pytest.raises(ValueError, match="at least 2"):
        TrainingWindows(np.zeros((1, 1)), np.zeros((1, 1)), window=1)
    with pytest.raises(ValueError, match="same length"):
        TrainingWindows(np.zeros((5, 1)), np.zeros((4, 1)), window=2)


def test_history_windows_give_the_samples_before_each_window():
    u, y = record(200)
    windows = TrainingWindows(u, y, window=30, batch_size=6, history=7, seed=2)
    (u_past, y_past, x), yy, w = windows[1]
    assert u_past.shape == (6, 7, 2) and y_past.shape == (6, 7, 1) and x.shape == (6, 30, 2)
    np.testing.assert_array_equal(w, np.ones((6, 30)))  # every sample scored, no washout
    for i, s in enumerate(windows.starts(1)):
        assert 7 <= s <= 200 - 30
        np.testing.assert_array_equal(u_past[i, :, 0], np.arange(s - 7, s))
        np.testing.assert_array_equal(y_past[i, :, 0], -np.arange(s - 7, s))
        np.testing.assert_array_equal(x[i, :, 0], np.arange(s, s + 30))


def test_history_longer_than_the_record_is_refused():
    u, y = record(50)
    with pytest.raises(ValueError, match="history"):
        TrainingWindows(u, y, window=40, history=20)
    with pytest.raises(ValueError, match="history"):
        TrainingWindows(u, y, window=10, history=-1)


@pytest.mark.parametrize("history", [0, 3])
def test_no_window_crosses_an_experiment_boundary(history):
    """Experiments of 30, 12 and 50 samples: every window (and its history) lies in one."""
    boundaries = (30, 42)
    u, y = record(92)
    windows = TrainingWindows(
        u, y, window=8, batch_size=64, washout=2, seed=1, history=history, boundaries=boundaries
    )
    edges = [0, *boundaries, 92]
    seen = set()
    for _epoch in range(5):
        for index in range(len(windows)):
            for s in windows.starts(index):
                k = next(k for k in range(3) if edges[k] <= s < edges[k + 1])
                assert edges[k] <= s - history and s + 8 <= edges[k + 1], (s, k)
                seen.add(k)
        windows.on_epoch_end()
    assert seen == {0, 1, 2}  # windows are drawn from every experiment
    batch = windows[0]
    x, w = (batch[0][2], batch[2]) if history else (batch[0], batch[2])
    starts = windows.starts(0)
    for i, s in enumerate(starts):  # the windows are the record's samples from their start
        np.testing.assert_array_equal(x[i, :, 0], np.arange(s, s + 8))
        if history:
            np.testing.assert_array_equal(batch[0][0][i, :, 0], np.arange(s - history, s))
    if not history:  # a later experiment's start is not the learned state: washout there too
        np.testing.assert_array_equal(w[starts > 0, :2], 0.0)


def test_several_experiments_cap_the_window_at_the_shortest():
    u, y = record(100)
    windows = TrainingWindows(u, y, window=500, batch_size=4, boundaries=(60,))
    assert windows.window == 40 and not windows.whole_record
    assert set(windows.starts(0)) <= {0, 60, *range(0, 21)}
    with pytest.raises(ValueError, match="shortest experiment has 40 samples"):
        TrainingWindows(u, y, window=38, history=5, boundaries=(60,))
    with pytest.raises(ValueError, match="`boundaries` must be increasing"):
        TrainingWindows(u, y, window=10, boundaries=(60, 60))


def test_one_experiment_draws_as_before():
    """Without boundaries the starts are those of one uniform draw over the record."""
    u, y = record()
    windows = TrainingWindows(u, y, window=10, batch_size=6, seed=4, history=2)
    rng = np.random.default_rng([4, 0, 3])
    np.testing.assert_array_equal(windows.starts(3), rng.integers(0, 100 - 2 - 10 + 1, 6) + 2)
