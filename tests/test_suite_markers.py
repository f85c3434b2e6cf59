"""The suite's own markers (tests/conftest.py): which backend runs what, and serial tests."""

import threading
import time

import pytest

from tests import conftest
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


class _Item:
    def __init__(self, *markers: str, nodeid: str = "tests/test_a.py::test"):
        self.markers = list(markers)
        self.nodeid = nodeid

    def get_closest_marker(self, name: str):
        return next((m for m in self.markers if getattr(m, "name", m) == name), None)

    def add_marker(self, marker):
        self.markers.append(marker.mark)


REASONS = {
    "backend_independent": "backend-independent subject; runs with the jax suite",
    "end_to_end": "a whole workflow, its pieces tested on every backend; runs with the jax suite",
}


@pytest.mark.parametrize("marker", list(REASONS))
@pytest.mark.parametrize("runs_here", [True, False])
def test_marked_tests_run_once_and_are_skipped_on_the_other_backends(
    monkeypatch, runs_here, marker
):
    """Backend-independent tests and end-to-end workflows run with the JAX suite only."""
    monkeypatch.setattr(conftest, "_runs_backend_independent_tests", lambda: runs_here)
    marked, dependent = _Item(marker), _Item()
    conftest.pytest_collection_modifyitems(None, [marked, dependent])
    skip = marked.get_closest_marker("skip")
    assert (skip is None) == runs_here and dependent.get_closest_marker("skip") is None
    if skip is not None:
        assert skip.kwargs["reason"] == REASONS[marker]


@pytest.mark.parametrize("runs_here", [True, False])
def test_where_the_workflows_run_their_modules_start_first_each_whole(monkeypatch, runs_here):
    monkeypatch.setattr(conftest, "_runs_backend_independent_tests", lambda: runs_here)
    items = [
        _Item(nodeid="tests/a.py::one"), _Item(nodeid="tests/b.py::two"),
        _Item("end_to_end", nodeid="tests/b.py::three"), _Item(nodeid="tests/c.py::four"),
        _Item(nodeid="tests/b.py::five"),
    ]  # fmt: skip
    conftest.pytest_collection_modifyitems(None, items)
    order = [item.nodeid.split("::")[1] for item in items]
    # where they are skipped, the order is left as collected
    assert order == (["two", "three", "five", "one", "four"] if runs_here else
                     ["one", "two", "three", "four", "five"])  # fmt: skip


def test_the_rule_runs_them_with_jax_or_wherever_it_is_missing(monkeypatch):
    monkeypatch.setattr(conftest.keras.backend, "backend", lambda: "tensorflow")
    monkeypatch.setattr(conftest.importlib.util, "find_spec", lambda name: object())
    assert not conftest._runs_backend_independent_tests()
    monkeypatch.setattr(conftest.importlib.util, "find_spec", lambda name: None)
    assert conftest._runs_backend_independent_tests()
    monkeypatch.setattr(conftest.keras.backend, "backend", lambda: "jax")
    assert conftest._runs_backend_independent_tests()


def _hold(serial: bool, events: list, name: str, seconds: float, entered: threading.Event):
    with conftest._serial_lock(serial):
        events.append(("start", name))
        entered.set()
        time.sleep(seconds)
        events.append(("end", name))


def _thread(*args) -> tuple[threading.Thread, threading.Event]:
    entered = threading.Event()
    thread = threading.Thread(target=_hold, args=(*args, entered))
    thread.start()
    return thread, entered


def test_a_serial_test_waits_for_running_tests_and_blocks_new_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(conftest, "_LOCK_DIR", str(tmp_path))
    events: list = []
    first, first_in = _thread(False, events, "ordinary 1", 1.0)
    assert first_in.wait(10)
    serial, _ = _thread(True, events, "serial", 0.3)
    time.sleep(0.3)  # the serial test is now waiting at the gate it holds
    late, _ = _thread(False, events, "ordinary 2", 0.0)
    for thread in (first, serial, late):
        thread.join(10)
    assert events == [
        ("start", "ordinary 1"), ("end", "ordinary 1"),
        ("start", "serial"), ("end", "serial"),
        ("start", "ordinary 2"), ("end", "ordinary 2"),
    ]  # fmt: skip


def test_ordinary_tests_run_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setattr(conftest, "_LOCK_DIR", str(tmp_path))
    events: list = []
    one, one_in = _thread(False, events, "one", 0.5)
    two, two_in = _thread(False, events, "two", 0.0)
    assert one_in.wait(10) and two_in.wait(10)
    one.join(10)
    two.join(10)
    assert events.index(("start", "two")) < events.index(("end", "one"))


@pytest.mark.serial
def test_a_serial_marker_is_registered(request):
    assert request.node.get_closest_marker("serial") is not None
