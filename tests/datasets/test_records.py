"""Tests of keras_mgu.datasets.records: Record and SysIdData."""

from __future__ import annotations

import numpy as np
import pytest

from keras_mgu.datasets import (
    Record,
    SysIdData,
    join_experiments,
)
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def test_record_converts_and_names_channels():
    rec = Record([[1, 2], [3, 4], [5, 6]], [[0], [1], [2]], ts=2)
    assert rec.u.dtype == np.float64 and rec.u.shape == (3, 2)
    assert rec.input_names == ("u0", "u1") and rec.output_names == ("y0",)
    assert rec.ts == 2.0 and rec.n_samples == 3 and (rec.n_inputs, rec.n_outputs) == (2, 1)
    np.testing.assert_allclose(rec.time, [0.0, 2.0, 4.0])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"u": np.zeros(5), "y": np.zeros((5, 1))}, r"2-D array.*\(5,\).*reshape"),
        ({"u": np.zeros((5, 1)), "y": np.zeros((4, 1))}, "same number of samples.*5.*4"),
        ({"u": [[0.0], [np.nan]], "y": [[0.0], [1.0]]}, "finite.*sample 1, channel 0"),
        ({"u": [[0.0], [1.0]], "y": [[0.0], [np.inf]]}, "`y` must contain only finite"),
        ({"u": [[0.0]], "y": [[0.0]], "ts": 0.0}, "`ts`.*positive"),
        ({"u": [[0.0]], "y": [[0.0]], "ts": -4}, "`ts`.*positive"),
        ({"u": [[0.0]], "y": [[0.0]], "input_names": ("a", "b")}, "input_names.*1 string"),
        ({"u": np.zeros((0, 1)), "y": np.zeros((0, 1))}, "at least one sample"),
    ],
)
def test_record_validation_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Record(**kwargs)


def test_record_rejects_non_numeric():
    with pytest.raises(TypeError, match="numeric"):
        Record([["a"], ["b"]], [[0.0], [1.0]])


def test_record_split_and_slice():
    u = np.arange(10.0)[:, None]
    rec = Record(u, 2 * u, ts=0.5, input_names=("p",), output_names=("q",), name="r")
    first, last = rec.split(0.2)
    assert (first.n_samples, last.n_samples) == (8, 2)
    np.testing.assert_array_equal(last.u[:, 0], [8.0, 9.0])
    np.testing.assert_array_equal(last.y[:, 0], [16.0, 18.0])
    assert last.ts == 0.5 and last.input_names == ("p",) and first.name == "r"
    assert rec.slice(2, 5, name="s").name == "s"
    for bad in (0.0, 1.0, 1.5, 0.01):
        with pytest.raises(ValueError, match="validation_fraction|empty part"):
            rec.split(bad)


def test_sysid_data_checks_records():
    a = Record(np.zeros((4, 1)), np.zeros((4, 1)))
    b = Record(np.zeros((4, 2)), np.zeros((4, 1)))
    with pytest.raises(ValueError, match="test record has 2 input"):
        SysIdData(a, a, b)
    with pytest.raises(TypeError, match="validation.*Record"):
        SysIdData(a, np.zeros((4, 1)), a)


def ramp(n: int, start: float = 0.0, name: str = "") -> Record:
    t = start + np.arange(n, dtype=float)[:, None]
    return Record(t, -t, ts=0.5, name=name)


def test_join_experiments_keeps_where_each_starts():
    joined = join_experiments([ramp(4, name="a"), ramp(3, 100), ramp(5, 200)], name="all")
    assert joined.boundaries == (4, 7) and joined.name == "all" and joined.n_samples == 12
    assert joined.experiments == [(0, 4), (4, 7), (7, 12)]
    np.testing.assert_array_equal(joined.u[4:7, 0], [100, 101, 102])
    # experiments of experiments: the inner boundaries move with their record
    assert join_experiments([ramp(2), joined]).boundaries == (2, 6, 9)
    # slices keep the boundaries inside them, shifted
    assert joined.slice(2, 10).boundaries == (2, 5) and joined.slice(4, 7).boundaries == ()
    assert joined.slice(-6).boundaries == (1,)
    single = ramp(3)
    assert join_experiments([single]) is single and single.experiments == [(0, 3)]


def test_split_of_several_experiments_cuts_the_last_one():
    joined = join_experiments([ramp(6), ramp(4, 100)])
    est, val = joined.split(0.3)  # 3 samples, from the 4 of the last experiment
    assert est.boundaries == (6,) and est.n_samples == 7 and val.boundaries == ()
    np.testing.assert_array_equal(val.u[:, 0], [101, 102, 103])
    est, val = joined.split(0.4)  # exactly the last experiment
    assert est.boundaries == () and est.n_samples == 6 and val.u[0, 0] == 100
    with pytest.raises(ValueError, match="more than the last experiment's 4"):
        joined.split(0.5)


@pytest.mark.parametrize("boundaries", [(0,), (5,), (3, 2), (2, 2), ("x",)])
def test_boundaries_must_be_increasing_samples_inside(boundaries):
    with pytest.raises(ValueError, match="`boundaries` must be increasing sample indices"):
        Record(np.zeros((5, 1)), np.zeros((5, 1)), boundaries=boundaries)


def test_join_experiments_refuses_other_channels_or_period():
    with pytest.raises(ValueError, match="expected the same channels"):
        join_experiments([ramp(3), Record(np.zeros((3, 2)), np.zeros((3, 1)))])
    with pytest.raises(ValueError, match="expected one sampling period"):
        join_experiments([ramp(3), Record(np.zeros((3, 1)), np.zeros((3, 1)), ts=1.0)])
    with pytest.raises(TypeError, match="non-empty sequence of Record"):
        join_experiments([])


def test_from_experiments_cuts_validation_from_the_end_of_the_last():
    one = SysIdData.from_experiments(ramp(10))
    assert (one.estimation.n_samples, one.validation.n_samples) == (8, 2)
    np.testing.assert_array_equal(one.validation.u[:, 0], [8.0, 9.0])
    assert one.test is one.validation  # no test record: the validation record stands in
    two = SysIdData.from_experiments([ramp(6), ramp(10, 100)], test=ramp(3, 300))
    assert two.estimation.boundaries == (6,) and two.estimation.n_samples == 13
    np.testing.assert_array_equal(two.validation.u[:, 0], [107.0, 108.0, 109.0])  # 20 % of 16
    assert two.test.u[0, 0] == 300.0
    given = SysIdData.from_experiments([ramp(6), ramp(10)], validation=ramp(2, 50))
    assert given.estimation.n_samples == 16 and given.validation.u[0, 0] == 50.0


def test_coerce_takes_data_records_or_lists_of_records():
    data = SysIdData.from_experiments(ramp(10))
    assert SysIdData.coerce(data) is data
    assert SysIdData.coerce(ramp(10)).estimation.n_samples == 8
    assert SysIdData.coerce((ramp(6), ramp(10))).estimation.boundaries == (6,)
    for bad, kind in [("run.csv", "str"), ([], "list"), ([ramp(4), "b"], "a list of Record, str")]:
        with pytest.raises(TypeError, match=f"SysIdData, a Record .* received {kind}"):
            SysIdData.coerce(bad)
