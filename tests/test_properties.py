"""Property-based checks of MGU over shapes, dtypes and arguments, and non-finite inputs.

Every invalid combination must raise a ``ValueError``/``TypeError`` whose message names
what was expected; every valid one must run and match the NumPy reference.
"""

from __future__ import annotations

import re

import keras
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keras_mgu import MGU
from keras_mgu.checks import IMPLEMENTATIONS as ALL_IMPLEMENTATIONS
from keras_mgu.kernels import reference
from tests.helpers import BACKEND, CELL_AND_FUSED, to_numpy

IMPLEMENTATIONS = CELL_AND_FUSED
FEW = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: Absolute tolerance against the float64 reference, by compute dtype.
ATOL = {"float16": 3e-2, "bfloat16": 1e-1, "float32": 1e-5, "float64": 1e-5}


def compute_dtype_of(policy: str) -> str:
    """The dtype MGU computes in under ``policy`` (JAX without x64 has no float64)."""
    dtype = keras.DTypePolicy(policy).compute_dtype
    if BACKEND == "jax" and dtype == "float64":
        import jax

        if not jax.config.jax_enable_x64:
            return "float32"
    return dtype


# --------------------------------------------------------------------------------------------
# Invalid constructor arguments
# --------------------------------------------------------------------------------------------

bad_units = st.one_of(
    st.integers(max_value=0),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
)
bad_rates = st.one_of(
    st.floats(max_value=-1e-6),
    st.floats(min_value=1.000001),
    st.just(float("nan")),
    st.text(min_size=1, max_size=3).filter(lambda s: not _is_number(s)),
)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@FEW
@given(units=bad_units)
def test_bad_units_are_rejected(units):
    with pytest.raises(ValueError, match="`units` must be a positive integer"):
        MGU(units)


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(["dropout", "recurrent_dropout"]), rate=bad_rates)
def test_bad_dropout_rates_are_rejected(name, rate):
    with pytest.raises(ValueError, match=rf"`{name}` must be a float in \[0, 1\]"):
        MGU(4, **{name: rate})


@FEW
@given(implementation=st.text(max_size=8).filter(lambda s: s not in ALL_IMPLEMENTATIONS))
def test_bad_implementation_is_rejected(implementation):
    with pytest.raises(ValueError, match="`implementation` must be one of"):
        MGU(4, implementation=implementation)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"unroll": True}, "unroll=True"),
        ({"recurrent_dropout": 0.25}, "recurrent_dropout"),
    ],
)
def test_fused_rejects_what_it_cannot_serve(kwargs, expected):
    with pytest.raises(ValueError, match=rf"implementation='fused' cannot serve.*{expected}"):
        MGU(4, implementation="fused", **kwargs)


@pytest.mark.parametrize(
    "kwargs", [{"activation": "relu"}, {"recurrent_activation": "hard_sigmoid"}]
)
def test_activations_without_an_mgu_kernel_run_fused_on_the_engine(kwargs):
    layer = MGU(4, implementation="fused", **kwargs)
    assert layer.kernel_in_use == "engine"


def test_integer_dtype_policy_is_rejected():
    with pytest.raises(ValueError, match=r"MGU.*float"):
        MGU(4, dtype="int32")(np.ones((1, 2, 3), "float32"))


# --------------------------------------------------------------------------------------------
# Invalid input shapes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@FEW
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=5).filter(lambda s: len(s) != 3))
def test_inputs_not_of_rank_3_raise(implementation, shape):
    with pytest.raises(ValueError, match=r"rank 3, \(batch, steps, features\)"):
        MGU(2, implementation=implementation)(np.ones(shape, "float32"))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@FEW
@given(batch=st.integers(1, 3), features=st.integers(1, 3))
def test_zero_time_steps_raise(implementation, batch, features):
    with pytest.raises(ValueError, match="at least one time step"):
        MGU(2, implementation=implementation)(np.ones((batch, 0, features), "float32"))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_feature_size_change_after_build_raises(implementation):
    layer = MGU(2, implementation=implementation)
    layer(np.ones((1, 2, 3), "float32"))
    with pytest.raises(ValueError, match="built for 3 input features but received 4"):
        layer(np.ones((1, 2, 4), "float32"))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "what, shape",
    [
        ("mask", (2, 6)),
        ("mask", (3, 5)),
        ("mask", (2, 5, 1)),
        ("initial_state", (2, 3)),
        ("initial_state", (3, 4)),
        ("initial_state", (4,)),
    ],
)
def test_wrong_mask_or_state_shape_raises(implementation, what, shape):
    value = np.ones(shape, bool) if what == "mask" else np.zeros(shape, "float32")
    layer = MGU(4, implementation=implementation)
    x = np.ones((2, 5, 3), "float32")
    layer(x)
    expected = (2, 5) if what == "mask" else (2, 4)  # (batch, steps) / (batch, units)
    with pytest.raises(ValueError, match=rf"(?s){what}.*{re.escape(str(expected))}"):
        layer(x, **{what: value})


# --------------------------------------------------------------------------------------------
# Valid shapes, dtypes and arguments
# --------------------------------------------------------------------------------------------


@st.composite
def valid_cases(draw):
    return {
        "batch": draw(st.integers(1, 3)),
        "steps": draw(st.integers(1, 4)),
        "features": draw(st.integers(1, 3)),
        "units": draw(st.integers(1, 4)),
        "input_dtype": draw(st.sampled_from(["float16", "bfloat16", "float32", "float64"])),
        "policy": draw(st.sampled_from(["float32", "float64", "mixed_float16", "mixed_bfloat16"])),
        "return_sequences": draw(st.booleans()),
        "go_backwards": draw(st.booleans()),
        "use_bias": draw(st.booleans()),
        "masked": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
    }


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@settings(FEW, max_examples=8)
@given(case=valid_cases())
def test_valid_combinations_run_and_match_reference(implementation, case):
    rng = np.random.default_rng(case["seed"])
    b, t, d, h = case["batch"], case["steps"], case["features"], case["units"]
    layer = MGU(
        h,
        implementation=implementation,
        return_sequences=case["return_sequences"],
        return_state=True,
        go_backwards=case["go_backwards"],
        use_bias=case["use_bias"],
        dtype=case["policy"],
    )
    x = keras.ops.cast(rng.standard_normal((b, t, d)), case["input_dtype"])
    mask = rng.random((b, t)) > 0.3 if case["masked"] else None
    out, state = layer(x, mask=mask)
    compute = compute_dtype_of(case["policy"])
    assert keras.backend.standardize_dtype(out.dtype) == compute
    expected_shape = (b, t, h) if case["return_sequences"] else (b, h)
    assert tuple(out.shape) == expected_shape and tuple(state.shape) == (b, h)

    # Reference: the input as the layer sees it (cast to the compute dtype), in float64.
    x64 = to_numpy(keras.ops.cast(keras.ops.cast(x, compute), "float32")).astype("float64")
    weights = [w.astype("float64") for w in layer.get_weights()]
    bias = weights[2] if case["use_bias"] else None
    ref_seq, ref_state = reference.mgu_sequence(
        x64, weights[0], weights[1], bias, mask=mask, go_backwards=case["go_backwards"]
    )
    ref_out = ref_seq if case["return_sequences"] else ref_state
    as64 = lambda v: to_numpy(keras.ops.cast(v, "float32")).astype("float64")  # noqa: E731
    np.testing.assert_allclose(as64(out), ref_out, atol=ATOL[compute])
    np.testing.assert_allclose(as64(state), ref_state, atol=ATOL[compute])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool"])
def test_integer_inputs_are_cast_to_the_compute_dtype(implementation, dtype):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 3, (2, 4, 3))
    layer = MGU(3, implementation=implementation, return_sequences=True)
    out = layer(keras.ops.cast(values, dtype))
    assert keras.backend.standardize_dtype(out.dtype) == "float32"
    expected, _ = reference.mgu_sequence(
        values.astype(dtype).astype("float32"), *layer.get_weights()
    )
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-5)


@pytest.mark.parametrize(
    "implementation",
    IMPLEMENTATIONS,
)
def test_complex_inputs_raise_type_error(implementation):
    x = keras.ops.cast(np.ones((1, 2, 3)), "complex64")
    with pytest.raises(TypeError, match="floating"):
        MGU(2, implementation=implementation)(x)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_empty_batch_gives_empty_outputs(implementation):
    out, state = MGU(2, implementation=implementation, return_sequences=True, return_state=True)(
        np.ones((0, 3, 4), "float32")
    )
    assert tuple(out.shape) == (0, 3, 2) and tuple(state.shape) == (0, 2)


# --------------------------------------------------------------------------------------------
# Non-finite inputs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@FEW
@given(t_bad=st.integers(0, 4), feature=st.integers(0, 2), go_backwards=st.booleans())
def test_nan_input_poisons_its_sequence_from_that_step_on(
    implementation, t_bad, feature, go_backwards
):
    rng = np.random.default_rng(t_bad)
    x = rng.standard_normal((2, 5, 3)).astype("float32")
    x[1, t_bad, feature] = np.nan
    layer = MGU(4, implementation=implementation, return_sequences=True, go_backwards=go_backwards)
    out = to_numpy(layer(x))
    assert np.isfinite(out[0]).all()  # the other sequence is untouched
    first = 4 - t_bad if go_backwards else t_bad  # position of the NaN step in processing order
    assert np.isfinite(out[1, :first]).all()
    assert np.isnan(out[1, first:]).all()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_infinite_input_follows_the_equations(rng, implementation, value):
    """An infinite input saturates the gates; the outputs are what the equations give."""
    x = rng.standard_normal((2, 5, 3)).astype("float32")
    x[0, 2, 1] = value
    layer = MGU(4, implementation=implementation, return_sequences=True)
    out = to_numpy(layer(x))
    expected, _ = reference.mgu_sequence(x, *layer.get_weights())
    np.testing.assert_allclose(out, expected, atol=1e-5)  # NaN where the reference has NaN


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_terminate_on_nan_stops_fit(rng, implementation, bad):
    x = rng.standard_normal((20, 5, 2)).astype("float32")
    y = rng.standard_normal((20, 1)).astype("float32")
    x[8, 3, 0] = bad  # in the third batch of four samples
    model = keras.Sequential(
        [keras.Input((5, 2)), MGU(3, implementation=implementation), keras.layers.Dense(1)]
    )
    model.compile(optimizer="sgd", loss="mse")
    seen = []
    counter = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(b))
    history = model.fit(
        x,
        y,
        batch_size=4,
        epochs=3,
        shuffle=False,
        verbose=0,
        callbacks=[counter, keras.callbacks.TerminateOnNaN()],
    )
    # NaN: the loss of batch 3 is NaN. inf: the outputs stay finite but the gradient is
    # NaN (inf * 0), so the weights become NaN and the loss of batch 4 is NaN.
    assert len(seen) == (3 if np.isnan(bad) else 4)
    assert len(history.history["loss"]) <= 1
