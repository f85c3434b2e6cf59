"""The restarts: runs of the candidate classes trained, scored on validation, and the choice.

:class:`Restarts` trains planned runs (``(structure, seed)`` pairs) one by one
or as populations (:func:`~keras_mgu.sysid.training.population.train_population`),
within the time budget if the config sets one, and scores each on the
physical records: its validation error, the free run through the estimation
record from its first measured samples (``horizon``; with
``RecipeConfig.held_out``, through the record's held-out start, which no run
fitted: :mod:`~keras_mgu.sysid.choice.held_out`), the choice error that
weighs both equally, and the noise model of its simulation residual
(:func:`~keras_mgu.sysid.judging.noise_model.fit_noise_model`). Every class
gets one run from the first seed; the class whose run scores best gets the
remaining restarts (after its capacity is screened, with
``capacity="search"``); :meth:`Restarts.chosen` keeps the best run of the
winning class's pool, or an average of runs (:mod:`~keras_mgu.sysid.choice.selection`).
A run whose free run leaves the estimation outputs' range
(:mod:`~keras_mgu.sysid.choice.runoff`), or, with ``RecipeConfig(edge_guard=True)``,
a nonlinear run that errs more than the least-squares ARX model on the
validation record's samples at the estimation record's edges
(:mod:`~keras_mgu.sysid.judging.edges`; every run's comparison is kept and
reported), is neither chosen nor averaged, unless every run is kept out; the
checks live in :mod:`~keras_mgu.sysid.choice.keep_out`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import keras
import numpy as np

from keras_mgu.callbacks import TerminalProgress
from keras_mgu.datasets import Record, SysIdData
from keras_mgu.sysid.choice import report
from keras_mgu.sysid.choice.candidates import Structure, lag_structures
from keras_mgu.sysid.choice.capacity import choose_capacity
from keras_mgu.sysid.choice.keep_out import KeepOutChecks
from keras_mgu.sysid.choice.racing import RaceCheckpoint, race_against, with_stop
from keras_mgu.sysid.choice.selection import describe_members, select
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.identification import Identification
from keras_mgu.sysid.judging.extrapolation import EstimationRange
from keras_mgu.sysid.judging.noise_model import fit_noise_model
from keras_mgu.sysid.judging.scoring import equal_weights, error_rmse
from keras_mgu.sysid.models.output_error import build_output_error
from keras_mgu.sysid.models.polynomial import fit_polynomial
from keras_mgu.sysid.training.lag_run import train_lag_run
from keras_mgu.sysid.training.polynomial_run import train_polynomial_run
from keras_mgu.sysid.training.population import PlannedRun, population_groups, train_population
from keras_mgu.sysid.training.run import RunResult, train_simulator

__all__ = ["Restarts", "best_run", "kept_runs", "selection_pool"]


def kept_runs(runs: list[RunResult], pool: Sequence[int] | None = None) -> list[int]:
    """The runs of ``pool`` (default: all) the choice may keep (:attr:`RunResult.not_kept`
    None: no run-off, and with the edge guard no edge error above the ARX model's); all of
    ``pool`` where none is."""
    pool = list(range(len(runs)) if pool is None else pool)
    return [k for k in pool if runs[k].not_kept is None] or pool


def best_run(runs: list[RunResult], pool: Sequence[int] | None = None) -> int:
    """The run with the lowest choice RMSE (:attr:`RunResult.choice_rmse`) of ``pool``
    (default: all) among those that did not run off (:func:`kept_runs`)."""
    pool = kept_runs(runs, pool)
    return pool[int(np.argmin([runs[k].choice_rmse for k in pool]))]


def selection_pool(runs: list[RunResult], winner: str) -> list[int]:
    """The runs the selection chooses from: the winning class's that may be kept.

    Runs of one class share their validation protocol (the same scored
    samples), so their simulations can be averaged; an average exports as one
    model, and what it averages is one class's runs, as the report says.
    """
    return kept_runs(runs, [k for k, run in enumerate(runs) if run.structure == winner])


class Restarts(KeepOutChecks):
    """Trains and scores the runs of ``options`` on ``data`` (module docstring).

    Args:
        data: The physical records (estimation, validation) the runs fit.
        options: The candidate classes (:func:`~keras_mgu.sysid.choice.candidates.model_classes`).
        restarts: Runs in all of the winning class (its first run included).
        population: Train runs that share their optimiser settings as one population.
        verbose: ``0``: silent; ``1``: a line per run (and, on a terminal, one
            line that follows each run's iterations as it trains,
            :class:`~keras_mgu.callbacks.TerminalProgress`); ``2``: also
            Keras's own progress lines (``fit(verbose=2)``).
        callbacks: Passed to every network run's ``fit``.
        held_out: The estimation record's held-out part
            (:func:`~keras_mgu.sysid.choice.held_out.hold_out`), or None.
        held_out_at: Where it was: ``"start"`` (the encoder's first samples
            are then its own) or ``"end"``.
    """

    def __init__(
        self,
        data: SysIdData,
        options: list[Structure],
        restarts: int,
        population: bool = True,
        verbose: int | str = 0,
        callbacks: Sequence[keras.callbacks.Callback] = (),
        held_out: Record | None = None,
        held_out_at: str = "start",
    ) -> None:
        self.data, self.options, self.restarts = data, options, restarts
        self.held_out, self.held_out_at = held_out, held_out_at
        #: The record the choice's long free run goes through: the held-out start, else the
        #: estimation record (which the runs fitted).
        self.scored_start = data.estimation if held_out is None else held_out
        self.population, self.verbose, self.callbacks = bool(population), verbose, callbacks
        loud = isinstance(verbose, int) and verbose >= 2
        #: ``fit``'s verbosity, and the progress line where Keras's lines are not shown.
        self.fit_verbose = 2 if loud else 0
        self.progress = (TerminalProgress(),) if verbose and not loud else ()
        self.records = {
            o.name: o.path.records(
                data, o.config.validation_continues, o.config.initial_state == "learned"
            )
            for o in options
        }
        self.left = restarts + len(options) - 1  # runs still to train
        self.budget = options[0].config.time_budget
        self.start, self.done = time.perf_counter(), 0
        #: The polynomial class's least-squares fit, once its first run made it.
        self.polynomial_fit = None
        lag = max(o.config.n_initial for o in options)
        start = data.estimation
        if held_out is not None and held_out_at == "start" and held_out.n_samples >= lag:
            start = held_out
        #: The first samples of the estimation record (the encoder's start), the head's if held out.
        self.first = (start.u[:lag], start.y[:lag])
        self._arx: RunResult | None = None
        self.init_checks(data)

    def first_runs(self, seed: int) -> list[RunResult]:
        """One run of every class, from ``seed``; the quick classes first, then the
        others racing against the best finished (:mod:`~keras_mgu.sysid.choice.racing`)."""
        race = self.options[0].config.racing
        return self.train([(option, seed) for option in self.options], race=race)

    def winner(self, runs: list[RunResult], seed: int) -> tuple[Structure, list[dict]]:
        """The class of the best run, with its capacity screened (``capacity="search"``)."""
        winner = next(o for o in self.options if o.name == runs[best_run(runs)].structure)
        if winner.config.capacity == "search" and self.restarts > 1 and winner.linear is None:
            return self._screened(winner, seed)
        return winner, []

    def more_runs(self, winner: Structure, seed: int) -> list[RunResult]:
        """The winning class's remaining restarts (seeds ``seed + 1000 k``)."""
        return self.train([(winner, seed + 1000 * k) for k in range(1, self.restarts)])

    def chosen(
        self,
        runs: list[RunResult],
        winner: Structure,
        linear_table: list[dict],
        capacity_table: list[dict],
        config: RecipeConfig,
    ) -> Identification:
        """The :class:`Identification` of the run (or average of runs) the rule keeps."""
        pool, rule = selection_pool(runs, winner.name), winner.config.selection
        members = ()
        if rule != "best":
            members = tuple(pool[k] for k in select([runs[k].choice_error for k in pool], rule))
        if self.verbose and members:
            classes = [run.structure for run in runs]
            print(f"selection ({rule}): {describe_members(members, classes)}", flush=True)
        if self.verbose:
            for line in report.ran_off_lines(runs):
                print(line, flush=True)
        est, arx = self.data.estimation, self.arx_run(config)
        return Identification(
            runs, best_run(runs, pool), self.data.n_initial, self.first, linear_table, members,
            input_names=est.input_names, output_names=est.output_names, ts=est.ts,
            protocol=self.data.protocol, capacity_table=capacity_table,
            class_table=report.class_table(runs, self.options, arx), arx=arx,
            ranges=EstimationRange.of(est.u, est.y),
        )  # fmt: skip

    def train(
        self, plan: list[tuple[Structure, int]], kind: str = "run", race: bool = False
    ) -> list[RunResult]:
        """Train ``plan`` (``(structure, seed)`` pairs); the results in the plan's order.

        ``kind`` names the runs in the progress lines (``"run"`` or
        ``"screening"``). The lag classes train first, in the plan's order
        (:func:`~keras_mgu.sysid.choice.candidates.model_classes` puts the
        quick ones first); with ``race``, each other run races against the
        best run finished before it
        (:func:`~keras_mgu.sysid.choice.racing.race_against`).
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
            checkpoint = race_against([plan[i][0]], list(runs.values())) if race else None
            run = self._train_lag(*plan[i], race=checkpoint)
            runs[i] = self._scored(with_stop(run, checkpoint), *plan[i], kind)
        for group in groups:
            share = self._share(len(group))
            members = [self._member(*plan[i]) for i in group]
            options = [plan[i][0] for i in group]
            checkpoint = race_against(options, list(runs.values())) if race else None
            trained = self._train_group(members, share, checkpoint)
            for member, (i, run) in enumerate(zip(group, trained, strict=True)):
                runs[i] = self._scored(with_stop(run, checkpoint, member), *plan[i], kind)
        return [runs[i] for i in range(len(plan))]

    def arx_run(self, config: RecipeConfig) -> RunResult | None:
        """The least-squares ARX model the lag classes start from, scored as a run.

        Fitted at the lag classes' order where none of them was tried; None
        where the record is too short for it.
        """
        option = next(
            (o for o in self.options if o.linear is not None and o.name != "polynomial"), None
        )
        if option is not None and self._arx is not None:
            return self._arx
        if option is None:
            try:
                option = lag_structures(self.data, config, ("linear",))[0]
            except (ValueError, np.linalg.LinAlgError):
                return None
        model = build_output_error(option.linear, option.config.n_initial)
        run = RunResult(model, 0, float("nan"), 0, 0.0, None, option.config)
        run = self._scored(run, dataclasses.replace(option, name="linear"), 0, "reference")
        if option.linear is not None:
            self._arx = run
        return run

    def _screened(self, winner: Structure, seed: int) -> tuple[Structure, list[dict]]:
        """``winner`` with the capacity its screening runs (seed ``seed``) validate best with."""

        def train(configs):
            plan = [(dataclasses.replace(winner, config=c), seed) for c in configs]
            return [run.validation_rmse for run in self.train(plan, "screening")]

        chosen, table = choose_capacity(winner.config, train)
        if self.verbose:
            print(report.capacity_line(chosen), flush=True)
        return dataclasses.replace(winner, config=chosen), table

    def _train_lag(
        self, option: Structure, seed: int, race: RaceCheckpoint | None = None
    ) -> RunResult:
        est, val = self.records[option.name]
        if option.name == "polynomial":
            return self._train_polynomial(option, seed)
        return train_lag_run(
            option.name, option.linear, est, val, option.config, seed, self.fit_verbose,
            option.anchor, self.progress, race,
        )  # fmt: skip

    def _train_polynomial(self, option: Structure, seed: int) -> RunResult:
        """A polynomial run from the class's least-squares fit, made by its first run.

        The fit depends on the records alone, so every run of the class
        refines the same one; its seconds count in the run that made it.
        """
        est, val = self.records[option.name]
        start = time.perf_counter()
        if self.polynomial_fit is None:
            head = est if self.held_out is None else option.path.trimmed(self.held_out)
            stretched = self._stretched(option)
            self.polynomial_fit = fit_polynomial(est, val, held_out=head, stretched=stretched)[0]
        run = train_polynomial_run(
            est, val, self.polynomial_fit, option.config, seed, self.fit_verbose, self.progress
        )
        return dataclasses.replace(run, seconds=time.perf_counter() - start)

    def _train_group(
        self, members: list[PlannedRun], share: float | None, race: RaceCheckpoint | None = None
    ) -> list[RunResult]:
        callbacks = (*self.callbacks, *self.progress)
        if len(members) > 1:
            return train_population(members, self.fit_verbose, callbacks, share, race)
        m = members[0]
        run = train_simulator(
            m.estimation, m.validation, m.config, m.seed, self.fit_verbose, callbacks, share, race
        )
        return [run]

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

    def _scored(self, run: RunResult, option: Structure, seed: int, kind: str) -> RunResult:
        """``run`` with its structure, signal path and errors (physical records, standardised)."""
        run = dataclasses.replace(run, structure=option.name, path=option.path)
        single = Identification([run], 0, self.data.n_initial, self.first)
        error = single.validation_error(self.data)
        horizons = single.horizon_errors(self.scored_start)
        horizon = np.concatenate(horizons) if horizons else np.zeros((0, error.shape[1]))
        test_like = single.test_like_error(self.data.validation)
        noise = None
        if np.all(np.isfinite(test_like)):
            noise = fit_noise_model([h for h in horizons if np.all(np.isfinite(h))], test_like)
        run = dataclasses.replace(
            run, validation_error=error, validation_rmse=error_rmse(error),
            horizon_rmse=error_rmse(horizon) if horizon.size else float("nan"),
            choice_error=equal_weights(test_like, horizon),
            noise=noise,
        )  # fmt: skip
        if kind == "reference":
            return run
        run.ran_off = self._ran_off(single, horizons, test_like)
        run.edge = self._edge(single, test_like)
        self.done += kind == "run"
        if self.verbose:
            print(report.run_line(run, option.name, kind, self.done), flush=True)
        return run
