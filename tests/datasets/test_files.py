"""Tests of the file loaders: load_csv_records, and load_record on text, .mat and .npz files."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io

from keras_mgu.datasets import load_csv_records, load_record
from keras_mgu.datasets.text_files import detect_delimiter, read_text_table
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
        ("a,b\n1,2\n", r"no column 'c'; available columns: 'a', 'b'"),
        ("a,b,c\n1,2,3\n4,x5,6\n", r"line 3, column 'b': 'x5' is not a number"),
        ("a,b,c\n1,2,3\n4,5,6\n7,,9\n", r"line 4, column 'b': empty cell"),
        ("a,b,c\n1,2,3\n4,5\n", r"line 3: 2 cell\(s\), but line 1 has 3"),
        ("a,b,c\n1,2,nan\n", r"line 2, column 'c': 'nan' is not a finite number"),
        ('a,b,c\n1,2,3\n4,"5,6\n7,8,9\n', "runs past the end of its line"),
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


U = np.array([[0.5, -1.0], [1.5, 2.25], [2.5, 3e-3]])
Y = np.array([[-3.0], [4.125], [5.0]])


def table_text(sep: str, header: bool, pad: str = "") -> str:
    """``U`` and ``Y`` as text rows ``u1 sep u2 sep y`` (with a header row when asked)."""
    rows = [sep.join(f"{pad}{float(v)!r}" for v in (*u, *y)) for u, y in zip(U, Y)]
    return "\n".join((["u1" + sep + "u2" + sep + "y"] if header else []) + rows) + "\n"


@pytest.mark.parametrize(
    "suffix, sep", [(".csv", ","), (".csv", ";"), (".tsv", "\t"), (".txt", " "), (".dat", "  ")]
)
@pytest.mark.parametrize("header", [True, False])
def test_text_files_with_any_delimiter_and_optional_header(tmp_path, suffix, sep, header):
    path = write_file(tmp_path / f"run{suffix}", table_text(sep, header, pad=" " * (sep != ",")))
    if header:
        rec = load_record(path, ["u1", "u2"], ["y"], ts=0.5)
        assert rec.input_names == ("u1", "u2") and rec.output_names == ("y",)
    else:  # columns by 0-based index, or named with `columns`
        rec = load_record(path, ["0", 1], ["2"], ts=0.5)
        assert rec.input_names == ("u0", "u1") and rec.output_names == ("y0",)
        named = load_record(path, ["a", "b"], ["c"], columns=["a", "b", "c"])
        assert named.input_names == ("a", "b") and named.output_names == ("c",)
        np.testing.assert_array_equal(named.u, U)
    np.testing.assert_array_equal(rec.u, U)
    np.testing.assert_array_equal(rec.y, Y)
    assert rec.ts == 0.5 and rec.name == "run"


def test_matlab_writematrix_output_and_blank_lines(tmp_path):
    """What ``writematrix([u y], 'data.txt')`` writes: numbers only, comma-separated."""
    path = write_file(tmp_path / "data.txt", "\n1,2.5e-1\n\n-3,4\r\n5,6\n\n")
    rec = load_record(path, [0], [1])
    np.testing.assert_array_equal(rec.u[:, 0], [1, -3, 5])
    np.testing.assert_array_equal(rec.y[:, 0], [0.25, 4, 6])


@pytest.mark.parametrize(
    "line, expected", [("a;b,c", ";"), ("a\tb,c", "\t"), ("1,2", ","), ("1  2", None)]
)
def test_delimiter_is_taken_from_the_first_line(line, expected):
    assert detect_delimiter(line) == expected


def test_mat_file_vectors_and_matrix_columns(tmp_path):
    path = str(tmp_path / "exp.mat")
    # MATLAB vectors load as N x 1 or 1 x N; a matrix's columns are name_0, name_1, ...
    scipy.io.savemat(path, {"u": U, "y": Y.T, "Ts": 0.1, "note": "ok"})
    rec = load_record(path, ["u_0", "u_1"], ["y"], ts=0.1)
    np.testing.assert_array_equal(rec.u, U)
    np.testing.assert_array_equal(rec.y, Y)
    assert rec.input_names == ("u_0", "u_1") and rec.name == "exp"
    # the scalar Ts and the text are not columns: indices count u_0, u_1, y
    assert load_record(path, [2], [0]).y[:, 0].tolist() == U[:, 0].tolist()
    renamed = load_record(path, ["a"], ["c"], columns=["a", "b", "c"])
    np.testing.assert_array_equal(renamed.y, Y)


def test_npz_file_array_names_as_columns(tmp_path):
    path = str(tmp_path / "exp.npz")
    np.savez(path, pump=U[:, 0], valve=U[:, 1], level=Y[:, 0])
    rec = load_record(path, ["pump", "valve"], ["level"])
    np.testing.assert_array_equal(rec.u, U)
    np.testing.assert_array_equal(rec.y, Y)
    assert rec.output_names == ("level",)


@pytest.mark.parametrize(
    "name, text, match",
    [
        ("e.csv", "", r"e\.csv is empty; expected rows of numbers"),
        ("e.csv", "\n \n", r"e\.csv is empty"),
        ("h.csv", "u,y\n", r"h\.csv has a header row \(u, y\) but no data rows"),
        ("r.csv", "u,y\n1,2\n3\n", r"r\.csv, line 3: 1 cell\(s\), but line 1 has 2; expected 2"),
        ("r.txt", "1 2\n3 4 5\n", r"r\.txt, line 2: 3 cell\(s\).*2 whitespace-separated"),
        ("n.csv", "u,y\n1,2\n3,x4\n", r"n\.csv, line 3, column 'y': 'x4' is not a number\."),
        ("d.csv", "u;y\n1,5;2\n", r"line 2, column 'u': '1,5' is not a number; decimal commas"),
        ("c.csv", "u,y\n1,\n", r"c\.csv, line 2, column 'y': empty cell; expected a number"),
        ("f.csv", "u,y\n1,2\n2,NaN\n", r"line 3, column 'y': 'NaN' is not a finite number"),
        ("i.txt", "u y\n1 2\n3 -inf\n", r"line 3, column 'y': '-inf' is not a finite"),
        ("m.csv", "a,b\n1,2\n", r"no column 'u'; available columns: 'a', 'b' \(or 0-based"),
        ("x.txt", "1 2\n", r"no column 'u'; the file has no header row.*0-based indices 0 to 1"),
        ("k.xlsx", "1 2\n", r"unknown file type '\.xlsx'; expected one of \.csv"),
        (
            "run.csv",
            "u\n-0.139,-0.897\n0.1,0.2\n",
            r"^\S*run\.csv: the header names 1 column \(u\) but line 2 has 2 values; give one "
            r"name per column\.$",
        ),
        ("w.txt", "t u y\n\n1 2\n", r"header names 3 columns \(t, u, y\) but line 3 has 2"),
        ("run.csv", "u,\n-0.139,-0.897\n", r"^\S*run\.csv: column 2 of the header has no name"),
        ("s.csv", "u;;y\n1;2;3\n", r"s\.csv: column 2 of the header has no name"),
    ],
)
def test_malformed_text_says_what_and_where(tmp_path, name, text, match):
    path = write_file(tmp_path / name, text)
    with pytest.raises(ValueError, match=match) as info:
        load_record(path, ["u"], ["y"])
    assert "\n" not in str(info.value)


def test_header_of_one_name_reads_one_column(tmp_path):
    """One name over one column still reads; the header's check spares good files."""
    path = write_file(tmp_path / "level.csv", "level\n1.5\n\n2.5\n")
    table = read_text_table(path)
    assert table.names == ("level",) and table.n_columns == 1
    np.testing.assert_array_equal(table.values(0), [1.5, 2.5])
    rec = load_record(write_file(tmp_path / "run.csv", "u,y\n-0.139,-0.897\n"), ["u"], ["y"])
    assert (rec.u[0, 0], rec.y[0, 0]) == (-0.139, -0.897)
    trailing = write_file(tmp_path / "t.csv", "u,y,\n1,2,\n3,4,\n")  # an empty last column
    assert load_record(trailing, ["u"], ["y"]).y[:, 0].tolist() == [2.0, 4.0]


def test_column_names_and_indices_are_checked(tmp_path):
    path = write_file(tmp_path / "t.csv", "u,y\n1,2\n")
    with pytest.raises(ValueError, match=r"has a header row \(u, y\); names given with `columns`"):
        load_record(path, ["u"], ["y"], columns=["a", "b"])
    bare = write_file(tmp_path / "b.csv", "1,2\n")
    with pytest.raises(ValueError, match=r"has 2 column\(s\) but 3 name\(s\)"):
        load_record(bare, ["a"], ["b"], columns=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"no column '2'"):
        load_record(bare, ["0"], ["2"])
    gap = write_file(tmp_path / "g.txt", "1 2\n3 inf\n")
    with pytest.raises(ValueError, match=r"g\.txt, line 2, column 1 \(0-based\): 'inf' is not"):
        load_record(gap, ["0"], ["1"])
    with pytest.raises(ValueError, match="`inputs` must be a non-empty list"):
        load_record(bare, [], ["1"])
    with pytest.raises(FileNotFoundError, match="nowhere.mat"):
        load_record(tmp_path / "nowhere.mat", ["u"], ["y"])
    with pytest.raises(ValueError, match=r"column 'y' is selected as an input and as an output"):
        load_record(path, ["y"], ["y"])
    with pytest.raises(ValueError, match=r"column 1 \(0-based\) is selected as an input and"):
        load_record(bare, ["0", "1"], ["1"])


def test_malformed_mat_and_npz_files(tmp_path):
    v73 = tmp_path / "big.mat"
    v73.write_bytes(
        b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: x HDF5 schema" + bytes(60)
    )
    with pytest.raises(ValueError, match=r"big\.mat is a MATLAB v7\.3 \(HDF5\) file.*'-v7'"):
        load_record(v73, ["u"], ["y"])
    junk = write_file(tmp_path / "junk.mat", "not a mat file at all")
    with pytest.raises(ValueError, match=r"junk\.mat cannot be read as a MATLAB \.mat file"):
        load_record(junk, ["u"], ["y"])
    ragged = str(tmp_path / "ragged.mat")
    scipy.io.savemat(ragged, {"u": np.zeros(5), "y": np.zeros(4)})
    with pytest.raises(ValueError, match=r"different numbers of samples \(u: 5, y: 4\)"):
        load_record(ragged, ["u"], ["y"])
    gap = str(tmp_path / "gap.npz")
    np.savez(gap, u=np.arange(4.0), y=np.array([0.0, 1.0, np.nan, 3.0]))
    with pytest.raises(ValueError, match=r"gap\.npz, column 'y', sample 2 \(0-based\): nan"):
        load_record(gap, ["u"], ["y"])
    cube = str(tmp_path / "cube.npz")
    np.savez(cube, u=np.zeros((4, 2, 2)))
    with pytest.raises(ValueError, match=r"'u' has shape \(4, 2, 2\); expected a vector"):
        load_record(cube, ["u"], ["y"])
    nothing = str(tmp_path / "nothing.npz")
    np.savez(nothing, label=np.array("text"))
    with pytest.raises(ValueError, match="holds no numeric vector or matrix"):
        load_record(nothing, ["u"], ["y"])
    with pytest.raises(ValueError, match=r"junk\.npz cannot be read as a NumPy \.npz file"):
        load_record(write_file(tmp_path / "junk.npz", "zzz"), ["u"], ["y"])
