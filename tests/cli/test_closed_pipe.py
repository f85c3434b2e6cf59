"""A closed pipe ends the report, not the work: ``keras-mgu simulate ... | head -1``.

``simulate`` writes its file before it prints; a reader that has gone leaves
the command to finish, with status 0 and without Python's ``Exception ignored
... BrokenPipeError`` at exit, whether the output is written line by line
(``PYTHONUNBUFFERED``) or in blocks (Python's default on a pipe).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from keras_mgu.cli.closed_pipe import report_until_closed
from tests.cli.common import MODEL, ROOT, write_inputs
from tests.helpers import BACKEND, BACKEND_INDEPENDENT, installed

pytestmark = BACKEND_INDEPENDENT

#: The child's backend: JAX, the quickest to start, where it is installed (the subject is
#: the command line's, not the backend's).
CHILD_BACKEND = "jax" if installed("jax") else BACKEND
#: What Python prints when a closed pipe meets a print, or its flush at exit.
NOISE = ("BrokenPipeError", "Exception ignored", "Traceback")


def child_env(unbuffered: bool) -> dict:
    """:data:`CHILD_BACKEND`, the checkout's package, output line by line or in blocks."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "PYTHONPATH")}
    env.pop("KERAS_MGU_CLI_RESTARTED", None)
    env.update(PYTHONPATH=ROOT, KERAS_BACKEND=CHILD_BACKEND, TF_CPP_MIN_LOG_LEVEL="3")
    return {**env, "PYTHONUNBUFFERED": "1"} if unbuffered else env


def keras_mgu(*argv: str, stdout, stderr, unbuffered: bool = True) -> subprocess.Popen:
    """``python -m keras_mgu ARGV`` in a child process."""
    return subprocess.Popen(
        [sys.executable, "-m", "keras_mgu", *argv], stdout=stdout, stderr=stderr, cwd=ROOT,
        env=child_env(unbuffered),
    )  # fmt: skip


def closed_pipe() -> int:
    """The writing end of a pipe whose reader has gone (``| head -0``)."""
    read, write = os.pipe()
    os.close(read)
    return write


def test_simulate_writes_its_file_before_it_prints(tmp_path):
    """Its first line comes when the file is whole; the reader stops there (``| head -1``)."""
    out = tmp_path / "sim.csv"
    argv = ["simulate", "--model", MODEL, "--data", write_inputs(tmp_path / "u.csv"), "--out", out]
    with open(tmp_path / "stderr", "w+") as stderr:
        child = keras_mgu(*map(str, argv), stdout=subprocess.PIPE, stderr=stderr)
        first = child.stdout.readline().decode()
        written = out.exists()
        child.stdout.close()
        status = child.wait(timeout=300)
        stderr.seek(0)
        err = stderr.read()
    assert first.startswith("model: "), (first, err[-2000:])
    assert written, "the report began before the file was written"
    assert status == 0 and not any(noise in err for noise in NOISE), err[-2000:]
    assert out.read_text().startswith("displacement_sim,")


def test_simulate_finishes_for_a_reader_that_has_gone(tmp_path):
    out = tmp_path / "sim.csv"
    argv = ["simulate", "--model", MODEL, "--data", write_inputs(tmp_path / "u.csv"), "--out", out]
    write = closed_pipe()
    try:
        child = keras_mgu(*map(str, argv), stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    err = child.communicate(timeout=300)[1].decode()
    assert child.returncode == 0 and not any(noise in err for noise in NOISE), err[-2000:]
    assert out.read_text().startswith("displacement_sim,")


@pytest.mark.parametrize("unbuffered", [True, False], ids=["line by line", "in blocks"])
def test_help_for_a_reader_that_has_gone_exits_quietly(unbuffered):
    """``simulate --help`` is shorter than Python's 8 KiB buffer: in blocks, the closed pipe is
    met by the last flush, where Python would print ``Exception ignored`` and exit with 120."""
    write = closed_pipe()
    try:
        child = keras_mgu("simulate", "--help", stdout=write, stderr=subprocess.PIPE,
                          unbuffered=unbuffered)  # fmt: skip
    finally:
        os.close(write)
    err = child.communicate(timeout=120)[1].decode()
    assert child.returncode == 0 and err == "", err


def test_the_report_stream_drops_the_rest_after_the_pipe_closes(monkeypatch):
    stream = open(closed_pipe(), "w", buffering=1)  # line-buffered: each line meets the pipe
    monkeypatch.setattr(sys, "stdout", stream)
    with report_until_closed() as report:
        print("the first line meets the closed pipe")
        print("the rest goes nowhere", flush=True)
    assert report.closed_pipe and sys.stdout is stream
    stream.close()  # its descriptor is os.devnull's now: nothing left to fail
