"""The recipe's report lines: how a lag run's iterations are counted."""

from types import SimpleNamespace

from keras_mgu.sysid import RecipeConfig
from keras_mgu.sysid.choice.racing import RACE_FACTOR
from keras_mgu.sysid.choice.report import run_line
from keras_mgu.sysid.training.lag_run import ONE_STEP, one_step_iterations
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def narx_run(best_iteration, stopped=None):
    """A NARX run of 2000 window iterations whose best check is ``best_iteration``."""
    config = RecipeConfig(iterations=2000, learning_rate=0.001, units=(64, 64))
    return SimpleNamespace(
        config=config, seed=0, choice_rmse=0.1, horizon_rmse=0.1, validation_rmse=0.1,
        polynomial=None, best_iteration=best_iteration, seconds=12.0, ran_off=None, not_kept=None,
        edge_worse=False, test_like_rmse=0.1, stopped=stopped,
    )  # fmt: skip


def test_a_lag_runs_best_iteration_is_counted_through_its_one_step_iterations():
    run = narx_run(5700)
    one = one_step_iterations("narx", run.config)
    assert one == int(ONE_STEP["narx"] * 2000) == 5000
    assert one_step_iterations("polynomial", run.config) == 0
    line = run_line(run, "narx", "run", 1)
    assert "best at iteration 5700 of 7000" in line  # the count the best iteration is on
    assert "stopped" not in line


def test_a_run_stopped_by_its_race_says_where_and_on_what_figures():
    stop = {"iteration": 5500, "iterations": 7000, "floor": 0.18914, "reference": 0.01734}
    line = run_line(narx_run(5200, stop), "narx", "run", 3)
    assert line.endswith(
        "; stopped at iteration 5500 of 7000: its validation so far keeps its choice RMSE above "
        f"0.1891, over {RACE_FACTOR:g} x the best finished run's 0.0173"
    )


def test_the_settings_line_says_how_a_lag_runs_iterations_count():
    from keras_mgu.sysid.choice.report import _lag_iterations

    config = RecipeConfig(iterations=2000)
    said = _lag_iterations(SimpleNamespace(name="narx", config=config))
    assert said == "2000 iterations after 5000 one-step ones (iterations 1-5000 one-step, " \
        "5001-7000 on windows)"  # fmt: skip
    assert _lag_iterations(SimpleNamespace(name="linear", config=config)) == "2000 iterations"


def test_the_class_table_says_which_class_stopped_where():
    from keras_mgu.sysid.choice.report import describe_class_table

    row = {"runs": 1, "best": 0.27, "median": 0.27, "validation": 0.27, "horizon": 0.27}
    table = [
        {"class": "narx", **row, "stopped_at": 5500, "stopped_of": 7000},
        {"class": "polynomial", **row, "runs": 3, "best": 0.017},
    ]
    lines = describe_class_table(table, "polynomial").splitlines()
    assert lines[1].endswith("(0.2700 | 0.2700; 1 run(s), stopped at iteration 5500 of 7000)")
    assert "stopped" not in lines[2] and lines[2].endswith("<- chosen")
