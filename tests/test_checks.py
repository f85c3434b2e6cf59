"""The argument checks of :mod:`keras_mgu.checks`, and that every backend's kernels use them.

The first tests pin the checks themselves on static shapes and dtype names.
The others call the active backend's MGU kernel, the grouped kernel and the
native loops with one bad argument at a time and require the same exception,
with the same message, as the check called directly: one place decides, on
TensorFlow, JAX and PyTorch alike.
"""

from __future__ import annotations

import contextlib
import re

import keras
import numpy as np
import pytest

from keras_mgu import checks, kernels, native
from tests.helpers import BACKEND_INDEPENDENT

B, T, D, H = 3, 5, 2, 4


# ---------------------------------------------------------------- the checks themselves
@BACKEND_INDEPENDENT
def test_sequence_shapes_pass_when_right_and_let_unknown_dimensions_through():
    checks.check_sequence_shapes(
        (B, T, D), (H, 2 * H), initial_state=(B, H), kernel=(D, 2 * H), bias=(2 * H,),
        mask=(B, T),
    )  # fmt: skip
    checks.check_sequence_shapes(
        (None, None, D), (H, 2 * H), initial_state=(None, H), kernel=(D, None),
        mask=(None, None),
    )  # fmt: skip
    # Symbolic dimensions (e.g. while PyTorch exports) are unknown everywhere, the weights' too.
    checks.check_sequence_shapes(
        (None, None, None), (None, None), initial_state=(None, None), kernel=(None, None)
    )


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "arguments, match",
    [
        ({"inputs": (B, D)}, r"`inputs` must have shape \(batch, steps >= 1, features\)"),
        ({"inputs": (B, 0, D)}, r"`inputs` must have shape \(batch, steps >= 1"),
        ({"recurrent_kernel": (H, H)}, r"`recurrent_kernel` must have shape \(H, 2H\)"),
        ({"recurrent_kernel": (H, 2 * H, 1)}, r"`recurrent_kernel` must have shape \(H, 2H\)"),
        ({"initial_state": (B + 1, H)}, r"`initial_state` must have shape \(3, 4\)"),
        ({"kernel": (D + 1, 2 * H)}, r"`kernel` must have shape \(2, 8\)"),
        ({"bias": (H,)}, r"`bias` must have shape \(8,\)"),
        ({"mask": (B, T - 1)}, r"`mask` must have shape \(3, 5\)"),
        ({"mask": (B, T, 1)}, r"`mask` must have shape \(3, 5\)"),
    ],
)
def test_sequence_shapes_name_the_bad_argument_and_its_expected_shape(arguments, match):
    shapes = {"inputs": (B, T, D), "recurrent_kernel": (H, 2 * H), "kernel": (D, 2 * H)}
    shapes.update(arguments)
    with pytest.raises(ValueError, match=match):
        checks.check_sequence_shapes(shapes.pop("inputs"), shapes.pop("recurrent_kernel"), **shapes)


@BACKEND_INDEPENDENT
def test_dtype_and_activation_checks():
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        checks.check_floating(dtype)
    for dtype in ("int32", "bool", "complex64"):
        with pytest.raises(TypeError, match=f"floating tensor; received dtype {dtype}"):
            checks.check_floating(dtype)
    checks.check_mask_dtype("bool")
    with pytest.raises(TypeError, match="`mask` must be a boolean tensor"):
        checks.check_mask_dtype("float32")
    checks.check_kernel_activations("sigmoid", "tanh")
    with pytest.raises(ValueError, match=r"`activation` in \('tanh', 'sigmoid'\)"):
        checks.check_kernel_activations("relu", "sigmoid")
    with pytest.raises(ValueError, match="received recurrent_activation=None"):
        checks.check_kernel_activations("tanh", None)
    with pytest.raises(TypeError, match=r"native MGU loops compute in \('float32', 'float64'\)"):
        checks.check_dtype_among("float16", native.DTYPES, "The native MGU loops")


@BACKEND_INDEPENDENT
def test_groups_and_grouped_shapes():
    assert checks.groups_of((H, 2 * H)) == 1
    assert checks.groups_of((3, H, 2 * H), batch=6, units=H) == 3
    assert checks.groups_of((None, H, 2 * H), batch=5) == 1  # unknown G passes
    with pytest.raises(ValueError, match="must be a multiple of G = 3; received a batch of 5"):
        checks.groups_of((3, H, 2 * H), batch=5)
    with pytest.raises(ValueError, match=r"\(4, 8\) or \(G, 4, 8\) for 4 units"):
        checks.groups_of((3, H + 1, 2 * H), units=H)
    with pytest.raises(ValueError, match="at least one group"):
        checks.groups_of((0, H, 2 * H))
    checks.check_grouped_shapes((2, B, T, D), (2, H, 2 * H))
    with pytest.raises(ValueError, match=r"`recurrent_kernel` must have shape \(G, H, 2H\)"):
        checks.check_grouped_shapes((2, B, T, D), (H, 2 * H))
    with pytest.raises(ValueError, match=r"`inputs` must have shape \(G=2, batch, steps"):
        checks.check_grouped_shapes((3, B, T, D), (2, H, 2 * H))


# ------------------------------------------------------- every backend's kernels use them
def _good(rng: np.random.Generator) -> dict:
    return {
        "inputs": rng.normal(size=(B, T, D)).astype("float32"),
        "initial_state": rng.normal(size=(B, H)).astype("float32"),
        "kernel": rng.normal(size=(D, 2 * H)).astype("float32"),
        "recurrent_kernel": rng.normal(size=(H, 2 * H)).astype("float32"),
        "bias": rng.normal(size=(2 * H,)).astype("float32"),
        "mask": np.ones((B, T), bool),
    }


def _shape(a) -> tuple | None:
    return None if a is None else tuple(a.shape)


BAD_ARGUMENTS = {
    "short kernel": {"kernel": lambda a: a[:, :-1]},
    "recurrent kernel not (H, 2H)": {"recurrent_kernel": lambda a: a[:, :-1]},
    "initial state of another batch": {"initial_state": lambda a: a[:-1]},
    "bias of H": {"bias": lambda a: a[:H]},
    "mask of other steps": {"mask": lambda a: a[:, :-1]},
    "no time steps": {"inputs": lambda a: a[:, :0], "mask": lambda a: a[:, :0]},
    "integer inputs": {"inputs": lambda a: a.astype("int32")},
    "float mask": {"mask": lambda a: a.astype("float32")},
    "activation relu": {"activation": "relu"},
    "recurrent activation hard_sigmoid": {"recurrent_activation": "hard_sigmoid"},
}


def _expected_error(args: dict, names: dict) -> Exception:
    """What :mod:`keras_mgu.checks`, called directly, raises for these arguments."""
    try:
        checks.check_kernel_activations(**names)
        checks.check_floating(str(args["inputs"].dtype))
        checks.check_mask_dtype(str(args["mask"].dtype))
        checks.check_sequence_shapes(
            _shape(args["inputs"]), _shape(args["recurrent_kernel"]),
            **{k: _shape(args[k]) for k in ("initial_state", "kernel", "bias", "mask")},
        )  # fmt: skip
    except (TypeError, ValueError) as error:
        return error
    raise AssertionError("the arguments were meant to be bad")


@pytest.mark.parametrize("loops", ["native", "backend-loops"])
@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_each_backend_kernel_raises_what_the_one_check_raises(rng, case, loops):
    args = _good(rng)
    names = {"activation": "tanh", "recurrent_activation": "sigmoid"}
    for key, change in BAD_ARGUMENTS[case].items():
        if callable(change):
            args[key] = change(args[key])
        else:
            names[key] = change
    expected = _expected_error(args, names)
    tensors = [keras.ops.convert_to_tensor(args[k]) for k in args]
    with native.turned_off() if loops == "backend-loops" else contextlib.nullcontext():
        with pytest.raises(type(expected), match=re.escape(str(expected))):
            kernels.mgu_sequence(*tensors, **names)


def test_the_grouped_kernel_and_the_native_loops_use_the_same_checks(rng):
    x = keras.ops.convert_to_tensor(rng.normal(size=(2, B, T, D)).astype("float32"))
    h0 = keras.ops.zeros((2, B, H))
    w = keras.ops.ones((2, D, 2 * H))
    u = keras.ops.ones((2, H, 2 * H))
    with pytest.raises(ValueError, match=r"`inputs` must have shape \(G=2, batch, steps"):
        kernels.grouped_sequence(x[:1], h0, w, u, None)
    with pytest.raises(ValueError, match=r"`recurrent_kernel` must have shape \(G, H, 2H\)"):
        kernels.grouped_sequence(x, h0, w, u[0], None)
    with pytest.raises(ValueError, match=r"The MGU sequence kernels support `activation`"):
        kernels.grouped_sequence(x, h0, w, u, None, activation="relu")
    with pytest.raises(ValueError, match=r"The MGU sequence kernels support `activation`"):
        native._codes("relu", "sigmoid")
    with pytest.raises(TypeError, match=r"The native MGU loops compute in"):
        native._suffix("float16")
