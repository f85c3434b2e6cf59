"""NumPy reference of the MGU sequence, written from the equations alone.

It is slow and only meant as an independent check of the layer and of the
fused kernels::

    f_t = sigmoid(x_t W[:, :H] + h_{t-1} U[:, :H] + b[:H])
    c_t = tanh(x_t W[:, H:] + (f_t * h_{t-1}) U[:, H:] + b[H:])
    h_t = (1 - f_t) * h_{t-1} + f_t * c_t

A masked step (``mask[:, t] == False``) leaves the state unchanged and emits
the carried state as its output, as Keras recurrent layers do; with
``zero_output_for_mask=True`` it emits zeros instead (the state is still
carried).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function ``1 / (1 + exp(-x))``."""
    return 1.0 / (1.0 + np.exp(-x))


def mgu_step(
    x_t: np.ndarray,
    h_prev: np.ndarray,
    kernel: np.ndarray,
    recurrent_kernel: np.ndarray,
    bias: np.ndarray | None,
    activation: Callable = np.tanh,
    recurrent_activation: Callable = sigmoid,
) -> np.ndarray:
    """One MGU step: ``x_t`` ``(B, D)``, ``h_prev`` ``(B, H)`` -> ``h_t`` ``(B, H)``."""
    units = h_prev.shape[-1]
    b = np.zeros(2 * units, dtype=x_t.dtype) if bias is None else bias
    w_f, w_c = kernel[:, :units], kernel[:, units:]
    u_f, u_c = recurrent_kernel[:, :units], recurrent_kernel[:, units:]
    f = recurrent_activation(x_t @ w_f + h_prev @ u_f + b[:units])
    c = activation(x_t @ w_c + (f * h_prev) @ u_c + b[units:])
    return (1.0 - f) * h_prev + f * c


def mgu_sequence(
    inputs: np.ndarray,
    kernel: np.ndarray,
    recurrent_kernel: np.ndarray,
    bias: np.ndarray | None = None,
    initial_state: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    go_backwards: bool = False,
    activation: Callable = np.tanh,
    recurrent_activation: Callable = sigmoid,
    zero_output_for_mask: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Run the MGU over a batch of sequences.

    Args:
        inputs: ``(B, T, D)``.
        kernel: ``(D, 2H)``; recurrent_kernel: ``(H, 2H)``; bias: ``(2H,)`` or None.
        initial_state: ``(B, H)``, zeros when None.
        mask: ``(B, T)`` booleans, True where a step is real.
        go_backwards: process the steps from last to first; the outputs are
            then in processing order (reversed time), as in Keras.
        zero_output_for_mask: emit zeros (instead of the carried state) at
            masked steps, leading ones included.

    Returns:
        ``(outputs, final_state)``: ``(B, T, H)`` and ``(B, H)``.
    """
    batch, steps, _ = inputs.shape
    units = recurrent_kernel.shape[0]
    h = np.zeros((batch, units), inputs.dtype) if initial_state is None else initial_state
    order = range(steps - 1, -1, -1) if go_backwards else range(steps)
    outputs = []
    for t in order:
        h_new = mgu_step(
            inputs[:, t], h, kernel, recurrent_kernel, bias, activation, recurrent_activation
        )
        if mask is not None:
            h_new = np.where(mask[:, t, None], h_new, h)
        h = h_new
        zero = zero_output_for_mask and mask is not None
        outputs.append(np.where(mask[:, t, None], h, 0.0).astype(h.dtype) if zero else h)
    return np.stack(outputs, axis=1), h
