"""Fused MGU sequence kernels, one module per Keras backend.

Every backend module exposes the same function::

    mgu_sequence(inputs, initial_state, kernel, recurrent_kernel, bias, mask,
                 activation, recurrent_activation, go_backwards)
        -> (outputs, final_state)

with ``inputs`` ``(B, T, D)``, ``initial_state`` ``(B, H)``, ``kernel``
``(D, 2H)``, ``recurrent_kernel`` ``(H, 2H)``, ``bias`` ``(2H,)`` or None,
``mask`` ``(B, T)`` boolean or None, activations given by name, and returns
``outputs`` ``(B, T, H)`` (in processing order, reversed in time when
``go_backwards``) and ``final_state`` ``(B, H)``. A masked step carries the
state forward and emits it, as the Keras cell loop does. The module
:mod:`keras_mgu.kernels.reference` is the NumPy reference all of them are
tested against.

:func:`grouped_sequence` runs ``G`` independent MGUs at once, each with its
own weights over its own sequences (the groups of a population of models).
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

import keras
from keras import ops

from keras_mgu import checks, registry


def backend_module(backend: str | None = None) -> ModuleType:
    """The kernel module of ``backend`` (default: the active Keras backend), from
    :mod:`keras_mgu.registry`; NotImplementedError for a backend without one."""
    return registry.backend_module("mgu_kernel", backend)


def kernel_name(dtype: str, units: int, batch: int | None = None) -> str:
    """Which MGU kernel a call in ``dtype`` with ``units`` (and ``batch``) runs.

    ``"native"`` where the native loops serve (see :mod:`keras_mgu.native`),
    else ``"fused"``; ``NotImplementedError`` on a backend without MGU kernels.
    """
    return "native" if backend_module().native_serves(dtype, units, batch) else "fused"


def native_inference() -> contextlib.AbstractContextManager:
    """A context in which inference graphs traced now run the compiled loops (TensorFlow).

    On TensorFlow a graph traced with no gradient tape (``predict``,
    ``evaluate``, an export) gets the plain inline time loop by default,
    which exporters and converters can read; a ``predict`` or ``evaluate``
    first called inside this context gets the native (or XLA-compiled) loops
    instead: the same numbers, several times faster on long records. Keras
    keeps a traced ``predict``/``evaluate`` function, so later calls keep
    them; an export traces its own function and stays portable. On JAX and
    PyTorch, whose inference already runs the compiled loops, it does
    nothing.
    """
    if keras.backend.backend() != "tensorflow":
        return contextlib.nullcontext()
    return backend_module().native_inference()


def mgu_sequence(*args: Any, **kwargs: Any) -> tuple:
    """Run the active backend's fused kernel; see the module docstring."""
    return backend_module().mgu_sequence(*args, **kwargs)


def grouped_sequence(
    inputs: Any,
    initial_state: Any,
    kernel: Any,
    recurrent_kernel: Any,
    bias: Any,
    *,
    activation: str = "tanh",
    recurrent_activation: str = "sigmoid",
) -> Any:
    """``G`` MGUs, each with its own weights over its own sequences, in one call.

    Args:
        inputs: ``(G, B, T, D)``: group ``g``'s ``B`` sequences.
        initial_state: ``(G, B, H)``.
        kernel: ``(G, D, 2H)``; recurrent_kernel: ``(G, H, 2H)``; bias:
            ``(G, 2H)`` or None. Forget-gate columns first, as in
            :func:`mgu_sequence`.
        activation, recurrent_activation: By name, as in :func:`mgu_sequence`.

    Returns:
        The states ``(G, B, T, H)``: ``states[g]`` is
        ``mgu_sequence(inputs[g], initial_state[g], kernel[g],
        recurrent_kernel[g], bias[g], None)[0]``, up to float rounding.

    The input projections ``x W_g + b_g`` are one batched product; where the
    native loops of :mod:`keras_mgu.native` serve, one call of the loop with a
    recurrent kernel per group (rows ``[g B, (g + 1) B)`` of the flattened
    batch use ``U_g``) runs every group, with its gradients. Elsewhere the
    groups run one after another through :func:`mgu_sequence`.
    """
    inputs, initial_state, kernel, recurrent_kernel = (
        ops.convert_to_tensor(t) for t in (inputs, initial_state, kernel, recurrent_kernel)
    )
    bias = None if bias is None else ops.convert_to_tensor(bias)
    checks.check_grouped_shapes(
        checks.static_shape(inputs.shape), checks.static_shape(recurrent_kernel.shape)
    )
    checks.check_kernel_activations(activation, recurrent_activation)
    groups, units = recurrent_kernel.shape[0], recurrent_kernel.shape[-2]
    names = {"activation": activation, "recurrent_activation": recurrent_activation}
    module = backend_module()
    shape = ops.shape(inputs)
    xw = ops.einsum("gbtd,gdk->gbtk", inputs, kernel)
    if bias is not None:
        xw = xw + bias[:, None, None, :]
    states = module.grouped_native(
        ops.reshape(xw, (-1, shape[2], 2 * units)),
        ops.reshape(initial_state, (-1, units)),
        recurrent_kernel,
        **names,
    )
    if states is not None:
        return ops.reshape(states, (groups, shape[1], shape[2], units))
    return ops.stack(
        [
            module.mgu_sequence(
                inputs[g], initial_state[g], kernel[g], recurrent_kernel[g],
                None if bias is None else bias[g], None, **names,
            )[0]
            for g in range(groups)
        ]
    )  # fmt: skip
