"""The recipe's report lines: how a lag run's iterations are counted."""

from types import SimpleNamespace

from keras_mgu.sysid import RecipeConfig
from keras_mgu.sysid.choice.report import run_line
from keras_mgu.sysid.training.lag_run import ONE_STEP, one_step_iterations
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def narx_run(best_iteration):
    """A NARX run of 2000 window iterations whose best check is ``best_iteration``."""
    config = RecipeConfig(iterations=2000, learning_rate=0.001, units=(64, 64))
    return SimpleNamespace(
        config=config, seed=0, choice_rmse=0.1, horizon_rmse=0.1, validation_rmse=0.1,
        polynomial=None, best_iteration=best_iteration, seconds=12.0, ran_off=None,
        test_like_rmse=0.1,
    )  # fmt: skip


def test_a_lag_runs_best_iteration_is_counted_through_its_one_step_iterations():
    run = narx_run(5700)
    one = one_step_iterations("narx", run.config)
    assert one == int(ONE_STEP["narx"] * 2000) == 5000
    assert one_step_iterations("polynomial", run.config) == 0
    line = run_line(run, "narx", "run", 1)
    assert "best at iteration 5700 of 7000" in line  # the count the best iteration is on


def test_the_settings_line_says_how_a_lag_runs_iterations_count():
    from keras_mgu.sysid.choice.report import _lag_iterations

    config = RecipeConfig(iterations=2000)
    said = _lag_iterations(SimpleNamespace(name="narx", config=config))
    assert said == "2000 iterations after 5000 one-step ones (iterations 1-5000 one-step, " \
        "5001-7000 on windows)"  # fmt: skip
    assert _lag_iterations(SimpleNamespace(name="linear", config=config)) == "2000 iterations"
