"""``PopulationEarlyStopping``: one early stopping per branch of a model that trains several.

A *population* model holds ``K`` independent branches, each a Keras model
with its own inputs and one output::

    [x_1, ..., x_K] -> [y_1, ..., y_K],   loss = sum_k loss_k(y_k)

Because the branches share no weights, the gradient of the sum with respect
to branch ``k``'s weights is the gradient of ``loss_k`` alone, so one ``fit``
trains ``K`` runs at once. This callback gives each branch what
:class:`~keras_mgu.callbacks.WeightedEarlyStopping` gives a single model: its
own checks, score, best weights, patience and history. A check simulates the
validation inputs of every branch in one ``predict_on_batch`` and scores
branch ``k`` by its weighted RMSE::

    val_rmse_k = sqrt( sum_t w_t mean_j (yhat_k[t, j] - y_k[t, j])^2 / sum_t w_t )

the value ``keras.metrics.RootMeanSquaredError`` gives with sample weights
``w``. A branch whose patience runs out stops being checked (its best weights
are kept); training stops when every branch has stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import keras
import numpy as np

from keras_mgu.callbacks.early_stopping import WeightedEarlyStopping
from keras_mgu.kernels import native_inference

__all__ = ["PopulationEarlyStopping", "flat_inputs", "weighted_rmse"]


def weighted_rmse(y_pred: np.ndarray, y_true: np.ndarray, weights: np.ndarray) -> float:
    """RMSE of ``(batch, steps, channels)`` arrays, samples weighted by ``(batch, steps)``."""
    squared = np.mean((np.asarray(y_pred, np.float64) - y_true) ** 2, axis=-1)
    total = float(np.sum(weights))
    if total <= 0:
        raise ValueError("The validation weights sum to zero: no sample is scored.")
    return float(np.sqrt(np.sum(weights * squared) / total))


def flat_inputs(xs: Any) -> list:
    """The branches' inputs (each an array or a tuple of arrays) as one flat list."""
    flat = []
    for x in xs:
        flat += list(x) if isinstance(x, (tuple, list)) else [x]
    return flat


class _BranchStopping(WeightedEarlyStopping):
    """A branch's :class:`WeightedEarlyStopping`, its ``val_*`` values handed in."""

    def __init__(self, source: Any, index: int, **kwargs) -> None:
        self._source, self._index = source, index
        super().__init__(**kwargs)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the population it was checked in (see the parent)."""
        return {**super().__getstate__(), "_source": None}

    def _check_validation_setup(self, validation_data: Any) -> None:
        return None  # the population callback supplies the values

    def _validate(self) -> dict[str, float]:
        return self._source.values(self._index)


class PopulationEarlyStopping(keras.callbacks.Callback):
    """Early stopping for each branch of a population model (see the module).

    Args:
        branches: The ``K`` branch models, in the order of the population
            model's outputs; or, for a model that holds the branches' weights
            itself, any objects with a ``name`` and the branches'
            ``get_weights()`` / ``set_weights()`` (such as
            :class:`keras_mgu.sysid.training.grouped.RunView`).
        validation_data: Per branch, ``(x, y, sample_weight)``: ``x`` the
            branch's inputs (an array or a tuple of arrays), ``y``
            ``(batch, steps, channels)``, ``sample_weight`` ``(batch, steps)``.
        weights: Score weights as for :class:`WeightedEarlyStopping`; names
            are ``val_rmse`` and ``loss`` (the branch's training loss).
        validation_frequency: Check every ``N`` iterations (and at the first).
        patience: ``None`` or the checks without improvement after which a
            branch stops.
        restore_best_weights: Restore each branch's best weights at the end.
        predict: ``None`` (the population model's ``predict_on_batch`` on the
            branches' flat validation inputs), or a function from the
            branches' validation inputs (a list, one per branch) to their
            predictions (a list of ``(batch, steps, channels)`` arrays), for
            a population model that computes its branches another way.

    Attributes:
        members: The branches' :class:`WeightedEarlyStopping` objects, with
            their ``best_score``, ``best_iteration``, ``best_weights`` and
            ``history`` after ``fit``.
    """

    def __init__(
        self,
        branches: Sequence[keras.Model],
        validation_data: Sequence[tuple],
        weights: Mapping[str, float],
        validation_frequency: int,
        patience: int | None = None,
        restore_best_weights: bool = True,
        predict: Callable[[list], Sequence] | None = None,
    ) -> None:
        super().__init__()
        if len(branches) != len(validation_data) or not branches:
            raise ValueError(
                f"Give one validation (x, y, sample_weight) per branch; received "
                f"{len(branches)} branches and {len(validation_data)} validation sets."
            )
        unknown = sorted(set(weights) - {"val_rmse", "loss"})
        if unknown:
            raise ValueError(
                f"A population scores its branches by 'val_rmse' and 'loss'; received {unknown}."
            )
        if isinstance(validation_frequency, bool) or not isinstance(validation_frequency, int):
            raise ValueError(
                f"`validation_frequency` must be an int >= 1; received {validation_frequency!r}."
            )
        self.branches = list(branches)
        self.validation_data = [tuple(v) for v in validation_data]
        self.members = [
            _BranchStopping(
                self,
                k,
                weights=weights,
                validation_frequency=validation_frequency,
                patience=patience,
                restore_best_weights=restore_best_weights,
            )  # fmt: skip
            for k in range(len(branches))
        ]
        for member, branch in zip(self.members, self.branches, strict=True):
            member.set_model(branch)
        self._values: list[float] | None = None
        self._predict = predict

    def values(self, index: int) -> dict[str, float]:
        """``{"val_rmse": ...}`` of branch ``index`` at the current check."""
        if self._values is None:
            self._values = self._score_all()
        return {"val_rmse": self._values[index]}

    def _score_all(self) -> list[float]:
        with native_inference():  # never exported: the compiled loops (TensorFlow)
            if self._predict is not None:
                predictions = self._predict([x for x, _, _ in self.validation_data])
            else:
                predictions = self.model.predict_on_batch(
                    flat_inputs(x for x, _, _ in self.validation_data)
                )
        if not isinstance(predictions, (list, tuple)):
            predictions = [predictions]
        return [
            weighted_rmse(keras.ops.convert_to_numpy(p), y, w)
            for p, (_, y, w) in zip(predictions, self.validation_data, strict=True)
        ]

    def _active(self) -> list[tuple[int, WeightedEarlyStopping]]:
        return [(k, m) for k, m in enumerate(self.members) if m.stopped_epoch is None]

    def on_train_begin(self, logs: dict | None = None) -> None:
        for member in self.members:
            member.set_params(self.params)
            member.on_train_begin(logs)

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        for _, member in self._active():
            member.on_epoch_begin(epoch, logs)

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        for k, member in self._active():
            member.on_train_batch_end(batch, self._branch_logs(k, logs))
        self._values = None
        if not self._active():
            self.model.stop_training = True

    def _branch_logs(self, k: int, logs: dict) -> dict:
        """The branch's training loss, from Keras's per-output loss (or the total for one)."""
        names = [f"{self.branches[k].name}_loss"]  # a grouped model's per-run metric
        if len(self.model.output_names) == len(self.members):
            names.insert(0, f"{self.model.output_names[k]}_loss")
        for name in names:
            if name in logs:
                return {"loss": logs[name]}
        return {"loss": logs["loss"]} if len(self.members) == 1 and "loss" in logs else {}

    def on_train_end(self, logs: dict | None = None) -> None:
        for member in self.members:
            member.on_train_end(logs)
