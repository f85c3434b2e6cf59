"""The examples run end to end in their reduced modes."""

import csv
import json
import os
import re

import numpy as np
import pytest

from keras_mgu import sysid
from tests.helpers import BACKEND_INDEPENDENT, END_TO_END, load_script

pytestmark = END_TO_END

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


#: The system-identification example is a thin wrapper over ``keras-mgu identify``,
#: whose runs tests/test_cli.py checks on every backend: its tests run once.
SYSID_EXAMPLE = BACKEND_INDEPENDENT


def load_example(name):
    return load_script("examples", f"{name}.py")


def reported_rmse(output: str) -> float:
    match = re.search(r"^test RMSE: ([0-9.]+)$", output, flags=re.MULTILINE)
    assert match, output
    return float(match.group(1))


@SYSID_EXAMPLE
def test_system_identification_compare_on_simulated_tanks(tmp_path, capsys):
    # The example is a thin wrapper over `keras-mgu identify` (keras_mgu.cli).
    example = load_example("system_identification")
    argv = ["--quick", "--iterations", "4", "--compare", "--units", "4", "--out", str(tmp_path)]
    argv += ["--model-classes", "network", "--restarts", "1"]  # cells compared where they differ
    assert example.main(argv) == 0
    out = capsys.readouterr().out
    rmse = reported_rmse(out)
    assert np.isfinite(rmse) and rmse > 0
    assert out.index("estimated training time") < out.index("== MGU")  # before any training
    for kind in ("MGU", "GRU", "LSTM"):
        assert re.search(rf"^  {kind}: [0-9.]+ ms per step, 4 iterations, \d runs: about ", out,
                         flags=re.MULTILINE), kind  # fmt: skip
    for kind in ("mgu", "gru", "lstm"):
        for name in ("test_simulation", "test_residual", "training"):
            path = tmp_path / f"network_{kind}_h4_lr0.01" / f"{name}.png"
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert re.search(
        r"^\| network \(LSTM 4\) \| network_lstm_h4_lr0.01/ \| \d+ \| \d+ \| [0-9.]+ \| -?[0-9.]+ "
        r"\| [0-9.]+ \|$",
        out,
        flags=re.MULTILINE,
    )
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert set(runs) == {"network_mgu_h4_lr0.01", "network_gru_h4_lr0.01", "network_lstm_h4_lr0.01"}
    for kind in ("MGU", "GRU", "LSTM"):
        row = runs[f"network_{kind.lower()}_h4_lr0.01"]  # named after the class and cell kept
        assert row["model"] == f"network ({kind} 4)" and row["requested_cell"] == kind
        assert row["class"] == "network" and row["cell"] == kind.lower() and row["backend"]
        assert row["n_initial"] == 50  # no protocol: the benchmark score starts at sample 50
        assert np.isfinite(row["rmse_benchmark"])
        # One model file per model, in its folder.
        path = tmp_path / f"network_{kind.lower()}_h4_lr0.01" / f"network_{kind.lower()}.kmgu"
        found = sysid.load(path)
        assert found.config.cell == kind.lower()
        assert row["model_file"] == str(path)


@SYSID_EXAMPLE
def test_system_identification_reads_the_command_line(monkeypatch, capsys):
    example = load_example("system_identification")
    monkeypatch.setattr("sys.argv", ["system_identification.py", "--dataset", "wh2009"])
    with pytest.raises(SystemExit) as exit_info:
        example.main()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "keras-mgu identify: error: --dataset wh2009 needs --data-path" in err


def write_csv(path, u, y):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["time", "u", "y"])
        for i, (a, b) in enumerate(zip(u, y)):
            writer.writerow([i, a, b])


@SYSID_EXAMPLE
def test_system_identification_on_own_csv_records(tmp_path, capsys):
    rng = np.random.default_rng(0)
    u = rng.uniform(0, 1, 300)
    y = np.convolve(u, np.ones(5) / 5, mode="same")
    write_csv(tmp_path / "train.csv", u[:200], y[:200])
    write_csv(tmp_path / "test.csv", u[200:], y[200:])
    example = load_example("system_identification")
    argv = ["--quick", "--iterations", "4", "--units", "4", "3", "--out", str(tmp_path / "out")]
    argv += ["--model-classes", "network", "linear+network"]
    argv += ["--train-csv", str(tmp_path / "train.csv"), "--test-csv", str(tmp_path / "test.csv")]
    argv += ["--inputs", "u", "--outputs", "y"]
    assert example.main(argv) == 0
    out = capsys.readouterr().out
    assert "test 100 samples" in out
    assert np.isfinite(reported_rmse(out))


@SYSID_EXAMPLE
def test_system_identification_on_the_real_benchmark(tmp_path, capsys, shared_data_dir):
    path = os.path.join(shared_data_dir, "cascaded_tanks", "dataBenchmark.csv")
    if not os.path.exists(path):
        pytest.skip("the Cascaded Tanks benchmark file is not beside this checkout")
    example = load_example("system_identification")
    argv = [
        "--quick",
        "--iterations",
        "4",
        "--units",
        "4",
        "--restarts",
        "2",
        "--model-classes",
        "network",
        "linear+network",
        "--out",
        str(tmp_path),
    ]
    assert example.main(argv + ["--dataset", "cascaded-tanks", "--data-path", path]) == 0
    out = capsys.readouterr().out
    assert "test 1024 samples" in out
    assert np.isfinite(reported_rmse(out))
    assert "from sample 50)" in out  # the benchmark protocol's n_initial
    assert re.search(r"^[a-z+]+ \([^)]+\) test RMSE in V: ", out, flags=re.MULTILINE)


def test_quickstart_loss_falls(capsys):
    load_example("quickstart").main(["--epochs", "3"])
    out = capsys.readouterr().out
    found = re.search(r"before training: ([0-9.]+), after: ([0-9.]+)", out)
    before, after = map(float, found.groups())
    assert after < before


def test_derivative_targets_example_learns(tmp_path):
    results = load_example("derivative_targets").main(
        ["--quick", "--epochs", "4", "--sequences", "64", "--steps", "20", "--out", str(tmp_path)]
    )
    assert results["loss_last"] < results["loss_first"]
    assert np.isfinite(results["rmse_total"]) and np.isfinite(results["rmse_head_only"])
    assert (tmp_path / "derivative_targets.png").read_bytes()[:4] == b"\x89PNG"


def test_custom_cells_example_trains_every_model(capsys):
    results = load_example("custom_cells").main(["--quick", "--units", "4"])
    out = capsys.readouterr().out
    assert [r["model"] for r in results] == list(load_example("custom_cells").MODELS)
    for r in results:
        assert np.isfinite(r["rmse"]) and r["rmse"] > 0
        if r["model"].startswith("custom"):
            assert r["kernel"] == "engine"
        assert re.search(rf"^\| {r['model']} \| {r['kernel']} \| {r['params']} \|", out, re.M)
    by_name = {r["model"]: r for r in results}
    assert by_name["MGU"]["kernel"] in ("native", "fused")
    assert by_name["custom GRU"]["params"] == by_name["GRU"]["params"]


def test_matlab_loop_trains_the_grid_and_keeps_the_best_check(capsys):
    example = load_example("matlab_loop")
    argv = ["--quick", "--units", "3", "--iterations", "12", "--validation-every", "4"]
    rows = example.main([*argv, "--decay-points", "0.5", "--decay-rate", "0.1"])
    out = capsys.readouterr().out
    assert [(r["model"], r["units"], r["learning_rate"]) for r in rows] == [
        ("MGU", 3, 0.01), ("GRU", 3, 0.01), ("LSTM", 3, 0.01),
    ]  # fmt: skip
    for r in rows:
        checks = (1, *range(4, r["iterations"] + 1, 4))
        assert r["iterations"] >= 12 and r["best_iteration"] in checks
        # The network returned is the best check's: its validation RMSE is that check's.
        assert r["validation_rmse"] == pytest.approx(r["best_check_val_rmse"], rel=1e-4)
        assert r["final_learning_rate"] == pytest.approx(0.01 * 0.1)  # one decay point
        assert np.isfinite(r["test_rmse"]) and r["test_rmse"] > 0
        line = rf"^\| {r['model']} \| 3 \| 0.01 \| {r['best_iteration']} of {r['iterations']} \|"
        assert re.search(line, out, re.MULTILINE), out
