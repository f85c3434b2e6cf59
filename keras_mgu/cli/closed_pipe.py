"""A closed pipe ends the report, not the work: ``keras-mgu simulate ... | head -3``.

When the program that reads a command's printed report closes its end of the
pipe (``head`` after its lines), the next write to standard output raises
:class:`BrokenPipeError`. :func:`report_until_closed` makes that the end of
the report: the rest of it goes to ``os.devnull``, the command goes on with
its work (the files it writes) and exits with its own status, and Python's
``Exception ignored ... BrokenPipeError`` is not printed at exit.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["ReportStream", "report_until_closed"]


class ReportStream:
    """``sys.stdout`` while a command runs: writes pass through until the reader has gone.

    On the first :class:`BrokenPipeError` the stream's file descriptor is pointed at
    ``os.devnull`` (``os.dup2``), so what is left of the report, and the stream's buffer
    flushed at exit, go nowhere without an error. Everything else is the stream's own.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        #: Whether the reader has closed the pipe (the rest of the report was dropped).
        self.closed_pipe = False

    def write(self, text: str) -> int:
        """Write ``text``; after the pipe has closed, drop it. Returns its length."""
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._drop_the_rest()
            return len(text)

    def flush(self) -> None:
        """Flush the stream; a closed pipe ends the report."""
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._drop_the_rest()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def _drop_the_rest(self) -> None:
        self.closed_pipe = True
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # no descriptor: drop the writes here
            self.stream = open(os.devnull, "w")  # noqa: SIM115 (open until the process ends)
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)


@contextlib.contextmanager
def report_until_closed() -> Iterator[ReportStream | None]:
    """Run a command with ``sys.stdout`` as a :class:`ReportStream`; ``sys.stdout`` after.

    What is left of the report is flushed on the way out (also on ``SystemExit``, as after
    ``--help``), so a closed pipe is met here and not in Python's flush at exit.
    """
    stream = sys.stdout
    if stream is None:  # no standard output at all
        yield None
        return
    report = ReportStream(stream)
    sys.stdout = report
    try:
        yield report
    finally:
        report.flush()
        if sys.stdout is report:
            sys.stdout = stream
