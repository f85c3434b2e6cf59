"""What ``keras-mgu identify`` names its outputs after, and which figure its report leads with."""

import re
from types import SimpleNamespace

import numpy as np
import pytest

from keras_mgu.cli import build_parser
from keras_mgu.cli.naming import UsedNames, model_file_stem, model_name, run_name
from keras_mgu.cli.report import fixed, print_scores, print_summary
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def kept(structure, units=(), cell="mlp", learning_rate=0.01):
    """A stand-in for an identification whose kept run is of ``structure``."""
    config = SimpleNamespace(units=units, cell=cell, learning_rate=learning_rate)
    return SimpleNamespace(runs=[SimpleNamespace(structure=structure, config=config)], best=0)


@pytest.mark.parametrize(
    "found, name, stem",
    [
        (kept("polynomial"), "polynomial", "polynomial"),  # its config names a cell it has not
        (kept("linear"), "linear", "linear"),
        (kept("narx", (64, 64)), "narx_mlp_h64-64_lr0.01", "narx_mlp"),
        (kept("network", (32,), "mgu"), "network_mgu_h32_lr0.01", "network_mgu"),
        (kept("linear+network", (16,), "gru", 0.003), "linear+network_gru_h16_lr0.003",
         "linear+network_gru"),
        (kept("loop", (8,), "my_cells.cells:PeepholeCell"), "loop_peepholecell_h8_lr0.01",
         "loop_peepholecell"),
    ],
)  # fmt: skip
def test_outputs_are_named_after_the_class_and_cell_kept(found, name, stem):
    assert model_name(found) == name and model_file_stem(found) == stem


def test_the_settings_asked_for_keep_their_own_name():
    assert run_name(SimpleNamespace(units=None, cell="mgu", learning_rate=0.01)) == "mgu_h32_lr0.01"


def test_two_models_of_one_call_never_share_a_folder():
    used = UsedNames()
    assert used.unique("polynomial", "MGU") == "polynomial"
    assert used.unique("polynomial", "GRU") == "polynomial_for_gru"
    assert used.unique("network_lstm_h32_lr0.01", "LSTM") == "network_lstm_h32_lr0.01"


def test_identify_help_says_every_class_is_tried(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["identify", "--help"])
    out = capsys.readouterr().out
    assert "MGU network" not in out and "models of every class" in out.replace("\n", " ")


def row(scored_from):
    """A results row whose scored figure starts at ``scored_from`` (0: the free run)."""
    return {
        "model": "polynomial", "name": "polynomial", "params": 7, "wall_seconds": 3.0,
        "rmse": 1.48, "fit_percent": [12.0], "rmse_benchmark": 0.39,
        "fit_percent_benchmark": [80.0],
        "headline": {"scored_from": scored_from, "rmse": 0.39 if scored_from else 1.48,
                     "start": "the first 50 measured outputs" if scored_from else "its start"},
        "prediction": None, "residuals": {"summary": "white"},
    }  # fmt: skip


@pytest.mark.parametrize("scored_from, first", [(50, 0.39), (0, 1.48)])
def test_the_report_leads_with_the_scored_figure(scored_from, first, capsys):
    test = SimpleNamespace(n_samples=300, y=np.ones((300, 1)), output_names=("y",))
    print_scores("polynomial", row(scored_from), test, 50, None)
    print_summary({"MGU": row(scored_from)}, test, 50, None)
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(f"RMSE {fixed(first)}, fit {80.0 if scored_from else 12.0} %")
    table = next(line for line in out if line.startswith("| polynomial |"))
    cells = [cell.strip() for cell in table.strip("|").split("|")]
    assert cells[4] == fixed(first)  # the first score column is the scored figure
    header = next(line for line in out if line.startswith("| model |"))
    scored = "from sample 50" if scored_from else "all, estimation start"
    assert re.search(rf"\| wall s \| test RMSE \({scored}\) \|", header)
