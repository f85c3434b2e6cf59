"""Output files are named for what they hold.

``simulate --out`` writes CSV and ``export --out`` ONNX: another suffix is
refused at once, in one line, and nothing is written.
"""

from __future__ import annotations

import pytest

from keras_mgu.cli.errors import OptionError, check_out_file
from tests.cli.common import MODEL, exit_status, write_inputs
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


@pytest.mark.parametrize(
    "command, out, expected",
    [
        ("export", "mgu.tflite", ".onnx (export writes ONNX)"),
        ("export", "mgu", ".onnx (export writes ONNX)"),
        ("simulate", "sim.txt", ".csv (simulate writes CSV)"),
        ("simulate", "sim.npz", ".csv (simulate writes CSV)"),
    ],
)
def test_an_out_file_named_for_another_format_is_refused(command, out, expected, tmp_path, capsys):
    argv = [command, "--model", MODEL, "--out", str(tmp_path / out)]
    if command == "simulate":
        argv += ["--data", write_inputs(tmp_path / "inputs.csv")]
    assert exit_status(argv) == 2
    err = capsys.readouterr().err
    want = f"keras-mgu {command}: error: --out: expected a file name ending in {expected}; got "
    assert err.startswith(want) and err.count("\n") == 1, err  # one line, no usage
    assert not (tmp_path / out).exists()


def test_an_out_file_is_judged_by_its_suffix_in_any_case():
    for path in ("sim.csv", "runs/sim.CSV", "a.b/sim.Csv"):
        check_out_file("--out", path, ".csv", "simulate", "CSV")
    for path in ("sim.csv.txt", "csv", "sim.csv/run", ".csv"):
        with pytest.raises(OptionError, match="expected a file name ending in .csv"):
            check_out_file("--out", path, ".csv", "simulate", "CSV")
