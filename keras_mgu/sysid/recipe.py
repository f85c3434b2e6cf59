"""The identification recipe: restarts of both structures, the choice on validation.

:func:`identify` standardises the data (statistics of the estimation record
only), fits a linear model first (:mod:`~keras_mgu.sysid.linear`), derives
the settings the config leaves open from the record
(:mod:`~keras_mgu.sysid.config`), trains ``restarts`` runs from different
seeds (:mod:`~keras_mgu.sysid.run`; where the linear model explains the
validation record, of both structures: the network on its residual and the
network alone), as populations (:mod:`~keras_mgu.sysid.population`) or one
by one, and keeps the one with the best *validation* score, or an average of
runs (:mod:`~keras_mgu.sysid.selection`). The test record is never seen by
any of it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import keras
import numpy as np

from keras_mgu.datasets import Normalizer, Record, SysIdData
from keras_mgu.sysid.capacity import choose_capacity
from keras_mgu.sysid.config import DEFAULT_MODEL_CLASSES, RecipeConfig
from keras_mgu.sysid.identification import Identification
from keras_mgu.sysid.lag_classes import LAG_CLASSES, lag_config, lag_orders, train_lag_run
from keras_mgu.sysid.linear import LINEAR_SHARE_MAX, LinearModel, select_linear_model
from keras_mgu.sysid.noise_model import fit_noise_model
from keras_mgu.sysid.output_error import build_output_error
from keras_mgu.sysid.population import PlannedRun, population_groups, train_population
from keras_mgu.sysid.run import RunResult, shortest, train_simulator
from keras_mgu.sysid.selection import describe_members, equal_weights, error_rmse, select
from keras_mgu.sysid.signals import SignalPath

__all__ = [
    "RunResult",
    "Structure",
    "identify",
    "model_classes",
    "selection_pool",
    "structures",
    "train_simulator",
]


def network_records(path: SignalPath, data: SysIdData, continues: bool) -> tuple[Record, Record]:
    """The estimation and validation records as the network sees them."""
    est, val = data.estimation, data.validation
    if not continues:
        return path.record(est), path.record(val)
    joined = path.record(
        Record(
            np.concatenate([est.u, val.u]), np.concatenate([est.y, val.y]), est.ts,
            boundaries=est.boundaries,
        )
    )  # fmt: skip
    return joined.slice(0, est.n_samples), joined.slice(est.n_samples, None)


@dataclasses.dataclass
class Structure:
    """One model class: the network alone, on a linear model's residual, NARX or the loop.

    Attributes:
        name: One of :data:`~keras_mgu.sysid.config.MODEL_CLASSES`.
        path: Physical signals to the network's and back.
        config: The settings resolved for it.
        linear: The ARX model a lag class (``"narx"``, ``"loop"``,
            ``"linear"``) starts from (standardised signals); None for the
            others.
        anchor: The ARX model of the order chosen on validation, which NARX
            and the loop fade to outside the estimation range; None for the
            others.
    """

    name: str
    path: SignalPath
    config: RecipeConfig
    linear: LinearModel | None = None
    anchor: LinearModel | None = None


def lag_structures(data: SysIdData, config: RecipeConfig, classes: Sequence[str]) -> list:
    """The lag classes among ``classes``, each with its ARX model and settings.

    The ARX model is refitted by least squares on the standardised estimation
    record at the lag classes' order (:func:`~keras_mgu.sysid.lag_classes.lag_orders`
    of the order :func:`~keras_mgu.sysid.linear.select_linear_model` chooses);
    the order that simulates validation best, refitted, is the anchor that
    NARX and the loop fade to outside the estimation range (where the
    validation record is too short for any, the lag-order ARX).
    """
    wanted = [name for name in LAG_CLASSES if name in classes]
    if not wanted:
        return []
    outer = Normalizer.fit(data.estimation)
    est, val = outer.transform(data.estimation), outer.transform(data.validation)
    chosen, table = select_linear_model(est, val, continues=False)
    na = lag_orders(chosen)
    linear = LinearModel.fit(est.u, est.y, na)
    anchor = chosen
    if anchor is None and table:
        anchor = LinearModel.fit(est.u, est.y, min(table, key=_val_rmse)["na"])
    return [
        Structure(
            name, SignalPath(outer), lag_config(config, linear, est.n_samples, name), linear,
            anchor,
        )
        for name in wanted
    ]


def structures(data: SysIdData, config: RecipeConfig) -> tuple[list[Structure], list[dict]]:
    """The structures the restarts try, and the linear models fitted (orders, validation RMSE).

    The linear model is fitted on the standardised estimation record. With
    ``config.linear_prior`` ``None`` both structures are tried where it
    explains the validation record
    (:func:`~keras_mgu.sysid.linear.select_linear_model`), else the network
    alone; ``True`` or ``False`` force one. An estimation record of several
    experiments (``Record.boundaries``) trains the network alone (``True``
    is refused): the linear model is fitted and simulated on one experiment.
    """
    outer = Normalizer.fit(data.estimation)
    est, val = outer.transform(data.estimation), outer.transform(data.validation)
    n, lag = est.n_samples, data.n_initial
    several = {"shortest_experiment": shortest(est)}
    plain = Structure(
        "network", SignalPath(outer), config.resolved(n, lag, linear_prior=False, **several)
    )
    if len(est.experiments) > 1 and config.linear_prior:
        raise ValueError(
            "`linear_prior=True` needs one estimation experiment: the linear model is fitted "
            f"and simulated on one record, and this one holds {len(est.experiments)}."
        )
    if config.linear_prior is False or len(est.experiments) > 1:
        return [plain], []
    continues = plain.config.validation_continues
    linear, table = select_linear_model(est, val, continues=continues)
    if linear is None and config.linear_prior and table:
        linear = LinearModel.fit(est.u, est.y, min(table, key=_val_rmse)["na"])
    if linear is None:
        return [plain], table
    y_lin = linear.simulate(est.u, est.y[0])
    inner = Normalizer.fit(Record(np.concatenate([est.u, y_lin], axis=1), est.y - y_lin))
    resolved = config.resolved(
        n, lag, time_constant=linear.time_constant, linear_prior=True, **several
    )
    prior = Structure("linear+network", SignalPath(outer, linear, inner), resolved)
    return ([prior] if config.linear_prior else [plain, prior]), table


def _val_rmse(row: dict) -> float:
    return row["validation_rmse"]


def _best_run(runs: list[RunResult], pool: Sequence[int] | None = None) -> int:
    """The run with the lowest choice RMSE (:attr:`RunResult.choice_rmse`), of ``pool``."""
    pool = range(len(runs)) if pool is None else pool
    return pool[int(np.argmin([runs[k].choice_rmse for k in pool]))]


def identify(
    data: SysIdData | Record | Sequence[Record],
    config: RecipeConfig | None = None,
    restarts: int = 3,
    seed: int = 0,
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    population: bool = True,
) -> Identification:
    """Identify a simulation model of ``data`` (physical units) with the recipe.

    Standardises with the estimation record's statistics, fits the linear
    model, resolves the settings the config leaves open, and trains
    ``restarts`` runs (seeds ``seed + 1000 * k``), each for the config's
    iterations (a fixed amount of work: the same model whatever the machine's
    load; ``config.time_budget`` caps the wall time instead).
    Every class of ``config.model_classes`` (default: all) gets one run from
    ``seed``, and the remaining ``restarts - 1`` runs use the class whose run
    scored best. Runs are scored by their choice error
    (:meth:`~keras_mgu.sysid.Identification.choice_error`): the validation
    record's simulation error and the free run through the estimation
    record from its first measured samples, equally weighted. The run kept
    scores best; with ``config.selection="ensemble"`` the result averages
    runs of the winning class chosen greedily on the same error
    (:mod:`~keras_mgu.sysid.selection`). ``data.test`` is not used.

    Args:
        data: Estimation, validation and test records, or a Record (or a
            list of Records, separate experiments) whose end validates
            (:meth:`~keras_mgu.datasets.SysIdData.coerce`).
        config: The recipe's settings (default :class:`RecipeConfig`; ``None``
            fields are derived from the record).
        restarts: Independent runs to choose from.
        seed: Seed of the first run.
        verbose: ``model.fit``'s verbosity; ``>= 1`` also prints the settings
            and a line per restart.
        callbacks: Passed to every run's ``fit``.
        population: Train the runs that share their optimiser settings at
            once, as one population (:func:`~keras_mgu.sysid.train_population`;
            the same numbers as one by one, in less time). ``False``: one by
            one.
    """
    data = SysIdData.coerce(data)
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 1:
        raise ValueError(f"`restarts` must be a positive integer; received {restarts!r}.")
    config = config or RecipeConfig()
    if config.capacity == "search" and config.units is not None:
        raise ValueError(
            "`capacity='search'` chooses the units on validation; leave `units` None "
            f"(received units={config.units})."
        )
    options, linear_table = model_classes(data, config)
    if verbose:
        classes = config.model_classes or DEFAULT_MODEL_CLASSES
        _print_settings(data, options, restarts, classes, linear_table)
    trainer = _Trainer(data, options, population, verbose, callbacks, restarts)
    runs = trainer.train([(option, seed) for option in options])
    winner = next(o for o in options if o.name == runs[_best_run(runs)].structure)
    capacity_table: list[dict] = []
    if winner.config.capacity == "search" and restarts > 1 and winner.linear is None:
        winner, capacity_table = _screened(trainer, winner, seed)
    runs += trainer.train([(winner, seed + 1000 * k) for k in range(1, restarts)])
    pool = selection_pool(runs, winner.name)
    rule = winner.config.selection
    members = ()
    if rule != "best":
        members = tuple(pool[k] for k in select([runs[k].choice_error for k in pool], rule))
    if verbose and members:
        print(f"selection ({rule}): {describe_members(members)}", flush=True)
    est, arx = data.estimation, trainer.arx_run(config)
    found = Identification(
        runs, _best_run(runs, pool), data.n_initial, trainer.first, linear_table, members,
        input_names=est.input_names, output_names=est.output_names, ts=est.ts,
        protocol=data.protocol, capacity_table=capacity_table,
        class_table=class_table(runs, options, arx), arx=arx,
    )  # fmt: skip
    found = found.with_window_horizons(data.validation).with_band(data.validation)
    if verbose:
        print(describe_class_table(found.class_table, winner.name), flush=True)
    return found


def model_classes(data: SysIdData, config: RecipeConfig) -> tuple[list[Structure], list[dict]]:
    """The classes :func:`identify` tries (``config.model_classes``, else the default two).

    Returns the structures and the table of the linear models fitted.
    """
    classes = config.model_classes or DEFAULT_MODEL_CLASSES
    options, table = [], []
    if {"network", "linear+network"} & set(classes):
        options, table = structures(data, config)
        options = [o for o in options if o.name in classes]
    lag = lag_structures(data, config, classes)
    if not options and not lag:  # "linear+network" alone, where the linear model is no candidate
        raise ValueError(
            "`model_classes` asks for 'linear+network' alone, but the linear model does "
            "not explain the validation record; add 'network' or a lag class."
        )
    return lag + options, table  # the order runs are trained in, so "run k" is runs[k - 1]


def selection_pool(runs: list[RunResult], winner: str) -> list[int]:
    """The runs the selection chooses from: the winning lag class's, or every other run.

    Runs of one pool share their validation protocol (the same scored samples),
    so their simulations can be averaged; an average exports as one model.
    """
    if winner in LAG_CLASSES:
        return [k for k, run in enumerate(runs) if run.structure == winner]
    return [k for k, run in enumerate(runs) if run.structure not in LAG_CLASSES]


def class_table(
    runs: list[RunResult], options: list[Structure], arx: RunResult | None = None
) -> list[dict]:
    """Per class tried: its runs' best and median choice RMSE (standardised).

    Each row also gives its best run's two halves of it: ``validation`` (the
    validation record simulated from its first measured samples) and
    ``horizon`` (:class:`RunResult`). ``arx``, the least-squares ARX model the lag classes
    start from, scored as a run, is the first row (``runs`` 0).
    """
    table = []
    if arx is not None:
        na, nb = arx.config.n_initial, arx.config.n_initial + 1
        table.append(_class_row(f"ARX({na}, {nb})", [arx], 0))
    for option in options:
        mine = [run for run in runs if run.structure == option.name]
        table.append(_class_row(option.name, mine, len(mine)))
    return table


def _class_row(name: str, runs: list[RunResult], count: int) -> dict:
    scores = [run.choice_rmse for run in runs]
    best = runs[int(np.argmin(scores))]
    return {
        "class": name, "runs": count, "best": float(np.min(scores)),
        "median": float(np.median(scores)), "validation": _test_like_rmse(best),
        "horizon": float(best.horizon_rmse),
    }  # fmt: skip


def _test_like_rmse(run: RunResult) -> float:
    """The validation half of ``run``'s choice RMSE (from its first measured samples)."""
    squared = 2 * run.choice_rmse**2 - run.horizon_rmse**2
    return float(np.sqrt(max(squared, 0.0))) if np.isfinite(squared) else float("inf")


def describe_class_table(table: list[dict], chosen: str) -> str:
    """The class table in lines, the chosen class marked, and a warning where ARX is not beaten."""
    lines = [
        "choice RMSE (standardised; validation and the free run through the estimation "
        "record, equally weighted) of each class tried, best / median of its runs, and the "
        "best run's validation | horizon:"
    ]
    for row in table:
        mark = "  <- chosen" if row["class"] == chosen else ""
        runs = "least squares" if row["runs"] == 0 else f"{row['runs']} run(s)"
        nan = float("nan")
        parts = f"{row.get('validation', nan):.4f} | {row.get('horizon', nan):.4f}"
        lines.append(
            f"  {row['class']:<16} {row['best']:.4f} / {row['median']:.4f}  ({parts}; {runs})"
            + mark
        )
    warning = linear_not_beaten(table)
    return "\n".join(lines + ([warning] if warning else []))


def linear_not_beaten(table: list[dict]) -> str | None:
    """One line saying no nonlinear class beats the linear models on the choice, or None."""
    linear = [row["best"] for row in table if row["runs"] == 0 or row["class"] == "linear"]
    networks = [row["best"] for row in table if row["runs"] > 0 and row["class"] != "linear"]
    if linear and networks and not min(networks) < min(linear):
        return (
            "warning: no network beats the linear model (ARX, or the linear class) on the "
            "choice; the chosen model is linear, or no better than it."
        )
    return None


def _screened(trainer: _Trainer, winner: Structure, seed: int) -> tuple[Structure, list[dict]]:
    """``winner`` with the capacity its screening runs (seed ``seed``) validate best with."""

    def train(configs):
        plan = [(dataclasses.replace(winner, config=c), seed) for c in configs]
        return [run.validation_rmse for run in trainer.train(plan, "screening")]

    chosen, table = choose_capacity(winner.config, train)
    if trainer.verbose:
        print(
            f"capacity chosen on validation: {chosen.units[0]} units, learning rate "
            f"{chosen.learning_rate:g}",
            flush=True,
        )
    return dataclasses.replace(winner, config=chosen), table


class _Trainer:
    """Trains planned runs, one by one or as populations (within the time budget, if any)."""

    def __init__(self, data, options, population, verbose, callbacks, restarts) -> None:
        self.data, self.population, self.options = data, bool(population), options
        self.verbose, self.callbacks = verbose, callbacks
        self.records = {
            o.name: network_records(o.path, data, o.config.validation_continues) for o in options
        }
        self.left = restarts + len(options) - 1  # runs still to train
        self.budget = options[0].config.time_budget
        self.start, self.done = time.perf_counter(), 0
        lag = max(o.config.n_initial for o in options)
        #: The first samples of the estimation record (the encoder's start).
        self.first = (data.estimation.u[:lag], data.estimation.y[:lag])

    def train(self, plan: list[tuple[Structure, int]], kind: str = "run") -> list[RunResult]:
        """Train ``plan`` (``(structure, seed)`` pairs); the results in the plan's order.

        ``kind`` names the runs in the progress lines (``"run"`` or ``"screening"``).
        """
        lag = [i for i, (option, _) in enumerate(plan) if option.linear is not None]
        rest = [i for i in range(len(plan)) if i not in lag]
        if self.population and rest:
            groups = population_groups([plan[i][0].config for i in rest])
            groups = [[rest[j] for j in group] for group in groups]
        else:
            groups = [[i] for i in rest]
        runs: dict[int, RunResult] = {}
        for i in lag:
            runs[i] = self._scored(self._train_lag(*plan[i]), *plan[i], kind)
        for group in groups:
            share = self._share(len(group))
            members = [self._member(*plan[i]) for i in group]
            trained = self._train_group(members, share)
            for i, run in zip(group, trained, strict=True):
                runs[i] = self._scored(run, *plan[i], kind)
        return [runs[i] for i in range(len(plan))]

    def _train_lag(self, option: Structure, seed: int) -> RunResult:
        est, val = self.records[option.name]
        verbose = self.verbose if isinstance(self.verbose, int) and self.verbose > 1 else 0
        return train_lag_run(
            option.name, option.linear, est, val, option.config, seed, verbose, option.anchor
        )

    def _train_group(self, members: list[PlannedRun], share: float | None) -> list[RunResult]:
        if len(members) > 1:
            return train_population(members, self.verbose, self.callbacks, share)
        m = members[0]
        return [
            train_simulator(
                m.estimation, m.validation, m.config, m.seed, self.verbose, self.callbacks, share
            )
        ]

    def _share(self, n_runs: int) -> float | None:
        if self.budget is None:
            return None
        left = self.budget - (time.perf_counter() - self.start)
        share = max(left * n_runs / max(self.left, n_runs), 1e-3)
        self.left -= n_runs
        return share

    def _member(self, option: Structure, seed: int) -> PlannedRun:
        est, val = self.records[option.name]
        return PlannedRun(est, val, option.config, seed)

    def arx_run(self, config: RecipeConfig) -> RunResult | None:
        """The least-squares ARX model the lag classes start from, scored as a run.

        Fitted at the lag classes' order where none of them was tried; None
        where the record is too short for it.
        """
        option = next((o for o in self.options if o.linear is not None), None)
        if option is None:
            try:
                option = lag_structures(self.data, config, ("linear",))[0]
            except (ValueError, np.linalg.LinAlgError):
                return None
        model = build_output_error(option.linear, option.config.n_initial)
        run = RunResult(model, 0, float("nan"), 0, 0.0, None, option.config)
        return self._scored(run, dataclasses.replace(option, name="linear"), 0, "reference")

    def _scored(self, run: RunResult, option: Structure, seed: int, kind: str) -> RunResult:
        """``run`` with its structure, signal path and errors (physical records, standardised)."""
        run = dataclasses.replace(run, structure=option.name, path=option.path)
        single = Identification([run], 0, self.data.n_initial, self.first)
        error, horizons = single.validation_error(self.data), single.horizon_errors(self.data)
        horizon = np.concatenate(horizons) if horizons else np.zeros((0, error.shape[1]))
        test_like = single.test_like_error(self.data.validation)
        noise = None
        if np.all(np.isfinite(test_like)):
            noise = fit_noise_model([h for h in horizons if np.all(np.isfinite(h))], test_like)
        run = dataclasses.replace(
            run, validation_error=error, validation_rmse=error_rmse(error),
            horizon_rmse=error_rmse(horizon), choice_error=equal_weights(test_like, horizon),
            noise=noise,
        )  # fmt: skip
        if kind == "reference":
            return run
        self.done += kind == "run"
        if self.verbose:
            units = (run.config.units or (0,))[0]
            label = f"run {self.done}" if kind == "run" else f"screening {units} units"
            print(
                f"{label} ({option.name}, seed {run.seed}, learning rate "
                f"{run.config.learning_rate:g}): choice RMSE {run.choice_rmse:.4f} "
                f"(validation {_test_like_rmse(run):.4f}, horizon {run.horizon_rmse:.4f}; "
                f"standardised), best at iteration {run.best_iteration}, {run.seconds:.0f} s",
                flush=True,
            )
        return run


def _print_settings(
    data: SysIdData, options: list[Structure], restarts: int, classes: Sequence[str], table: list
) -> None:
    extra = f", first one run of each of {len(options)} classes" if len(options) > 1 else ""
    print(f"recipe: {data.estimation.n_samples} estimation samples, {restarts} restart(s){extra}")
    tried = {o.name for o in options}
    if "linear+network" in classes and "linear+network" not in tried:
        several = len(data.estimation.experiments) > 1
        print(f"  linear+network: not tried: {_why_no_prior(table, several)}", flush=True)
    for option in options:
        config, linear = option.config, option.path.linear
        if option.linear is not None:
            _print_lag_settings(option)
            continue
        state = config.initial_state
        if state == "encoder":
            state += f" of {config.n_initial} samples"
        print(
            f"  {option.name}: {config.cell.upper()} {list(config.units)}, {state} initial "
            f"state, linear model {'none' if linear is None else f'ARX{linear.orders}'}, window "
            f"{config.window} x batch {config.batch_size}, {config.iterations} iterations, "
            f"learning rate {config.learning_rate:g}, weight decay {config.weight_decay:.3g}"
            + ("" if config.time_budget is None else f", all runs within {config.time_budget:g} s"),
            flush=True,
        )


def _why_no_prior(table: list[dict], several: bool) -> str:
    """Why the network on the linear model's residual is not a candidate."""
    if several:
        return "the estimation record holds several experiments"
    if not table:
        return "linear_prior=False"
    best = min(table, key=_val_rmse)
    share = best["validation_rmse"] / best["baseline_rmse"]
    return (
        f"the best ARX model (na={best['na']}) simulates the validation record at "
        f"{share:.0%} of the constant predictor's RMSE, more than the "
        f"{LINEAR_SHARE_MAX:.0%} that makes it a base for the network"
    )


def _print_lag_settings(option: Structure) -> None:
    config, (na, nb) = option.config, option.linear.orders
    branch = {"narx": "MLP", "linear": "no branch"}.get(option.name, config.cell.upper())
    units = "" if option.name == "linear" else f" {list(config.units)}"
    print(
        f"  {option.name}: ARX({na}, {nb}) with {branch}{units} in its loop, "
        f"state from the {config.n_initial} measured samples before each window, window "
        f"{config.window} x batch {config.batch_size}, {config.iterations} iterations "
        f"(after one-step ones), learning rate {config.learning_rate:g}, no weight decay",
        flush=True,
    )
