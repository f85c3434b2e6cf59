"""The ``keras-mgu`` command line: in process, as ``python -m keras_mgu``, and installed.

The tests that run a whole identification through the command line's options
are ``END_TO_END``: they run once, with the JAX suite; what they call
is tested on every backend.
"""

import dataclasses
import importlib.util
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
from keras_mgu import datasets, sysid
from keras_mgu.cli import main
from keras_mgu.export import ONNX_PACKAGES
from tests.helpers import BACKEND_INDEPENDENT, END_TO_END, NETWORK_CLASSES, other_backend

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
#: A tiny run of every class (the default), and one of the recurrent network alone: each class
#: a run tries costs its graphs' compiling, and the options the ``TINY`` runs check do not
#: depend on the classes.
EVERY_CLASS = ["--quick", "--units", "4"]
TINY = [*EVERY_CLASS, "--model-classes", "network"]


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


@END_TO_END
def test_identify_quick_writes_results(tmp_path, capsys):
    backend = keras.backend.backend()
    argv = ["identify", *EVERY_CLASS, "--backend", backend, "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"backend: {backend}" in out
    assert "test 256 samples" in out  # --quick's short simulated record
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    [(name, mgu)] = runs.items()  # named after the class and cell kept
    assert name == keras_mgu.cli.naming.model_name(sysid.load(mgu["model_file"]))
    assert name.startswith(f"{mgu['class']}_") or name == mgu["class"]
    assert mgu["requested"] == "mgu_h4_lr0.01" and mgu["requested_cell"] == "MGU"
    # --quick passes small iterations explicitly; the rest is derived (no time budget).
    assert mgu["settings"] == {"units": [4], "iterations": 40, "steps_per_epoch": 40}
    assert mgu["restarts"] == 2 and mgu["n_initial"] == 50
    assert mgu["dataset"] == "simulated-tanks" and mgu["protocol"] is None
    # Two restarts, and one run more where the linear model makes a second structure worth a try.
    n_runs = len(mgu["stopping_scores"])
    assert n_runs == 2 + (len(set(mgu["structures"])) - 1) and len(mgu["validation_rmse"]) == n_runs
    # Every class is tried by default; the folder is named by the settings asked for.
    assert {"network", "narx", "loop", "linear"} <= set(mgu["structures"])
    beyond = mgu["extrapolation"]  # the share of the test outside the estimation range
    assert 0 <= beyond["share"] <= 1 and beyond["samples"] == round(beyond["share"] * 206)
    said = keras_mgu.sysid.judging.extrapolation.describe_extrapolation(beyond, 50)
    assert f"test, {said}" in out
    for off in mgu["ran_off"]:  # runs that ran off, said as printed
        assert off["where"] in out and off["class"] == mgu["structures"][off["run"] - 1]
    for out_run in mgu["not_kept"]:  # those and the runs worse than ARX at the record's edges
        assert f"run {out_run['run']} ({out_run['class']}, seed {out_run['seed']}): " in out
    # What the chosen class does beyond its range, and its edge error beside the ARX model's.
    outside = mgu["outside_range"]
    assert outside["class"] == mgu["class"]
    assert f"the chosen {outside['class']} {outside['behaviour']}" in out
    edge = outside["edge"]  # with the guard, a nonlinear run worse there is kept only where
    if edge is not None and edge["worse"] and mgu["class"] != "linear":  # every run is out
        assert not mgu["config"]["edge_guard"] or len(mgu["not_kept"]) == n_runs
    # One number per run, its place in training order, in the progress lines as in the file.
    printed = re.findall(r"^run (\d+) \(([a-z+]+), seed", out, re.MULTILINE)
    assert [int(k) for k, _ in printed] == list(range(1, n_runs + 1))
    assert [name for _, name in printed] == mgu["structures"]
    # One line per run, the same for every class: no Keras progress lines without --verbose.
    assert not re.search(r"^Epoch \d+/|\d+/\d+ .*step", out, re.MULTILINE), out[:3000]
    assert mgu["config"]["iterations"] == 40
    for key in ("rmse", "rmse_benchmark"):
        assert np.isfinite(mgu[key]) and mgu[key] > 0
    # No protocol says the test record starts where estimation did: the headline is the
    # simulation from its first 50 measured outputs, named as such; the free run is named too.
    assert mgu["headline"]["rmse"] == mgu["rmse_benchmark"] != mgu["rmse"]
    assert mgu["headline"]["start"] == "the first 50 measured outputs"
    assert last_line_rmse(out) == pytest.approx(mgu["rmse_benchmark"], rel=1e-3)
    # The report names the model it made: its class and cell, in every line and in results.json.
    label = mgu["model"]
    assert label == keras_mgu.cli.report.model_label(sysid.load(mgu["model_file"]))
    assert label.split(" (")[0] == mgu["class"] in mgu["structures"]
    assert f"test RMSE below: the {label}'s simulation from the first 50 measured outputs, from " \
        "sample 50" in out  # fmt: skip
    assert (
        f"{label} test, free run from the estimation record's start state, all 256 samples" in out
    )
    # The band's coverage, the ARX model's and the last-sample predictor's figures beside it.
    assert mgu["band"]["level"] == 0.95 and set(mgu["band"]["coverage"]) == {
        "simulation",
        "1",
        "10",
    }
    assert f"{label} test, band 0.95 (calibrated on validation)" in out
    arx, last = mgu["reference"]["arx"], mgu["reference"]["last_sample"]
    assert f"ARX one-step RMSE {keras_mgu.cli.report.fixed(arx['one_step'])}" in out
    assert f"last-sample predictor RMSE {keras_mgu.cli.report.fixed(last)}" in out
    warning = mgu["warning"]  # the one line printed where no network beats the ARX model
    assert (warning is None) == ("warning: no network beats" not in out)
    assert warning is None or warning in out
    assert list(mgu["outputs"]) == ["y"] and mgu["outputs"]["y"]["rmse"] == mgu["rmse"]
    # Fit %, the k-step prediction and the residual analysis beside the RMSEs, as printed.
    assert len(mgu["fit_percent"]) == 1 and mgu["fit_percent"][0] < 100
    assert mgu["prediction"]["steps_ahead"] == 1 and np.isfinite(mgu["prediction"]["rmse"])
    rmse_1 = keras_mgu.cli.report.fixed(mgu["prediction"]["rmse"])
    k_step = f"1-step-ahead prediction, scored from sample 50: RMSE {rmse_1}"
    assert k_step in out
    residuals = mgu["residuals"]
    assert len(residuals["lags"]) == 26 and residuals["n_samples"] == 256 - 50
    assert residuals["band"] == pytest.approx(2.5758 / np.sqrt(206), rel=1e-4)
    assert 0 < mgu["wall_seconds"] and "seconds" not in mgu
    for plot in ("test_simulation", "test_residual", "residuals", "training"):
        assert (tmp_path / name / f"{plot}.png").read_bytes()[:4] == b"\x89PNG"
    # The identified model is a file, in its folder, named after its class, that scores as it did.
    stem = mgu["class"] if mgu["cell"] is None else f"{mgu['class']}_{mgu['cell']}"
    path = tmp_path / name / f"{stem}.kmgu"
    assert mgu["model_file"] == str(path)
    assert f"model file: {path}" in out
    found = sysid.load(mgu["model_file"])
    test = datasets.simulate_cascaded_tanks(n_samples=256, seed=0).test
    assert found.score(test) == pytest.approx(mgu["rmse"], rel=1e-6)


@END_TO_END
def test_identify_scores_a_benchmark_in_its_protocol_unit(tmp_path, capsys, shared_data_dir):
    path = os.path.join(shared_data_dir, "cascaded_tanks")
    if not os.path.isdir(path):
        pytest.skip("the Cascaded Tanks benchmark is not beside this checkout")
    argv = ["identify", *TINY, "--iterations", "4", "--dataset", "cascaded-tanks"]
    assert main([*argv, "--data-path", path, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    [mgu] = json.loads((tmp_path / "results.json").read_text())["runs"].values()
    protocol = mgu["protocol"]
    assert protocol["name"] == "cascaded_tanks" and protocol["unit"] == "V"
    assert mgu["n_initial"] == protocol["n_initial"] == 50
    assert mgu["rmse_in_unit"] == pytest.approx(mgu["rmse"] * protocol["scale"])
    assert re.search(r"^[a-z+]+ \(MGU 4\) test RMSE in V: [0-9.]+ \(all\), [0-9.]+ "
                     r"\(from sample 50\)$", out, re.MULTILINE)  # fmt: skip
    assert "| from sample 50 [V] |" in out


@END_TO_END
def test_n_initial_option_overrides_the_default(tmp_path, capsys):
    argv = ["identify", *TINY, "--iterations", "2", "--n-initial", "7", "--out", str(tmp_path)]
    assert main(argv) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    [row] = results["runs"].values()
    assert row["n_initial"] == 7
    assert "from sample 7" in capsys.readouterr().out


@END_TO_END
def test_n_initial_zero_is_the_free_run_alone(tmp_path, capsys):
    """No measured output sets the state: one simulation, one RMSE, no prediction."""
    argv = ["identify", *TINY, "--iterations", "2", "--n-initial", "0", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    [mgu] = json.loads((tmp_path / "results.json").read_text())["runs"].values()
    assert mgu["rmse_benchmark"] == mgu["rmse"] and mgu["prediction"] is None
    assert "from sample" not in out and "test RMSE (from sample" not in out


@END_TO_END
def test_selection_option_averages_runs_chosen_on_validation(tmp_path, capsys):
    argv = ["identify", *TINY, "--iterations", "2", "--restarts", "2", "--selection", "ensemble"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    [mgu] = json.loads((tmp_path / "results.json").read_text())["runs"].values()
    assert mgu["config"]["selection"] == "ensemble"
    assert mgu["averaged_seeds"][0] == mgu["chosen_seed"]
    assert set(mgu["averaged_seeds"]) <= {0, 1000}
    out = capsys.readouterr().out
    kept = r"model kept \(ensemble\): (run \d \(network\) alone|the weighted average of run \d)"
    assert re.search(kept, out)
    weights = [member["weight"] for member in mgu["ensemble"]]
    assert sum(weights) == pytest.approx(1.0) and mgu["ensemble"][0]["seed"] == mgu["chosen_seed"]


@pytest.mark.parametrize(
    "argv, message, usage",
    [  # usage: a wrong command line shows the usage; a bad value or file is one line
        (["--dataset", "wh2009"], "--dataset wh2009 needs --data-path", True),
        (["--dataset", "emps", "--data-path", "/no/such/folder"], "no such file or folder", False),
        (["--train-csv", "/no/est.csv"], "--train: no such file", False),
        (["--test", "t.csv"], "--test, --val and --columns go with --train", True),
        (["--val", "v.csv"], "--test, --val and --columns go with --train", True),
        (["--train", "/no/a.csv", "--test", "/no/t.csv"], "--train: no such file", False),
        (["--val-fraction", "1"], "argument --val-fraction: expected a number between 0 and 1",
         False),
        (["--train-csv", "/no/such.csv", "--test-csv", "/no/t.csv"], "no such file", False),
        (["--data-path", "."], "--data-path goes with --dataset", True),
        (["--units", "0"], "argument --units: expected a positive integer", False),
        (["--time-budget", "-1"], "argument --time-budget: expected a positive number", False),
        (["--dataset", "silverbox"], "invalid choice: 'silverbox'", False),
        (["--selection", "mean"], "--selection must be one of ('best', 'ensemble')", False),
        (["--decay-points", "0.5", "1.5"], "expected a fraction of the run in (0, 1]", False),
        (["--decay-rate", "0"], "argument --decay-rate: expected a positive number", False),
        (["--score-weights", "val_rmse=0.8,val_mae=0.2"], "unknown score name 'val_mae'", False),
        (["--score-weights", "val_rmse=0.8,loss=-0.2"], "expected a weight >= 0 for loss", False),
        (["--score-weights", "val_rmse"], "expected NAME=WEIGHT pairs", False),
        (["--score-weights", "loss=0"], "at least one positive weight", False),
        (["--validation-checks", "0"], "argument --validation-checks: expected a positive",
         False),
        (["--validation-checks", "4", "--validation-every", "2"], "not allowed with", True),
        (["--no-such-option"], "unrecognized arguments: --no-such-option", True),
        (["--units"], "argument --units: expected at least one argument", True),
    ],
)  # fmt: skip
def test_bad_arguments_exit_with_a_message(argv, message, usage, capsys, tmp_path):
    assert exit_status(["identify", *argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "keras-mgu identify: error:" in err and message in err, err
    assert ("usage:" in err) == usage, err
    assert usage or err.count("\n") == 1, err  # one line
    assert "`" not in err  # options as typed, not the settings' Python names
    assert not (tmp_path / "results.json").exists()


def test_identify_help_shows_options_and_defaults(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["identify", "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    for option in ("--iterations", "--window", "--batch-size"):
        assert re.search(rf"{option} \S+ .*?\(default: derived from the record: ", out), option
    assert "--units N [N ...] stacked layer sizes (default: one layer of 32 units)" in out
    assert "(default: 0.01)" in out and "score starts at sample 50 and the encoder reads 20" in out
    assert "--restarts N runs to choose from on the validation record (default: 3)" in out
    assert "{simulated-tanks,cascaded-tanks,wh2009,emps}" in out
    for option in ("--time-budget", "--n-initial", "--compare", "--backend", "--quick"):
        assert option in out
    for option in ("--train FILE [FILE ...]", "--val FILE", "--val-fraction F", "--verbose"):
        assert option in out
    assert "--columns NAME [NAME ...]" in out and "(default: 0.2)" in out
    for option in ("--decay-points", "--decay-rate", "--steps-per-epoch", "--score-weights",
                   "--validation-checks", "--validation-every"):  # fmt: skip
        assert re.search(rf"{option} \S+", out), option
    recipe = keras_mgu.sysid.RecipeConfig()  # the defaults the help text states
    assert f"the recipe's, {' '.join(f'{p:g}' for p in recipe.decay_points)})" in out
    assert f"the recipe's, {recipe.decay_rate:g})" in out
    assert f"the recipe's, {recipe.validation_checks})" in out
    assert recipe.score_weights == {"val_rmse": 1.0} and "the recipe's, val_rmse=1)" in out
    assert f"(default: {recipe.steps_per_epoch}, or --iterations when fewer)" in out


@pytest.mark.parametrize("command", [[], ["identify"], ["simulate"], ["export"], ["tune"]])
def test_help_texts_show_no_rest_markup(command, capsys):
    """Docstrings feed the help texts; their reST roles and literals are not shown."""
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    out = capsys.readouterr().out
    assert not re.search(r"``|:(func|class|mod|data|meth):", out), out
    if command == ["export"]:
        assert (
            "model file (.kmgu)" in out
            and "keras_mgu.sysid.files.onnx_export.export_simulator" in out
        )


def test_help_texts_say_the_recipe_defaults():
    """The defaults the help texts name are RecipeConfig's (not derived from the record)."""
    from keras_mgu.cli import identify
    from keras_mgu.sysid import RecipeConfig, config

    for n_samples in (100, 5000):
        resolved = RecipeConfig().resolved(n_samples)
        assert resolved.units == identify.RECIPE_UNITS
        assert resolved.learning_rate == identify.RECIPE_LEARNING_RATE
        assert resolved.n_initial == identify.RECIPE_N_INITIAL == config.DEFAULT_N_INITIAL
    assert RecipeConfig().decay_points == (0.5, 0.8) and RecipeConfig().decay_rate == 0.3
    assert RecipeConfig().resolved(10**6).time_budget is None  # no wall-clock default


def parsed_config(*options):
    """The resolved RecipeConfig of ``identify`` options (1024 estimation samples)."""
    args = keras_mgu.cli.build_parser().parse_args(["identify", *options])
    return keras_mgu.cli.identify.build_config(args, "mgu").resolved(1024)


def test_model_classes_option_maps_onto_the_config():
    assert parsed_config().model_classes is None
    assert (
        parsed_config("--model-classes", "all").model_classes
        == keras_mgu.sysid.config.MODEL_CLASSES
    )
    assert parsed_config("--model-classes", "narx", "loop", "narx").model_classes == (
        "narx",
        "loop",
    )
    with pytest.raises(SystemExit):
        parsed_config("--model-classes", "arx")


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
    assert keras_mgu.cli.identify.SCORE_NAMES == keras_mgu.sysid.config_checks.SCORE_NAMES


@BACKEND_INDEPENDENT
def test_effort_and_time_budget_options_map_onto_the_config():
    default = parsed_config()
    assert default.time_budget is None and default.effort == 1
    more = parsed_config("--effort", "3")
    assert more.iterations == 3 * default.iterations
    assert more.weight_decay == pytest.approx(default.weight_decay / 3)
    assert parsed_config("--effort", "3", "--iterations", "50").iterations == 50
    assert parsed_config("--time-budget", "90").time_budget == 90.0
    assert default.capacity == "fixed"
    assert parsed_config("--capacity", "search").capacity == "search"


class LearningRateSpy(keras.callbacks.Callback):
    """The optimizer's learning rate at every training batch (after the recipe's schedule)."""

    def __init__(self):
        super().__init__()
        self.rates = []

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))


@END_TO_END
def test_schedule_and_score_options_reach_the_callbacks(tmp_path, monkeypatch):
    """The decay points, the score weights and the check interval act in the recipe's ``fit``."""
    spy, found = LearningRateSpy(), []
    identify = keras_mgu.sysid.identify

    def identify_with_spy(*args, **kwargs):
        found.append(identify(*args, callbacks=[spy], **kwargs))
        return found[-1]

    monkeypatch.setattr(keras_mgu.sysid, "identify", identify_with_spy)
    argv = ["identify", "--units", "4", "--restarts", "1", "--time-budget", "600"]
    argv += ["--model-classes", "network", "linear+network"]  # the network's callbacks
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
    [row] = json.loads((tmp_path / "results.json").read_text())["runs"].values()
    config = row["config"]
    assert config["decay_points"] == [0.5] and config["decay_rate"] == 0.1
    assert config["score_weights"] == {"val_rmse": 0.8, "loss": 0.2}
    assert config["validation_every"] == 3 and config["steps_per_epoch"] == 2


@END_TO_END
def test_runs_of_other_settings_into_one_folder_are_kept(tmp_path, capsys):
    argv = ["identify", *EVERY_CLASS, "--model-classes", "network", "--iterations", "2"]
    argv += ["--restarts", "1", "--out", str(tmp_path)]
    assert main([*argv, "--units", "3"]) == 0
    assert main([*argv, "--units", "3", "2", "--learning-rate", "0.005"]) == 0
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert set(runs) == {"network_mgu_h3_lr0.01", "network_mgu_h3-2_lr0.005"}
    assert runs["network_mgu_h3-2_lr0.005"]["config"]["units"] == [3, 2]
    for name in runs:
        assert (tmp_path / name / "training.png").exists()
    out = capsys.readouterr().out
    assert re.search(r"\| network \(MGU 3-2\) \| network_mgu_h3-2_lr0.005/ \|", out)


@BACKEND_INDEPENDENT
def test_a_results_file_of_another_format_is_never_overwritten(tmp_path, capsys):
    (tmp_path / "results.json").write_text('{"MGU": {"rmse": 0.1}}')
    assert main(["identify", "--quick", "--iterations", "2", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "has no 'runs' table" in err and err.count("\n") == 1  # one line, no usage
    assert (tmp_path / "results.json").read_text() == '{"MGU": {"rmse": 0.1}}'


def test_backend_option_restarts_the_process(monkeypatch, tmp_path):
    other = other_backend("jax", "tensorflow", "torch")
    if other is None:
        pytest.skip("needs a second Keras backend installed to restart on")
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
    for command in ("simulate", "export"):
        assert re.search(rf"^\s+{command}\s+\S", helped.stdout, re.MULTILINE), command
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
    # The model file it wrote, simulated and exported by the installed commands.
    [row] = json.loads((tmp_path / "out" / "results.json").read_text())["runs"].values()
    model = row["model_file"]
    data = write_csv(tmp_path / "new.csv", datasets.simulate_cascaded_tanks(n_samples=64).test)
    commands = [["simulate", "--data", data, "--out", str(tmp_path / "sim.csv")]]
    if HAS_ONNX_EXPORT:
        commands.append(["export", "--out", str(tmp_path / "model.onnx")])
    for command in commands:
        ran = subprocess.run(
            [script, *command, "--model", model], capture_output=True, text=True, cwd=tmp_path,
            env=env, timeout=600,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    header = "y_sim,y_sim_lo,y_sim_hi,y_sim_from50,y_sim_from50_lo,y_sim_from50_hi\n"
    assert (tmp_path / "sim.csv").read_text().startswith(header)
    assert not HAS_ONNX_EXPORT or (tmp_path / "model.onnx").stat().st_size > 0


@END_TO_END
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
    # The best trial's model is a file that loads and simulates as the search scored it.
    model_file = tmp_path / "best.kmgu"
    assert summary["model_file"] == str(model_file) and f"model file: {model_file}" in out
    loaded = sysid.load(model_file)
    assert loaded.config.units == tuple(best["units"])
    test = datasets.simulate_cascaded_tanks(n_samples=256, seed=0).test
    assert loaded.score(test) == pytest.approx(summary["test_rmse"]["all"], rel=1e-6)


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
    assert exit_status(["tune", *TINY, "--out", str(tmp_path), *extra]) == 2
    assert message in capsys.readouterr().err


def write_experiments(folder, n_samples=(128, 100, 96)):
    """Three simulated tank experiments as ``exp1.csv`` (header), ``exp2.npz``, ``test.mat``."""
    import scipy.io

    from keras_mgu import datasets

    recs = [
        datasets.simulate_cascaded_tanks(n_samples=n, seed=k).estimation
        for k, n in enumerate(n_samples)
    ]
    first = folder / "exp1.csv"
    first.write_text(
        "u,y\n"
        + "".join(
            f"{u!r},{y!r}\n" for u, y in zip(recs[0].u[:, 0].tolist(), recs[0].y[:, 0].tolist())
        )
    )
    np.savez(folder / "exp2.npz", u=recs[1].u[:, 0], y=recs[1].y[:, 0])
    scipy.io.savemat(folder / "test.mat", {"u": recs[2].u, "y": recs[2].y})
    return [str(first), str(folder / "exp2.npz")], str(folder / "test.mat"), recs


@END_TO_END
def test_identify_own_files_of_several_experiments(tmp_path, capsys):
    """Two estimation experiments in two formats, columns by index; windows stay inside one."""
    train, test, recs = write_experiments(tmp_path)
    argv = ["identify", *TINY, "--iterations", "2", "--train", *train, "--test", test]
    argv += ["--inputs", "0", "--outputs", "1", "--ts", "4", "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    [mgu] = json.loads((tmp_path / "out" / "results.json").read_text())["runs"].values()
    assert mgu["dataset"] == "own files" and mgu["protocol"] is None
    # 20% of 228 samples (46) validate, cut from the second experiment: 128 + 54 estimate
    assert "recipe: 182 estimation samples" in out
    config = mgu["config"]
    dead = max(mgu["input_delay"]["samples"], default=0)  # each experiment is fitted after them
    assert config["window"] == 54 - dead  # the shortest experiment, not the whole record
    assert config["validation_continues"] is False and config["linear_prior"] is False
    assert set(mgu["structures"]) == {"network"}
    assert np.isfinite(mgu["rmse"]) and last_line_rmse(out) > 0
    assert mgu["scored_on"] == "test"


@END_TO_END
def test_identify_own_files_without_a_test_record(tmp_path, capsys):
    """--train alone identifies, and the validation record is scored, said everywhere."""
    train, _, _ = write_experiments(tmp_path)
    argv = ["identify", *TINY, "--iterations", "2", "--restarts", "1", "--train", *train]
    argv += ["--inputs", "0", "--outputs", "1", "--n-initial", "10", "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    [mgu] = json.loads((tmp_path / "out" / "results.json").read_text())["runs"].values()
    assert mgu["scored_on"] == "validation" and np.isfinite(mgu["rmse"])
    assert "no test record; inputs" in out and out.count("no test record (--test)") == 2
    assert "test RMSE" not in out and "validation RMSE (all, estimation start)" in out
    last = out.strip().splitlines()[-1]
    assert re.fullmatch(r"validation RMSE: [0-9.]+", last), last
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "out" / mgu["name"] / "validation_simulation.png").exists()
        assert not (tmp_path / "out" / mgu["name"] / "test_simulation.png").exists()


@pytest.mark.parametrize("flag, verbose", [([], 1), (["--verbose"], 2)])
def test_verbose_adds_keras_progress_lines(flag, verbose, model_file, monkeypatch, tmp_path):
    """identify asks the recipe for a line per run; --verbose for Keras's lines too."""
    from keras_mgu.cli import build_parser, identify

    _, found, data = model_file
    asked = []

    def identified(*args, verbose=0, **kwargs):
        asked.append(verbose)
        return found

    monkeypatch.setattr(keras_mgu.sysid, "identify", identified)
    args = build_parser().parse_args(["identify", *flag, "--out", str(tmp_path)])
    identify.identify_model("MGU", data, args, n_initial=50)
    assert asked == [verbose]


@BACKEND_INDEPENDENT
def test_own_data_options_build_the_records(tmp_path):
    """--columns names header-less files; --val replaces --val-fraction; experiments join."""
    from keras_mgu.cli import build_parser, identify

    rows = lambda a: "".join(f"{2 * k + a} {k}\n" for k in range(10))  # noqa: E731
    files = {name: tmp_path / f"{name}.txt" for name in ("a", "b", "v", "t")}
    for k, path in enumerate(files.values()):
        path.write_text(rows(100 * k))
    common = ["--test", str(files["t"]), "--columns", "y", "u", "--ts", "0.5"]
    args = build_parser().parse_args(
        ["identify", "--train", str(files["a"]), str(files["b"]), *common]
    )
    args.check(args)
    data = identify.load_data(args)
    est, val = data.estimation, data.validation
    assert est.boundaries == (10,) and est.n_samples == 16 and val.n_samples == 4
    np.testing.assert_array_equal(est.u[:, 0], list(range(10)) + list(range(6)))
    np.testing.assert_array_equal(val.y[:, 0], [112, 114, 116, 118])
    assert est.input_names == ("u",) and est.ts == 0.5
    args = build_parser().parse_args(
        ["identify", "--train-csv", str(files["a"]), "--val", str(files["v"]), *common]
    )
    args.check(args)
    data = identify.load_data(args)
    assert data.estimation.n_samples == 10 and data.validation.y[0, 0] == 200
    args = build_parser().parse_args(
        ["identify", "--train", str(files["a"]), str(files["b"]), "--val-fraction", "0.6", *common]
    )
    args.check(args)
    with pytest.raises(identify.DataError, match="12 samples, more than the last experiment's 10"):
        identify.load_data(args)


@BACKEND_INDEPENDENT
def test_own_files_split_as_sysid_identify_splits_records(tmp_path):
    """--train alone validates on the same samples as ``sysid.identify`` given the records."""
    from keras_mgu import datasets
    from keras_mgu.cli import build_parser, identify
    from keras_mgu.datasets.records import VALIDATION_FRACTION

    assert identify.VAL_FRACTION == VALIDATION_FRACTION
    paths = [tmp_path / f"{name}.csv" for name in ("a", "b", "t")]
    for k, path in enumerate(paths):
        path.write_text("u,y\n" + "".join(f"{k}.{j},{j}\n" for j in range(7 + k)))
    train = [str(path) for path in paths[:2]]
    args = build_parser().parse_args(
        ["identify", "--train", *train, "--test", str(paths[2]), "--inputs", "u", "--outputs", "y"]
    )
    args.check(args)
    data = identify.load_data(args)
    records = [datasets.load_record(path, ["u"], ["y"]) for path in train]
    library = datasets.SysIdData.coerce(records)
    for cli_record, own in [
        (data.estimation, library.estimation),
        (data.validation, library.validation),
    ]:
        np.testing.assert_array_equal(cli_record.u, own.u)
        assert cli_record.boundaries == own.boundaries
    assert data.validation.n_samples == 3 and data.test.n_samples == 9


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "content, extra, message",
    [
        ("u,y\n1,2\n3,x\n", [], "bad.csv, line 3, column 'y': 'x' is not a number."),
        ("u,y\n1,2\n3\n", [], "bad.csv, line 3: 1 cell(s), but line 1 has 2"),
        ("u,z\n1,2\n", [], "bad.csv: no column 'y'; available columns: 'u', 'z'"),
        ("u;y\n1;2\n3;NaN\n", [], "bad.csv, line 3, column 'y': 'NaN' is not a finite number"),
        ("", [], "bad.csv is empty"),
        ("u,y\n1,2\n", ["--columns", "a", "b"], "bad.csv has a header row (u, y)"),
    ],
)
def test_malformed_data_is_one_line_and_status_2(tmp_path, capsys, content, extra, message):
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    good = tmp_path / "good.csv"
    good.write_text("u,y\n" + "".join(f"{k},{k}\n" for k in range(20)))
    argv = ["identify", "--train", str(bad), str(good), "--test", str(good), *extra]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "keras-mgu identify: error: cannot load the data:"
    )
    assert message in err and str(bad) in err
    assert not (tmp_path / "out").exists()


@BACKEND_INDEPENDENT
def test_names_with_underscores_or_hyphens_are_the_same(tmp_path):
    from keras_mgu.cli import build_parser, tune

    parse = build_parser().parse_args
    for name in ("cascaded_tanks", "cascaded-tanks"):
        assert parse(["identify", "--dataset", name]).dataset == "cascaded-tanks"
    assert parse(["tune", "--dataset", "simulated_tanks"]).dataset == "simulated-tanks"
    args = parse(["tune", "--space", '{"batch-size": [8], "learning_rate": [0.01]}'])
    tune.check_arguments(args)
    assert args.space == {"batch_size": [8], "learning_rate": [0.01]}


# ------------------------------------------------------------------ simulate and export
HAS_ONNX_EXPORT = all(
    importlib.util.find_spec(name) is not None
    for name in ("onnxruntime", *ONNX_PACKAGES[keras.backend.backend()])
)


def write_csv(path, record, outputs: bool = True) -> str:
    """``record`` as a CSV file with a time column, ``u`` and (if ``outputs``) ``y``."""
    header = ["time", *record.input_names, *(record.output_names if outputs else ())]
    columns = [record.time[:, None], record.u, *([record.y] if outputs else [])]
    np.savetxt(path, np.hstack(columns), delimiter=",", header=",".join(header), comments="")
    return str(path)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """A tiny identified model (learned state) saved as a file, and the data it came from."""
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    config = sysid.RecipeConfig(
        units=(4,), iterations=4, steps_per_epoch=2, validation_checks=2,
        model_classes=NETWORK_CLASSES,
    )  # fmt: skip
    found = sysid.identify(data, config, restarts=1)
    return found.save(tmp_path_factory.mktemp("model") / "mgu.kmgu"), found, data


def read_simulation(path, bands: bool = False) -> tuple[list[str], np.ndarray]:
    """The CSV file's header and values; without ``bands``, the trajectories alone (no _lo, _hi)."""
    with open(path) as f:
        header = f.readline().strip().split(",")
    values = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    if bands:
        return header, values
    keep = [i for i, name in enumerate(header) if not name.endswith(("_lo", "_hi"))]
    return [header[i] for i in keep], values[:, keep]


def column(path, name: str) -> np.ndarray:
    header, values = read_simulation(path, bands=True)
    return values[:, header.index(name)]


def test_simulate_writes_the_simulation_and_prints_the_scores(model_file, tmp_path, capsys):
    path, found, data = model_file
    test = data.test
    csv = write_csv(tmp_path / "test.csv", test)
    argv = ["simulate", "--model", path, "--data", csv, "--out", str(tmp_path / "sim.csv")]
    assert main([*argv, "--n-initial", "7"]) == 0
    out = capsys.readouterr().out
    header, values = read_simulation(tmp_path / "sim.csv", bands=True)
    trajectories = ["y_sim", "y_sim_from7"]  # the free run is always y_sim
    assert header == [f"{c}{b}" for c in trajectories for b in ("", "_lo", "_hi")]
    np.testing.assert_allclose(values[:, :1], found.simulate(test.u), rtol=1e-7)
    want = found.simulate(test.u, test.y[:7], band=0.95)  # the state set from the first 7 outputs
    for i, part in enumerate(want):
        np.testing.assert_allclose(values[:, 3 + i : 4 + i], part, rtol=1e-7)
    free = found.simulate(test.u, band=0.95)
    np.testing.assert_allclose(values[:, 1:3], np.hstack([free.lower, free.upper]), rtol=1e-7)
    free = sysid.score(test.y, found.simulate(test.u), "all")
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("RMSE: "))
    from_7 = sysid.score(test.y, want.y, "benchmark", 7)
    # A new experiment is judged first by its simulation from its own measured outputs.
    assert re.match(rf"RMSE: {from_7:.6g}, fit [-0-9.]+ % \(from sample 7,", lines[first]), out
    assert re.match(rf"RMSE: {free:.6g}, fit [-0-9.]+ % \(all 160 samples", lines[first + 1]), out
    assert re.search(r"^band 0.95: share of the samples inside it [0-9.]+ \(simulation\)", out,
                     re.M), out  # fmt: skip
    assert out.strip().splitlines()[-1] == f"simulation: {tmp_path / 'sim.csv'}"
    # --band 0: the trajectories alone; no --n-initial: the simulation from the model's n, 50.
    assert main([*argv, "--band", "0"]) == 0
    header, values = read_simulation(tmp_path / "sim.csv", bands=True)
    assert header == ["y_sim", "y_sim_from50"]
    np.testing.assert_allclose(values[:, 1:], found.simulate(test.u, test.y[:50]), rtol=1e-7)
    assert exit_status([*argv, "--band", "1.5"]) == 2


def test_simulate_names_the_model_as_identify_does(model_file, tmp_path, capsys):
    path, found, data = model_file
    csv = write_csv(tmp_path / "test.csv", data.test)
    assert main(["simulate", "--model", path, "--data", csv, "--out", str(tmp_path / "s.csv")]) == 0
    printed = capsys.readouterr().out
    first = printed.splitlines()[0]
    assert re.search(r"^outside the estimation range, from sample 50: [0-9.]+% of the samples",
                     printed, re.M)  # fmt: skip
    label = keras_mgu.cli.report.model_label(found)  # identify's: "linear+network (MGU 4)"
    assert first.startswith(f"model: {path} ({label}, learned state, "), first
    averaged = len(set(found.members)) > 1  # as the seed's runs fell on this backend
    chosen = "the weighted average of run" if averaged else "run "
    assert first.split("learned state, ", 1)[1].startswith(chosen), first


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "structure, units, cell, label",
    [
        ("linear+network", (32,), "mgu", "linear+network (MGU 32)"),
        ("narx", (64, 64), "mlp", "narx (MLP 64-64)"),
        ("linear", (), "mgu", "linear (ARX)"),
        ("polynomial", (), "mgu", "polynomial"),
    ],
)
def test_simulate_describes_the_chosen_class_not_the_settings_asked_for(
    structure, units, cell, label
):
    from types import SimpleNamespace

    from keras_mgu.cli import simulate

    chosen = SimpleNamespace(units=units, cell=cell, initial_state="learned")
    found = SimpleNamespace(
        config=SimpleNamespace(units=(32,), cell="mgu", initial_state="learned"),  # as asked
        runs=[SimpleNamespace(structure=structure, config=chosen)], best=0, members=(0, 0),
        kept=(0, 0),
    )  # fmt: skip
    assert keras_mgu.cli.report.model_label(found) == label
    assert simulate._describe(found) == f"{label}, learned state, run 1 ({structure}) alone"


def test_simulate_without_outputs_runs_from_the_learned_state(model_file, tmp_path, capsys):
    path, found, data = model_file
    csv = write_csv(tmp_path / "inputs.csv", data.test, outputs=False)
    argv = ["simulate", "--model", path, "--data", csv, "--out", str(tmp_path / "sim.csv")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "RMSE" not in printed and "not scored: " in printed
    np.testing.assert_allclose(
        read_simulation(tmp_path / "sim.csv")[1], found.simulate(data.test.u), rtol=1e-7
    )
    assert exit_status([*argv, "--n-initial", "5"]) == 2
    err = capsys.readouterr().err
    assert "--n-initial needs the measured outputs" in err and "usage:" not in err


@pytest.mark.parametrize("suffix", [".npz", ".mat", ".txt"])
def test_simulate_reads_the_data_formats_of_identify(model_file, tmp_path, suffix):
    """The columns by the model's names from an .npz, a .mat and a semicolon-separated file."""
    import scipy.io

    path, found, data = model_file
    u, y = data.test.u[:, 0], data.test.y[:, 0]
    file = tmp_path / f"new{suffix}"
    if suffix == ".npz":
        np.savez(file, y=y, u=u)
    elif suffix == ".mat":
        scipy.io.savemat(file, {"y": y[:, None], "u": u[:, None]})
    else:
        file.write_text("y;u\n" + "".join(f"{b!r};{a!r}\n" for a, b in zip(u.tolist(), y.tolist())))
    out = tmp_path / "sim.csv"
    assert main(["simulate", "--model", path, "--data", str(file), "--out", str(out)]) == 0
    np.testing.assert_allclose(column(out, "y_sim"), found.simulate(data.test.u)[:, 0], rtol=1e-7)


def test_simulate_and_export_refuse_bad_files(model_file, tmp_path, capsys):
    path, found, data = model_file
    no_u = tmp_path / "no_u.csv"
    no_u.write_text("time,y\n0,1\n1,2\n")
    not_a_model = tmp_path / "notes.kmgu"
    not_a_model.write_text("hello\n")
    csv = write_csv(tmp_path / "test.csv", data.test)
    bare = tmp_path / "bare.txt"
    np.savetxt(bare, np.hstack([data.test.u, data.test.y]))  # no header row
    unnamed = dataclasses.replace(found, input_names=(), output_names=())
    unnamed = unnamed.save(tmp_path / "unnamed.kmgu")
    cases = [  # (argv, message, a usage error): bad files and values are one line, no usage
        (["simulate", "--model", unnamed, "--data", csv], "does not name its input and output", 0),
        (["simulate", "--model", path, "--data", str(no_u)], "no input column(s) ['u']", 0),
        (["simulate", "--model", path, "--data", str(bare), "--inputs", "5"],
         "no column '5'; the file has no header row, so its columns are known by 0-based indices "
         "0 to 1 (or name them all with --columns)", 0),
        (["simulate", "--model", path, "--data", csv, "--columns", "a", "b", "c"],
         "names given with --columns are for files without one", 0),
        (["simulate", "--model", str(not_a_model), "--data", csv], "not a keras-mgu model file", 0),
        (["simulate", "--model", path, "--data", "/no/such.csv"], "--data: no such file", 0),
        (["simulate", "--model", path, "--data", csv, "--band", "1.5"], "a level in [0, 1)", 0),
        (["simulate", "--model", path, "--data", csv, "--n-initial", "0", "--steps-ahead", "2"],
         "--steps-ahead needs --n-initial >= 1", 0),
        (["export", "--model", str(not_a_model)], "cannot load the model", 0),
        (["export", "--model", "/no/such.kmgu"], "--model: no such file", 0),
        (["export", "--model", path, "--format", "tflite"], "invalid choice: 'tflite'", 0),
        (["simulate", "--model", path], "the following arguments are required: --data", 1),
        (["simulate", "--model", path, "--data", csv, "--outputs", "y"], "--outputs goes with", 1),
        (["export", "--model", path, "--bogus"], "unrecognized arguments: --bogus", 1),
    ]  # fmt: skip
    for argv, message, usage in cases:
        assert exit_status([*argv, "--out", out_file(tmp_path, argv[0])]) == 2
        err = capsys.readouterr().err
        assert f"keras-mgu {argv[0]}: error:" in err and message in err, err
        assert ("usage:" in err) == bool(usage), err
        assert usage or err.count("\n") == 1, err
        assert "`" not in err, err  # options as typed, not the settings' Python names
    assert not list(tmp_path.glob("out.*"))


def out_file(folder, command: str) -> str:
    """An ``--out`` named for what ``command`` writes: ``out.csv`` (simulate), ``out.onnx``."""
    return str(folder / ("out.csv" if command == "simulate" else "out.onnx"))


def exit_status(argv) -> int:
    try:
        return main(argv)
    except SystemExit as done:
        return done.code


def test_simulate_reads_what_identify_reads(model_file, tmp_path, capsys):
    """A header-less file by --columns or by index, --steps-ahead, --n-initial 0, no outputs."""
    path, found, data = model_file
    test = data.test
    bare = tmp_path / "bare.txt"
    np.savetxt(bare, np.hstack([test.y, test.u]))  # y first: the order of MATLAB's writematrix
    out = tmp_path / "sim.csv"
    base = ["simulate", "--model", path, "--data", str(bare), "--out", str(out)]
    assert main([*base, "--columns", "y", "u", "--steps-ahead", "3", "--n-initial", "6"]) == 0
    printed = capsys.readouterr().out
    header, values = read_simulation(out)
    assert header == ["y_sim", "y_sim_from6", "y_pred3"]
    np.testing.assert_allclose(values[:, 0], found.simulate(test.u)[:, 0], rtol=1e-6)
    np.testing.assert_allclose(values[:, 1], found.simulate(test.u, test.y[:6])[:, 0], rtol=1e-6)
    want = found.predict(test.u, test.y, steps_ahead=3, n_initial=6)[:, 0]
    np.testing.assert_allclose(values[:, 2], want, rtol=1e-6)
    assert main([*base, "--columns", "y", "u", "--steps-ahead", "2"]) == 0  # n: the default, 50
    assert read_simulation(out)[0] == ["y_sim", "y_sim_from50", "y_pred2"]
    printed += capsys.readouterr().out
    rmse_3 = sysid.rmse(test.y[6:, 0], want[6:])
    assert re.search(rf"^RMSE: {rmse_3:.6g}, fit [-0-9.]+ % \(3-step-ahead", printed, re.M), printed
    assert main([*base, "--inputs", "1", "--outputs", "0", "--n-initial", "0"]) == 0
    printed = capsys.readouterr().out
    free = found.simulate(test.u)[:, 0]
    np.testing.assert_allclose(read_simulation(out)[1][:, 0], free, rtol=1e-6)
    assert "from sample" not in printed and "RMSE: " in printed
    assert main([*base, "--inputs", "1"]) == 0
    assert "not scored:" in capsys.readouterr().out


def test_data_errors_come_before_the_backend_loads(tmp_path, capsys, monkeypatch):
    def no_backend(*args):
        raise AssertionError("the backend was prepared before the data were checked")

    monkeypatch.setattr(keras_mgu.cli, "_prepare_backend", no_backend)
    bad = tmp_path / "bad.csv"
    bad.write_text("u,y\n1,2\n3,oops\n")
    argv = ["identify", "--train", str(bad), "--test", str(bad), "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "'oops'" in err and "usage:" not in err
    same = tmp_path / "same.csv"
    same.write_text("u,y\n1,2\n3,4\n")
    argv = ["identify", "--train", str(same), "--test", str(same), "--inputs", "y"]
    assert main([*argv, "--outputs", "y", "--out", str(tmp_path)]) == 2
    assert "column 'y' is selected as an input and as an output" in capsys.readouterr().err


@pytest.mark.skipif(not HAS_ONNX_EXPORT, reason="the `export` extra is not installed")
def test_export_writes_an_onnx_simulator(model_file, tmp_path, capsys):
    import onnx
    import onnxruntime

    from tests.test_onnx_initializers import unused_initializers

    path, found, data = model_file
    out = str(tmp_path / "mgu.onnx")
    assert main(["export", "--model", path, "--format", "onnx", "--out", out]) == 0
    printed = capsys.readouterr().out
    assert "inputs: u (batch, N, 1) (physical units: u)" in printed
    assert "output: y (batch, N, 1) (physical units: y)" in printed  # named after the channel
    assert printed.strip().splitlines()[-1] == f"onnx: {out}"
    assert "the file simulates u from the learned state, as the y_sim column" in printed
    proto = onnx.load(out)
    assert {p.key: p.value for p in proto.metadata_props}["keras_mgu.measured_samples"] == "0"
    assert proto.graph.name == "simulator_from_the_learned_state"
    assert unused_initializers(onnx.load(out).graph) == []  # onnxruntime warns of each
    session = onnxruntime.InferenceSession(out, providers=["CPUExecutionProvider"])
    assert [o.name for o in session.get_outputs()] == ["y"]
    (y,) = session.run(None, {"u": data.test.u[None].astype("float32")})
    want = found.simulate(data.test.u)
    np.testing.assert_allclose(y[0], want, atol=1e-4 * np.abs(want).max())


@BACKEND_INDEPENDENT
@pytest.mark.parametrize("backend", sorted(ONNX_PACKAGES))
@pytest.mark.parametrize("chosen_by", ["--backend", "KERAS_BACKEND"])
def test_export_without_the_exporter_names_its_extra_before_any_work(
    backend, chosen_by, tmp_path, capsys, monkeypatch
):
    """The backend's converter not installed: one line naming the backend's extra, at once."""
    from keras_mgu.cli import export_command

    converter = ONNX_PACKAGES[backend][1]
    real = importlib.util.find_spec
    absent = lambda name, *args: None if name == converter else real(name, *args)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", absent)

    def no_work(*args):
        raise AssertionError("the model was read or the backend loaded before the check")

    monkeypatch.setattr(export_command, "read_model_info", no_work)
    monkeypatch.setattr(keras_mgu.cli, "_prepare_backend", no_work)
    model = tmp_path / "mgu.kmgu"
    model.write_text("never read\n")
    argv = ["export", "--model", str(model), "--out", str(tmp_path / "mgu.onnx")]
    if chosen_by == "--backend":
        argv += ["--backend", backend]
    else:
        monkeypatch.setenv("KERAS_BACKEND", backend)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"keras-mgu export: error: ONNX export on the {backend} backend needs {converter} "
        f'(not installed); install it with: pip install "keras-mgu[export-{backend}]"'
    ), err
    assert not (tmp_path / "mgu.onnx").exists()


@BACKEND_INDEPENDENT
@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("jax", "jax2onnx", "tensorflow", "onnx")),
    reason="needs JAX, jax2onnx and TensorFlow (whose start-up lines are the subject)",
)
def test_export_on_jax_keeps_tensorflows_start_up_lines_off_stderr(model_file, tmp_path):
    """Keras's serialisation imports TensorFlow on JAX too; its native lines are not printed."""
    out = tmp_path / "mgu.onnx"
    argv = ["export", "--model", model_file[0], "--out", str(out), "--backend", "jax"]
    env = subprocess_env(KERAS_BACKEND="jax")
    env.pop("TF_CPP_MIN_LOG_LEVEL")  # as a user runs it
    done = subprocess.run(
        [sys.executable, "-m", "keras_mgu", *argv], capture_output=True, text=True, cwd=ROOT,
        env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and out.is_file(), done.stderr[-3000:]
    noise = ("oneDNN", "cuda", "cpu_feature_guard", "absl::InitializeLog")
    assert not [line for line in done.stderr.splitlines() if any(n in line for n in noise)]
    assert done.stdout.strip().splitlines()[-1] == f"onnx: {out}"


@BACKEND_INDEPENDENT
def test_command_modules_import_no_backend_at_module_level():
    """``keras-mgu --help`` should not pay for Keras: the new commands import it lazily."""
    import ast

    for name in ("simulate", "export_command"):
        tree = ast.parse(open(os.path.join(ROOT, "keras_mgu", "cli", f"{name}.py")).read())
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                )
                for module in modules:
                    root = (module or "").split(".")[0]
                    assert root not in ("keras", "tensorflow", "jax", "torch", "numpy"), name


# ------------------------------------------------------------------ several outputs, early checks
def write_two_outputs(path, n_samples: int, seed: int) -> str:
    """A simulated tank record with a second output (the level doubled, noisy) as CSV."""
    rec = datasets.simulate_cascaded_tanks(n_samples=n_samples, seed=seed).estimation
    y2 = 2 * rec.y[:, 0] + 0.1 * np.random.default_rng(seed).normal(size=n_samples)
    np.savetxt(path, np.column_stack([rec.u[:, 0], rec.y[:, 0], y2]), delimiter=",",
               header="pump,level,level2", comments="")  # fmt: skip
    return str(path)


@END_TO_END
def test_identify_reports_every_output_and_scores_own_test_from_its_outputs(
    tmp_path, capsys, monkeypatch
):
    """Two outputs: a panel each, each scored by name; a test file of one's own is quoted
    by the simulation from its first n measured outputs, not from the estimation start."""
    import keras_mgu.plotting

    figures = []
    real = keras_mgu.plotting.simulation_figure
    monkeypatch.setattr(keras_mgu.plotting, "simulation_figure",
                        lambda *a, **k: figures.append(real(*a, **k)) or figures[-1])  # fmt: skip
    train = write_two_outputs(tmp_path / "est.csv", 160, 0)
    test = write_two_outputs(tmp_path / "test.csv", 96, 1)
    argv = ["identify", *TINY, "--iterations", "2", "--restarts", "1", "--train", train]
    argv += ["--test", test, "--inputs", "pump", "--outputs", "level", "level2", "--n-initial", "8"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    [mgu] = json.loads((tmp_path / "out" / "results.json").read_text())["runs"].values()
    assert list(mgu["outputs"]) == ["level", "level2"]
    assert mgu["residuals"]["output_names"] == ["level", "level2"]
    assert np.array(mgu["residuals"]["autocorrelation"]).shape == (2, 26)
    assert mgu["headline"] == {"rmse": mgu["rmse_benchmark"], "fit_percent":
                               mgu["fit_percent_benchmark"], "scored_from": 8,
                               "start": "the first 8 measured outputs"}  # fmt: skip
    assert last_line_rmse(out) == pytest.approx(mgu["rmse_benchmark"], rel=1e-3)
    assert re.search(r"^  output level2: RMSE [0-9.]+, fit -?[0-9.]+ %; from sample 8: ", out,
                     re.M)  # fmt: skip
    band = mgu["band"]  # each output's share inside the band, and every output's at once
    for name, share in zip(("level", "level2"), band["coverage_by_output"], strict=True):
        said = rf"; inside the band 0.95: {share:.3f} \(simulation\)$"
        assert re.search(rf"^  output {name}: .*{said}", out, re.M)
    assert band["joint_coverage"] <= min(band["coverage_by_output"])
    assert f"every output at once {band['joint_coverage']:.3f} (simulation)" in out
    assert len(figures) == 2  # test_simulation.png (the input below) and test_residual.png
    for fig, below in zip(figures, (["pump"], []), strict=True):
        assert [ax.get_ylabel() for ax in fig.axes] == ["level", "level2", *below]
        assert fig.axes[1].get_title().startswith("level2: RMSE ")


def test_identify_refuses_fewer_outputs_than_the_encoder_reads(tmp_path, capsys):
    """An encoder of 20 samples (a window shorter than the record) scored from 5 outputs."""
    from keras_mgu.cli import build_parser, identify

    argv = ["identify", *TINY, "--iterations", "2", "--restarts", "1", "--window", "32"]
    args = build_parser().parse_args([*argv, "--out", str(tmp_path)])
    args.check(args)
    data = identify.load_data(args)
    with pytest.raises(identify.DataError, match="the model's encoder reads 20 samples"):
        identify.identify_model("MGU", data, args, n_initial=5)
    assert "test RMSE" not in capsys.readouterr().out


@pytest.fixture(scope="module")
def encoder_file(tmp_path_factory):
    """A tiny encoder model (its encoder reads 20 samples) saved as a file, and its data."""
    data = datasets.simulate_cascaded_tanks(n_samples=160, seed=0)
    config = sysid.RecipeConfig(units=(4,), iterations=2, steps_per_epoch=2, validation_checks=2,
                                initial_state="encoder", window=32,
                                model_classes=NETWORK_CLASSES)  # fmt: skip
    found = sysid.identify(data, config, restarts=1)
    assert found.config.initial_state == "encoder" and found.config.n_initial == 20
    return found.save(tmp_path_factory.mktemp("encoder") / "mgu.kmgu"), found, data


def test_simulate_and_export_check_files_before_the_backend_loads(
    model_file, encoder_file, tmp_path
):
    """Bad files, missing columns and too few outputs for the encoder: at once, without Keras."""
    from tests.test_cli_startup import probe

    path, found, data = model_file
    csv = write_csv(tmp_path / "test.csv", data.test)
    no_u = tmp_path / "no_u.csv"
    no_u.write_text("time,y\n0,1\n1,2\n")
    not_a_model = tmp_path / "notes.kmgu"
    not_a_model.write_text("hello\n")
    cases = [
        (["simulate", "--model", str(not_a_model), "--data", csv], "not a keras-mgu model file"),
        (["simulate", "--model", path, "--data", str(no_u)], "no input column(s) ['u']"),
        (["simulate", "--model", encoder_file[0], "--data", csv, "--n-initial", "5"],
         "--n-initial 5: the model's encoder reads 20 samples to set its state; give "
         "--n-initial 20 or more"),
        (["simulate", "--model", encoder_file[0], "--data", csv, "--steps-ahead", "2",
          "--n-initial", "19"], "give --n-initial 20 or more"),
        (["export", "--model", str(not_a_model)], "cannot load the model"),
    ]  # fmt: skip
    for argv, message in cases:
        loaded, code, err = probe(*argv, "--out", out_file(tmp_path, argv[0]))
        assert code == 2 and message in err, err[-2000:]
        assert loaded == [], (argv, loaded)
    assert not list(tmp_path.glob("out.*"))


def test_simulation_plot_draws_the_inputs_below_the_outputs(model_file, tmp_path, monkeypatch):
    """test_simulation.png: the outputs, then the test record's input on the same time axis."""
    pytest.importorskip("matplotlib")
    import keras_mgu.plotting

    path, found, data = model_file
    figures = []
    real = keras_mgu.plotting.simulation_figure
    monkeypatch.setattr(keras_mgu.plotting, "simulation_figure",
                        lambda *a, **k: figures.append(real(*a, **k)) or figures[-1])  # fmt: skip
    test = data.test
    evaluation = sysid.evaluate(found, test.u, test.y, 50, 1, test.input_names, test.output_names)
    keras_mgu.cli.report.plot_results("MGU", test, evaluation, None, str(tmp_path))
    simulation, residual = figures  # test_simulation.png, test_residual.png
    assert [ax.get_ylabel() for ax in simulation.axes] == ["y", "u"]
    assert simulation.axes[1].get_shared_x_axes().joined(*simulation.axes)
    np.testing.assert_allclose(simulation.axes[1].get_lines()[0].get_ydata(), test.u[:, 0])
    assert [ax.get_ylabel() for ax in residual.axes] == ["y"]
    assert (tmp_path / "test_simulation.png").read_bytes()[:4] == b"\x89PNG"


@BACKEND_INDEPENDENT
def test_residual_lags_option_of_identify_and_simulate(capsys):
    from keras_mgu.cli import build_parser, identify
    from keras_mgu.sysid.judging.residuals import MAX_LAG

    parse = build_parser().parse_args
    simulate = ["simulate", "--model", "m.kmgu", "--data", "d.csv", "--out", "s.csv"]
    assert identify.RESIDUAL_LAGS == MAX_LAG == 25  # the default is the library's
    for argv in (["identify"], simulate):
        assert parse(argv).residual_lags == 25
        assert parse([*argv, "--residual-lags", "7"]).residual_lags == 7
        assert exit_status([*argv, "--residual-lags", "0"]) == 2
        err = capsys.readouterr().err
        assert "argument --residual-lags: expected a positive integer; got '0'" in err, err
        with pytest.raises(SystemExit):
            main([*argv[:1], "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "--residual-lags N lags of the residual analysis" in out and "(default: 25)" in out
    assert "residual_lags" not in parse(["tune"])  # a search scores no residuals


def test_residual_lags_reach_the_residual_analysis(model_file, tmp_path, monkeypatch, capsys):
    """``--residual-lags 7``: lags 0..7 in simulate's and identify's analysis, results.json too."""
    from keras_mgu.cli import build_parser, identify, simulate

    path, found, data = model_file
    csv = write_csv(tmp_path / "test.csv", data.test)
    argv = ["simulate", "--model", path, "--data", csv, "--out", str(tmp_path / "sim.csv")]
    args = build_parser().parse_args([*argv, "--residual-lags", "7"])
    args.check(args)
    residuals = simulate.run(args)["residuals"]
    assert residuals["lags"] == list(range(8)) and len(residuals["cross_lags"]) == 15
    monkeypatch.setattr(keras_mgu.sysid, "identify", lambda *args, **kwargs: found)  # trained
    args = build_parser().parse_args(["identify", "--residual-lags", "7", "--out", str(tmp_path)])
    row = identify.identify_model("MGU", data, args, n_initial=50)
    assert row["residuals"]["lags"] == list(range(8))
    assert np.shape(row["residuals"]["autocorrelation"]) == (1, 8)


def test_simulate_encoder_model_from_its_lag(encoder_file, tmp_path, capsys):
    path, found, data = encoder_file
    csv = write_csv(tmp_path / "test.csv", data.test)
    argv = ["simulate", "--model", path, "--data", csv, "--out", str(tmp_path / "sim.csv")]
    assert main([*argv, "--n-initial", "20"]) == 0
    header, values = read_simulation(tmp_path / "sim.csv")
    assert header == ["y_sim", "y_sim_from20"]
    np.testing.assert_allclose(values[:, 1], found.simulate(data.test.u, data.test.y[:20])[:, 0],
                               rtol=1e-6)  # fmt: skip


@pytest.mark.skipif(not HAS_ONNX_EXPORT, reason="the `export` extra is not installed")
def test_an_encoder_models_onnx_file_states_its_n_and_agrees_with_simulate(
    encoder_file, tmp_path, capsys
):
    """The file takes the encoder's n samples, says so, and computes simulate's y_sim_from<n>."""
    import shutil

    import onnx
    import onnxruntime

    path, found, data = encoder_file
    model = shutil.copy(path, tmp_path / "mgu.kmgu")
    assert main(["export", "--model", str(model)]) == 0  # no --out: named after its n
    out = tmp_path / "mgu_from20.onnx"
    printed = capsys.readouterr().out
    assert printed.strip().splitlines()[-1] == f"onnx: {out}"
    assert "starts from the first 20 measured samples" in printed
    assert "y_sim_from20 column of keras-mgu simulate --n-initial 20" in printed
    proto = onnx.load(str(out))
    props = {prop.key: prop.value for prop in proto.metadata_props}
    assert props["keras_mgu.measured_samples"] == "20"
    assert proto.graph.name == "simulator_from_20_measured_samples"
    csv = write_csv(tmp_path / "test.csv", data.test)
    argv = ["simulate", "--model", str(model), "--data", csv, "--n-initial", "20"]
    assert main([*argv, "--out", str(tmp_path / "sim.csv")]) == 0
    want = column(tmp_path / "sim.csv", "y_sim_from20")[20:]
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    u, y = data.test.u.astype("float32"), data.test.y.astype("float32")
    feeds = {"u_initial": u[None, :20], "y_initial": y[None, :20], "u": u[None, 20:]}
    (got,) = session.run(None, feeds)
    np.testing.assert_allclose(got[0, :, 0], want, rtol=0, atol=1e-4 * np.std(data.test.y))


@pytest.mark.skipif(not HAS_ONNX_EXPORT, reason="the `export` extra is not installed")
def test_export_prints_no_numpy_future_warning(model_file, tmp_path):
    """Keras's ONNX route probes ``np.object``; NumPy's FutureWarning about it is not shown."""
    out = tmp_path / "mgu.onnx"
    done = subprocess.run(
        [sys.executable, "-m", "keras_mgu", "export", "--model", model_file[0], "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, env=subprocess_env(), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and out.is_file(), done.stderr[-3000:]
    assert "FutureWarning" not in done.stderr and "np.object" not in done.stderr, done.stderr
