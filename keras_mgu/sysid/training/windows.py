"""Training windows of an estimation record: from a learned or encoded state, or measured lags.

:class:`TrainingWindows` (the network classes) is a ``keras.utils.PyDataset``: each batch holds
``batch_size`` windows of ``window`` samples cut from the record on the fly
(memory stays that of the record, however many windows are drawn), with
sample weights that mask a washout::

    x (batch_size, window, n_inputs), y (batch_size, window, n_outputs),
    w (batch_size, window)

Every window starts from the model's learned initial state. That state is the
plant's state at the start of the record, so a window starting at sample 0 is
scored in full; a window starting later begins from a state that is not the
plant's, and its first ``washout`` samples get weight 0 while the network
forgets the mismatch. When ``window`` covers the record, every batch is the
whole record (``batch_size`` 1): training then minimises the free-run
simulation error of the whole estimation record.

With ``history=n`` (models with an encoder, see
:func:`~keras_mgu.sysid.build_simulator`) each window is preceded by the
``n`` samples the encoder reads, and a batch is::

    (u_past (batch_size, n, n_inputs), y_past (batch_size, n, n_outputs),
     u (batch_size, window, n_inputs)), y (batch_size, window, n_outputs), w

Every window then starts from its estimated state and is scored in full.

A record of several experiments end to end (``boundaries``, the samples at
which each experiment after the first starts; see
:func:`keras_mgu.datasets.join_experiments`) gives windows that lie inside
one experiment, history included: none crosses a boundary. Every start
inside an experiment is equally likely, so each experiment gives windows in
proportion to its length; the window is at most the shortest experiment
(less ``history``). A window that starts at a later experiment's first
sample starts from the learned state, which is the first experiment's, so it
gets the washout too.

:func:`measured_windows` (the lag classes) cuts every window of the record
with the measured samples before it, which set its state.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np

from keras_mgu.datasets import Record

__all__ = ["TrainingWindows", "measured_windows"]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer; received {value!r}.")
    return int(value)


class TrainingWindows(keras.utils.PyDataset):
    """Random windows of one ``(u, y)`` record, ``steps_per_epoch`` batches per epoch.

    Args:
        u: ``(N, n_inputs)`` standardised inputs.
        y: ``(N, n_outputs)`` standardised outputs.
        window: Samples per window; ``>= N`` means the whole record.
        batch_size: Windows per batch (1 when the window is the whole record).
        steps_per_epoch: Batches per epoch.
        washout: Leading samples with weight 0 in windows that start after
            sample 0, ``0 <= washout < window``.
        start_fraction: Share of windows that start at sample 0 (scored in
            full, from the learned initial state).
        seed: Seeds the window draws; batch ``i`` of epoch ``e`` is the same
            on every run and backend.
        history: Samples before each window given to the model's encoder
            (0: none; the model starts from its learned state).
        boundaries: Samples at which a new experiment starts (``()``: one
            experiment); no window, history included, crosses one.
    """

    def __init__(
        self,
        u: np.ndarray,
        y: np.ndarray,
        window: int,
        batch_size: int = 16,
        steps_per_epoch: int = 20,
        washout: int = 0,
        start_fraction: float = 0.1,
        seed: int = 0,
        history: int = 0,
        boundaries: Sequence[int] = (),
    ) -> None:
        super().__init__()
        self.u = np.asarray(u, dtype="float32")
        self.y = np.asarray(y, dtype="float32")
        if self.u.ndim != 2 or self.y.ndim != 2 or len(self.u) != len(self.y):
            raise ValueError(
                "`u` and `y` must be (N, channels) arrays of the same length; received shapes "
                f"{self.u.shape} and {self.y.shape}."
            )
        for name, arr in (("u", self.u), ("y", self.y)):
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"`{name}` contains NaN or inf; clean the record before training.")
        n = len(self.u)
        if n < 2:
            raise ValueError(f"The record has {n} sample(s); training needs at least 2.")
        if isinstance(history, bool) or not isinstance(history, (int, np.integer)) or history < 0:
            raise ValueError(f"`history` must be an integer >= 0; received {history!r}.")
        self.history = int(history)
        edges = [0, *(int(b) for b in boundaries), n]
        if any(b <= a for a, b in zip(edges[:-1], edges[1:])):
            raise ValueError(
                f"`boundaries` must be increasing samples in (0, {n}); received {boundaries!r}."
            )
        #: ``(start, stop)`` of each experiment.
        self.experiments = list(zip(edges[:-1], edges[1:]))
        shortest = min(b - a for a, b in self.experiments)
        if self.history and self.history + int(window) > shortest:
            what = "record" if len(self.experiments) == 1 else "shortest experiment"
            raise ValueError(
                f"The {what} has {shortest} samples, fewer than history {history} + window "
                f"{window}."
            )
        self.window = min(_positive_int("window", window), shortest - self.history)
        self.whole_record = self.window == n and not self.history
        self.batch_size = 1 if self.whole_record else _positive_int("batch_size", batch_size)
        self.steps_per_epoch = _positive_int("steps_per_epoch", steps_per_epoch)
        if isinstance(washout, bool) or not 0 <= int(washout) < self.window:
            raise ValueError(
                f"`washout` must be an integer in [0, window={self.window}); received {washout!r}."
            )
        self.washout = int(washout)
        if not 0.0 <= float(start_fraction) <= 1.0:
            raise ValueError(f"`start_fraction` must be in [0, 1]; received {start_fraction!r}.")
        self.start_fraction = float(start_fraction)
        self.seed = int(seed)
        self.epoch = 0

    def __len__(self) -> int:
        return self.steps_per_epoch

    def on_epoch_end(self) -> None:
        self.epoch += 1

    def starts(self, index: int) -> np.ndarray:
        """Start samples of the windows of batch ``index`` in the current epoch.

        With ``history`` the starts are at least ``history``, so that the
        samples before each window are in the record.
        """
        if self.whole_record:
            return np.zeros(1, dtype=np.int64)
        rng = np.random.default_rng([self.seed, self.epoch, index])
        starts = self._draw(rng)
        if not self.history:
            starts[rng.random(self.batch_size) < self.start_fraction] = 0
        return starts

    def _draw(self, rng: np.random.Generator) -> np.ndarray:
        """``batch_size`` starts, uniform over every window inside one experiment."""
        first = np.array([a + self.history for a, _ in self.experiments])
        counts = np.array([b - self.window for _, b in self.experiments]) - first + 1
        offsets = rng.integers(0, counts.sum(), size=self.batch_size)
        ends = np.cumsum(counts)
        experiment = np.searchsorted(ends, offsets, side="right")
        return first[experiment] + offsets - (ends - counts)[experiment]

    def __getitem__(self, index: int) -> tuple:
        starts = self.starts(index)
        idx = starts[:, None] + np.arange(self.window)[None, :]
        weights = np.ones(idx.shape, dtype="float32")
        if self.history:
            past = starts[:, None] + np.arange(-self.history, 0)[None, :]
            return (self.u[past], self.y[past], self.u[idx]), self.y[idx], weights
        weights[starts > 0, : self.washout] = 0.0
        return self.u[idx], self.y[idx], weights


def measured_windows(record: Record, lag: int, window: int) -> tuple[np.ndarray, ...]:
    """Every window of ``record`` with ``lag`` measured samples before it.

    Returns ``(u_past (W, lag, n_u), y_past (W, lag, n_y), u (W, T, n_u),
    y (W, T, n_y))`` as float32, ``W`` windows over all starts ``s`` of each
    experiment (``lag <= s <= n - T``). Raises ``ValueError`` when no
    experiment holds ``lag + window`` samples.
    """
    parts = []
    u, y = record.u, record.y
    for first, stop in record.experiments:
        starts = np.arange(first + lag, stop - window + 1)
        if len(starts):
            past, future = starts[:, None] + np.arange(-lag, 0), starts[:, None] + np.arange(window)
            parts.append((u[past], y[past], u[future], y[future]))
    if not parts:
        raise ValueError(
            f"No estimation experiment holds {lag + window} samples ({lag} to set the state, "
            f"{window} to simulate); give a longer record or a shorter window."
        )
    return tuple(np.concatenate(p).astype("float32") for p in zip(*parts))
