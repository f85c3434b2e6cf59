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
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import keras

from keras_mgu.callbacks import LearningRateDecayPoints

__all__ = ["fit_windows"]


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
    """
    if metrics is None:
        metrics = [keras.metrics.RootMeanSquaredError(name="rmse")]
    model.compile(optimizer, loss, weighted_metrics=list(metrics))
    x, y = (windows, None) if isinstance(windows, keras.utils.PyDataset) else windows
    scheduled = [c for c in (decay, budget) if c is not None]
    start = time.perf_counter()
    model.fit(
        x, y, batch_size=batch_size, epochs=epochs, steps_per_epoch=steps_per_epoch,
        shuffle=False,  # windows are drawn at random
        verbose=verbose, callbacks=[*scheduled, stopper, *callbacks],
    )  # fmt: skip
    return time.perf_counter() - start
