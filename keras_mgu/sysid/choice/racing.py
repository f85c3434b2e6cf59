"""Racing: a class whose first run is far behind at a fraction of its iterations stops there.

:func:`~keras_mgu.sysid.identify` trains one run of every class before it
chooses the class that gets the other restarts. The quick classes (the
polynomial's least squares, the linear class's few parameters) are fitted
first, in seconds; every other class (NARX, the loop, the networks) then
races against the best run finished so far. At its checkpoint, the first
validation check at or after :data:`RACE_FRACTION` of its iterations, the
run's best validation RMSE so far ``v`` (the record simulated free from its
first measured samples, out of sample) gives a floor under the choice RMSE
it could reach by its end::

    choice RMSE  >=  v / sqrt(2)          (validation and horizon weigh the same)
    stop where   s v / sqrt(2)  >  RACE_FACTOR * r

``r`` is the lowest choice RMSE of the runs finished before it (none that
ran off) and ``s`` the smallest scale from the network's units to the
standardised outputs (1 for the classes that simulate standardised outputs,
the residual's deviations for ``"linear+network"``), so that ``s v`` is
never more than the standardised RMSE. ``RACE_FACTOR`` is how much a run
may still improve after its checkpoint: a stopped run's end would have to
be ``RACE_FACTOR`` times better than its checkpoint to beat ``r``. A
population of runs trained as one stops only where every member is behind.

The factor and fraction were measured on the zoo's estimation and
validation records (``benchmarks/racing.py``), never on a test record. A
stopped run keeps its best weights so far and says where it stopped
(:attr:`~keras_mgu.sysid.RunResult.stopped`); it cannot be chosen, since its
floor is above a finished run's score.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np

__all__ = [
    "QUICK_CLASSES", "RACE_FACTOR", "RACE_FRACTION", "RaceCheckpoint", "checkpoint_iteration",
    "floors", "goes_on", "network_scale", "race_against", "with_stop",
]  # fmt: skip

#: The classes whose runs take seconds (the polynomial's least squares and refinement, the
#: linear class's few parameters): trained first, never stopped by a race.
QUICK_CLASSES = ("linear", "polynomial")
#: The share of a run's iterations after which its checkpoint comes.
RACE_FRACTION = 0.25
#: How much a run may still improve after its checkpoint (module docstring).
RACE_FACTOR = 4.0


def checkpoint_iteration(iterations: int, every: int, fraction: float = RACE_FRACTION) -> int:
    """The first validation check (a multiple of ``every``) from ``fraction * iterations`` on."""
    if iterations < 1 or every < 1:
        raise ValueError(f"`iterations` and `every` must be >= 1; received {iterations}, {every}.")
    return min(iterations, every * max(1, math.ceil(fraction * iterations / every)))


def floors(scores: Sequence[float], scales: Sequence[float]) -> list[float]:
    """Each member's floor ``s v / sqrt(2)`` under the choice RMSE it can reach (module
    docstring): ``scores`` its best validation RMSE so far in the network's units, ``scales``
    the smallest scale from those units to standardised outputs."""
    if len(scores) != len(scales):
        raise ValueError(f"{len(scores)} scores for {len(scales)} scales; give one each.")
    return [s * v / math.sqrt(2.0) for v, s in zip(scores, scales, strict=True)]


def goes_on(
    scores: Sequence[float], scales: Sequence[float], reference: float,
    factor: float = RACE_FACTOR,
) -> bool:  # fmt: skip
    """Whether a run (a population: any member) may still beat ``reference`` (module docstring).

    Args:
        scores: Each member's best validation RMSE so far, the network's units.
        scales: Each member's smallest scale from those units to standardised outputs.
        reference: The lowest choice RMSE of the runs finished (standardised);
            not finite: nothing to race against, the run goes on.
        factor: How much a run may still improve.

    A member with no finite score yet (diverged) is behind.
    """
    below = floors(scores, scales)
    if not math.isfinite(reference):
        return True
    return any(f <= factor * reference for f in below)  # NaN, inf: no finite check, behind


class RaceCheckpoint(keras.callbacks.Callback):
    """Stops a run (or population) at its checkpoint where :func:`goes_on` says it cannot win.

    The training function that holds the run's early stopping calls
    :meth:`watch` before ``fit`` (the scores to read, the run's iterations
    and its validation interval) and puts this callback after the early
    stopping, so that the check at the checkpoint has been made when it
    reads the scores.

    Args:
        reference: The lowest choice RMSE of the runs finished (standardised).
        scales: Per member, the smallest scale from the network's units to
            the standardised outputs.
        factor, fraction: :data:`RACE_FACTOR`, :data:`RACE_FRACTION`.

    Attributes:
        stopped: None while the run goes on; where it stopped, a dict:
            ``iteration`` (the run's, counted as its report counts them),
            ``iterations`` (the run's in all), ``floors`` (each member's
            floor under its choice RMSE, standardised) and ``reference``.
    """

    def __init__(
        self, reference: float, scales: Sequence[float], factor: float = RACE_FACTOR,
        fraction: float = RACE_FRACTION,
    ) -> None:  # fmt: skip
        super().__init__()
        self.reference, self.scales = float(reference), [float(s) for s in scales]
        self.factor, self.fraction = float(factor), float(fraction)
        self.stopped: dict | None = None
        self._scores: Callable[[], Sequence[float]] | None = None
        self._at, self._iterations, self._seen, self._offset, self._epoch = 0, 0, 0, 0, 0

    def watch(
        self, scores: Callable[[], Sequence[float]], iterations: int, every: int, offset: int = 0
    ) -> None:
        """Read ``scores()`` at the first check at or after the fraction of ``iterations``.

        ``offset``: the run's iterations before this ``fit`` (a lag run's
        one-step ones), which :attr:`stopped` counts in.
        """
        self._scores, self._iterations, self._offset = scores, int(iterations), int(offset)
        self._at = checkpoint_iteration(self._iterations, int(every), self.fraction)

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self._scores is None:
            raise RuntimeError("RaceCheckpoint.watch() must be called before training.")
        self._seen, self._epoch, self.stopped = 0, 0, None

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        # Counted from Keras's batch index: one call per block of batches under
        # ``compile(steps_per_execution=k)``, whose ends the checkpoint falls on.
        steps = int((self.params or {}).get("steps") or 0)
        previous, self._seen = self._seen, self._epoch * steps + batch + 1
        if not previous < self._at <= self._seen or self._at >= self._iterations:
            return
        scores = [float(s) for s in self._scores()]
        if goes_on(scores, self.scales, self.reference, self.factor):
            return
        self.stopped = {
            "iteration": self._offset + self._seen, "iterations": self._offset + self._iterations,
            "floors": floors(scores, self.scales), "reference": self.reference,
        }  # fmt: skip
        self.model.stop_training = True


def network_scale(path: Any) -> float:
    """The smallest scale from a structure's network units to standardised outputs: 1 where
    the network simulates them (``path.inner`` None), the residual's smallest deviation
    (``path.inner.y_std``) where it simulates the residual of a linear model."""
    if path is None or path.inner is None:
        return 1.0
    return float(np.min(path.inner.y_std))


def race_against(options: Sequence[Any], finished: Sequence[Any]) -> RaceCheckpoint | None:
    """The checkpoint of runs of the structures ``options`` (trained as one), racing the best
    choice RMSE of the ``finished`` runs (:class:`~keras_mgu.sysid.RunResult`) the choice may
    keep (:attr:`~keras_mgu.sysid.RunResult.not_kept`); None for a quick class
    (:data:`QUICK_CLASSES`) or where no finished run is kept."""
    if any(o.name in QUICK_CLASSES for o in options):
        return None
    kept = [run for run in finished if run.not_kept is None]
    if not kept:
        return None
    reference = min(run.choice_rmse for run in kept)
    return RaceCheckpoint(reference, [network_scale(o.path) for o in options])


def with_stop(run: Any, race: RaceCheckpoint | None, member: int = 0) -> Any:
    """``run`` (member ``member`` of the race's population) with where ``race`` stopped it
    (:attr:`~keras_mgu.sysid.RunResult.stopped`: ``iteration``, ``iterations``, its ``floor``
    and the ``reference``), if it did."""
    if race is None or race.stopped is None:
        return run
    stop = {k: v for k, v in race.stopped.items() if k != "floors"}
    return dataclasses.replace(run, stopped={**stop, "floor": race.stopped["floors"][member]})
