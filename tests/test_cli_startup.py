"""The ``keras-mgu`` command line starts quickly and quietly.

``--help`` and usage errors import neither Keras nor a backend; a backend
that is not installed is one line naming what to install, one that is
installed but fails to import is one line naming the error and the reinstall;
the backends' start-up lines are hidden unless ``--verbose``; PyTorch gets
``OMP_WAIT_POLICY=PASSIVE`` unless the user set it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

import keras_mgu.cli
from keras_mgu.cli import backends, main
from tests.helpers import BACKEND, BACKEND_INDEPENDENT, installed

pytestmark = BACKEND_INDEPENDENT

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
HEAVY = ("keras", "tensorflow", "jax", "torch")
#: Runs ``python -m keras_mgu ARGV...`` in this process, then prints the heavy modules loaded.
PROBE = f"""
import json, runpy, sys
sys.argv = ["keras-mgu", *sys.argv[1:]]
code = None
try:
    runpy.run_module("keras_mgu", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    code = exit.code
print(json.dumps([[m for m in {list(HEAVY)!r} if m in sys.modules], code]))
"""


def child_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL")}
    env.pop("KERAS_MGU_CLI_RESTARTED", None)
    return {**env, "PYTHONPATH": ROOT, **extra}


def probe(*argv: str, prelude: str = "") -> tuple[list[str], int, str]:
    """The heavy modules ``keras-mgu ARGV`` loaded, its exit code and its stderr.

    ``prelude``: Python run first in the same process.
    """
    done = subprocess.run(
        [sys.executable, "-c", prelude + PROBE, *argv], capture_output=True, text=True, cwd=ROOT,
        env=child_env(), timeout=120,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr[-2000:]
    loaded, code = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded, code, done.stderr


@pytest.mark.parametrize(
    "argv, code",
    [
        (["--help"], 0),
        (["identify", "--help"], 0),
        (["tune", "--help"], 0),
        (["identify", "--units", "0"], 2),
        (["identify", "--dataset", "wh2009"], 2),
    ],
)
def test_help_and_usage_errors_import_no_backend(argv, code):
    loaded, status, err = probe(*argv)
    assert loaded == [] and status == code, err[-2000:]


def test_tune_without_keras_tuner_is_one_line_naming_the_extra_before_any_backend():
    """KerasTuner missing (``sys.modules['keras_tuner'] = None``): status 2 at once, one line."""
    prelude = "import sys\nsys.modules['keras_tuner'] = None\n"
    loaded, status, err = probe("tune", "--quick", prelude=prelude)
    assert loaded == [] and status == 2, err[-2000:]
    assert err == (
        "keras-mgu tune: error: KerasTuner is not installed; install it with: "
        'pip install "keras-mgu[tune]"\n'
    )


def test_package_names_load_on_first_use_and_register_with_keras():
    """``import keras_mgu`` loads nothing heavy; ``import keras`` after it registers the classes.

    So ``keras.saving.load_model`` finds ``keras_mgu>MGU`` after ``import
    keras_mgu``, whichever of the two was imported first.
    """
    script = (
        "import importlib.util, sys, keras_mgu\n"
        "names = dir(keras_mgu)\n"
        "assert set(keras_mgu.__all__) <= set(names), names\n"
        "assert importlib.util.find_spec('keras')\n"
        "assert not {'keras', 'keras_mgu.layer'} & set(sys.modules)\n"
        "import keras\n"
        "mgu = keras.saving.get_registered_object('keras_mgu>MGU')\n"
        "assert keras.saving.get_registered_object('keras_mgu>Normalizer')\n"
        "from keras_mgu import MGU, sysid\n"
        "assert mgu is MGU is keras_mgu.MGU and sysid.identify\n"
        "print('OK')\n"
    )
    backend = "jax" if installed("jax") else BACKEND  # JAX imports quickest
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
        env=child_env(TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND=backend), timeout=300,
    )  # fmt: skip
    assert done.stdout.strip() == "OK", done.stderr[-3000:]
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        keras_mgu.nothing  # noqa: B018


@pytest.mark.parametrize(
    "backend, install",
    [("jax", 'pip install "keras-mgu[jax]"'), ("torch", 'pip install "keras-mgu[torch]"')],
)
def test_missing_backend_is_one_line_naming_the_extra(
    monkeypatch, capsys, tmp_path, backend, install
):
    real = backends.importlib.util.find_spec
    monkeypatch.setattr(
        backends.importlib.util, "find_spec", lambda name: None if name == backend else real(name)
    )
    called = []
    monkeypatch.setattr(keras_mgu.cli.subprocess, "call", lambda *a, **k: called.append(a) or 0)
    argv = ["identify", "--quick", "--backend", backend, "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (
        f"keras-mgu identify: error: --backend {backend}: the {backend} backend is not "
        f"installed; install it with: {install}\n"
    )
    assert not called and not (tmp_path / "results.json").exists()
    monkeypatch.setenv("KERAS_BACKEND", backend)  # the same from the environment
    assert main(argv[:2] + argv[4:]) == 2
    assert f"KERAS_BACKEND {backend}: the {backend} backend is not" in capsys.readouterr().err


def test_keras_default_backend_missing_names_the_installed_ones(monkeypatch, capsys, tmp_path):
    """No --backend, no KERAS_BACKEND, no keras.json, no TensorFlow: one line, the way out."""
    real = backends.importlib.util.find_spec
    monkeypatch.setattr(
        backends.importlib.util, "find_spec", lambda n: None if n == "tensorflow" else real(n)
    )
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "no_keras_home"))
    assert backends.configured_backend() == "tensorflow"
    assert main(["identify", "--quick", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    others = "|".join(b for b in ("jax", "torch") if installed(b))
    assert err == (
        "keras-mgu identify: error: Keras's configured backend tensorflow: the tensorflow backend "
        'is not installed; install it with: pip install "keras-mgu[tensorflow]"'
        + (f", or choose an installed one with --backend {others}" if others else "")
        + "\n"
    )
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "keras.json").write_text('{"backend": "jax", "floatx": "float32"}')
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "home"))
    assert backends.configured_backend() == "jax"


def test_backend_start_up_lines_are_hidden_unless_verbose(tmp_path):
    """A data error after the backend loaded: stderr is that one line, TensorFlow's hidden.

    ``--backend`` given before Keras loads is used at once (no second process).
    """
    bad = tmp_path / "bad.csv"
    bad.write_text("u,y\n1,2\n3,x\n")
    argv = ["identify", "--train", str(bad), "--test", str(bad), "--backend", "tensorflow"]
    done = subprocess.run(
        [sys.executable, "-m", "keras_mgu", *argv], capture_output=True, text=True,
        cwd=tmp_path, env=child_env(KERAS_BACKEND="jax"), timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "running again" not in done.stdout
    assert done.stderr.splitlines() == [
        f"keras-mgu identify: error: cannot load the data: {bad}, line 3, column 'y': "
        "'x' is not a number."
    ]


def test_quiet_backend_logs_keeps_the_users_settings(monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.setenv("GRPC_VERBOSITY", "DEBUG")
    backends.quiet_backend_logs()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3" and os.environ["GRPC_VERBOSITY"] == "DEBUG"


@pytest.mark.parametrize("verbose", [False, True])
def test_broken_backend_is_one_line_naming_the_error_and_the_reinstall(tmp_path, verbose):
    """An installed JAX whose import fails: one line, status 2; ``--verbose`` adds the traceback."""
    fake = tmp_path / "site" / "jax"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "import sys\nsys.stderr.write('jaxlib start-up noise\\n')\n"
        "raise ImportError('jaxlib is broken')\n"
    )
    out = tmp_path / "out"
    argv = ["identify", "--quick", "--backend", "jax", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "keras_mgu", *argv, *(["--verbose"] if verbose else [])],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env=child_env(PYTHONPATH=os.pathsep.join([str(fake.parent), ROOT])),
    )  # fmt: skip
    line = (
        "keras-mgu identify: error: the jax backend is installed but failed to import "
        "(ImportError: jaxlib is broken); reinstall it with: "
        'pip install --force-reinstall "keras-mgu[jax]"'
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert not out.exists() and "running again" not in done.stdout
    lines = done.stderr.splitlines()
    if verbose:
        assert lines[0] == "jaxlib start-up noise" and "Traceback" in done.stderr
        assert lines[-2:] == ["ImportError: jaxlib is broken", line]
    else:
        assert lines == [line + "; --verbose shows the whole error"]


def test_import_keras_keeps_the_failed_imports_output(tmp_path, monkeypatch):
    """Quiet: the import's stderr is kept on the error, not written; Keras's failure is named."""
    (tmp_path / "torch.py").write_text(
        "import os\nos.write(2, b'libtorch noise\\n')\n"
        "raise OSError('libtorch_cpu.so: cannot open shared object file')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "keras")  # restored afterwards; torch is not imported
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with pytest.raises(backends.BackendImportError) as raised:
        backends.import_keras("torch")
    assert str(raised.value) == (
        "the torch backend is installed but failed to import (OSError: libtorch_cpu.so: cannot "
        "open shared object file); reinstall it with: "
        'pip install --force-reinstall "keras-mgu[torch]"'
    )
    assert raised.value.output == "libtorch noise\n"
    assert isinstance(raised.value.__cause__, OSError)


def test_import_failure_names_keras_and_an_inner_error():
    tf_style = ImportError(
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "ImportError: libcudart.so.12: cannot open shared object file\n\n"
        "Failed to load the native TensorFlow runtime.\nSee https://www.tensorflow.org/install"
    )
    assert backends.error_summary(tf_style) == (
        "ImportError: libcudart.so.12: cannot open shared object file"
    )
    assert backends.error_summary(RuntimeError("x" * 1000)).endswith("x...")
    assert len(backends.error_summary(RuntimeError("x" * 1000))) == 300
    message = backends._import_failure("keras", "jax", AttributeError("no attribute 'ops'"))
    assert message == (
        "Keras failed to import with the jax backend (AttributeError: no attribute 'ops'); "
        'reinstall it with: pip install --force-reinstall "keras-mgu[jax]"'
    )


@pytest.mark.parametrize("backend", ["torch", "jax", "tensorflow"])
def test_torch_gets_a_passive_openmp_wait_policy_unless_set(monkeypatch, backend):
    """``OMP_WAIT_POLICY=PASSIVE`` before PyTorch loads; a user's own value wins; others: unset."""
    for name in (*backends.QUIET_ENVIRONMENT, "OMP_WAIT_POLICY"):
        monkeypatch.setenv(name, "placeholder")  # restored afterwards
        monkeypatch.delenv(name)
    monkeypatch.setenv("KERAS_BACKEND", backend)
    monkeypatch.setattr(backends, "missing_backend", lambda name: None)
    args = argparse.Namespace(backend=None, verbose=False, subparser=None)
    assert keras_mgu.cli._prepare_backend(args, []) is None  # Keras is loaded: no import
    expected = "PASSIVE" if backend == "torch" else None
    assert os.environ.get("OMP_WAIT_POLICY") == expected
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    backends.prepare_environment(backend)
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


BROKEN_KERAS_TUNER = """
import importlib.abc, importlib.machinery, sys

class Broken(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "keras_tuner":
            return importlib.machinery.ModuleSpec(name, self)
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        raise ImportError("cannot import name 'Tuner' from partially initialized module")

sys.meta_path.insert(0, Broken())
"""


def test_tune_with_a_broken_keras_tuner_is_one_line_naming_the_problem_and_the_extra():
    """KerasTuner found but failing to import: status 2, one line, no traceback."""
    loaded, status, err = probe("tune", "--quick", prelude=BROKEN_KERAS_TUNER)
    assert status == 2, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last == (
        "keras-mgu tune: error: KerasTuner is installed but cannot be imported (ImportError: "
        "cannot import name 'Tuner' from partially initialized module); reinstall it with: "
        'pip install "keras-mgu[tune]"'
    )
    assert "Traceback" not in err


JAX_CACHE_SETTINGS = (
    "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes", "jax_compilation_cache_max_size",
)  # fmt: skip


def test_on_jax_the_command_line_keeps_compiled_programs_beside_the_native_libraries(
    monkeypatch, tmp_path
):
    import keras

    if keras.backend.backend() != "jax":
        pytest.skip("JAX's compilation cache: runs where Keras runs on JAX")
    import jax

    saved = {name: getattr(jax.config, name) for name in JAX_CACHE_SETTINGS}
    monkeypatch.setenv("KERAS_MGU_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    try:
        jax.config.update("jax_compilation_cache_dir", None)
        assert backends.use_compilation_cache() == str(tmp_path / "jax")
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "jax")
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
        assert jax.config.jax_persistent_cache_min_entry_size_bytes == 0
        assert jax.config.jax_compilation_cache_max_size == backends.JAX_CACHE_BYTES
        # A folder the user gave JAX, in its configuration or its environment, is kept.
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "own"))
        assert backends.use_compilation_cache() is None
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "own")
        jax.config.update("jax_compilation_cache_dir", None)
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "env"))
        assert backends.use_compilation_cache() is None
        assert jax.config.jax_compilation_cache_dir is None
    finally:
        for name, value in saved.items():
            jax.config.update(name, value)
