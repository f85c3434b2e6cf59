"""The one trainer: a model fitted on windows of a record, with the package's callbacks.

Every model class trains here (:func:`fit_windows`): the network classes on
windows that start from a learned or encoded state
(:func:`~keras_mgu.sysid.training.run.train_simulator`), the lag classes on
windows that start from measured outputs
(:func:`~keras_mgu.sysid.training.lag_run.train_lag_model`). A call compiles
the model with its optimiser, the MSE loss and an RMSE metric (``rmse``, so
validation reads ``val_rmse``) and fits it under
:class:`~keras_mgu.callbacks.LearningRateDecayPoints` (the learning rate's
decays) and :class:`~keras_mgu.callbacks.WeightedEarlyStopping` (the
validation checks, and the best weights kept; for several runs trained at
once, :mod:`~keras_mgu.sysid.training.population`, one per run).

Keras runs ``k`` training steps per call of its train function and calls
the callbacks once after them (``compile(steps_per_execution=k)``): on
TensorFlow the ``k`` steps run in one graph call, on every backend the
callbacks no longer read the logs (a wait for the device) after each step.
:func:`execution_block` chooses ``k`` so that every validation check and
epoch start falls on a block's end: the same steps in the same order, the
same checks, so the same model as one step per call (a decay set per
iteration moves to the first block start past its boundary). Keras's
PyTorch trainer runs one step per call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import keras

from keras_mgu.callbacks import LearningRateDecayPoints

__all__ = ["MAX_BLOCK", "execution_block", "fit_windows"]

#: The most training steps of one Keras execution (the progress line and a time
#: budget see the run once per block).
MAX_BLOCK = 50


def execution_block(*marks: int, cap: int = MAX_BLOCK) -> int:
    """Training steps per execution on which every one of ``marks`` falls: the largest
    divisor of their greatest common divisor that is at most ``cap``.

    ``marks``: iteration counts every block end must be able to meet (the
    validation interval, the epoch's steps); a mark below 1 is ignored.

    >>> execution_block(20, 100)
    20
    >>> execution_block(5000, 5000)
    50
    """
    if cap < 1:
        raise ValueError(f"`cap` must be >= 1; received {cap}.")
    common = math.gcd(*(int(m) for m in marks if int(m) >= 1)) or 1
    return max(d for d in range(1, min(common, cap) + 1) if common % d == 0)


def fit_windows(
    model: keras.Model,
    windows: keras.utils.PyDataset | tuple[Any, Any],
    optimizer: keras.optimizers.Optimizer,
    stopper: keras.callbacks.Callback,
    decay: LearningRateDecayPoints | None = None,
    *,
    loss: Any = "mse",
    metrics: Sequence[keras.metrics.Metric] | None = None,
    epochs: int = 1,
    steps_per_epoch: int | None = None,
    batch_size: int | None = None,
    budget: keras.callbacks.Callback | None = None,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    verbose: int | str = 0,
    steps_per_execution: int = 1,
) -> float:
    """Fit ``model`` on ``windows``; returns the seconds ``fit`` took.

    Args:
        model: The simulator to train (its inputs those of ``windows``).
        windows: A ``keras.utils.PyDataset`` of ``(x, y)`` batches, or arrays
            ``(x, y)`` whose rows are windows, taken in order (``batch_size``
            a batch; draw them at random before).
        optimizer: The optimiser (a float learning rate, which ``decay`` sets).
        stopper: The validation checks
            (:class:`~keras_mgu.callbacks.WeightedEarlyStopping`, or a
            population's :class:`~keras_mgu.callbacks.PopulationEarlyStopping`);
            the model ends with its best weights where it restores them.
        decay: The learning rate's decays, or None for a constant rate.
        loss, metrics: ``compile``'s loss and weighted metrics (default: MSE
            and the RMSE named ``rmse``).
        epochs, steps_per_epoch: ``fit``'s.
        batch_size: Windows of a batch, for arrays.
        budget: A :class:`~keras_mgu.callbacks.TimeBudget`, or None.
        callbacks: Further Keras callbacks.
        verbose: ``fit``'s verbosity.
        steps_per_execution: Training steps per call of Keras's train
            function (:func:`execution_block` of the run's checks and epochs).
    """
    if metrics is None:
        metrics = [keras.metrics.RootMeanSquaredError(name="rmse")]
    if keras.backend.backend() == "torch":
        steps_per_execution = 1  # Keras's PyTorch trainer runs one step per call
    model.compile(
        optimizer, loss, weighted_metrics=list(metrics), steps_per_execution=steps_per_execution
    )
    x, y = (windows, None) if isinstance(windows, keras.utils.PyDataset) else windows
    scheduled = [c for c in (decay, budget) if c is not None]
    start = time.perf_counter()
    model.fit(
        x, y, batch_size=batch_size, epochs=epochs, steps_per_epoch=steps_per_epoch,
        shuffle=False,  # windows are drawn at random
        verbose=verbose, callbacks=[*scheduled, stopper, *callbacks],
    )  # fmt: skip
    return time.perf_counter() - start
