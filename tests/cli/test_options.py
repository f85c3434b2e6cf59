"""Output files are named for what they hold, and options are spelled out in full.

``simulate --out`` writes CSV and ``export --out`` ONNX: another suffix is
refused at once, in one line, and nothing is written. argparse's
abbreviations are off in every parser: ``--input`` is an unknown option, not
``--inputs``.
"""

from __future__ import annotations

import pytest

from keras_mgu.cli import build_parser
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


@pytest.mark.parametrize(
    "command, abbreviated",
    [
        (["identify", "--train", "/no/such.csv"], ["--input", "u"]),  # --inputs
        (["identify", "--train", "/no/such.csv"], ["--model-class", "network"]),  # --model-classes
        (["simulate", "--model", MODEL], ["--input", "force"]),  # --inputs
        (["simulate", "--model", MODEL], ["--step", "3"]),  # --steps-ahead
    ],
)
def test_an_abbreviated_option_is_unknown(command, abbreviated, tmp_path, capsys):
    argv = [*command, *abbreviated]
    if command[0] == "simulate":
        argv += ["--data", write_inputs(tmp_path / "inputs.csv"), "--out", str(tmp_path / "s.csv")]
    else:
        argv += ["--out", str(tmp_path)]
    assert exit_status(argv) == 2
    err = capsys.readouterr().err
    assert "usage:" in err, err
    assert f"keras-mgu {command[0]}: error: unrecognized arguments: {' '.join(abbreviated)}" in err
    assert not (tmp_path / "s.csv").exists()


def test_no_parser_takes_abbreviations():
    parser = build_parser()
    [commands] = [a for a in parser._actions if a.dest == "command"]
    assert not parser.allow_abbrev
    assert all(not sub.allow_abbrev for sub in commands.choices.values())
    assert type(commands.choices["simulate"]) is type(parser)  # one-line bad values too
