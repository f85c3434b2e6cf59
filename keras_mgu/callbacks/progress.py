"""``TerminalProgress``: one line that follows a training run's iterations, on a terminal.

Keras's own progress output (``fit(verbose=1)`` or ``2``) prints a line, or a
bar, per epoch; an identification's runs have few long epochs, or many short
ones, and other lines of its own between them. This callback instead
rewrites one line as the run trains, ``  training: 1200/5000 iterations``,
and erases it when the run ends, so that the line the recipe prints per run
takes its place. It writes only where ``stream`` is a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import keras

__all__ = ["TerminalProgress"]


class TerminalProgress(keras.callbacks.Callback):
    """Rewrites one line with the iterations done, where ``stream`` is a terminal.

    Args:
        stream: Where to write (default ``sys.stdout``); nothing is written
            unless ``stream.isatty()``.
        every: The least seconds between two updates of the line.
    """

    def __init__(self, stream: TextIO | None = None, every: float = 0.2) -> None:
        super().__init__()
        self.stream, self.every = stream, float(every)
        self._done, self._total, self._shown, self._width, self._epoch = 0, None, 0.0, 0, 0

    @property
    def active(self) -> bool:
        """Whether the stream is a terminal (the line is written)."""
        stream = self.stream or sys.stdout
        return bool(getattr(stream, "isatty", lambda: False)())

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        params = self.params or {}
        steps, epochs = params.get("steps"), params.get("epochs")
        self._total = steps * epochs if steps and epochs else None
        self._done, self._shown, self._epoch = 0, 0.0, 0

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        # From Keras's batch index: right under ``compile(steps_per_execution=k)`` too.
        steps = (self.params or {}).get("steps") or 0
        self._done = self._epoch * steps + batch + 1
        now = time.monotonic()
        if now - self._shown >= self.every:
            self._shown = now
            total = "" if self._total is None else f"/{self._total}"
            self._write(f"  training: {self._done}{total} iterations")

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self._write("")

    def _write(self, text: str) -> None:
        if not self.active:
            return
        stream = self.stream or sys.stdout
        stream.write("\r" + text.ljust(self._width) + ("\r" if not text else ""))
        stream.flush()
        self._width = len(text)
