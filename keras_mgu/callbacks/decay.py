"""``LearningRateDecayPoints``: the learning rate times a factor at fractions of the run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any

import keras


def decay_epochs(decay_points: Sequence[float], epochs: int) -> list[int]:
    """Epochs (counted from 1) at whose start the learning rate decays.

    ``ceil(p * epochs)`` for each decay point ``p`` in ``(0, 1]``; the product
    is rounded to 9 decimals first so that e.g. ``0.3 * 10`` gives epoch 3, not
    4. Points that fall on the same epoch decay it once.
    """
    return sorted({math.ceil(round(p * epochs, 9)) for p in decay_points})


def decay_iterations(decay_points: Sequence[float], iterations: int) -> list[int]:
    """Boundaries ``floor(p * iterations)``: the rate decays once per boundary the update passes.

    The update with 0-based index ``s`` runs at ``base * rate ** #{b < s}``, as
    ``keras.optimizers.schedules.PiecewiseConstantDecay`` with these boundaries.
    """
    return sorted({math.floor(p * iterations) for p in decay_points})


#: What a decay point is a fraction of: the fit's epochs or its iterations.
UNITS = ("epoch", "iteration")


def _check_decay_points(decay_points: Any) -> tuple[float, ...]:
    if isinstance(decay_points, Real) and not isinstance(decay_points, bool):
        decay_points = (decay_points,)
    try:
        points = tuple(float(p) for p in decay_points)
    except (TypeError, ValueError):
        raise TypeError(
            f"`decay_points` must be a number or a sequence of numbers in (0, 1]; "
            f"got {decay_points!r}."
        ) from None
    if not points:
        raise ValueError("`decay_points` must contain at least one decay point in (0, 1].")
    bad = [p for p in points if not (0.0 < p <= 1.0)]
    if bad:
        raise ValueError(
            f"`decay_points`: each decay point is a fraction of the run in (0, 1]; got {bad} "
            f"in {points}."
        )
    return points


def _check_positive_real(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"`{name}` must be a positive number; got {value!r}.")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"`{name}` must be a positive finite number; got {value}.")
    return value


def _settable_learning_rate(optimizer: Any) -> None:
    """Raise unless ``optimizer`` holds its learning rate in a plain variable."""
    if optimizer is None:
        raise ValueError("The model must be compiled with an optimizer.")
    current = getattr(optimizer, "_learning_rate", None)
    if isinstance(current, keras.optimizers.schedules.LearningRateSchedule) or (
        callable(current) and not isinstance(current, keras.Variable)
    ):
        raise ValueError(
            "LearningRateDecayPoints sets the optimizer's learning rate, but this "
            f"optimizer's learning rate is driven by {type(current).__name__}. "
            "Compile with a float `learning_rate` instead."
        )
    if not hasattr(optimizer, "learning_rate"):
        raise ValueError(f"Optimizer {type(optimizer).__name__} has no `learning_rate`.")


def _read_learning_rate(optimizer: Any) -> float:
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


@keras.saving.register_keras_serializable(package="keras_mgu")
class LearningRateDecayPoints(keras.callbacks.Callback):
    """Multiply the learning rate by ``decay_rate`` at fractions of the run.

    With ``E`` the ``epochs`` passed to ``fit``, the decay epochs (counted from
    1) are ``{ceil(p * E) for p in decay_points}``; at the start of each one the
    learning rate is multiplied by ``decay_rate``. The learning rate of epoch
    ``e`` is therefore::

        lr_e = base_lr * decay_rate ** #{d in decay epochs : d <= e}

    E.g. ``E=10``, ``decay_points=(0.5,)``, ``decay_rate=0.1`` and a base rate of
    ``1e-2``: epochs 1-4 run at ``1e-2`` and epochs 5-10 at ``1e-3``. The rate in
    effect is written to the epoch logs as ``learning_rate``.

    Resuming: the rate is always recomputed from ``base_lr``, never multiplied
    step by step. ``base_lr`` is the optimizer's rate when ``fit`` starts at
    epoch 0. When ``fit`` starts at ``initial_epoch=k > 0`` the optimizer is
    assumed to hold the rate of epoch ``k`` (the last one completed), as it does
    after an interrupted ``fit`` on the same model, after
    ``keras.callbacks.BackupAndRestore`` or after loading a ``.keras`` file
    saved at that epoch; ``base_lr`` is recovered by dividing out the decays
    already passed. ``fit`` must be given the same ``epochs`` as the original
    run, since the decay epochs depend on it.

    With ``unit="iteration"`` the points are fractions of the fit's ``I``
    iterations (``steps_per_epoch * epochs``) instead: with boundaries
    ``b = floor(p * I)`` (:func:`decay_iterations`) the update with 0-based
    index ``s`` runs at ``base_lr * decay_rate ** #{b < s}``, the rate
    ``keras.optimizers.schedules.PiecewiseConstantDecay`` gives with those
    boundaries, set before each batch.

    Args:
        decay_points: A fraction or a sequence of fractions of the run, each in
            ``(0, 1]``.
        decay_rate: Positive factor applied at each decay epoch.
        verbose: ``1`` prints a line at each decay.
        unit: ``"epoch"`` (default) or ``"iteration"``: what the points are
            fractions of.

    Attributes:
        base_learning_rate: The undecayed rate of the current run (set at the
            first epoch of ``fit``).
        decay_epochs: The decay epochs of the current run, counted from 1.
    """

    def __init__(
        self,
        decay_points: float | Sequence[float],
        decay_rate: float = 0.1,
        verbose: int = 0,
        unit: str = "epoch",
    ) -> None:
        super().__init__()
        self.decay_points = _check_decay_points(decay_points)
        self.decay_rate = _check_positive_real(decay_rate, "decay_rate")
        self.verbose = int(verbose)
        if unit not in UNITS:
            raise ValueError(f"`unit` must be one of {UNITS}; got {unit!r}.")
        self.unit = unit
        self.base_learning_rate: float | None = None
        self.decay_epochs: list[int] = []
        self.decay_iterations: list[int] = []
        self._epoch, self._passed = 0, 0

    def on_train_begin(self, logs: dict | None = None) -> None:
        epochs = self.params.get("epochs") if self.params else None
        if not epochs:
            raise ValueError("LearningRateDecayPoints needs the `epochs` passed to `fit`.")
        _settable_learning_rate(self.model.optimizer)
        self.base_learning_rate = None
        if self.unit == "epoch":
            self.decay_epochs = decay_epochs(self.decay_points, int(epochs))
            return
        steps = self.params.get("steps")
        if not steps:
            raise ValueError(
                "LearningRateDecayPoints(unit='iteration') needs the fit's iterations: pass "
                "`steps_per_epoch` to `fit`, or give data of a known length."
            )
        self.decay_iterations = decay_iterations(self.decay_points, int(steps) * int(epochs))

    def learning_rate_at(self, epoch: int) -> float:
        """Learning rate of the epoch with 0-based index ``epoch``."""
        if self.base_learning_rate is None:
            raise RuntimeError("The base learning rate is known once `fit` has started.")
        passed = sum(1 for d in self.decay_epochs if d <= epoch + 1)
        return self.base_learning_rate * self.decay_rate**passed

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch = epoch
        if self.unit == "iteration":
            return
        optimizer = self.model.optimizer
        if self.base_learning_rate is None:
            # Rate in the optimizer = rate of the epoch before this one.
            passed = sum(1 for d in self.decay_epochs if d <= epoch)
            self.base_learning_rate = _read_learning_rate(optimizer) / self.decay_rate**passed
        learning_rate = self.learning_rate_at(epoch)
        optimizer.learning_rate = learning_rate
        if self.verbose and epoch + 1 in self.decay_epochs:
            print(
                f"\nEpoch {epoch + 1}: LearningRateDecayPoints set the learning rate to "
                f"{learning_rate:.4g}."
            )

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        if self.unit == "epoch":
            return
        step = self._epoch * int(self.params["steps"]) + batch  # updates done before this one
        passed = sum(1 for b in self.decay_iterations if b < step)
        optimizer = self.model.optimizer
        if self.base_learning_rate is None:
            self.base_learning_rate = _read_learning_rate(optimizer) / self.decay_rate**passed
            self._passed = passed
        if batch == 0 or passed != self._passed:
            optimizer.learning_rate = self.base_learning_rate * self.decay_rate**passed
            self._passed = passed

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is not None:
            logs["learning_rate"] = _read_learning_rate(self.model.optimizer)

    def get_config(self) -> dict[str, Any]:
        return {
            "decay_points": list(self.decay_points),
            "decay_rate": self.decay_rate,
            "verbose": self.verbose,
            "unit": self.unit,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LearningRateDecayPoints:
        return cls(**config)
