"""Suite-wide fixtures and the two markers that shape a parallel, three-backend run.

* ``backend_independent``: the test's subject does not depend on the Keras
  backend (file loaders, the native build and C API, installing the package):
  it runs once per CI, with the JAX suite (where the recipe trains fastest on
  a CPU, its compiled programs shared by the workers), or with whatever backend
  is active where JAX is not installed; on the other backends it is skipped
  with that reason. Whole modules say
  ``pytestmark = BACKEND_INDEPENDENT`` (``tests.helpers``).
* ``end_to_end``: a whole workflow (an example, the README's lines, the
  command line's full identification, a benchmark run) whose backend-dependent
  pieces the unit tests check on every backend: it runs once, like the
  backend-independent tests, and is skipped on the other backends with that
  reason (``tests.helpers.END_TO_END``).
* ``serial``: the test measures wall-clock time (budgets) and must not share
  the machine with other tests. Under ``pytest -n N`` (pytest-xdist) it waits
  until no other test of any worker runs, and no other test starts until it
  ends (:func:`_serial_lock`).
"""

import contextlib
import fcntl
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import keras
import numpy as np
import pytest

#: The backend whose suite runs the backend-independent and end-to-end tests.
INDEPENDENT_SUITE_BACKEND = "jax"


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: as many workers as the cores this process may use, one more on TensorFlow.

    A TensorFlow worker spends part of its time off the CPU (tracing and
    optimising graphs single-threaded, waiting for a subprocess on another
    backend), and the extra worker fills it; JAX's and PyTorch's workers keep
    the cores busy themselves. On the project's 2-core machine (clean-clone
    CI runs): TensorFlow's suite 531 s with 3 workers against 631 s with 2,
    JAX's 729 s against 663 s, PyTorch's 230 s against 206 s.
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins.
    """
    configured = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if configured:
        return int(configured)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + (keras.backend.backend() == "tensorflow")


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend {keras.backend.backend()}"


def _runs_backend_independent_tests() -> bool:
    backend = keras.backend.backend()
    if backend == INDEPENDENT_SUITE_BACKEND:
        return True
    return importlib.util.find_spec(INDEPENDENT_SUITE_BACKEND) is None


def pytest_collection_modifyitems(config, items):
    if _runs_backend_independent_tests():
        _workflows_first(items)
        return
    reasons = {
        "backend_independent": "backend-independent subject",
        "end_to_end": "a whole workflow, its pieces tested on every backend",
    }
    for item in items:
        for marker, reason in reasons.items():
            if item.get_closest_marker(marker):
                suite = f"runs with the {INDEPENDENT_SUITE_BACKEND} suite"
                item.add_marker(pytest.mark.skip(reason=f"{reason}; {suite}"))
                break


def _workflows_first(items: list) -> None:
    """The modules that hold an end-to-end test move to the front, in place (each kept whole).

    The whole workflows are the suite's longest tests (the README's quick start
    takes minutes); started first, they run beside the short tests, and no
    worker of a parallel run waits alone for one at the end.
    """
    module = lambda item: item.nodeid.split("::")[0]  # noqa: E731
    workflows = {module(item) for item in items if item.get_closest_marker("end_to_end")}
    items.sort(key=lambda item: module(item) not in workflows)  # stable


#: Lock files shared by every pytest process of this user on the machine.
_LOCK_DIR = os.path.join(tempfile.gettempdir(), f"keras-mgu-tests-{os.getuid()}")


#: Names this run; set by the first pytest process, inherited by its workers.
_RUN = "KERAS_MGU_TEST_RUN"


def _run_folder(name: str) -> str:
    """A folder ``name`` of this test run, shared by its pytest-xdist workers."""
    return os.path.join(_LOCK_DIR, f"{name}-{os.environ[_RUN]}")


def _share_jax_compilations() -> None:
    """On JAX, the workers of one run share the programs XLA compiled (a cache for the run).

    Many tests build the same small models; a program compiled once is read
    back by every later test and worker instead of compiled again. The cache
    starts empty each run, so nothing compiled by other code is read.
    """
    if keras.backend.backend() != "jax":
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", _run_folder("jax-compilations"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_configure(config):
    os.environ.setdefault(_RUN, f"{os.getpid()}-{time.time_ns()}")
    _share_jax_compilations()


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):  # the controller, once every worker has ended
        for name in ("jax-compilations", "saved-on-jax", "saved-on-torch"):
            shutil.rmtree(_run_folder(name), ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                os.remove(_run_folder(name) + ".lock")


@contextlib.contextmanager
def _flock(name: str, mode: int):
    os.makedirs(_LOCK_DIR, exist_ok=True)
    with open(os.path.join(_LOCK_DIR, name), "a") as handle:
        fcntl.flock(handle.fileno(), mode)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _serial_lock(serial: bool):
    """A readers-writer lock between test processes: ``serial`` tests run alone.

    Every test passes the ``gate`` (held briefly) and then holds ``running``:
    shared for ordinary tests, exclusive for serial ones. A serial test keeps
    the gate while it waits, so no new test starts meanwhile and it cannot be
    starved.
    """
    if serial:
        with _flock("gate", fcntl.LOCK_EX), _flock("running", fcntl.LOCK_EX):
            yield
        return
    with _flock("gate", fcntl.LOCK_EX):
        running = _flock("running", fcntl.LOCK_SH)
        running.__enter__()
    try:
        yield
    finally:
        running.__exit__(None, None, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown of a test inside the lock (fixtures' time counts too)."""
    with _serial_lock(item.get_closest_marker("serial") is not None):
        return (yield)


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Each test starts from a clean Keras session and the float32 policy."""
    keras.backend.clear_session(free_memory=False)
    keras.config.set_dtype_policy("float32")
    np.random.seed(0)
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def shared_data_dir():
    """The shared benchmark data folder, if this checkout has one beside it."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.abspath(os.path.join(here, "..", "..", "shared", "data"))


@pytest.fixture(scope="session")
def saved_on_another_backend():
    """``(folder, backend)``: two tiny identified models saved on another backend.

    ``tests/scripts/save_identification.py`` runs once a test run (the
    pytest-xdist workers share its folder, the first to need it writes it)
    in a subprocess with JAX (torch when this suite is JAX's) and writes
    ``<state>.kmgu`` and ``<state>.npz`` for ``state`` in ``learned``,
    ``encoder``. Training there takes about 20-40 s with its imports. Where
    that backend is not installed (a one-backend install) the tests skip.
    """
    from tests.helpers import other_backend

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = os.path.join(root, "tests", "scripts", "save_identification.py")
    other = other_backend("jax", "torch")
    if other is None:
        pytest.skip("needs a second Keras backend (jax or torch) installed to save on")
    folder = _run_folder(f"saved-on-{other}")
    with _flock(os.path.basename(folder) + ".lock", fcntl.LOCK_EX):
        if not os.path.exists(os.path.join(folder, "done")):
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder)
            env = dict(os.environ, KERAS_BACKEND=other, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="3")
            proc = subprocess.run(
                [sys.executable, script, folder], capture_output=True, text=True, env=env,
                timeout=600,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            open(os.path.join(folder, "done"), "w").close()
    return pathlib.Path(folder), other
