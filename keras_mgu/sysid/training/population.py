"""Population training: several runs of the recipe trained at once, in one Keras model.

``K`` runs (each a :class:`PlannedRun`: records, resolved settings and seed)
become the branches of one model::

    inputs  [x_1, ..., x_K]     (each run's inputs, as train_simulator feeds them)
    outputs [y_1, ..., y_K]     loss = sum_k mse_k

Each branch is the simulator :func:`~keras_mgu.sysid.training.run.train_simulator`
would build with that seed, and is trained on that run's own window draws.
The branches share no weights, so the gradient for branch ``k`` is the
gradient of its own loss; AdamW's update is elementwise and ``clipnorm``
clips each variable on its own. Every branch therefore follows the path its
run follows alone, up to float rounding, while one training step (one
dispatch, one compiled function, one pass of Keras's loop) serves all ``K``.
Each branch keeps its own early stopping, score, best weights and history
(:class:`~keras_mgu.callbacks.PopulationEarlyStopping`).

Runs of the same settings on the same records differ only in their seed, so
their simulators share one structure: they are then trained as one
:class:`~keras_mgu.sysid.training.grouped.GroupedSimulators` model (inputs, targets and
weights stacked on axis 1, loss ``sum_k mse_k``), whose MGU layers run every
run in one native loop call; the numbers are those of separate branches, up
to float rounding. Runs that differ in structure become separate branches.

The optimiser and its schedule are shared, so the members of a population
must agree on :data:`SHARED_SETTINGS`; :func:`population_groups` splits
runs into groups that do. Window, batch, units, cell and initial state may
differ from branch to branch.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from keras_mgu.callbacks.population import PopulationEarlyStopping, flat_inputs
from keras_mgu.datasets import Record
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.training import run
from keras_mgu.sysid.training.grouped import GroupedSimulators, grouped_unsupported_reason
from keras_mgu.sysid.training.trainer import fit_windows

__all__ = [
    "SHARED_SETTINGS", "PlannedRun", "groupable", "population_groups", "stack_inputs",
    "train_population",
]  # fmt: skip

#: Settings the members of one population share (one optimiser, one schedule).
SHARED_SETTINGS = (
    "iterations", "steps_per_epoch", "learning_rate", "weight_decay", "clipnorm",
    "decay_points", "decay_rate", "validation_checks", "validation_every", "score_weights",
    "time_budget",
)  # fmt: skip


@dataclasses.dataclass
class PlannedRun:
    """One run of a population: the records as its network sees them, its settings, its seed.

    ``config`` must be resolved (:meth:`RecipeConfig.resolved`).
    """

    estimation: Record
    validation: Record
    config: RecipeConfig
    seed: int


def _shared_key(config: RecipeConfig) -> tuple:
    return tuple(
        tuple(sorted(v.items())) if isinstance(v, dict) else v
        for v in (getattr(config, name) for name in SHARED_SETTINGS)
    )


def population_groups(configs: Sequence[RecipeConfig]) -> list[list[int]]:
    """Indices of ``configs`` grouped by :data:`SHARED_SETTINGS`, in order of first appearance."""
    groups: dict[tuple, list[int]] = {}
    for i, config in enumerate(configs):
        groups.setdefault(_shared_key(config), []).append(i)
    return list(groups.values())


class _PopulationBatches(keras.utils.PyDataset):
    """Batch ``i`` of every member's windows, as the population model's inputs and targets."""

    def __init__(self, windows: Sequence[keras.utils.PyDataset]) -> None:
        super().__init__()
        self.windows = list(windows)

    def __len__(self) -> int:
        return len(self.windows[0])

    def on_epoch_end(self) -> None:
        for w in self.windows:
            w.on_epoch_end()

    def members(self, index: int) -> tuple:
        """``(xs, ys, ws)``: each member's batch ``index``."""
        return tuple(zip(*(w[index] for w in self.windows), strict=True))

    def __getitem__(self, index: int) -> tuple:
        xs, ys, ws = self.members(index)
        return tuple(flat_inputs(xs)), ys, ws


def stack_inputs(xs: Sequence) -> object:
    """The runs' inputs (each an array or a tuple of arrays) stacked on axis 1."""
    if isinstance(xs[0], (tuple, list)):
        return tuple(np.stack(parts, axis=1) for parts in zip(*xs, strict=True))
    return np.stack(xs, axis=1)


class _GroupedBatches(_PopulationBatches):
    """Batch ``i`` of every member's windows, stacked on axis 1 for the grouped model."""

    def __getitem__(self, index: int) -> tuple:
        xs, ys, ws = self.members(index)
        return stack_inputs(xs), np.stack(ys, axis=1), np.stack(ws, axis=1)


class _MemberLoss(keras.metrics.Mean):
    """Run ``index``'s training loss in a grouped model: its weighted MSE, batch by batch.

    The value Keras logs as a separate branch's loss (``sum w e^2 / (batch * steps)``).
    """

    def __init__(self, index: int, name: str) -> None:
        super().__init__(name=name)
        self.index = index

    def update_state(self, y_true, y_pred, sample_weight=None):
        k = self.index
        squared = ops.mean(ops.square(y_pred[:, k] - ops.cast(y_true[:, k], y_pred.dtype)), -1)
        if sample_weight is not None:
            squared = squared * ops.cast(sample_weight[:, k], squared.dtype)
        return super().update_state(ops.sum(squared) / ops.cast(ops.size(squared), squared.dtype))


def _summed_mse(count: int):
    """``sum_k mse_k`` of a grouped model's ``(batch, K, steps, outputs)`` (Keras then averages)."""

    def summed_mse(y_true, y_pred):
        return count * ops.mean(ops.square(y_pred - ops.cast(y_true, y_pred.dtype)), axis=-1)

    return summed_mse


def _grouped_model(branches: Sequence[keras.Model]) -> tuple[keras.Model, GroupedSimulators]:
    count = len(branches)
    inputs = [keras.Input((count, *t.shape[1:]), name=t.name) for t in branches[0].inputs]
    layer = GroupedSimulators(branches, name="runs")
    outputs = layer(inputs if len(inputs) > 1 else inputs[0])
    return keras.Model(inputs, outputs, name="population"), layer


def _grouped_predict(model: keras.Model):
    """The runs' validation predictions from one call of the grouped model."""

    def predict(xs: Sequence) -> list:
        y = keras.ops.convert_to_numpy(model.predict_on_batch(stack_inputs(list(xs))))
        return [y[:, k] for k in range(y.shape[1])]

    return predict


def groupable(members: Sequence[PlannedRun], branches: Sequence[keras.Model]) -> bool:
    """Whether ``members`` train as one grouped model.

    They do when they share one config and one set of records (so their
    simulators share one structure, see
    :func:`~keras_mgu.sysid.training.grouped.grouped_unsupported_reason`) and the
    config clips no gradient norm (a clip of a stacked weight would see every
    run's slice at once).
    """
    first = members[0]
    alike = all(
        m.config == first.config and m.estimation is first.estimation
        and m.validation is first.validation
        for m in members
    )  # fmt: skip
    return (
        len(members) > 1 and alike and first.config.clipnorm is None
        and grouped_unsupported_reason(branches) is None
    )  # fmt: skip


def _population_model(branches: Sequence[keras.Model]) -> keras.Model:
    inputs, outputs = [], []
    for k, branch in enumerate(branches):
        own = [keras.Input(t.shape[1:], name=f"run_{k}_{t.name}") for t in branch.inputs]
        inputs += own
        outputs.append(branch(own if len(own) > 1 else own[0]))
    return keras.Model(inputs, outputs, name="population")


@dataclasses.dataclass
class _Setup:
    """A compiled population model and how its runs are read.

    ``runs``: what each run's early stopping reads and restores weights
    through (its simulator, or its view of a grouped model's weights);
    ``predict``: the validation predictor (None: the model's own);
    ``finish``: copies the trained weights into the simulators.
    """

    model: keras.Model
    runs: list
    loss: Any
    metrics: list
    predict: Callable | None = None
    finish: Callable[[], None] | None = None


def _population_setup(
    branches: Sequence[keras.Model], config: RecipeConfig, grouped: bool
) -> _Setup:
    if not grouped:
        population = _population_model(branches)
        return _Setup(population, list(branches), ["mse"] * len(branches), [])
    population, layer = _grouped_model(branches)
    losses = []
    if "loss" in config.score_weights:
        losses = [_MemberLoss(k, f"{b.name}_loss") for k, b in enumerate(branches)]
    views = [layer.member(k) for k in range(len(branches))]
    return _Setup(
        population, views, _summed_mse(len(branches)), losses, _grouped_predict(population),
        layer.write_back,
    )  # fmt: skip


def train_population(
    members: Sequence[PlannedRun],
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    time_budget: float | None = None,
    race: Any = None,
) -> list:
    """Train ``members`` at once; one :class:`~keras_mgu.sysid.training.run.RunResult` each.

    Args:
        members: Runs that agree on :data:`SHARED_SETTINGS`.
        verbose: ``model.fit``'s verbosity.
        callbacks: Further Keras callbacks for the population's ``fit``.
        time_budget: A cap on the population's wall time in seconds
            (default: the members' config's; ``None`` there: no cap).
        race: A :class:`~keras_mgu.sysid.choice.racing.RaceCheckpoint` that
            may stop the population at its checkpoint (every member behind),
            or None.

    Each result's ``seconds`` is the population's wall time.
    """
    members = list(members)
    if not members:
        raise ValueError("A population needs at least one member.")
    if len(population_groups([m.config for m in members])) > 1:
        raise ValueError(
            f"The members of a population must agree on {', '.join(SHARED_SETTINGS)}; "
            "split them with population_groups()."
        )
    config = members[0].config
    branches = []
    for k, m in enumerate(members):
        # Unique variable paths: the PyTorch backend tracks a model's weights by path.
        with keras.name_scope(f"run_{k}"):
            branches.append(run.build_run_model(m.estimation, m.config, m.seed))
    names = [b.name for b in branches]
    for k, branch in enumerate(branches):
        branch.name = f"run_{k}"  # unique names inside the population model
    try:
        grouped = groupable(members, branches)
        setup = _population_setup(branches, config, grouped)
        stopper = PopulationEarlyStopping(
            setup.runs,
            [run.validation_data(m.estimation, m.validation, m.config) for m in members],
            dict(config.score_weights),
            validation_frequency=config.validation_interval(),
            predict=setup.predict,
        )
        decay, budget, epochs = run.run_schedule(config, time_budget)
        if race is not None:
            race.watch(
                lambda: [s.best_score for s in stopper.members], config.iterations,
                config.validation_interval(),
            )  # fmt: skip
            callbacks = (*callbacks, race)
        windows = [run.training_windows(m.estimation, m.config, m.seed) for m in members]
        batches = (_GroupedBatches if grouped else _PopulationBatches)(windows)
        start = time.perf_counter()
        fit_windows(
            setup.model, batches, run.run_optimizer(config), stopper, decay, loss=setup.loss,
            metrics=setup.metrics, epochs=epochs, budget=budget, callbacks=callbacks,
            verbose=verbose,
            steps_per_execution=run.run_block(config),
        )  # fmt: skip
        if setup.finish is not None:
            setup.finish()
        seconds = time.perf_counter() - start
    finally:
        for branch, name in zip(branches, names, strict=True):
            branch.name = name
    return [
        run.RunResult(
            branch, m.seed, float(s.best_score), int(s.best_iteration or 0), seconds, s, m.config
        )
        for branch, m, s in zip(branches, members, stopper.members, strict=True)
    ]
