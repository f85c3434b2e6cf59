"""Population training: several runs of the recipe trained at once, in one Keras model.

``K`` runs (each a :class:`Member`: records, resolved settings and seed)
become the branches of one model::

    inputs  [x_1, ..., x_K]     (each run's inputs, as train_simulator feeds them)
    outputs [y_1, ..., y_K]     loss = sum_k mse_k

Each branch is the simulator :func:`~keras_mgu.sysid.run.train_simulator`
would build with that seed, and is trained on that run's own window draws.
The branches share no weights, so the gradient for branch ``k`` is the
gradient of its own loss; AdamW's update is elementwise and ``clipnorm``
clips each variable on its own. Every branch therefore follows the path its
run follows alone, up to float rounding, while one training step (one
dispatch, one compiled function, one pass of Keras's loop) serves all ``K``.
Each branch keeps its own early stopping, score, best weights and history
(:class:`~keras_mgu.callbacks.PopulationEarlyStopping`).

The optimiser and its schedule are shared, so the members of a population
must agree on :data:`SHARED_SETTINGS`; :func:`population_groups` splits
runs into groups that do. Window, batch, units, cell and initial state may
differ from branch to branch.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import keras

from keras_mgu.callbacks.population import PopulationEarlyStopping, flat_inputs
from keras_mgu.datasets import Record
from keras_mgu.sysid import run
from keras_mgu.sysid.config import RecipeConfig

__all__ = ["SHARED_SETTINGS", "Member", "population_groups", "train_population"]

#: Settings the members of one population share (one optimiser, one schedule).
SHARED_SETTINGS = (
    "iterations", "steps_per_epoch", "learning_rate", "weight_decay", "clipnorm",
    "decay_points", "decay_rate", "validation_checks", "score_weights", "time_budget",
)  # fmt: skip


@dataclasses.dataclass
class Member:
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

    def __getitem__(self, index: int) -> tuple:
        xs, ys, ws = zip(*(w[index] for w in self.windows), strict=True)
        return tuple(flat_inputs(xs)), ys, ws


def _population_model(branches: Sequence[keras.Model]) -> keras.Model:
    inputs, outputs = [], []
    for k, branch in enumerate(branches):
        own = [keras.Input(t.shape[1:], name=f"run_{k}_{t.name}") for t in branch.inputs]
        inputs += own
        outputs.append(branch(own if len(own) > 1 else own[0]))
    return keras.Model(inputs, outputs, name="population")


def train_population(
    members: Sequence[Member],
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    time_budget: float | None = None,
) -> list:
    """Train ``members`` at once; one :class:`~keras_mgu.sysid.run.RunResult` each.

    Args:
        members: Runs that agree on :data:`SHARED_SETTINGS`.
        verbose: ``model.fit``'s verbosity.
        callbacks: Further Keras callbacks for the population's ``fit``.
        time_budget: Seconds for the whole population (default: the
            members' budget).

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
        population = _population_model(branches)
        population.compile(run.run_optimizer(config), ["mse"] * len(branches))
        stopper = PopulationEarlyStopping(
            branches,
            [run.validation_data(m.estimation, m.validation, m.config) for m in members],
            dict(config.score_weights),
            validation_frequency=max(1, config.iterations // config.validation_checks),
        )
        schedule, budget, epochs = run.run_schedule(config, time_budget)
        windows = [run.training_windows(m.estimation, m.config, m.seed) for m in members]
        start = time.perf_counter()
        population.fit(
            _PopulationBatches(windows), epochs=epochs, verbose=verbose, shuffle=False,
            callbacks=[schedule, budget, stopper, *callbacks],
        )  # fmt: skip
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

