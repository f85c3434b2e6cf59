"""Sweeps of the recipe's settings, with KerasTuner as the search engine.

:func:`tune` searches :class:`~keras_mgu.sysid.RecipeConfig` settings (any
field: ``units``, ``cell``, ``learning_rate``, ``weight_decay``, ``window``,
...). Each trial is one :func:`~keras_mgu.sysid.identify` of the data with
the trial's settings (its restarts trained as one population) and is scored
by the validation RMSE of the run it keeps (standardised units), so the
choice never sees the test record. The search engine is a
``keras_tuner`` oracle (random search, or a grid over every combination),
and its trials, states and scores are KerasTuner's, in
``directory/project_name``.

Parallel trials use KerasTuner's distributed mode: a *chief* process holds
the oracle and *workers* run trials, told apart by the environment variables
``KERASTUNER_TUNER_ID`` (``chief``, ``tuner0``, ``tuner1``, ...),
``KERASTUNER_ORACLE_IP`` and ``KERASTUNER_ORACLE_PORT``. ``tune(...,
workers=N)`` starts ``N`` local worker processes itself; across machines,
run the same ``tune`` call (or ``keras-mgu tune``) on every machine with
those variables set (see ``docs/sweeps.md``). The chief returns the table;
each trial saves its :class:`Identification` (``identification.kmgu``, a
model file, in its KerasTuner trial folder), and the chief returns the best one from there;
where it cannot read it (a worker on another machine with its own folder),
the best trial's settings are identified again in the calling process (same
seeds: the same numbers).

``search_budget`` bounds the whole search, the workers' start included.
It sets a deadline ``search_budget`` seconds after the call; each trial's
``identify`` gets as its time budget (:attr:`RecipeConfig.time_budget`,
which shortens its runs where they would overrun it) the time left to the
deadline over the trials its worker still expects
(``ceil(max_trials / workers)`` in all), less the time its earlier trials
ran past the budgets they were given (building the models before training,
compiling, scoring after it: the mean over its trials after the first, whose
overrun includes the process's one-time start), so a trial that overran
leaves less to the next. A trial with nothing left of its share after that
still trains its floor (a budget of :data:`MIN_TRIAL_BUDGET`). A trial that
would start with less time left than the shortest trial its worker has run
(or after the deadline) is not run: it fails at once (status ``FAILED``),
and the search returns the best of those that ran.
A trial has a floor it cannot go below (building its models, two epochs of
each run, scoring), so a budget far below ``max_trials / workers`` times
that floor ends with failed trials.

Local worker processes (``workers > 1``) are started and served by
:mod:`~keras_mgu.sysid.tuning.workers`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from keras_mgu.datasets import SysIdData
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.identification import Identification
from keras_mgu.sysid.tuning.space import (
    DEFAULT_SPACE,
    check_space,
    hyperparameters,
    import_keras_tuner,
    trial_settings,
)

__all__ = [
    "DEFAULT_SPACE",
    "MIN_TRIAL_BUDGET",
    "TuneResult",
    "check_space",
    "tune",
]

#: The time budget (s) of a trial that the expected overrun leaves nothing:
#: ``identify`` then trains its floor (two epochs of each run).
MIN_TRIAL_BUDGET = 1.0


@dataclasses.dataclass
class TuneResult:
    """What a sweep found.

    Attributes:
        best: The best trial's :class:`Identification` (lowest validation RMSE).
        best_settings: Its settings (the searched fields).
        table: One dict per trial, in trial order: ``trial``, ``status``
            (``COMPLETED``, ``FAILED``, ...), each searched field,
            ``validation_rmse`` and ``seconds`` (NaN where it failed).
        directory: KerasTuner's folder of the search.
    """

    best: Identification
    best_settings: dict
    table: list[dict]
    directory: str


def _tuner_class():
    kt = import_keras_tuner()

    class RecipeTuner(kt.Tuner):
        """A KerasTuner ``Tuner`` whose trial is one ``identify`` of the data."""

        def __init__(self, job: dict, **kwargs) -> None:
            super().__init__(**kwargs)
            self.job, self.found, self.started = job, {}, 0
            self.fastest = 0.0  # the shortest trial this worker has run (s)
            self.overruns: list[float] = []  # each trial's seconds past its budget

        def run_trial(self, trial, *args, **kwargs) -> dict:
            from keras_mgu.sysid.recipe import identify

            job = self.job
            settings = trial_settings(trial.hyperparameters.values, job["space"])
            budget = _trial_share(job, self.started, self.fastest, _overrun(self.overruns))
            self.started += 1
            if budget is not None and budget <= 0:
                raise kt.errors.FailedTrialError(
                    f"Too little of the search budget of {job['search_budget']:g} s is left for "
                    f"trial {trial.trial_id}; it is not run."
                )
            start = time.perf_counter()
            found = identify(job["data"], _trial_config(job, settings, budget), job["restarts"],
                             job["seed"], population=True)  # fmt: skip
            self.found[trial.trial_id] = found
            _save_found(found, self.get_trial_dir(trial.trial_id))
            # The kept model's: the best run, or the average the selection rule keeps.
            rmse = found.validation_rmse(job["data"])
            seconds = time.perf_counter() - start
            self.fastest = min(self.fastest or seconds, seconds)
            if budget is not None:
                self.overruns.append(max(seconds - budget, 0.0))
            return {"val_rmse": rmse, "seconds": seconds}

    return RecipeTuner


def _trial_config(job: dict, settings: dict, budget: float | None = None) -> RecipeConfig:
    """A trial's settings, with ``budget`` (default: its nominal share of the search's) if any."""
    config = dataclasses.replace(job["config"], **settings)
    budget = job["trial_budget"] if budget is None else budget
    if budget is not None:
        config = dataclasses.replace(config, time_budget=budget)
    return config


def _trial_share(job: dict, started: int, floor: float = 0.0, overrun: float = 0.0) -> float | None:
    """Seconds for a worker's next trial: the time to the deadline over its trials to come.

    ``started``: the trials this worker has started; it expects
    ``ceil(max_trials / workers)`` in all (at least one more). ``overrun``:
    the seconds a trial is expected to run past its budget, taken off its
    share, down to :data:`MIN_TRIAL_BUDGET`. ``None`` without a search
    budget; ``0`` once less than ``floor`` (the shortest trial the worker has
    run) is left to the deadline: no trial would end before it.
    """
    if job.get("deadline") is None:
        return None
    left = job["deadline"] - time.time()
    if left <= floor:
        return 0.0
    expected = max(1, math.ceil(job["max_trials"] / job["workers"]) - started)
    return max(left / expected - overrun, MIN_TRIAL_BUDGET)


def _overrun(overruns: Sequence[float]) -> float:
    """The seconds the next trial is expected to run past its budget, from the earlier ones'.

    The mean over the trials after the first, whose overrun also holds the
    worker's one-time start (first compilations); the first's alone before.
    """
    warm = overruns[1:] or overruns
    return sum(warm) / len(warm) if warm else 0.0


#: A trial's saved Identification (a model file, :mod:`~keras_mgu.sysid.files.kmgu`), in its
#: KerasTuner trial folder.
FOUND_FILE = "identification.kmgu"


def _save_found(found: Identification, trial_dir: str) -> None:
    """Save ``found`` into ``trial_dir``, whole or not at all (a temporary file, renamed)."""
    found.save(os.path.join(trial_dir, FOUND_FILE))


def _load_found(trial_dir: str) -> Identification | None:
    """The Identification a trial of this search saved in ``trial_dir``; ``None`` if absent."""
    from keras_mgu.sysid.identification import load

    path = os.path.join(trial_dir, FOUND_FILE)
    return load(path) if os.path.exists(path) else None


def _oracle_seed(seed: int) -> int:
    """The random search's seed: ``seed + 1`` for ``seed >= 0`` (KerasTuner takes 0 for none)."""
    return seed + 1 if seed >= 0 else seed


def _make_tuner(job: dict):
    kt = import_keras_tuner()
    objective = kt.Objective("val_rmse", direction="min")
    hps = hyperparameters(job["space"])
    common = {
        "objective": objective, "hyperparameters": hps, "tune_new_entries": False,
        "max_consecutive_failed_trials": job["max_trials"],  # a failed trial is skipped
    }  # fmt: skip
    if job["search"] == "grid":
        oracle = kt.oracles.GridSearchOracle(max_trials=job["max_trials"], **common)
    else:
        oracle = kt.oracles.RandomSearchOracle(
            max_trials=job["max_trials"], seed=_oracle_seed(job["seed"]), **common
        )
    return _tuner_class()(
        job, oracle=oracle, directory=job["directory"], project_name=job["project_name"],
        overwrite=job["overwrite"],
    )  # fmt: skip


def tune(
    data: SysIdData,
    space: Mapping[str, Sequence[Any]] | None = None,
    config: RecipeConfig | None = None,
    max_trials: int = 16,
    restarts: int = 2,
    seed: int = 0,
    search: str = "random",
    workers: int = 1,
    search_budget: float | None = None,
    directory: str = "keras_mgu_tune",
    project_name: str = "sweep",
    overwrite: bool = True,
) -> TuneResult | None:
    """Search the recipe's settings on validation; the best :class:`Identification` and a table.

    Args:
        data: Estimation, validation and test records (the test record is not used).
        space: ``{RecipeConfig field: [values]}`` (default :data:`DEFAULT_SPACE`).
        config: The settings the space leaves (default :class:`RecipeConfig`).
        max_trials: Trials to run.
        restarts: Restarts per trial (``identify``'s ``restarts``).
        seed: Seeds every trial's runs and the random search (whose oracle
            gets ``seed + 1``: KerasTuner takes a seed of 0 for none).
        search: ``"random"`` or ``"grid"`` (every combination, in order).
        workers: Trials run at once, in local worker processes (KerasTuner's
            distributed mode on this machine). ``1``: in this process. Across
            machines (``KERASTUNER_TUNER_ID`` set), the worker processes in
            all, for ``search_budget``'s share.
        search_budget: Seconds for the whole search, from this call: each
            trial's ``identify`` gets the time left over the trials its
            worker still expects (at first ``search_budget * workers /
            max_trials``); trials that would start too late (with less
            time left than the worker's shortest trial) fail at once.
            ``None``: each trial has ``config.time_budget`` (by default
            none: every run does its iterations). Not both.
        directory, project_name, overwrite: KerasTuner's folder of the search.

    Returns:
        A :class:`TuneResult`; ``None`` in a worker process of a distributed
        search (``KERASTUNER_TUNER_ID`` not ``chief``).
    """
    import_keras_tuner()  # before any work: the message names the extra to install
    job = _job(data, space, config, max_trials, restarts, seed, search, directory, project_name)
    job["overwrite"] = overwrite
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"`workers` must be a positive integer; received {workers!r}.")
    job["trial_budget"] = _trial_budget(search_budget, job, workers)
    job["search_budget"], job["workers"] = search_budget, workers
    job["deadline"] = None if search_budget is None else time.time() + float(search_budget)
    role = os.environ.get("KERASTUNER_TUNER_ID")
    if role is not None and "chief" not in role:
        _make_tuner(job).search()
        return None
    if role is None and workers > 1:
        from keras_mgu.sysid.tuning.workers import run_local_workers

        return _result(run_local_workers(job, workers, _make_tuner), job)
    tuner = _make_tuner(job)
    tuner.search()
    return _result(tuner, job)


def _job(data, space, config, max_trials, restarts, seed, search, directory, project_name):
    if not isinstance(data, SysIdData):
        raise TypeError(f"`data` must be a keras_mgu.datasets.SysIdData; got {type(data)}.")
    for name, value in (("max_trials", max_trials), ("restarts", restarts)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive integer; received {value!r}.")
    if search not in ("random", "grid"):
        raise ValueError(f"`search` must be 'random' or 'grid'; received {search!r}.")
    return {
        "data": data, "space": check_space(DEFAULT_SPACE if space is None else space),
        "config": config or RecipeConfig(), "max_trials": max_trials, "restarts": restarts,
        "seed": seed, "search": search, "directory": os.fspath(directory),
        "project_name": project_name,
    }  # fmt: skip


def _trial_budget(search_budget: float | None, job: dict, workers: int) -> float | None:
    """Each trial's time budget: its share of ``search_budget`` (``None``: the config's)."""
    if search_budget is None:
        return None
    if (
        isinstance(search_budget, bool)
        or not isinstance(search_budget, (int, float))
        or not (0 < search_budget < math.inf)
    ):
        raise ValueError(
            f"`search_budget` must be a positive number of seconds; received {search_budget!r}."
        )
    if job["config"].time_budget is not None:
        raise ValueError(
            "Give `search_budget` (the whole search) or `config.time_budget` (each trial), not "
            f"both; received search_budget={search_budget!r} and config.time_budget="
            f"{job['config'].time_budget!r}."
        )
    if "time_budget" in job["space"]:
        raise ValueError(
            "`search_budget` sets each trial's time budget; do not search `time_budget`."
        )
    return float(search_budget) * workers / job["max_trials"]


def _result(tuner, job: dict) -> TuneResult:
    table = _table(tuner, job["space"])
    done = [row for row in table if row["status"] == "COMPLETED"]
    if not done:
        raise RuntimeError(f"No trial of the search completed; see {job['directory']}.")
    best_row = min(done, key=lambda row: row["validation_rmse"])
    settings = {name: best_row[name] for name in job["space"]}
    found = tuner.found.get(best_row["trial"])
    if found is None:  # trained in another process: its saved model, else identified again
        found = _load_found(tuner.get_trial_dir(best_row["trial"]))
    if found is None:
        from keras_mgu.sysid.recipe import identify

        config = _trial_config(job, settings)
        found = identify(job["data"], config, job["restarts"], job["seed"], population=True)
    path = os.path.join(job["directory"], job["project_name"])
    return TuneResult(found, settings, table, path)


def _table(tuner, space: dict[str, list]) -> list[dict]:
    rows = []
    for trial_id, trial in sorted(tuner.oracle.trials.items()):
        metrics = trial.metrics
        row = {"trial": trial_id, "status": str(trial.status)}
        row.update(trial_settings(trial.hyperparameters.values, space))
        for key, name in (("validation_rmse", "val_rmse"), ("seconds", "seconds")):
            value = metrics.get_last_value(name) if metrics.exists(name) else None
            row[key] = float("nan") if value is None else float(value)
        rows.append(row)
    return rows
