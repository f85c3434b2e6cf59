"""The ARX loop cell, NARX and the linear loop: checked against NumPy loops written from their
equations, finite differences, and the linear model they start from."""

import os

import keras
import numpy as np
import pytest

from keras_mgu import MGUCell
from keras_mgu.kernels.reference import mgu_step
from keras_mgu.sysid import LinearModel
from keras_mgu.sysid.models.lag_model import lag_simulator
from keras_mgu.sysid.models.loop import build_linear_loop, make_cell
from keras_mgu.sysid.models.loop_cell import ArxLoopCell, arx_kernel, regressor_bounds
from keras_mgu.sysid.models.narx import build_narx


def _plant(rng, n=400):
    """A two-input, two-output record with a mild nonlinearity."""
    u = rng.normal(size=(n, 2))
    y = np.zeros((n, 2))
    for t in range(2, n):
        y[t, 0] = 1.2 * y[t - 1, 0] - 0.5 * y[t - 2, 0] + 0.4 * u[t, 0] + 0.2 * u[t - 1, 1]
        y[t, 1] = 0.7 * y[t - 1, 1] + 0.3 * u[t - 1, 0] + 0.1 * np.tanh(y[t - 1, 0])
    return u, y + 0.01 * rng.normal(size=y.shape)


def _arx_loop(linear, u, y, start, steps):
    """ARX free run from the measured samples before ``start``, from its equations."""
    na, nb = linear.orders
    out = np.array(y, dtype=np.float64)
    for t in range(start, start + steps):
        for i in range(out.shape[1]):
            past = out[t - np.arange(1, na + 1), i]
            forcing = sum(linear.b[i, m] @ u[t - np.arange(nb), m] for m in range(u.shape[1]))
            out[t, i] = -linear.a[i] @ past + forcing + linear.c[i]
    return out[start : start + steps]


def _call(model, u, y, start, lag, steps):
    inputs = [
        u[None, start - lag : start],
        y[None, start - lag : start],
        u[None, start : start + steps],
    ]
    out = model([np.asarray(a, dtype="float32") for a in inputs], training=False)
    return keras.ops.convert_to_numpy(out)[0].astype(np.float64)


@pytest.mark.parametrize("kind", ["narx", "loop"])
def test_a_fresh_model_simulates_as_its_linear_model(kind, rng):
    u, y = _plant(rng)
    linear = LinearModel.fit(u, y, 3, 4)
    build = build_narx if kind == "narx" else build_linear_loop
    model = build(linear, lag=6, seed=0)
    got = _call(model, u, y, 100, 6, 60)
    np.testing.assert_allclose(got, _arx_loop(linear, u, y, 100, 60), atol=2e-4)


def test_arx_kernel_orders_the_regressors_as_the_state():
    a, b = np.array([[0.5, -0.2]]), np.array([[[1.0, 2.0, 3.0]]])
    kernel = arx_kernel(a, b)  # rows: y_{t-1}, y_{t-2}, u_{t-1}, u_{t-2}, u_t
    np.testing.assert_array_equal(kernel[:, 0], [-0.5, 0.2, 2.0, 3.0, 1.0])


def _numpy_free_run(na, nb, u, y_past, u_past, step):
    """A lag model's free run: ``y_t = step(r_t)``, ``r_t`` the regressors newest first."""
    ys, us = list(y_past[::-1][:na]), list(u_past[::-1][: nb - 1])
    result = []
    for u_t in u:
        y_t = step(np.concatenate([*ys, *us, u_t]))
        result.append(y_t)
        ys = [y_t, *ys[:-1]]
        us = [u_t, *us[:-1]] if nb > 1 else []
    return np.array(result)


def _mlp(g, mlp):
    for k in range(0, len(mlp), 2):
        g = np.tanh(g @ mlp[k] + mlp[k + 1])
    return g


def _numpy_narx(cell, weights, u, y_past, u_past):
    """The NARX free run written from its equations (module docstring of ``loop_cell``)."""
    kernel, bias, *mlp, out = weights
    step = lambda r: r @ kernel + bias + _mlp(r, mlp) @ out  # noqa: E731
    return _numpy_free_run(cell.na, cell.nb, u, y_past, u_past, step)


def test_the_narx_free_run_matches_a_numpy_loop(rng):
    u, y = _plant(rng)
    model = build_narx(LinearModel.fit(u, y, 2, 3), lag=4, hidden=(8, 5), seed=1)
    cell = model.get_layer("loop").cell
    cell.out_kernel.assign(rng.normal(scale=0.3, size=cell.out_kernel.shape).astype("float32"))
    weights = [keras.ops.convert_to_numpy(w).astype(np.float64) for w in cell.weights]
    got = _call(model, u, y, 50, 4, 40)
    expected = _numpy_narx(cell, weights, u[50:90], y[46:50], u[46:50])
    np.testing.assert_allclose(got, expected, atol=2e-4)


def test_the_loop_free_run_matches_a_numpy_loop_with_the_reference_mgu(rng):
    u, y = _plant(rng)
    linear = LinearModel.fit(u, y, 2, 2)
    model = build_linear_loop(linear, lag=2, units=5, seed=2)
    cell = model.get_layer("loop").cell
    cell.out_kernel.assign(rng.normal(scale=0.5, size=cell.out_kernel.shape).astype("float32"))
    w = {
        v.path.rsplit("/", 1)[-1]: keras.ops.convert_to_numpy(v).astype(np.float64)
        for v in cell.weights
    }
    past = np.concatenate([u[48:50], y[48:50]], axis=1).reshape(1, -1)
    enc = model.get_layer("encoder_hidden").get_weights()
    h0w = model.get_layer("encoder_state_0").get_weights()
    h = np.tanh(past @ enc[0] + enc[1]) @ h0w[0] + h0w[1]
    ys, us, out = [y[49], y[48]], [u[49]], []
    for t in range(50, 80):
        r = np.concatenate([*ys, *us, u[t]])[None]
        h = mgu_step(r, h, w["kernel"], w["recurrent_kernel"], w["bias"])
        y_t = (r @ w["arx_kernel"] + w["arx_bias"] + h @ w["branch_out"])[0]
        out.append(y_t)
        ys, us = [y_t, ys[0]], [u[t]]
    np.testing.assert_allclose(_call(model, u, y, 50, 2, 30), np.array(out), atol=2e-4)


def test_gradients_match_finite_differences(rng):
    """One plain SGD step moves the weights by -lr times the gradient of the window loss."""
    u, y = _plant(rng, 200)
    model = build_narx(LinearModel.fit(u, y, 2, 3), lag=2, hidden=(4,), seed=3)
    cell = model.get_layer("loop").cell
    cell.out_kernel.assign(rng.normal(scale=0.3, size=cell.out_kernel.shape).astype("float32"))
    inputs = [a.astype("float32") for a in (u[None, 20:22], y[None, 20:22], u[None, 22:42])]
    target = y[None, 22:42].astype("float32")

    def loss(weights):
        model.set_weights(weights)
        out = keras.ops.convert_to_numpy(model(inputs)).astype(np.float64)
        return float(np.mean((out - target) ** 2))

    start = model.get_weights()
    model.compile(keras.optimizers.SGD(1.0), "mse")
    model.train_on_batch(inputs, target)
    moved = [s - w for s, w in zip(start, model.get_weights())]
    for index in (0, 2, len(start) - 1):  # ARX kernel, hidden kernel, output kernel
        flat = start[index].reshape(-1)
        for j in rng.choice(flat.size, size=min(3, flat.size), replace=False):
            eps = 1e-2
            plus = [w.copy() for w in start]
            minus = [w.copy() for w in start]
            plus[index].reshape(-1)[j] += eps
            minus[index].reshape(-1)[j] -= eps
            fd = (loss(plus) - loss(minus)) / (2 * eps)
            assert moved[index].reshape(-1)[j] == pytest.approx(fd, rel=2e-2, abs=2e-4)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_the_loop_takes_keras_cells(cell, rng):
    u, y = _plant(rng, 200)
    linear = LinearModel.fit(u, y, 2, 3)
    model = build_linear_loop(linear, cell=cell, units=3, seed=0)
    np.testing.assert_allclose(
        _call(model, u, y, 50, 2, 20), _arx_loop(linear, u, y, 50, 20), atol=2e-4
    )


def test_a_users_cell_by_its_import_path():
    made = make_cell("keras_mgu:MGUCell", 7)
    assert isinstance(made, MGUCell) and made.units == 7
    with pytest.raises(ValueError, match="cannot import the cell"):
        make_cell("no_such_module:Cell", 3)
    with pytest.raises(ValueError, match="must be one of"):
        make_cell("rnn", 3)


def test_a_lag_model_saves_and_loads(tmp_path, rng):
    u, y = _plant(rng, 200)
    model = build_linear_loop(LinearModel.fit(u, y, 2, 3), units=4, seed=0)
    cell = model.get_layer("loop").cell
    cell.out_kernel.assign(rng.normal(size=cell.out_kernel.shape).astype("float32"))
    path = os.path.join(tmp_path, "loop.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(
        _call(loaded, u, y, 50, 2, 30), _call(model, u, y, 50, 2, 30), atol=1e-6
    )


def test_bad_arguments_say_what_was_expected():
    with pytest.raises(ValueError, match="`na` must be an integer >= 1"):
        ArxLoopCell(1, 1, 0, 1)
    with pytest.raises(ValueError, match=r"`kernel` must be a finite array of shape \(3, 1\)"):
        ArxLoopCell(1, 1, 1, 2, kernel=np.zeros((2, 1)))
    with pytest.raises(ValueError, match="`branch` must be 'mlp', 'polynomial' or a recurrent"):
        ArxLoopCell(1, 1, 1, 1, branch="rnn")
    with pytest.raises(ValueError, match=r"`terms` must be index triples in \[0, 2\]"):
        ArxLoopCell(1, 1, 1, 1, branch="polynomial", terms=[[0, 0, 3]])
    with pytest.raises(ValueError, match="`output_limits` must be \\(lower, upper\\)"):
        ArxLoopCell(1, 1, 1, 1, output_limits=([1.0], [0.0]))
    with pytest.raises(ValueError, match=r"`lag` must be at least max\(na, nb - 1\) = 3"):
        lag_simulator(ArxLoopCell(1, 1, 3, 2), 2)


def _numpy_faded(cell, u, y_past, u_past):
    """A faded NARX free run from the equations of ``loop_cell``'s module docstring."""
    w = {
        v.path.split("/")[-1]: keras.ops.convert_to_numpy(v).astype(np.float64)
        for v in cell.weights
    }
    kernel, bias, out = w["arx_kernel"], w["arx_bias"], w["branch_out"]
    anchor_k, anchor_b, lower, upper = w["anchor_kernel"], w["anchor_bias"], w["lower"], w["upper"]
    mlp = [w[f"hidden_{k}_{part}"] for k in range(len(cell.hidden)) for part in ("kernel", "bias")]

    def step(r):
        inside = np.clip(r, lower, upper)
        excess = np.max(np.abs(r - inside) / (upper - lower))
        share = np.clip(1 - excess / cell.fade, 0, 1)
        anchor = r @ anchor_k + anchor_b
        return anchor + share * (r @ kernel + bias + _mlp(inside, mlp) @ out - anchor)

    return _numpy_free_run(cell.na, cell.nb, u, y_past, u_past, step)


def _faded_narx(rng):
    u, y = _plant(rng)
    linear, anchor = LinearModel.fit(u, y, 2, 3), LinearModel.fit(u, y, 1, 2)
    bounds = regressor_bounds((u.min(0), u.max(0)), (y.min(0), y.max(0)), 2, 3)
    model = build_narx(linear, lag=2, hidden=(6,), seed=4, bounds=bounds, anchor=anchor)
    cell = model.get_layer("loop").cell
    for weight in cell.trainable_weights:  # move off the start, so every term counts
        weight.assign(weight + rng.normal(scale=0.05, size=weight.shape))
    return u, y, anchor, model, cell


def test_outside_its_range_a_faded_model_is_its_anchor_inside_the_trained_model(rng):
    u, y, anchor, model, cell = _faded_narx(rng)
    scale = np.linspace(0.5, 3.0, 80)[:, None]  # from inside the range to far outside it
    u_long = np.concatenate([u[:20], u[20:100] * scale])
    got = _call(model, u_long, y, 20, 2, 80)
    expected = _numpy_faded(cell, u_long[20:100], y[18:20], u_long[18:20])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    padded = anchor.padded(2, 3)
    anchor_kernel = keras.ops.convert_to_numpy(cell.anchor_kernel)
    np.testing.assert_allclose(anchor_kernel, arx_kernel(padded.a, padded.b), atol=1e-6)
    # far outside (u three times its range) the model runs as the anchor ARX model alone
    big = np.concatenate([u[:20], 40 * np.sign(u[20:60]) + u[20:60]])
    y_big = np.concatenate([y[:20], _arx_loop(anchor.padded(2, 3), big, y, 20, 40)])
    np.testing.assert_allclose(_call(model, big, y, 20, 2, 40), y_big[20:], rtol=1e-4, atol=1e-3)


def test_a_faded_cell_keeps_its_bounds_and_anchor_through_its_config(rng):
    _, _, _, model, cell = _faded_narx(rng)
    again = ArxLoopCell.from_config(cell.get_config())
    np.testing.assert_array_equal(again.bounds[0], cell.bounds[0])
    np.testing.assert_array_equal(again.anchor[0], cell.anchor[0])
    assert again.fade == cell.fade
    old = {k: v for k, v in cell.get_config().items() if k not in ("bounds", "fade", "anchor")}
    assert ArxLoopCell.from_config(old).bounds is None  # a cell saved before them: no fading
    with pytest.raises(ValueError, match="`bounds` must be \\(lower, upper\\)"):
        ArxLoopCell(1, 1, 1, 1, bounds=([0.0, 0.0], [1.0, 0.0]))
    with pytest.raises(ValueError, match="`fade` must be a positive number"):
        ArxLoopCell(1, 1, 1, 1, fade=0)
