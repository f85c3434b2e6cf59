"""Backend-specific test plumbing: gradients of a scalar function of tensors."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from collections.abc import Callable, Sequence

import keras
import numpy as np
import pytest

from keras_mgu import MGU

BACKEND = keras.backend.backend()

#: The repository's root folder.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_script(*path: str, register: bool = False) -> types.ModuleType:
    """The Python file at ``ROOT/*path`` (a benchmark, an example, a test script) as a module
    named after the file; ``register``: in ``sys.modules`` too (a dataclass of the file looks
    its module up there)."""
    name = os.path.splitext(path[-1])[0]
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, *path))
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


#: For tests whose subject does not depend on the Keras backend (building the
#: native core library, installing the package, file loaders): they run once,
#: with the JAX suite; ``tests/conftest.py`` applies the rule.
BACKEND_INDEPENDENT = pytest.mark.backend_independent

#: For whole workflows (an example, the README's lines, the command line's full
#: identification, a benchmark run): every backend-dependent piece they call is
#: tested on every backend by the unit tests, so the workflow itself runs once,
#: with the JAX suite, as the backend-independent tests do.
END_TO_END = pytest.mark.end_to_end

#: For tests that measure wall-clock time: under pytest-xdist they run alone.
SERIAL = pytest.mark.serial


def installed(module: str) -> bool:
    """Whether ``module`` is installed here (a one-backend install lacks the other backends)."""
    return importlib.util.find_spec(module) is not None


def requires(*modules: str, subject: str = "") -> pytest.MarkDecorator:
    """Skip where one of ``modules`` is not installed, with a reason that names it.

    For tests whose subject needs that package whatever the active backend, as
    a TF SavedModel needs TensorFlow: ``@requires("tensorflow", subject="a
    SavedModel")`` skips with "needs tensorflow (a SavedModel), not installed".
    """
    missing = [module for module in modules if not installed(module)]
    what = f" ({subject})" if subject else ""
    return pytest.mark.skipif(
        bool(missing), reason=f"needs {' and '.join(missing)}{what}, not installed"
    )


def other_backend(*candidates: str) -> str | None:
    """The first of ``candidates`` that is installed and not the active backend, else None."""
    return next((b for b in candidates if b != BACKEND and installed(b)), None)


#: Whether the active backend has a fused kernel (``implementation="auto"`` uses it).
FUSED_LIVE = MGU(4).uses_fused_path

#: Both paths as a parametrize list, "fused" skipped where the backend has no kernel.
CELL_AND_FUSED = [
    "cell",
    pytest.param(
        "fused",
        marks=pytest.mark.skipif(not FUSED_LIVE, reason="no fused kernel on this backend"),
    ),
]


def to_numpy(x) -> np.ndarray:
    return keras.ops.convert_to_numpy(x)


def random_mgu_weights(rng, d: int, h: int, scale: float = 0.5) -> list[np.ndarray]:
    """Random float32 ``kernel (d, 2h)``, ``recurrent_kernel (h, 2h)`` and ``bias (2h,)``."""
    return [
        (rng.standard_normal((d, 2 * h)) * scale).astype("float32"),
        (rng.standard_normal((h, 2 * h)) * scale).astype("float32"),
        (rng.standard_normal(2 * h) * scale).astype("float32"),
    ]


def value_and_grad(fn: Callable, args: Sequence) -> tuple[float, list[np.ndarray]]:
    """Value of the scalar ``fn(*args)`` and its gradient w.r.t. every arg (as NumPy)."""
    args = [keras.ops.convert_to_tensor(a) for a in args]
    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            for a in args:
                tape.watch(a)
            value = fn(*args)
        grads = tape.gradient(value, args)
    elif BACKEND == "jax":
        import jax

        value, grads = jax.value_and_grad(fn, argnums=tuple(range(len(args))))(*args)
    elif BACKEND == "torch":
        import torch

        args = [a.detach().clone().requires_grad_(True) for a in args]
        value = fn(*args)
        grads = torch.autograd.grad(value, args, allow_unused=True)
        grads = [torch.zeros_like(a) if g is None else g for a, g in zip(args, grads)]
        value = value.detach()
    else:  # pragma: no cover - other backends are not supported
        raise NotImplementedError(BACKEND)
    return float(to_numpy(value)), [to_numpy(g) for g in grads]


def central_differences(
    fn: Callable[..., float], args: Sequence[np.ndarray], eps: float = 1e-4
) -> list[np.ndarray]:
    """Central finite differences of the scalar NumPy function ``fn(*args)``."""
    grads = []
    for i, a in enumerate(args):
        g = np.zeros_like(a, dtype=np.float64)
        it = np.nditer(a, flags=["multi_index"])
        for _ in it:
            idx = it.multi_index
            plus = [x.copy() for x in args]
            minus = [x.copy() for x in args]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            g[idx] = (fn(*plus) - fn(*minus)) / (2 * eps)
        grads.append(g)
    return grads


def input_gradient_penalty_grads(fn: Callable, x, weights: Sequence) -> list[np.ndarray]:
    """Gradient w.r.t. ``weights`` of ``sum((d sum(fn(x, *weights)) / dx) ** 2)``.

    A second-order quantity: the loss contains an input gradient, as training
    on derivative targets does.
    """
    x = keras.ops.convert_to_tensor(x)
    weights = [keras.ops.convert_to_tensor(w) for w in weights]
    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as outer:
            outer.watch(weights)
            with tf.GradientTape() as inner:
                inner.watch(x)
                value = tf.reduce_sum(fn(x, *weights))
            gx = inner.gradient(value, x)
            penalty = tf.reduce_sum(gx**2)
        grads = outer.gradient(penalty, weights)
    elif BACKEND == "jax":
        import jax

        def penalty(ws):
            gx = jax.grad(lambda x_: fn(x_, *ws).sum())(x)
            return (gx**2).sum()

        grads = jax.grad(penalty)(weights)
    elif BACKEND == "torch":
        import torch

        x = x.detach().clone().requires_grad_(True)
        weights = [w.detach().clone().requires_grad_(True) for w in weights]
        (gx,) = torch.autograd.grad(fn(x, *weights).sum(), x, create_graph=True)
        grads = torch.autograd.grad((gx**2).sum(), weights)
    else:  # pragma: no cover
        raise NotImplementedError(BACKEND)
    return [to_numpy(g) for g in grads]


#: The recurrent network's two classes: tests of the network's recipe (not of the choice among
#: every class, the default) train these alone, in a fraction of the time.
NETWORK_CLASSES = ("network", "linear+network")


def short_network_config(units: int, iterations: int, checks: int):
    """A ``RecipeConfig`` of the network classes alone, trained briefly (10 steps an epoch)."""
    from keras_mgu.sysid import RecipeConfig

    return RecipeConfig(
        units=(units,), iterations=iterations, steps_per_epoch=10, validation_checks=checks,
        model_classes=NETWORK_CLASSES,
    )  # fmt: skip
