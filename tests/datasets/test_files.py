"""Tests of keras_mgu.datasets.files: load_csv_records."""

from __future__ import annotations

import numpy as np
import pytest

from keras_mgu.datasets import load_csv_records
from tests.datasets.common import write_file
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def test_load_csv_records_happy_path(tmp_path):
    text = "time, u1 ,u2,y,notes\n0,1.5,2,-3,a\n1, 2.5 ,3e0,-4,b\n\n2,3.5,4,-5.25,\n\n"
    path = write_file(tmp_path / "run1.csv", text)
    rec = load_csv_records(path, inputs=["u1", "u2"], outputs=["y"], ts=0.1)
    np.testing.assert_array_equal(rec.u, [[1.5, 2.0], [2.5, 3.0], [3.5, 4.0]])
    np.testing.assert_array_equal(rec.y, [[-3.0], [-4.0], [-5.25]])
    assert rec.input_names == ("u1", "u2") and rec.output_names == ("y",)
    assert rec.ts == 0.1 and rec.name == "run1"
    assert load_csv_records(path, "u2", "time", name="x").name == "x"


@pytest.mark.parametrize(
    "text, match",
    [
        ("a,b\n1,2\n", r"Column 'c' not found.*available columns: 'a', 'b'"),
        ("a,b,c\n1,2,3\n4,x5,6\n", r"Non-numeric value 'x5' in column 'b'.*line 3"),
        ("a,b,c\n1,2,3\n4,5,6\n7,,9\n", r"Columns .* different lengths.*'b': 2.*'c': 3"),
        ("a,b,c\n1,2,3\n4,,6\n7,8,9\n", r"Empty cell in column 'b'.*line 3"),
        ("a,b,c\n1,2,3\n4,5\n", r"different lengths.*'c': 1"),
        ("a,b,c\n1,2,nan\n", r"Non-finite value 'nan' in column 'c'.*line 2"),
        ("a,b,c\n", "no data rows"),
        ("", "is empty"),
        ("\n\n", "is empty"),
    ],
)
def test_load_csv_records_errors(tmp_path, text, match):
    path = write_file(tmp_path / "bad.csv", text)
    with pytest.raises(ValueError, match=match):
        load_csv_records(path, inputs=["a", "b"], outputs=["c"])


def test_load_csv_records_missing_file_and_bad_columns(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.csv"):
        load_csv_records(tmp_path / "nowhere.csv", ["a"], ["b"])
    path = write_file(tmp_path / "ok.csv", "a,b\n1,2\n")
    with pytest.raises(ValueError, match="inputs"):
        load_csv_records(path, inputs=[], outputs=["b"])
