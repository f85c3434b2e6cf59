"""Sweeps with KerasTuner: trials, the choice on validation, failed trials, distributed mode.

The subject is the search around the recipe (trials, budgets, workers, saved
results), not the backend's numbers, which tests/sysid/test_recipe.py checks on
every backend: these run once, with the JAX suite.
"""

import dataclasses
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("keras_tuner")

from keras_mgu import datasets  # noqa: E402
from keras_mgu.sysid import RecipeConfig, check_space, recipe, tune  # noqa: E402
from keras_mgu.sysid.files import kmgu as saving  # noqa: E402
from keras_mgu.sysid.tuning import search as tuning  # noqa: E402
from keras_mgu.sysid.tuning.workers import worker_compile_cache, worker_threads  # noqa: E402
from tests.helpers import BACKEND_INDEPENDENT, SERIAL  # noqa: E402

pytestmark = BACKEND_INDEPENDENT

#: One model class: a trial is one recipe run whatever its classes (their choice has tests of
#: its own), and each class a trial tries costs its graphs' compiling.
TINY = RecipeConfig(
    units=(4,), iterations=10, steps_per_epoch=5, validation_checks=2, model_classes=("network",)
)


@pytest.fixture(scope="module")
def data():
    return datasets.simulate_cascaded_tanks(n_samples=160, seed=0)


def test_two_trials_give_a_table_and_the_best_on_validation(data, tmp_path):
    result = tune(data, {"units": [(3,), (5,)]}, TINY, max_trials=2, restarts=1,
                  search="grid", directory=tmp_path)  # fmt: skip
    assert [row["units"] for row in result.table] == [(3,), (5,)]
    assert all(row["status"] == "COMPLETED" for row in result.table)
    scores = [row["validation_rmse"] for row in result.table]
    best = int(np.argmin(scores))
    assert result.best_settings == {"units": result.table[best]["units"]}
    assert result.best.config.units == result.table[best]["units"]
    assert result.best.runs[result.best.best].validation_rmse == pytest.approx(scores[best])
    assert all(row["seconds"] > 0 for row in result.table)


def test_a_trial_is_scored_by_the_model_its_selection_rule_keeps(data, tmp_path):
    config = dataclasses.replace(TINY, linear_prior=False)
    result = tune(data, {"selection": ["best", "ensemble"]}, config, max_trials=2, restarts=2,
                  search="grid", directory=tmp_path)  # fmt: skip
    scores = {row["selection"]: row["validation_rmse"] for row in result.table}
    # The same seeds train the same runs; the average validates no worse than the best run.
    assert scores["ensemble"] <= scores["best"] * (1 + 1e-6)
    assert result.best.validation_rmse(data) == pytest.approx(min(scores.values()), rel=1e-5)


def test_a_random_search_draws_the_same_trials_with_the_same_seed(data, tmp_path):
    # 25 settings: two unseeded searches would agree on their first two draws once in 600.
    space = {"units": [(2,), (3,), (4,), (5,), (6,)],
             "learning_rate": [0.001, 0.002, 0.003, 0.004, 0.005]}  # fmt: skip
    drawn = []
    for run in range(2):
        result = tune(data, space, TINY, max_trials=2, restarts=1, seed=0,
                      directory=tmp_path / str(run))  # fmt: skip
        drawn.append([(row["units"], row["learning_rate"]) for row in result.table])
    assert drawn[0] == drawn[1]


def test_settings_of_mixed_types_come_back_as_given(data, tmp_path):
    # An int and a tuple for `units`: KerasTuner sees one type (JSON text), the table the values.
    result = tune(data, {"units": [3, (2, 2)]}, TINY, max_trials=2, restarts=1,
                  search="grid", directory=tmp_path)  # fmt: skip
    assert sorted(map(str, (row["units"] for row in result.table))) == ["(2, 2)", "3"]
    assert all(row["status"] == "COMPLETED" for row in result.table)
    assert result.best_settings["units"] in (3, (2, 2))


def test_a_failing_trial_is_reported_and_skipped(data, tmp_path):
    # A window longer than the record passes RecipeConfig but fails when the trial runs.
    result = tune(data, {"window": [None, 10**6]}, TINY, max_trials=2, restarts=1,
                  search="grid", directory=tmp_path)  # fmt: skip
    status = {row["window"]: row["status"] for row in result.table}
    assert status == {None: "COMPLETED", 10**6: "FAILED"}
    failed = next(row for row in result.table if row["status"] == "FAILED")
    assert math.isnan(failed["validation_rmse"])
    assert result.best_settings == {"window": None}


def test_distributed_chief_and_two_workers_on_localhost(data, tmp_path):
    start = time.perf_counter()
    result = tune(data, {"units": [(3,), (4,), (5,)]}, TINY, max_trials=3, restarts=1,
                  search="grid", workers=2, directory=tmp_path)  # fmt: skip
    assert time.perf_counter() - start < 300  # bounded: the search ends, nothing hangs
    assert sorted(row["units"] for row in result.table) == [(3,), (4,), (5,)]
    assert all(row["status"] == "COMPLETED" for row in result.table)
    # Trials ran in the workers, each saved its model; the chief returns the best one's.
    assert sorted(p.parent.name for p in tmp_path.glob(f"sweep/trial_*/{tuning.FOUND_FILE}")) == [
        f"trial_{row['trial']}" for row in result.table
    ]
    best = min(result.table, key=lambda row: row["validation_rmse"])
    assert result.best.config.units == best["units"]
    assert result.best.validation_rmse(data) == pytest.approx(best["validation_rmse"], rel=1e-9)


def test_the_best_trial_is_identified_again_where_its_saved_model_is_missing(data, tmp_path):
    # The chief finds no saved model (a worker on another machine): the same settings and seeds.
    space = {"units": [(3,), (4,)]}
    result = tune(data, space, TINY, max_trials=2, restarts=1, search="grid", directory=tmp_path)
    job = tuning._job(data, space, TINY, 2, 1, 0, "grid", tmp_path, "sweep")
    job.update(overwrite=False, trial_budget=None)  # the finished search, read back
    tuner = tuning._make_tuner(job)
    for saved in tmp_path.glob(f"sweep/trial_*/{tuning.FOUND_FILE}"):
        saved.unlink()
    again = tuning._result(tuner, job)
    assert again.best is not result.best
    assert again.best_settings == result.best_settings
    best = min(result.table, key=lambda row: row["validation_rmse"])
    assert again.best.validation_rmse(data) == pytest.approx(best["validation_rmse"], rel=1e-3)


def test_a_saved_trial_survives_a_crash_while_saving_the_next(data, tmp_path, monkeypatch):
    result = tune(data, {"units": [(3,)]}, TINY, max_trials=1, restarts=1, directory=tmp_path)
    trial_dir = next(tmp_path.glob("sweep/trial_*"))
    before = (trial_dir / tuning.FOUND_FILE).read_bytes()

    def crash(model):  # the manifest is written, the networks not yet
        raise OSError("disk full")

    monkeypatch.setattr(saving, "network_bytes", crash)
    with pytest.raises(OSError, match="disk full"):
        tuning._save_found(result.best, str(trial_dir))
    assert (trial_dir / tuning.FOUND_FILE).read_bytes() == before
    assert [p.name for p in trial_dir.iterdir() if p.name.startswith(".identification")] == []
    monkeypatch.undo()
    loaded = tuning._load_found(str(trial_dir))
    u = data.test.u[:50]
    np.testing.assert_array_equal(loaded.simulate(u), result.best.simulate(u))


@SERIAL  # the budgets follow the wall clock: other tests beside it would change them
def test_a_search_budget_gives_each_trial_the_time_left_over_the_trials_to_come(data, tmp_path):
    result = tune(data, {"units": [(3,), (4,)]}, TINY, max_trials=2, restarts=1,
                  search="grid", search_budget=120.0, directory=tmp_path)  # fmt: skip
    assert all(row["status"] == "COMPLETED" for row in result.table)
    budgets = [
        tuning._load_found(str(tmp_path / "sweep" / f"trial_{row['trial']}")).config.time_budget
        for row in result.table
    ]
    # The first trial: half the search's budget, less the start; the second: all that is left,
    # less what the first ran past its budget.
    assert 120.0 / 2 - 5 < budgets[0] <= 120.0 / 2
    seconds = result.table[0]["seconds"]
    left = 2 * budgets[0] - seconds - max(seconds - budgets[0], 0.0)
    assert left - 5 < budgets[1] <= left
    assert result.best.config.time_budget in budgets


class _Clock:
    """``time.time`` that jumps ``jump`` seconds ahead after its first ``calls`` readings."""

    perf_counter = staticmethod(time.perf_counter)

    def __init__(self, calls: int, jump: float) -> None:
        self.calls, self.jump, self.read = calls, jump, 0

    def time(self) -> float:
        self.read += 1
        return 1000.0 + (self.jump if self.read > self.calls else 0.0)


def test_trials_after_the_deadline_are_not_run(data, tmp_path, monkeypatch):
    # Readings: the deadline, then the first trial's share; the clock then passes the deadline.
    monkeypatch.setattr(tuning, "time", _Clock(calls=2, jump=61.0))
    result = tune(data, {"units": [(3,), (4,), (5,)]}, TINY, max_trials=3, restarts=1,
                  search="grid", search_budget=60.0, directory=tmp_path)  # fmt: skip
    assert [row["status"] for row in result.table] == ["COMPLETED", "FAILED", "FAILED"]
    assert all(math.isnan(row["validation_rmse"]) for row in result.table[1:])
    assert result.best.config.time_budget == pytest.approx(60.0 / 3)
    assert result.best_settings == {"units": (3,)}


class _SetClock:
    """``time`` whose readings (``time()`` and ``perf_counter()``) move only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    perf_counter = time


def test_a_trial_budget_leaves_out_what_earlier_trials_ran_past_theirs(data, tmp_path, monkeypatch):
    clock, budgets = _SetClock(), []
    monkeypatch.setattr(tuning, "time", clock)
    real_identify = recipe.identify
    # Seconds each trial takes on the search's clock: past its budget by 6 s, then by 2 s.
    takes = [lambda budget: budget + 6.0, lambda budget: budget + 2.0, lambda budget: 10.0]

    def timed_identify(data, config, *args, **kwargs):
        budgets.append(config.time_budget)
        found = real_identify(data, config, *args, **kwargs)
        clock.now += takes[len(budgets) - 1](config.time_budget)
        return found

    monkeypatch.setattr(recipe, "identify", timed_identify)
    result = tune(data, {"units": [(3,), (4,), (5,)]}, TINY, max_trials=3, restarts=1,
                  search="grid", search_budget=90.0, directory=tmp_path)  # fmt: skip
    assert [row["status"] for row in result.table] == ["COMPLETED"] * 3
    # 90 s over 3 trials; then 54 s over 2, less the first's 6 s past its budget; then the 31 s
    # left, less the second's 2 s (the first's overrun, which holds the start, no longer counts).
    assert budgets == pytest.approx([30.0, 54.0 / 2 - 6.0, 31.0 - 2.0])


def test_a_worker_expects_its_share_of_the_trials():
    job = {"deadline": time.time() + 100.0, "max_trials": 16, "workers": 2}
    assert tuning._trial_share(job, 0) == pytest.approx(100.0 / 8, rel=1e-3)
    assert tuning._trial_share(job, 6) == pytest.approx(100.0 / 2, rel=1e-3)
    assert tuning._trial_share(job, 9) == pytest.approx(100.0, rel=1e-3)  # more than expected
    assert tuning._trial_share({**job, "deadline": time.time() - 1.0}, 0) == 0.0
    assert tuning._trial_share({**job, "deadline": None}, 0) is None
    # Less time left than the shortest trial this worker has run: none would end in time.
    assert tuning._trial_share(job, 6, floor=120.0) == 0.0
    assert tuning._trial_share(job, 6, floor=80.0) == pytest.approx(100.0 / 2, rel=1e-3)
    # Less the seconds a trial runs past its budget; none left of the share: its floor.
    assert tuning._trial_share(job, 6, overrun=8.0) == pytest.approx(100.0 / 2 - 8, rel=1e-3)
    assert tuning._trial_share(job, 6, overrun=60.0) == tuning.MIN_TRIAL_BUDGET
    # The overrun expected: the first trial's alone, then the mean of those after it.
    assert tuning._overrun([]) == 0.0
    assert tuning._overrun([9.0]) == 9.0
    assert tuning._overrun([9.0, 2.0, 4.0]) == pytest.approx(3.0)


def test_local_workers_share_a_jax_compilation_cache(tmp_path):
    pytest.importorskip("jax")
    cache = worker_compile_cache(str(tmp_path), {})
    assert worker_compile_cache(str(tmp_path), {"JAX_COMPILATION_CACHE_DIR": "x"}) == {}
    # A process with that environment writes what it compiles there.
    program = "import jax, jax.numpy as jnp; print(jax.jit(lambda x: jnp.tanh(x) * 3)(1.0))"
    env = {**os.environ, **cache, "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", program], env=env, check=True, capture_output=True)
    assert [p for p in tmp_path.iterdir() if p.is_file()]


def test_local_workers_share_the_cpus():
    cpus = len(os.sched_getaffinity(0))
    caps = worker_threads(2, {})
    assert caps["KERAS_MGU_NUM_THREADS"] == caps["OMP_NUM_THREADS"] == str(max(1, cpus // 2))
    assert caps["TF_NUM_INTRAOP_THREADS"] == str(max(1, cpus // 2))
    one = worker_threads(cpus, {})
    assert one["KERAS_MGU_NUM_THREADS"] == "1" and "multi_thread_eigen=false" in one["XLA_FLAGS"]
    # What the user set is theirs.
    kept = worker_threads(cpus, {"OMP_NUM_THREADS": "3", "XLA_FLAGS": "--xla_dump_to=x"})
    assert "OMP_NUM_THREADS" not in kept and "XLA_FLAGS" not in kept


@pytest.mark.parametrize(
    "space, message",
    [
        ({"unitz": [(4,)]}, "not a RecipeConfig field"),
        ({"units": []}, "non-empty list"),
        ({"units": "32"}, "non-empty list"),
        ({"units": [(4,), [4]]}, "repeats a value"),
        ({"learning_rate": [0.01, -1.0]}, "RecipeConfig refuses"),
        ({}, "non-empty dict"),
    ],
)
def test_bad_search_spaces_are_refused(space, message):
    with pytest.raises(ValueError, match=message):
        check_space(space)


@BACKEND_INDEPENDENT
def test_tune_without_keras_tuner_names_the_extra(data, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "keras_tuner", None)  # as if not installed
    with pytest.raises(ImportError, match=r'KerasTuner .* pip install "keras-mgu\[tune\]"'):
        tune(data, {"units": [(4,)]}, TINY, directory=tmp_path)
    assert not os.listdir(tmp_path)  # refused before any work


def test_bad_tune_arguments_are_refused(data):
    with pytest.raises(ValueError, match="search"):
        tune(data, {"units": [(4,)]}, TINY, search="bayes")
    with pytest.raises(ValueError, match="workers"):
        tune(data, {"units": [(4,)]}, TINY, workers=0)
    with pytest.raises(ValueError, match="max_trials"):
        tune(data, {"units": [(4,)]}, TINY, max_trials=0)
    with pytest.raises(TypeError, match="SysIdData"):
        tune(data.test, {"units": [(4,)]}, TINY)
    for budget in (0, -5.0, float("inf"), "60", True):
        with pytest.raises(ValueError, match="search_budget"):
            tune(data, {"units": [(4,)]}, TINY, search_budget=budget)
    with pytest.raises(ValueError, match="not both"):
        tune(data, {"units": [(4,)]}, dataclasses.replace(TINY, time_budget=10.0), search_budget=60)
    with pytest.raises(ValueError, match="do not search `time_budget`"):
        tune(data, {"time_budget": [10.0, 20.0]}, TINY, search_budget=60)
