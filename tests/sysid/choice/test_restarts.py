"""The restarts' edge guard on hand-made models of a simulated record."""

import dataclasses

import numpy as np
import pytest


def _scored(restarts, option, model, name):
    from keras_mgu.sysid.training.run import RunResult

    run = RunResult(model, 0, float("nan"), 0, 0.0, None, option.config)
    return restarts._scored(run, dataclasses.replace(option, name=name), 0, "run")


@pytest.mark.parametrize("guard", [True, False])
def test_a_model_wrong_only_at_the_edges_is_not_kept_with_the_edge_guard(guard):
    """The least-squares ARX model, and the same model flattened above the 0.9 quantile of its
    own estimation output (right within, wrong at the record's upper edge), each scored as
    a NARX run: the first is level with the ARX model at the edges and kept, the flattened one
    errs more there and, with the guard, is not kept, though its choice RMSE is close; as
    the linear class it would be (a linear model is not held to the rule); without the
    guard it is kept and its line says it. The edge figures are those of the validation
    samples outside the estimation record's 0.05-0.95 quantiles."""
    import keras

    from keras_mgu import datasets, sysid
    from keras_mgu.sysid.choice import report
    from keras_mgu.sysid.choice.candidates import model_classes
    from keras_mgu.sysid.choice.restarts import Restarts
    from keras_mgu.sysid.identification import Identification
    from keras_mgu.sysid.models.output_error import build_output_error

    data = datasets.simulate_cascaded_tanks(n_samples=1024, seed=0)
    config = sysid.RecipeConfig(model_classes=("linear",), edge_guard=guard)
    options, _ = model_classes(data, config)
    assert options[0].config.edge_guard is guard
    restarts, option = Restarts(data, options, restarts=1), options[0]
    plain = build_output_error(option.linear, option.config.n_initial)
    est = data.estimation
    inner = Identification([_scored(restarts, option, plain, "linear")], 0, data.n_initial)
    top = float(np.quantile(inner.path.outer.transform_y(est.y), 0.9))
    bend = keras.layers.Lambda(lambda y: y - 0.8 * keras.ops.relu(y - top))  # flattened
    flat = keras.Model(plain.inputs, bend(plain.outputs[0]))

    level = _scored(restarts, option, plain, "narx")
    assert level.edge.decides and level.edge.rmse == level.edge.linear_rmse
    assert level.not_kept is None
    worse = _scored(restarts, option, flat, "narx")
    assert worse.edge_worse and worse.choice_rmse < 2 * level.choice_rmse
    if guard:
        assert "at the record's edges" in worse.not_kept
    else:
        assert worse.not_kept is None
        line = report.run_line(worse, "narx", "run", 1)
        assert line.endswith(f"; {worse.edge.describe()}: above the ARX model's")
    assert _scored(restarts, option, flat, "linear").not_kept is None

    # the figures, from the validation record's own simulation
    val, alone = data.validation, Identification([worse], 0, data.n_initial, restarts.first)
    n = min(alone.measured_n(), val.n_samples - 1)
    (y_low, y_high), (u_low, u_high) = (
        np.quantile(est.y, [0.05, 0.95]),
        np.quantile(est.u, [0.05, 0.95]),
    )
    edge = ((val.y < y_low) | (val.y > y_high) | (val.u < u_low) | (val.u > u_high))[:, 0]
    error = alone.test_like_error(val)
    assert worse.edge.samples == edge[n:].sum() >= 20
    np.testing.assert_allclose(worse.edge.rmse, np.sqrt(np.mean(error[edge[n:]] ** 2)))
