"""One run of the recipe: train a simulation model on records as the network sees them.

:func:`train_simulator`:

1. Build :func:`~keras_mgu.sysid.models.network.build_simulator` (MGU, linear path;
   a learned initial state, or an encoder of the samples before each window)
   with the run's seed (:func:`build_run_model`).
2. Train it with the one trainer (:func:`~keras_mgu.sysid.training.trainer.fit_windows`)
   on :class:`~keras_mgu.sysid.training.windows.TrainingWindows`
   (:func:`training_windows`): Adam with decoupled weight decay (AdamW,
   :func:`run_optimizer`), the learning rate cut at fixed fractions of the
   run (:class:`~keras_mgu.callbacks.LearningRateDecayPoints`), for the
   config's iterations, or less under a user's time budget
   (:class:`~keras_mgu.callbacks.TimeBudget`; :func:`run_schedule`).
3. Every :meth:`~keras_mgu.sysid.RecipeConfig.validation_interval` iterations
   (``validation_every``, else ``iterations / validation_checks``), simulate the
   validation record free-run (:func:`validation_data`) and keep the weights
   with the best score (:class:`~keras_mgu.callbacks.WeightedEarlyStopping`).

:mod:`~keras_mgu.sysid.training.population` builds its branches from the same pieces.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np

from keras_mgu.callbacks import LearningRateDecayPoints, TimeBudget, WeightedEarlyStopping
from keras_mgu.datasets import Record
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.judging.noise_model import NoiseModel
from keras_mgu.sysid.models.network import build_simulator
from keras_mgu.sysid.models.signals import SignalPath
from keras_mgu.sysid.training.trainer import execution_block, fit_windows
from keras_mgu.sysid.training.windows import TrainingWindows

__all__ = [
    "DeferredModel",
    "RunResult",
    "build_run_model",
    "deferred_source",
    "run_block",
    "run_optimizer",
    "run_schedule",
    "shortest",
    "train_simulator",
    "training_windows",
    "validation_data",
]


class DeferredModel:
    """A run's network made when it is first read (:attr:`RunResult.model`).

    A model file's runs hold one each (:func:`keras_mgu.sysid.load`): a
    network is read from the file when a simulation, a prediction or an
    export first uses it, so that loading a file with many runs builds only
    those used.

    Args:
        make: Makes the network: ``make(source)``.
        source: What it is made from (a ``.keras`` archive's bytes); a
            model file written again copies it unchanged.
    """

    def __init__(self, make: Callable[[Any], keras.Model], source: Any) -> None:
        self.make, self.source = make, source

    def __repr__(self) -> str:
        return "DeferredModel(not made yet)"


class _Network:
    """:attr:`RunResult.model`: the network, made on first read from a :class:`DeferredModel`."""

    name = "_model"  # where a run keeps it

    def __get__(self, run: Any, owner: type | None = None) -> keras.Model:
        if run is None:  # read on the class: the field has no default
            raise AttributeError(self.name)
        value = run.__dict__[self.name]
        if isinstance(value, DeferredModel):
            value = run.__dict__[self.name] = value.make(value.source)
        return value

    def __set__(self, run: Any, value: Any) -> None:
        run.__dict__[self.name] = value


def deferred_source(run: RunResult) -> Any:
    """The :attr:`DeferredModel.source` of ``run``'s network while it is not made yet, else None."""
    value = run.__dict__.get(_Network.name)
    return value.source if isinstance(value, DeferredModel) else None


@dataclasses.dataclass
class RunResult:
    """One trained run: its model, seed, settings and validation scores.

    ``validation_score`` is the early-stopping score (the network's units);
    ``validation_rmse`` is the RMSE of the validation record alone in the
    estimation record's standardised output units, the same for every
    structure (with or without the linear model), and ``validation_error``
    the error it is the RMSE of (``(N_scored, n_outputs)``, what the selection
    rules read). ``structure`` and ``path`` say how the network's signals
    relate to the physical ones. Training returns a run without these four;
    :func:`identify` returns copies with them (``dataclasses.replace``).
    ``stopper`` (the early stopping, with the training history) is None in a
    run loaded from a model file (:func:`~keras_mgu.sysid.load`).
    ``horizon_rmse`` is the RMSE of the free run through the estimation
    record's held-out start from its first measured samples (NaN where none
    was held out; :mod:`~keras_mgu.sysid.choice.held_out`), and
    ``choice_error`` the error :func:`identify` chooses runs by (validation
    and that held-out start, equally weighted;
    :meth:`~keras_mgu.sysid.Identification.choice_error`), whose
    RMSE is :attr:`choice_rmse`. ``noise`` is the autoregression of its
    simulation residual that its k-step prediction adds
    (:mod:`~keras_mgu.sysid.judging.noise_model`; None: no correction), and
    ``window_horizon`` (lag classes) the longest horizon predicted from the
    measured lags instead, chosen on validation (None: every horizon; see
    :mod:`~keras_mgu.sysid.judging.prediction`). ``polynomial`` (the
    polynomial class) is its
    :class:`~keras_mgu.sysid.models.polynomial.PolynomialNarx`: the terms,
    coefficients and error reduction ratios. ``ran_off`` says where its free
    run left the estimation outputs' range (None: it did not, or it was not
    checked; :mod:`~keras_mgu.sysid.choice.runoff`): such a run is neither
    chosen nor averaged. ``edge`` (an
    :class:`~keras_mgu.sysid.judging.edges.EdgeCheck`; None: not checked) is
    its error on the validation record's samples at the estimation record's
    edges beside the least-squares ARX model's: with
    ``RecipeConfig(edge_guard=True)`` a nonlinear run that errs more there is
    not kept either (:attr:`not_kept`). ``stopped`` says where a class's first run was
    stopped at its racing checkpoint, far behind the best run finished
    (:mod:`~keras_mgu.sysid.choice.racing`; None: it ran all its
    iterations). A run read from a model file
    makes its ``model`` when it is first read (:class:`DeferredModel`).
    """

    model: keras.Model = _Network()
    seed: int
    validation_score: float
    best_iteration: int
    seconds: float
    stopper: WeightedEarlyStopping | None
    config: RecipeConfig | None = None
    validation_rmse: float = float("nan")
    validation_error: np.ndarray | None = None
    structure: str = "network"
    path: SignalPath | None = None
    validation_history: list = dataclasses.field(default_factory=list)
    horizon_rmse: float = float("nan")
    choice_error: np.ndarray | None = None
    noise: NoiseModel | None = None
    window_horizon: int | None = None
    polynomial: Any = None
    ran_off: str | None = None
    stopped: dict | None = None
    edge: Any = None

    @property
    def choice_rmse(self) -> float:
        """RMSE of :attr:`choice_error`; the validation RMSE where it is not known."""
        if self.choice_error is None:
            return self.validation_rmse
        value = float(np.sqrt(np.mean(np.square(self.choice_error))))
        return value if np.isfinite(value) else float("inf")

    @property
    def edge_worse(self) -> bool:
        """Whether this run is nonlinear and errs more than the ARX model at the record's
        edges (:attr:`edge`; the linear class is a linear model, not held to it)."""
        return self.edge is not None and self.edge.worse and self.structure != "linear"

    @property
    def not_kept(self) -> str | None:
        """Why the choice keeps this run out, or None: its free run ran off
        (:attr:`ran_off`), or :attr:`edge_worse` where its config asks for the
        edge guard (``RecipeConfig.edge_guard``)."""
        if self.ran_off is not None:
            return f"ran off ({self.ran_off})"
        if self.edge_worse and getattr(self.config, "edge_guard", False):
            return f"errs more than the ARX model at the record's edges ({self.edge.describe()})"
        return None


def _check_record(record: Any, what: str, min_samples: int = 2) -> Record:
    if not isinstance(record, Record):
        raise TypeError(f"`{what}` must be a keras_mgu.datasets.Record; got {type(record)}.")
    if record.n_samples < min_samples:
        raise ValueError(
            f"The {what} record has {record.n_samples} samples; the recipe needs at least "
            f"{min_samples}."
        )
    return record


def shortest(record: Record) -> int:
    """Samples of the shortest experiment of ``record``."""
    return min(stop - start for start, stop in record.experiments)


def validation_data(estimation: Record, validation: Record, config: RecipeConfig):
    """``(x, y, weights)``: one sequence whose weighted free-run RMSE is the validation score.

    A continuing validation record is simulated after the estimation record
    from the learned initial state, and the score is the RMSE over both: the
    free-run error of the whole experiment, whose last part training never
    saw. A separate validation record is simulated on its own: with the
    encoder, from the state its first ``n_initial`` samples give (the rest
    scored); else from the learned state, its first ``washout`` samples
    unscored.
    """
    as32 = lambda a: np.asarray(a, dtype="float32")[None]  # noqa: E731
    if config.validation_continues:
        u = np.concatenate([estimation.u, validation.u])
        y = np.concatenate([estimation.y, validation.y])
    else:
        u, y = validation.u, validation.y
    if config.initial_state == "encoder":
        lag = config.n_initial
        if len(u) <= lag:
            raise ValueError(
                f"The validation record has {len(u)} samples; the encoder reads {lag}, so it "
                f"needs more than {lag}."
            )
        x = (as32(u[:lag]), as32(y[:lag]), as32(u[lag:]))
        return x, as32(y[lag:]), np.ones((1, len(u) - lag), dtype="float32")
    weights = np.ones(len(u), dtype="float32")
    if not config.validation_continues:
        weights[: min(config.washout, len(u) - 1)] = 0.0
    return as32(u), as32(y), weights[None]


def training_windows(estimation: Record, config: RecipeConfig, seed: int) -> TrainingWindows:
    history = config.n_initial if config.initial_state == "encoder" else 0
    return TrainingWindows(
        estimation.u, estimation.y, config.window, config.batch_size,
        config.steps_per_epoch, config.washout, seed=seed, history=history,
        boundaries=estimation.boundaries,
    )  # fmt: skip


def build_run_model(estimation: Record, config: RecipeConfig, seed: int) -> keras.Model:
    """The simulator a run of ``config`` trains, its weights seeded with ``seed``."""
    encoder = config.n_initial if config.initial_state == "encoder" else None
    return build_simulator(
        estimation.n_inputs, estimation.n_outputs, config.units, config.linear_path,
        seed=seed, cell=config.cell, encoder_lag=encoder,
    )  # fmt: skip


def run_optimizer(config: RecipeConfig) -> keras.optimizers.Optimizer:
    """AdamW with the config's learning rate, decoupled weight decay and ``clipnorm``."""
    return keras.optimizers.AdamW(
        config.learning_rate, weight_decay=config.weight_decay, clipnorm=config.clipnorm
    )


def run_schedule(
    config: RecipeConfig, time_budget: float | None
) -> tuple[LearningRateDecayPoints, TimeBudget | None, int]:
    """``(decay, budget, epochs)``: the decay points, the time budget (or None), ``fit``'s epochs.

    ``time_budget`` (else ``config.time_budget``) gives a
    :class:`~keras_mgu.callbacks.TimeBudget` that shortens the schedule with
    the run; without one the run does all its iterations.
    """
    decay = LearningRateDecayPoints(config.decay_points, decay_rate=config.decay_rate)
    seconds = time_budget or config.time_budget
    budget = None if seconds is None else TimeBudget(seconds, decay)
    return decay, budget, max(1, -(-config.iterations // config.steps_per_epoch))


def run_block(config: RecipeConfig) -> int:
    """Training steps per Keras execution for a network run (or population) of ``config``:
    every validation check and epoch start on a block's end (:func:`execution_block`)."""
    return execution_block(config.validation_interval(), config.steps_per_epoch)


def train_simulator(
    estimation: Record,
    validation: Record,
    config: RecipeConfig | None = None,
    seed: int = 0,
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    time_budget: float | None = None,
    race: Any = None,
) -> RunResult:
    """Train one simulation model on records as the network sees them (see :func:`identify`).

    Args:
        estimation: Record to train on.
        validation: Record to score for early stopping and restart selection.
        config: The recipe's settings (default :class:`RecipeConfig`; open
            fields are resolved for ``estimation``).
        seed: Seeds the weights and the window draws.
        verbose: ``model.fit``'s verbosity (``2``: one line per epoch).
        callbacks: Further Keras callbacks for ``fit``.
        time_budget: A cap on this run's wall time in seconds (default: the
            config's; ``None`` there: no cap).
        race: A :class:`~keras_mgu.sysid.choice.racing.RaceCheckpoint` that
            may stop the run at its checkpoint, or None.
    """
    n = _check_record(estimation, "estimation").n_samples
    config = (config or RecipeConfig()).resolved(n, shortest_experiment=shortest(estimation))
    _check_record(validation, "validation", min_samples=1)
    model = build_run_model(estimation, config, seed)
    stopper = WeightedEarlyStopping(
        dict(config.score_weights),
        validation_data=validation_data(estimation, validation, config),
        validation_frequency=config.validation_interval(),
        restore_best_weights=True,
    )
    decay, budget, epochs = run_schedule(config, time_budget)
    if race is not None:
        race.watch(lambda: [stopper.best_score], config.iterations, config.validation_interval())
        callbacks = (*callbacks, race)
    seconds = fit_windows(
        model, training_windows(estimation, config, seed), run_optimizer(config), stopper, decay,
        epochs=epochs, budget=budget, callbacks=callbacks, verbose=verbose,
        steps_per_execution=run_block(config),
    )  # fmt: skip
    return RunResult(
        model, seed, float(stopper.best_score), int(stopper.best_iteration or 0), seconds,
        stopper, config,
    )  # fmt: skip
