"""The run-off guard's box, stress experiment and words, on hand-made records."""

import numpy as np
import pytest

from keras_mgu.sysid.choice.runoff import (
    STRETCH,
    OutputBox,
    describe_exit,
    stress_input,
    stretched_input,
)
from tests.helpers import BACKEND_INDEPENDENT


@BACKEND_INDEPENDENT
def test_the_box_is_the_range_widened_by_half_its_span_per_output():
    y = np.array([[0.0, 10.0], [2.0, 14.0], [1.0, 12.0]])
    box = OutputBox.of(y)
    np.testing.assert_allclose(box.lower, [-1.0, 8.0])
    np.testing.assert_allclose(box.upper, [3.0, 16.0])
    assert box.first_exit(np.array([[-1.0, 8.0], [3.0, 16.0]])) is None  # its edges are inside
    assert box.first_exit(np.array([[0.0, 9.0], [0.0, 16.1], [9.0, 9.0]])) == (1, 1)
    assert box.first_exit(np.array([[0.0, 9.0], [np.nan, 9.0]])) == (1, 0)  # not finite
    with pytest.raises(ValueError, match=r"shape \(N >= 1, n_outputs\)"):
        OutputBox.of(np.zeros(3))


@BACKEND_INDEPENDENT
def test_the_stress_input_is_the_record_then_the_record_reversed():
    u = np.arange(8.0).reshape(4, 2)
    stress = stress_input(u)
    assert stress.shape == (8, 2)
    np.testing.assert_array_equal(stress[:4], u)
    np.testing.assert_array_equal(stress[4:], u[::-1])


@BACKEND_INDEPENDENT
def test_a_diverging_free_run_is_described_where_it_leaves():
    box = OutputBox.of(np.array([[0.0], [1.0]]))
    growing = 0.5 * 1.1 ** np.arange(40.0)[:, None]  # leaves 1.5 at the 12th sample
    said = describe_exit("the validation record", growing, box, offset=20, output_names=["y"])
    first = int(np.argmax(growing[:, 0] > 1.5))
    assert said == (
        f"left [-0.5, 1.5] on the validation record at sample {first + 20} "
        f"(y = {growing[first, 0]:.4g})"
    )
    assert describe_exit("it", np.full((5, 1), 0.7), box) is None


@BACKEND_INDEPENDENT
def test_a_run_that_ran_off_is_neither_chosen_nor_averaged_unless_every_one_did():
    import types

    from keras_mgu.sysid.choice.restarts import best_run, kept_runs, selection_pool

    def run(structure, score, off=None):
        return types.SimpleNamespace(structure=structure, choice_rmse=score, not_kept=off)

    runs = [run("loop", 0.1, "left [0, 1] ..."), run("loop", 0.3), run("network", 0.2),
            run("loop", 0.05, "left [0, 1] ...")]  # fmt: skip
    assert best_run(runs) == 2 and best_run(runs, [0, 1, 3]) == 1
    assert selection_pool(runs, "loop") == [1]
    assert kept_runs(runs, [0, 3]) == [0, 3]  # every one ran off: all stay, the best is kept
    assert best_run(runs, [0, 3]) == 3


def test_a_run_made_to_diverge_runs_off():
    """An ARX model with a pole at 1.05 leaves the box; the least-squares one does not."""
    from keras_mgu import datasets, sysid
    from keras_mgu.sysid.choice.candidates import model_classes
    from keras_mgu.sysid.choice.restarts import Restarts
    from keras_mgu.sysid.models.arx import LinearModel
    from keras_mgu.sysid.models.output_error import build_output_error
    from keras_mgu.sysid.training.run import RunResult

    data = datasets.simulate_cascaded_tanks(n_samples=256, seed=0)
    options, _ = model_classes(data, sysid.RecipeConfig(model_classes=("linear",)))
    restarts, option = Restarts(data, options, restarts=1), options[0]
    a = np.zeros_like(option.linear.a)
    a[:, 0] = -1.05  # y(k) = 1.05 y(k - 1) + ...
    unstable = LinearModel(a, option.linear.b, option.linear.c)
    runs = []
    for linear in (option.linear, unstable):
        model = build_output_error(linear, option.config.n_initial)
        run = RunResult(model, 0, float("nan"), 0, 0.0, None, option.config)
        runs.append(restarts._scored(run, option, 0, "run"))
    assert restarts.stress_applies(
        "the estimation inputs then reversed"
    )  # the tanks' ARX model holds on the stress experiment
    assert runs[0].ran_off is None
    assert runs[1].ran_off.startswith("left [") and "on the estimation record" in runs[1].ran_off


@BACKEND_INDEPENDENT
def test_the_stretched_input_keeps_each_mean_and_stretches_each_deviation():
    u = np.array([[0.0, 10.0], [2.0, 14.0], [1.0, 12.0], [5.0, 12.0]])
    stretched = stretched_input(u, 2.0)
    expected = np.stack([u[:, j].mean() + 2.0 * (u[:, j] - u[:, j].mean()) for j in (0, 1)], 1)
    np.testing.assert_allclose(stretched, expected)
    np.testing.assert_allclose(stretched_input(u), u.mean(0) + STRETCH * (u - u.mean(0)))


def test_a_polynomial_that_blows_up_beyond_its_range_runs_off_on_the_stretched_experiment():
    """The hardening oscillator's polynomial chosen on its records alone stays in the box on
    them and on the reversed inputs, and leaves it once the inputs are stretched: the run
    is not kept, and the report says where. The one the recipe fits does not."""
    import dataclasses

    from keras_mgu import datasets, sysid
    from keras_mgu.sysid.choice.candidates import model_classes
    from keras_mgu.sysid.choice.restarts import Restarts
    from keras_mgu.sysid.models.polynomial import fit_polynomial
    from keras_mgu.sysid.training.run import RunResult

    data = datasets.zoo_plant("hardening_oscillator", seed=0).data
    config = sysid.RecipeConfig(model_classes=("polynomial",), input_delay=0)
    options, _ = model_classes(data, config)
    restarts, option = Restarts(data, options, restarts=1), options[0]
    name = f"the estimation inputs stretched {STRETCH:g} times"
    assert name in restarts.stresses and restarts.stress_applies(name)
    est, val = restarts.records["polynomial"]
    plain = fit_polynomial(est, val, lags=(6,), degrees=(3,), held_out=est)[0]
    stretched = restarts._stretched(option)
    careful = fit_polynomial(est, val, lags=(6,), degrees=(3,), held_out=est,
                             stretched=stretched)[0]  # fmt: skip
    said = []
    for fitted in (plain, careful):
        run_config = dataclasses.replace(option.config, n_initial=fitted.lag, units=())
        run = RunResult(fitted.keras_model(), 0, float("nan"), 0, 0.0, None, run_config)
        said.append(restarts._scored(run, option, 0, "run").ran_off)
    assert said[0].startswith("left [") and f"on {name} at sample" in said[0]
    assert said[1] is None
