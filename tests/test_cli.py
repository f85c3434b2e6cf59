"""The ``keras-mgu`` command line: in process, as ``python -m keras_mgu``, and installed."""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_mgu.cli
import keras_mgu.sysid
from keras_mgu.cli import main
from tests.helpers import BACKEND_INDEPENDENT

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TINY = ["--quick", "--units", "4"]


def subprocess_env(**extra):
    """The environment of a child process: this backend, quiet TensorFlow, no checkout path."""
    env = dict(os.environ, KERAS_BACKEND=keras.backend.backend(), TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONPATH", None)
    env.pop("KERAS_MGU_CLI_RESTARTED", None)
    return {**env, **extra}


def last_line_rmse(output: str) -> float:
    lines = output.strip().splitlines()
    match = re.fullmatch(r"test RMSE: ([0-9.]+)", lines[-1])
    assert match, output[-2000:]
    return float(match.group(1))


def test_identify_quick_writes_results(tmp_path, capsys):
    backend = keras.backend.backend()
    argv = ["identify", *TINY, "--backend", backend, "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"backend: {backend}" in out
    assert "test 256 samples" in out  # --quick's short simulated record
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert list(runs) == ["mgu_h4_lr0.01"]  # named by its settings
    mgu = runs["mgu_h4_lr0.01"]
    # --quick passes small iterations and time budget explicitly; the rest is derived.
    assert mgu["settings"] == {
        "units": [4], "iterations": 40, "time_budget": 30.0, "steps_per_epoch": 40,
    }  # fmt: skip
    assert mgu["restarts"] == 2 and mgu["n_initial"] == 50 and mgu["model"] == "MGU"
    assert mgu["dataset"] == "simulated-tanks" and mgu["protocol"] is None
    # Two restarts, and one run more where the linear model makes a second structure worth a try.
    n_runs = len(mgu["validation_scores"])
    assert n_runs == 2 + (len(set(mgu["structures"])) - 1) and len(mgu["validation_rmse"]) == n_runs
    assert mgu["config"]["units"] == [4] and mgu["config"]["iterations"] == 40
    for key in ("rmse", "rmse_benchmark"):
        assert np.isfinite(mgu[key]) and mgu[key] > 0
    assert last_line_rmse(out) == pytest.approx(mgu["rmse"], rel=1e-3)
    for name in ("test_simulation", "test_residual", "training"):
        assert (tmp_path / "mgu_h4_lr0.01" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


def test_identify_scores_a_benchmark_in_its_protocol_unit(tmp_path, capsys, shared_data_dir):
    path = os.path.join(shared_data_dir, "cascaded_tanks")
    if not os.path.isdir(path):
        pytest.skip("the Cascaded Tanks benchmark is not beside this checkout")
    argv = ["identify", *TINY, "--iterations", "4", "--dataset", "cascaded-tanks"]
    assert main([*argv, "--data-path", path, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    mgu = json.loads((tmp_path / "results.json").read_text())["runs"]["mgu_h4_lr0.01"]
    protocol = mgu["protocol"]
    assert protocol["name"] == "cascaded_tanks" and protocol["unit"] == "V"
    assert mgu["n_initial"] == protocol["n_initial"] == 50
    assert mgu["rmse_in_unit"] == pytest.approx(mgu["rmse"] * protocol["scale"])
    assert re.search(r"^MGU test RMSE in V: [0-9.]+ \(all\), [0-9.]+ \(from sample 50\)$", out,
                     re.MULTILINE)  # fmt: skip
    assert "| from sample 50 [V] |" in out


def test_n_initial_option_overrides_the_default(tmp_path, capsys):
    argv = ["identify", *TINY, "--iterations", "2", "--n-initial", "7", "--out", str(tmp_path)]
    assert main(argv) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["runs"]["mgu_h4_lr0.01"]["n_initial"] == 7
    assert "from sample 7" in capsys.readouterr().out


def test_selection_option_averages_runs_chosen_on_validation(tmp_path, capsys):
    argv = ["identify", *TINY, "--iterations", "2", "--restarts", "2", "--selection", "ensemble"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    mgu = json.loads((tmp_path / "results.json").read_text())["runs"]["mgu_h4_lr0.01"]
    assert mgu["config"]["selection"] == "ensemble"
    assert mgu["averaged_seeds"][0] == mgu["chosen_seed"]
    assert set(mgu["averaged_seeds"]) <= {0, 1000}
    assert "selection (ensemble): runs " in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dataset", "wh2009"], "--dataset wh2009 needs --data-path"),
        (["--dataset", "emps", "--data-path", "/no/such/folder"], "no such file or folder"),
        (["--train-csv", "est.csv"], "--train-csv and --test-csv go together"),
        (["--train-csv", "/no/such.csv", "--test-csv", "/no/t.csv"], "no such file"),
        (["--data-path", "."], "--data-path goes with --dataset"),
        (["--units", "0"], "argument --units: expected a positive integer"),
        (["--time-budget", "-1"], "argument --time-budget: expected a positive number"),
        (["--dataset", "silverbox"], "invalid choice: 'silverbox'"),
        (["--selection", "mean"], "`selection` must be one of ('best', 'ensemble')"),
        (["--decay-points", "0.5", "1.5"], "expected a fraction of the run in (0, 1]"),
        (["--decay-rate", "0"], "argument --decay-rate: expected a positive number"),
        (["--score-weights", "val_rmse=0.8,val_mae=0.2"], "unknown score name 'val_mae'"),
        (["--score-weights", "val_rmse=0.8,loss=-0.2"], "expected a weight >= 0 for loss"),
        (["--score-weights", "val_rmse"], "expected NAME=WEIGHT pairs"),
        (["--score-weights", "loss=0"], "at least one positive weight"),
        (["--validation-checks", "0"], "argument --validation-checks: expected a positive"),
        (["--validation-checks", "4", "--validation-every", "2"], "not allowed with"),
    ],
)
def test_bad_arguments_exit_with_a_message(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["identify", *argv, "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "keras-mgu identify: error:" in err and message in err
    assert not (tmp_path / "results.json").exists()


def test_identify_help_shows_options_and_defaults(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["identify", "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    for option in ("--units", "--iterations", "--window", "--batch-size", "--learning-rate"):
        assert re.search(rf"{option} \S+ .*?\(default: derived from the record\)", out), option
    assert "--restarts N runs to choose from on the validation record (default: 3)" in out
    assert "{simulated-tanks,cascaded-tanks,wh2009,emps}" in out
    for option in ("--time-budget", "--n-initial", "--compare", "--backend", "--quick"):
        assert option in out
    for option in ("--decay-points", "--decay-rate", "--steps-per-epoch", "--score-weights",
                   "--validation-checks", "--validation-every"):  # fmt: skip
        assert re.search(rf"{option} \S+", out), option
    recipe = keras_mgu.sysid.RecipeConfig()  # the defaults the help text states
    assert f"the recipe's, {' '.join(f'{p:g}' for p in recipe.decay_points)})" in out
    assert f"the recipe's, {recipe.decay_rate:g})" in out
    assert f"the recipe's, {recipe.validation_checks})" in out
    assert recipe.score_weights == {"val_rmse": 1.0} and "the recipe's, val_rmse=1)" in out
    assert f"(default: {recipe.steps_per_epoch}, or --iterations when fewer)" in out


def parsed_config(*options):
    """The resolved RecipeConfig of ``identify`` options (1024 estimation samples)."""
    args = keras_mgu.cli.build_parser().parse_args(["identify", *options])
    return keras_mgu.cli.identify.build_config(args, "mgu").resolved(1024)


def test_schedule_and_score_options_map_onto_the_config():
    default = parsed_config()
    assert default.decay_points == (0.5, 0.8) and default.validation_interval() == 2000 // 100
    config = parsed_config(
        "--iterations", "300", "--decay-points", "0.25", "0.75", "--decay-rate", "0.5",
        "--score-weights", "val_rmse=0.8, loss=0.2", "--validation-checks", "6",
        "--steps-per-epoch", "30",
    )  # fmt: skip
    assert config.decay_points == (0.25, 0.75) and config.decay_rate == 0.5
    assert config.score_weights == {"val_rmse": 0.8, "loss": 0.2}
    assert config.validation_interval() == 50 and config.steps_per_epoch == 30
    every = parsed_config("--iterations", "300", "--validation-every", "7")
    assert every.validation_interval() == 7 and every.steps_per_epoch == 100
    assert parsed_config("--iterations", "30").steps_per_epoch == 30  # --iterations is exact
    assert keras_mgu.cli.identify.SCORE_NAMES == keras_mgu.sysid.config.SCORE_NAMES


class LearningRateSpy(keras.callbacks.Callback):
    """The optimizer's learning rate at every training batch (after the recipe's schedule)."""

    def __init__(self):
        super().__init__()
        self.rates = []

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))


def test_schedule_and_score_options_reach_the_callbacks(tmp_path, monkeypatch):
    """The decay points, the score weights and the check interval act in the recipe's ``fit``."""
    spy, found = LearningRateSpy(), []
    identify = keras_mgu.sysid.identify

    def identify_with_spy(*args, **kwargs):
        found.append(identify(*args, callbacks=[spy], **kwargs))
        return found[-1]

    monkeypatch.setattr(keras_mgu.sysid, "identify", identify_with_spy)
    argv = ["identify", "--units", "4", "--restarts", "1", "--time-budget", "600"]
    argv += ["--iterations", "8", "--steps-per-epoch", "2", "--learning-rate", "0.02"]
    argv += ["--decay-points", "0.5", "--decay-rate", "0.1", "--validation-every", "3"]
    argv += ["--score-weights", "val_rmse=0.8,loss=0.2", "--out", str(tmp_path)]
    assert main(argv) == 0
    # 4 epochs of 2 iterations; the decay point 0.5 is the start of epoch ceil(0.5 * 4) = 2.
    assert spy.rates == pytest.approx([0.02] * 2 + [0.002] * 6)
    [result] = found
    for run in result.runs:
        history = run.stopper.history
        assert [check["iteration"] for check in history] == [1, 3, 6]
        for check in history:
            expected = 0.8 * check["val_rmse"] + 0.2 * check["loss"]
            assert check["score"] == pytest.approx(expected, rel=1e-6)
            assert check["loss"] > 0 and check["score"] != pytest.approx(check["val_rmse"])
        assert run.validation_score == min(check["score"] for check in history)
    config = json.loads((tmp_path / "results.json").read_text())["runs"]["mgu_h4_lr0.02"]["config"]
    assert config["decay_points"] == [0.5] and config["decay_rate"] == 0.1
    assert config["score_weights"] == {"val_rmse": 0.8, "loss": 0.2}
    assert config["validation_every"] == 3 and config["steps_per_epoch"] == 2


def test_runs_of_other_settings_into_one_folder_are_kept(tmp_path, capsys):
    argv = ["identify", "--quick", "--iterations", "2", "--restarts", "1", "--out", str(tmp_path)]
    assert main([*argv, "--units", "3"]) == 0
    assert main([*argv, "--units", "3", "2", "--learning-rate", "0.005"]) == 0
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert set(runs) == {"mgu_h3_lr0.01", "mgu_h3-2_lr0.005"}
    assert runs["mgu_h3-2_lr0.005"]["config"]["units"] == [3, 2]
    for name in runs:
        assert (tmp_path / name / "training.png").exists()
    assert "| MGU | mgu_h3-2_lr0.005/ |" in capsys.readouterr().out


@BACKEND_INDEPENDENT
def test_a_results_file_of_another_format_is_never_overwritten(tmp_path, capsys):
    (tmp_path / "results.json").write_text('{"MGU": {"rmse": 0.1}}')
    with pytest.raises(SystemExit):
        main(["identify", "--quick", "--iterations", "2", "--out", str(tmp_path)])
    assert "has no 'runs' table" in capsys.readouterr().err
    assert (tmp_path / "results.json").read_text() == '{"MGU": {"rmse": 0.1}}'


def test_backend_option_restarts_the_process(monkeypatch, tmp_path):
    other = "jax" if keras.backend.backend() != "jax" else "tensorflow"
    calls = []
    monkeypatch.setattr(
        keras_mgu.cli.subprocess, "call", lambda cmd, env: calls.append((cmd, env)) or 7
    )
    argv = ["identify", "--quick", "--backend", other, "--out", str(tmp_path)]
    assert main(argv) == 7  # the child's exit status
    [(cmd, env)] = calls
    assert cmd == [sys.executable, "-m", "keras_mgu", *argv]
    assert env["KERAS_BACKEND"] == other
    assert not (tmp_path / "results.json").exists()  # nothing ran here
    # A child whose Keras still loaded another backend stops instead of looping.
    monkeypatch.setenv("KERAS_MGU_CLI_RESTARTED", "1")
    with pytest.raises(SystemExit, match=f"--backend {other} was asked for"):
        main(argv)


def test_python_m_keras_mgu(tmp_path):
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "keras_mgu", *args], capture_output=True, text=True,
        cwd=ROOT, env=subprocess_env(), timeout=300,
    )  # fmt: skip
    helped = run("--help")
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert re.search(r"^\s+identify\s+identify a dynamical system", helped.stdout, re.MULTILINE)
    bad = run("identify", "--dataset", "wh2009", "--out", str(tmp_path))
    assert bad.returncode == 2
    assert "keras-mgu identify: error: --dataset wh2009 needs --data-path" in bad.stderr
    assert re.search(r"^usage: keras-mgu identify", bad.stderr, re.MULTILINE)


def site_packages() -> list[str]:
    """This interpreter's site-packages folders."""
    return [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]


@BACKEND_INDEPENDENT
def test_console_script_in_a_fresh_venv(tmp_path):
    """``pip install`` (not editable) into a new venv, then run ``keras-mgu`` away from ROOT.

    The venv reuses this environment's packages through a ``.pth`` file, so
    nothing is downloaded; the checkout is not on its path.
    """
    pytest.importorskip("hatchling", reason="building the wheel needs hatchling (dev extra)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    with open(os.path.join(purelib, "_parent_environment.pth"), "w") as f:
        f.write("\n".join(site_packages()) + "\n")
    # The native loops' cache key carries the install folder, so this copy would compile them
    # afresh (about a minute) and leave a library in the cache on every run: keep them off.
    env = subprocess_env(PIP_DISABLE_PIP_VERSION_CHECK="1", KERAS_MGU_NATIVE="0")
    pip = [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index"]
    installed = subprocess.run(
        [*pip, "--ignore-installed", ROOT], capture_output=True, text=True, cwd=tmp_path,
        env=env, timeout=300,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    find = "import importlib.util; print(importlib.util.find_spec('keras_mgu').origin)"
    where = subprocess.run(
        [python, "-c", find], capture_output=True, text=True, cwd=tmp_path, env=env, check=True
    ).stdout.strip()
    assert where == os.path.join(purelib, "keras_mgu", "__init__.py")  # not the checkout
    script = str(venv / "bin" / "keras-mgu")
    ran = subprocess.run(
        [script, "identify", *TINY, "--iterations", "4", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert np.isfinite(last_line_rmse(ran.stdout))
    assert (tmp_path / "out" / "results.json").exists()


def test_tune_prints_the_trials_and_writes_table_and_plot(tmp_path, capsys):
    pytest.importorskip("keras_tuner")
    argv = ["tune", *TINY, "--space", '{"units": [[3], [4]]}', "--search", "grid",
            "--restarts", "1", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "trials.json").read_text())
    rows = summary["trials"]
    assert [row["units"] for row in rows] == [[3], [4]]
    best = min(rows, key=lambda row: row["validation_rmse"])
    assert summary["best_settings"] == {"units": best["units"]}
    assert "| trial | units | validation RMSE |" in out
    assert last_line_rmse(out) == pytest.approx(summary["test_rmse"]["all"], rel=1e-3)
    assert (tmp_path / "trials.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--space", "{units"], "--space is not JSON"),
        (["--space", '{"unitz": [[3]]}'], "not a RecipeConfig field"),
        (["--compare"], "--compare does not apply"),
        (["--search-budget", "60", "--time-budget", "5"], "exclude each other"),
        (["--search-budget", "-1"], "--search-budget"),
    ],
)
def test_tune_refuses_bad_options(extra, message, tmp_path, capsys):
    pytest.importorskip("keras_tuner")
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", *TINY, "--out", str(tmp_path), *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
