"""README.md's code and commands, the install extras, and the package without TensorFlow."""

import ast
import math
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.helpers import BACKEND_INDEPENDENT, END_TO_END, load_script, requires

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MAPPING_HEADING = "## From a custom MATLAB training loop to keras-mgu"


def read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} is not in the snippet exactly once"
    return text.replace(old, new)


def mapping_snippet() -> str:
    """The first ``python`` block of the README's section on the MATLAB training loop."""
    readme = read("README.md")
    section = readme[readme.index(MAPPING_HEADING) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match and match.start() < section.index("\n## ", 1), "no snippet in the section"
    return match.group(1)


def test_readme_mapping_snippet_runs_and_keeps_the_best_check():
    """The snippet as printed, on tiny settings: 4 epochs of a 256-sample record."""
    code = replace_once(
        mapping_snippet(),
        "max_epochs, mini_batch_size, learn_rate = 30, 16, 1e-2",
        "max_epochs, mini_batch_size, learn_rate = 4, 2, 1e-2",
    )
    code = replace_once(code, "n_samples=1024", "n_samples=256")
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    best, model = namespace["best"], namespace["model"]
    # Checks every ceil(max(0.005, 1 / 4) * iterations) iterations and at the first.
    iterations = 4 * math.ceil(len(namespace["x_train"]) / 2)
    every = math.ceil(iterations / 4)
    expected = [1, *range(every, iterations + 1, every)]
    assert [check["iteration"] for check in best.history] == expected
    for check in best.history:  # the seed loop's weighted early-stopping score
        assert check["score"] == pytest.approx(0.8 * check["val_rmse"] + 0.2 * check["loss"])
    assert best.best_score == min(check["score"] for check in best.history)
    for kept, weight in zip(best.best_weights, model.get_weights(), strict=True):
        np.testing.assert_array_equal(kept, weight)  # the best check's network
    # decay points (0.5, 0.8) of 4 epochs: epochs 2 and 4 start with a decay.
    rate = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
    assert rate == pytest.approx(1e-2 * 0.3**2)


def ten_lines(model_class: str) -> str:
    """The first screen's example, on tiny settings and one model class.

    Every class is tried by the recipe's own tests; here a single class (its
    graphs traced once rather than six classes') carries the lines through.
    """
    readme = read("README.md")
    section = readme[readme.index("## In ten lines") :]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    config = f"sysid.RecipeConfig(units=(4,), iterations=4, model_classes=({model_class!r},))"
    return replace_once(
        code,
        "sysid.identify(data, restarts=3, seed=0)",
        f"sysid.identify(data, {config}, restarts=1, seed=0)",
    )


@END_TO_END
def test_readme_ten_lines_run_save_load_and_simulate(tmp_path, monkeypatch):
    """The first screen's example as printed, on tiny settings: the model file round trip.

    The linear+network class, so the file holds a network, the scaling and a linear model.
    """
    code = replace_once(ten_lines("linear+network"), "tanks(seed=0)", "tanks(256, seed=0)")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    data, found, y_sim = namespace["data"], namespace["found"], namespace["y_sim"]
    assert (tmp_path / "tanks.kmgu").is_file() and y_sim.shape == data.test.y.shape
    np.testing.assert_allclose(y_sim, found.simulate(data.test.u, data.test.y[:50]), rtol=1e-5)
    assert namespace["model"].layers[0].__class__.__name__ == "MGU"


@END_TO_END
def test_readme_ten_lines_run_on_a_file_of_ones_own(tmp_path, monkeypatch):
    """The data line's alternative, a header-less ``run.txt``, runs the example through."""
    from keras_mgu import datasets

    code = ten_lines("network")
    line = next(text for text in code.splitlines() if text.startswith("data = "))
    code = replace_once(code, line, "data = " + line.split("# or ", 1)[1])
    tanks = datasets.simulate_cascaded_tanks(256, seed=0).estimation
    rows = "".join(f"{u},{y}\n" for u, y in zip(tanks.u[:, 0].tolist(), tanks.y[:, 0].tolist()))
    (tmp_path / "run.txt").write_text(rows)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    data = namespace["data"]
    assert data.estimation.n_samples == round(0.8 * tanks.n_samples)
    assert data.estimation.ts == 4.0
    assert namespace["y_sim"].shape == data.test.y.shape


@BACKEND_INDEPENDENT
def test_readme_test_command_is_the_ci_command():
    """CI runs README's test command, its set-up and its test run as two steps."""
    quick_start = read("README.md").split("## Quick start", 1)[1].split("```")[1]
    ci = read(".ci/run")
    [test_command] = [line for line in quick_start.splitlines() if "pytest" in line]
    quiet = [line.replace("pip install -q ", "pip install ") for line in ci.splitlines()]
    set_up, run = test_command.rsplit(" && ", 1)
    assert set_up in quiet  # the same command; CI's pip is quiet
    assert any(line.startswith(run) for line in quiet), run
    assert quiet.index(set_up) < next(i for i, line in enumerate(quiet) if line.startswith(run))
    assert "-n auto" in run  # the suite runs on every core
    assert "-c .ci/constraints.txt" in test_command and ".[tensorflow," in test_command
    pins = [line for line in read(".ci/constraints.txt").splitlines() if "==" in line]
    assert pins == ["torch==2.13.0"]
    first = next(line for line in quick_start.splitlines() if line.startswith("python3"))
    assert '.[tensorflow,plot]"' in first and "examples/system_identification.py" in first


@BACKEND_INDEPENDENT
def test_each_backend_is_an_extra():
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    names = [re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0] for d in project["dependencies"]]
    assert "keras" in names and not {"tensorflow", "jax", "torch"} & set(names)
    extras = project["optional-dependencies"]
    for extra, package in (("tensorflow", "tensorflow"), ("jax", "jax"), ("torch", "torch")):
        assert any(d.startswith(package) for d in extras[extra])
        assert not [d for d in extras[extra] if "==" in d], "extras take ranges"
    assert any(d.startswith("nonlinear-benchmarks") for d in extras["dev"])


@BACKEND_INDEPENDENT
def test_each_backend_has_its_own_export_extra():
    """``export-<backend>``: the runtime and that backend's converter only; ``export``: all."""
    from keras_mgu.export import ONNX_EXTRAS, ONNX_PACKAGES

    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    converters = {"tf2onnx", "jax2onnx", "onnxscript"}
    for backend, modules in ONNX_PACKAGES.items():
        names = {re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0] for d in extras[ONNX_EXTRAS[backend]]}
        assert names == {"onnxruntime", *modules}, backend
        assert len(names & converters) == 1, backend
    assert extras["export"] == [f"keras-mgu[{','.join(ONNX_EXTRAS.values())}]"]


@BACKEND_INDEPENDENT
def test_readme_jax_and_pytorch_installs_carry_their_export_extra():
    """The JAX and PyTorch install lines also install that backend's ONNX exporter."""
    from keras_mgu.export import ONNX_EXTRAS

    section = read("README.md").split("## On JAX or PyTorch", 1)[1].split("\n## ", 1)[0]
    for backend in ("jax", "torch"):
        [line] = [line for line in section.splitlines() if f"KERAS_BACKEND={backend}" in line]
        extras = re.search(r'pip install -e "\.\[([^\]]+)\]"', line).group(1).split(",")
        assert backend in extras and ONNX_EXTRAS[backend] in extras, line


#: The modules that may import TensorFlow when they are loaded: the TensorFlow backend's own.
TENSORFLOW_MODULES = {
    "keras_mgu/kernels/tensorflow.py",
    "keras_mgu/native/tensorflow.py",
    "keras_mgu/fused/engines/tensorflow.py",
}


def _module_level_imports(tree: ast.Module) -> list[str]:
    """Modules imported outside functions and classes (also inside module-level if/try)."""
    names, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            fields = ("body", "orelse", "finalbody")
            todo += [n for field in fields for n in getattr(node, field, [])]
            todo += [n for handler in getattr(node, "handlers", []) for n in handler.body]
    return names


@BACKEND_INDEPENDENT
def test_only_the_tensorflow_backend_modules_import_tensorflow_when_loaded():
    offenders = []
    for folder, _, files in os.walk(os.path.join(ROOT, "keras_mgu")):
        for name in files:
            path = os.path.relpath(os.path.join(folder, name), ROOT).replace(os.sep, "/")
            if not name.endswith(".py") or path in TENSORFLOW_MODULES:
                continue
            tree = ast.parse(read(path))
            if any(m.split(".")[0] == "tensorflow" for m in _module_level_imports(tree)):
                offenders.append(path)
    assert offenders == []


WITHOUT_TENSORFLOW = """
import importlib.abc, sys

class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tf_keras", "tf2onnx"):
            raise ImportError(f"No module named {name!r} (hidden by the test)")

sys.meta_path.insert(0, NoTensorFlow())
import keras, keras_mgu
from keras_mgu import datasets, sysid

assert keras.backend.backend() == "jax", keras.backend.backend()
data = datasets.simulate_cascaded_tanks(n_samples=128, seed=0)
config = sysid.RecipeConfig(units=(3,), iterations=2, steps_per_epoch=2, validation_checks=1,
                            model_classes=("network",))
found = sysid.identify(data, config, restarts=1)
print("test RMSE", found.score(data.test))
print("tensorflow loaded:", "tensorflow" in sys.modules)
"""


@BACKEND_INDEPENDENT
def test_the_package_imports_and_identifies_without_tensorflow(tmp_path):
    """With TensorFlow hidden, ``KERAS_BACKEND=jax``: import, and a 2-iteration ``identify``."""
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    ran = subprocess.run(
        [sys.executable, "-c", WITHOUT_TENSORFLOW], capture_output=True, text=True,
        cwd=tmp_path, env=env, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    rmse = float(re.search(r"^test RMSE (\S+)$", ran.stdout, re.MULTILINE).group(1))
    assert np.isfinite(rmse) and rmse > 0
    assert "tensorflow loaded: False" in ran.stdout


def _readme_figures():
    return load_script("benchmarks", "readme_figures.py", register=True)  # it has a dataclass


@BACKEND_INDEPENDENT
def test_readme_figures_are_found_and_a_different_digit_is_caught():
    """The check reads every quoted figure from README.md and flags a run that prints another."""
    figures = _readme_figures()
    readme = figures.readme_text()
    want = {f.name: re.search(f.readme, readme).group(1) for f in figures.FIGURES["jax"]}
    output = "\n".join([
        f"network (MGU 32) test, 1-step-ahead prediction, scored from sample 50: RMSE "
        f"{want['one-step RMSE']}1, fit 99.0 %",
        f"network (MGU 32) test, band 0.95 (calibrated on validation): share of the samples "
        f"inside it {float(want['band coverage']) / 100:.3f} (simulation), 0.95 (1-step)",
        f"reference on the test, from sample 50: ARX simulation RMSE 0.3, ARX one-step RMSE "
        f"{want['ARX one-step RMSE']}; last-sample predictor RMSE {want['last-sample RMSE']}",
        f"test RMSE: {float(want['test RMSE']) + 1e-5:.5f}",
    ])  # fmt: skip
    rows = {row["figure"]: row for row in figures.compare("jax", output, readme)}
    assert set(rows) == set(want)
    assert not rows["test RMSE"]["same"] and rows["test RMSE"]["close"]  # one digit off
    assert all(rows[name]["same"] for name in want if name != "test RMSE"), rows
    far = float(want["test RMSE"]) * (1 + 2 * figures.TOLERANCE)
    output = output.replace(output.splitlines()[-1], f"test RMSE: {far:.5f}")
    rows = {row["figure"]: row for row in figures.compare("jax", output, readme)}
    assert not rows["test RMSE"]["close"]  # off by twice the tolerance


@END_TO_END
@requires("tensorflow", subject="the quick start runs on TensorFlow")
def test_readme_quick_start_prints_the_figures_readme_quotes():
    """The quick start's first command, run afresh on TensorFlow, prints README.md's figures
    (its digits on README's machine, within the tolerance of another CPU's rounding here)."""
    rows, _ = _readme_figures().check("tensorflow")
    assert rows and all(row["close"] for row in rows), rows
