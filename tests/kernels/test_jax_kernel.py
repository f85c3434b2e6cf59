"""The fused JAX MGU kernel against the NumPy reference and finite differences."""

import os

import pytest

if os.environ.get("KERAS_BACKEND", "tensorflow") != "jax":
    pytest.skip("JAX kernel tests run on the jax backend only", allow_module_level=True)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_mgu import MGU  # noqa: E402
from keras_mgu.kernels import jax as kernel  # noqa: E402
from keras_mgu.kernels import reference  # noqa: E402
from tests.helpers import central_differences  # noqa: E402

ACTS = {"tanh": np.tanh, "sigmoid": reference.sigmoid}
GATE_PAIRS = [("tanh", "sigmoid"), ("sigmoid", "tanh")]


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(params=["small_matmul", "dot"])
def loop_variant(request, monkeypatch):
    """Cover both ways the loops multiply by U and both ways dU is formed."""
    if request.param == "small_matmul":
        monkeypatch.setattr(kernel, "SMALL_MATMUL_UNITS", 1000)
        monkeypatch.setattr(kernel, "LOOP_WEIGHT_GRAD_UNITS", 1000)
    else:
        monkeypatch.setattr(kernel, "SMALL_MATMUL_UNITS", 0)
        monkeypatch.setattr(kernel, "LOOP_WEIGHT_GRAD_UNITS", 1)
    return request.param


def make_args(rng, batch=3, steps=5, features=2, units=4, dtype=np.float64):
    x = rng.normal(size=(batch, steps, features))
    h0 = rng.normal(size=(batch, units)) * 0.5
    w = rng.normal(size=(features, 2 * units))
    u = rng.normal(size=(units, 2 * units)) * 0.7
    b = rng.normal(size=(2 * units,)) * 0.3
    return [a.astype(dtype) for a in (x, h0, w, u, b)]


def make_mask(batch, steps):
    """Holes, a fully masked row, a leading and a trailing masked step."""
    mask = np.ones((batch, steps), bool)
    mask[0, 1] = mask[0, 3] = False
    mask[1, :] = False
    mask[2, 0] = mask[2, -1] = False
    return mask


def run_reference(x, h0, w, u, b, mask, go_backwards, act="tanh", ract="sigmoid"):
    return reference.mgu_sequence(
        x, w, u, b, h0, mask, go_backwards, activation=ACTS[act], recurrent_activation=ACTS[ract]
    )


def run_kernel(x, h0, w, u, b, mask, go_backwards, act="tanh", ract="sigmoid"):
    return kernel.mgu_sequence(
        x,
        h0,
        w,
        u,
        b,
        mask,
        activation=act,
        recurrent_activation=ract,
        go_backwards=go_backwards,
    )


def scan_autodiff(x, h0, w, u, b, mask, go_backwards):
    """Plain cell-by-cell ``lax.scan`` of the MGU, differentiated by JAX alone."""
    units = h0.shape[-1]
    xs = jnp.swapaxes(x, 0, 1)
    ms = jnp.swapaxes(mask, 0, 1)[..., None]
    if go_backwards:
        xs, ms = xs[::-1], ms[::-1]

    def step(h, inp):
        x_t, m_t = inp
        f = jax.nn.sigmoid(x_t @ w[:, :units] + h @ u[:, :units] + b[:units])
        c = jnp.tanh(x_t @ w[:, units:] + (f * h) @ u[:, units:] + b[units:])
        h_new = jnp.where(m_t, (1.0 - f) * h + f * c, h)
        return h_new, h_new

    h_last, hs = jax.lax.scan(step, h0, (xs, ms))
    return jnp.swapaxes(hs, 0, 1), h_last


# --------------------------------------------------------------------- forward
@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("use_bias", [True, False])
def test_forward_matches_reference(x64, rng, loop_variant, go_backwards, masked, use_bias):
    x, h0, w, u, b = make_args(rng, batch=3, steps=6)
    b = b if use_bias else None
    mask = make_mask(3, 6) if masked else None
    outputs, state = run_kernel(x, h0, w, u, b, mask, go_backwards)
    ref_outputs, ref_state = run_reference(x, h0, w, u, b, mask, go_backwards)
    assert outputs.shape == (3, 6, 4) and state.shape == (3, 4)
    assert outputs.dtype == jnp.float64
    np.testing.assert_allclose(outputs, ref_outputs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state, ref_state, rtol=1e-12, atol=1e-12)
    if masked:  # the fully masked row keeps its initial state everywhere
        np.testing.assert_array_equal(np.asarray(outputs)[1], np.broadcast_to(h0[1], (6, 4)))


@pytest.mark.parametrize("act,ract", GATE_PAIRS + [("sigmoid", "sigmoid"), ("tanh", "tanh")])
def test_activations_match_reference(x64, rng, act, ract):
    x, h0, w, u, b = make_args(rng)
    mask = make_mask(3, 5)
    outputs, state = run_kernel(x, h0, w, u, b, mask, False, act, ract)
    ref_outputs, ref_state = run_reference(x, h0, w, u, b, mask, False, act, ract)
    np.testing.assert_allclose(outputs, ref_outputs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state, ref_state, rtol=1e-12, atol=1e-12)


def test_single_step_and_jit(rng):
    x, h0, w, u, b = make_args(rng, steps=1, dtype=np.float32)
    jitted = jax.jit(run_kernel, static_argnums=(6,))
    for go_backwards in (False, True):
        outputs, state = jitted(x, h0, w, u, b, None, go_backwards)
        ref_outputs, ref_state = run_reference(x, h0, w, u, b, None, go_backwards)
        np.testing.assert_allclose(outputs, ref_outputs, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(state, ref_state, rtol=1e-5, atol=1e-6)


def test_jit_with_mask_equals_eager(rng):
    x, h0, w, u, b = make_args(rng, batch=3, steps=7, dtype=np.float32)
    mask = np.random.default_rng(2).random((3, 7)) > 0.4
    eager = run_kernel(x, h0, w, u, b, mask, True)
    jitted = jax.jit(run_kernel, static_argnums=(6,))(x, h0, w, u, b, mask, True)
    for a, c in zip(eager, jitted):
        np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-6)
    ref = run_reference(*[a.astype(np.float64) for a in (x, h0, w, u, b)], mask, True)
    np.testing.assert_allclose(jitted[0], ref[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_inputs(rng, dtype):
    x, h0, w, u, b = make_args(rng, steps=8, dtype=np.float32)
    cast = [jnp.asarray(a).astype(dtype) for a in (x, h0, w, u, b)]
    outputs, state = run_kernel(*cast, make_mask(3, 8), False)
    assert outputs.dtype == jnp.dtype(dtype) and state.dtype == jnp.dtype(dtype)
    exact = run_reference(
        *[np.asarray(a.astype("float32"), np.float64) for a in cast], make_mask(3, 8), False
    )
    tol = 2e-2 if dtype == "bfloat16" else 3e-3
    np.testing.assert_allclose(np.asarray(outputs, np.float64), exact[0], atol=tol, rtol=tol)
    np.testing.assert_allclose(np.asarray(state, np.float64), exact[1], atol=tol, rtol=tol)


# ------------------------------------------------------------------- gradients
def weighted_loss(outputs, state):
    """A loss that weights every output and the final state differently."""
    steps, units = outputs.shape[1], outputs.shape[2]
    weights = np.linspace(0.5, 1.5, steps * units).reshape(steps, units)
    return (outputs**2 * weights).sum() + (state * np.arange(1, units + 1)).sum()


@pytest.mark.parametrize(
    "go_backwards,masked,custom_vjp",
    [(False, False, True), (True, True, True), (False, True, True), (True, True, False)],
)
def test_gradients_match_finite_differences(
    x64, rng, loop_variant, monkeypatch, go_backwards, masked, custom_vjp
):
    monkeypatch.setattr(kernel, "CUSTOM_VJP", custom_vjp)
    args = make_args(rng, batch=2, steps=4, features=2, units=3)
    mask = make_mask(3, 4)[[0, 2]] if masked else None

    def loss(x, h0, w, u, b):
        return weighted_loss(*run_kernel(x, h0, w, u, b, mask, go_backwards))

    grads = jax.grad(loss, argnums=(0, 1, 2, 3, 4))(*[jnp.asarray(a) for a in args])
    expected = central_differences(
        lambda *a: weighted_loss(*run_reference(*a, mask, go_backwards)), args, eps=1e-6
    )
    for name, g, e in zip(("inputs", "initial_state", "kernel", "rec", "bias"), grads, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7, err_msg=name)


def test_gradients_without_bias_match_finite_differences(x64, rng):
    x, h0, w, u, _ = make_args(rng, batch=2, steps=3, units=3)

    def loss(x, h0, w, u):
        return weighted_loss(*run_kernel(x, h0, w, u, None, None, False))

    grads = jax.grad(loss, argnums=(0, 1, 2, 3))(x, h0, w, u)
    expected = central_differences(
        lambda *a: weighted_loss(*run_reference(*a, None, None, False)), [x, h0, w, u], eps=1e-6
    )
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("act,ract", GATE_PAIRS)
def test_gradients_of_both_activation_orders(x64, rng, act, ract):
    args = make_args(rng, batch=2, steps=4, units=3)
    mask = make_mask(3, 4)[[0, 2]]

    def loss(*a):
        return weighted_loss(*run_kernel(*a, mask, True, act, ract))

    grads = jax.grad(loss, argnums=(0, 1, 2, 3, 4))(*args)
    expected = central_differences(
        lambda *a: weighted_loss(*run_reference(*a, mask, True, act, ract)), args, eps=1e-6
    )
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)


def test_gradients_under_jit_float32(rng):
    args = [jnp.asarray(a) for a in make_args(rng, batch=2, steps=6, dtype=np.float32)]
    mask = jnp.asarray(np.random.default_rng(3).random((2, 6)) > 0.3)

    def loss(fn, *a):
        outputs, state = fn(*a, mask, False)
        return jnp.sum(outputs**2) + jnp.sum(state)

    fused = jax.jit(jax.grad(lambda *a: loss(run_kernel, *a), argnums=(0, 1, 2, 3, 4)))(*args)
    plain = jax.grad(lambda *a: loss(scan_autodiff, *a), argnums=(0, 1, 2, 3, 4))(*args)
    for g, e in zip(fused, plain):
        np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize(
    "loop_variant,go_backwards", [("small_matmul", False), ("dot", True)], indirect=["loop_variant"]
)
def test_second_order_gradient_matches_plain_autodiff(x64, rng, loop_variant, go_backwards):
    x, h0, w, u, b = [jnp.asarray(a) for a in make_args(rng, batch=3, steps=5, units=4)]
    mask = jnp.asarray(make_mask(3, 5))

    def outer(fn):
        def penalty(w):
            grad_x = jax.grad(lambda x: jnp.sum(fn(x, h0, w, u, b, mask, go_backwards)[0]))(x)
            return jnp.sum(grad_x**2)

        return jax.grad(penalty)(w)

    fused = outer(run_kernel)
    plain = outer(scan_autodiff)
    assert np.abs(plain).max() > 1e-3  # a non-trivial second derivative
    np.testing.assert_allclose(fused, plain, rtol=1e-9, atol=1e-11)


def test_forward_over_reverse_hessian_vector_product(x64, rng):
    x, h0, w, u, b = [jnp.asarray(a) for a in make_args(rng, batch=2, steps=4, units=3)]
    mask = jnp.asarray(make_mask(3, 4)[[0, 2]])
    direction = jnp.asarray(np.random.default_rng(5).normal(size=u.shape))

    def hvp(fn):
        grad_u = jax.grad(lambda u: jnp.sum(fn(x, h0, w, u, b, mask, False)[0] ** 2))
        return jax.jvp(grad_u, (u,), (direction,))[1]

    np.testing.assert_allclose(hvp(run_kernel), hvp(scan_autodiff), rtol=1e-9, atol=1e-11)


def test_forward_mode_directly_raises_clear_error(rng):
    x, h0, w, u, b = [jnp.asarray(a) for a in make_args(rng, dtype=np.float32)]
    with pytest.raises(TypeError, match="jvp"):
        jax.jvp(lambda x: run_kernel(x, h0, w, u, b, None, False)[0], (x,), (jnp.ones_like(x),))


def test_forward_mode_with_autodiff_backward(x64, rng, monkeypatch):
    monkeypatch.setattr(kernel, "CUSTOM_VJP", False)
    x, h0, w, u, b = [jnp.asarray(a) for a in make_args(rng)]
    tangent = jnp.asarray(np.random.default_rng(4).normal(size=x.shape))
    _, jvp_out = jax.jvp(lambda x: run_kernel(x, h0, w, u, b, None, False)[0], (x,), (tangent,))
    eps = 1e-6
    plus = run_reference(np.asarray(x + eps * tangent), h0, w, u, b, None, False)[0]
    minus = run_reference(np.asarray(x - eps * tangent), h0, w, u, b, None, False)[0]
    np.testing.assert_allclose(jvp_out, (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-8)


# ----------------------------------------------------------------------- Keras
def test_keras_fit_fused_matches_cell_loop():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 12, 3)).astype("float32")
    x[:3, -4:] = 0.0  # padding the Masking layer turns into a mask
    y = rng.normal(size=(8, 1)).astype("float32")

    def model(implementation):
        keras.utils.set_random_seed(7)
        m = keras.Sequential(
            [
                keras.Input((12, 3)),
                keras.layers.Masking(0.0),
                MGU(5, go_backwards=True, implementation=implementation),
                keras.layers.Dense(1),
            ]
        )
        m.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
        return m

    fused, cell = model("fused"), model("cell")
    assert fused.layers[1].uses_fused_path and not cell.layers[1].uses_fused_path
    initial = fused.get_weights()
    loss_fused = fused.fit(x, y, batch_size=4, shuffle=False, verbose=0).history["loss"]
    loss_cell = cell.fit(x, y, batch_size=4, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(loss_fused, loss_cell, rtol=1e-4)  # same forward and updates
    for before, a, c in zip(initial, fused.get_weights(), cell.get_weights()):
        assert not np.allclose(a, before)
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
