"""The layers of the standalone simulator: per-channel affine maps and the ARX recursion.

* :class:`ChannelAffine`: ``x * scale + offset`` per channel (the
  standardisation and its inverse);
* :class:`InputDelay`: each input channel delayed by its dead time, the
  first sample held before the sequence (as
  :func:`~keras_mgu.sysid.models.delay.delay_inputs`);
* :class:`ARXCell` in a ``keras.layers.RNN`` (:class:`LinearSimulation`): the
  linear model's recursion, at rest at its first sample as
  :meth:`LinearModel.simulate <keras_mgu.sysid.LinearModel.simulate>`.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
from keras import ops

__all__ = ["ARXCell", "ChannelAffine", "InputDelay", "LinearSimulation"]


@keras.saving.register_keras_serializable(package="keras_mgu")
class ChannelAffine(keras.layers.Layer):
    """``x * scale + offset`` over the last axis (``scale``, ``offset``: one float per channel)."""

    def __init__(self, scale: Any, offset: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scale = [float(v) for v in np.reshape(scale, -1)]
        self.offset = [float(v) for v in np.reshape(offset, -1)]
        if len(self.scale) != len(self.offset):
            raise ValueError(
                f"`scale` and `offset` must have one entry per channel; received "
                f"{len(self.scale)} and {len(self.offset)}."
            )

    def call(self, x):
        scale = ops.convert_to_tensor(np.float32(self.scale), dtype=self.compute_dtype)
        offset = ops.convert_to_tensor(np.float32(self.offset), dtype=self.compute_dtype)
        return x * scale + offset

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return input_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "scale": self.scale, "offset": self.offset}


@keras.saving.register_keras_serializable(package="keras_mgu")
class InputDelay(keras.layers.Layer):
    """``(batch, T, channels)`` with channel ``i`` delayed by ``delay[i]`` samples.

    ``out[:, k, i] = x[:, k - nk_i, i]``, where ``k - nk_i < 0`` reads the
    samples before: the last ones of ``history`` ``(batch, n, channels)`` (a
    static length), held at its first sample before it; without ``history``
    the first sample of ``x`` held (the plant at rest). A delay line of
    static length in front of ``x``, then its first ``T`` samples, so ``T``
    may vary.
    """

    def __init__(self, delay: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay = [int(nk) for nk in delay]

    def call(self, x, history=None):
        channels = []
        for i, nk in enumerate(self.delay):
            channel = x[:, :, i : i + 1]
            if nk:
                channel = self._delayed(channel, nk, history, i)
            channels.append(channel)
        return channels[0] if len(channels) == 1 else ops.concatenate(channels, axis=-1)

    @staticmethod
    def _delayed(channel: Any, nk: int, history: Any, i: int) -> Any:
        if history is None:
            before = [channel[:, :1]] * nk
        else:
            past = history[:, :, i : i + 1]
            held = [past[:, :1]] * max(0, nk - int(history.shape[1]))
            before = [ops.concatenate([*held, past], axis=1)[:, -nk:]]
        # The delay line in front, then the first T samples: gathered at 0..T-1, counted from
        # the input itself, so that T may vary (no arithmetic on a symbolic length).
        line = ops.concatenate([*before, channel], axis=1)
        if keras.backend.backend() == "torch":  # its exporter records the length as it is read
            return line[:, : channel.shape[1]]
        steps = ops.cast(ops.cumsum(ops.ones_like(channel[0, :, 0]), axis=0) - 1.0, "int32")
        return ops.take(line, steps, axis=1)

    def compute_output_shape(self, x_shape: tuple, history_shape: tuple | None = None) -> tuple:
        return x_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "delay": self.delay}


def _arx_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``W`` with ``y[k] = r[k] W + c``, ``r[k] = [y[k-1..k-na], u[k], u[k-1..k-nb+1]]``.

    Block ``j`` of the output part holds ``y[k-j]`` (all outputs), block
    ``j`` of the input part ``u[k-j]`` (all inputs).
    """
    n_out, na = a.shape
    _, n_in, nb = b.shape
    w = np.zeros((na * n_out + nb * n_in, n_out))
    for i in range(n_out):
        for j in range(na):
            w[j * n_out + i, i] = -a[i, j]
        for j in range(nb):
            for m in range(n_in):
                w[na * n_out + j * n_in + m, i] = b[i, m, j]
    return w


@keras.saving.register_keras_serializable(package="keras_mgu")
class ARXCell(keras.layers.Layer):
    """One step of a multi-input ARX model (:class:`~keras_mgu.sysid.LinearModel`).

    Input ``u[k]`` ``(batch, n_inputs)``; states: the past outputs
    ``(batch, na * n_outputs)`` (``y[k-1]`` first) and, when ``nb > 1``, the
    past inputs ``(batch, (nb - 1) * n_inputs)`` (``u[k-1]`` first). Output
    ``y[k]`` ``(batch, n_outputs)``.

    Args:
        a, b, c: The ARX coefficients, ``(n_outputs, na)``,
            ``(n_outputs, n_inputs, nb)`` and ``(n_outputs,)``.
    """

    def __init__(self, a: Any, b: Any, c: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.a, self.b, self.c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
        if self.a.ndim != 2 or self.b.ndim != 3 or self.c.shape != (len(self.a),):
            raise ValueError(
                "ARX coefficients must be a (n_outputs, na), b (n_outputs, n_inputs, nb) and "
                f"c (n_outputs,); received {self.a.shape}, {self.b.shape}, {self.c.shape}."
            )
        (self.n_outputs, self.na), (_, self.n_inputs, self.nb) = self.a.shape, self.b.shape
        self.state_size = [self.na * self.n_outputs]
        if self.nb > 1:
            self.state_size.append((self.nb - 1) * self.n_inputs)
        self.output_size = self.n_outputs
        self._w = _arx_matrix(self.a, self.b).astype("float32")

    def call(self, u, states):
        y_past = states[0]
        u_past = states[1:]
        r = ops.concatenate([y_past, u, *u_past], axis=-1)
        w = ops.convert_to_tensor(self._w, dtype=self.compute_dtype)
        c = ops.convert_to_tensor(self.c.astype("float32"), dtype=self.compute_dtype)
        y = ops.matmul(r, w) + c
        new = [ops.concatenate([y, y_past[:, : (self.na - 1) * self.n_outputs]], axis=-1)]
        if self.nb > 1:
            new.append(ops.concatenate([u, u_past[0][:, : (self.nb - 2) * self.n_inputs]], -1))
        return y, new

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "a": self.a.tolist(),
            "b": self.b.tolist(),
            "c": self.c.tolist(),
        }


@keras.saving.register_keras_serializable(package="keras_mgu")
class LinearSimulation(keras.layers.Layer):
    """The ARX model run free on ``u`` ``(batch, N, n_inputs)``; ``(batch, N, n_outputs)`` out.

    ``layer(u, y0=y0)``, or ``layer(u)`` when ``y0`` is given here: at rest
    at the first sample, the output held at ``y0`` ``(batch, n_outputs)``
    and the input at ``u[:, 0]`` before sample 0, as :meth:`LinearModel.simulate
    <keras_mgu.sysid.LinearModel.simulate>` (in float32). ``layer(u,
    initial_state=states)``: continued from the ``states`` a layer with
    ``return_state=True`` returned after the samples before ``u``.
    """

    def __init__(
        self, a: Any, b: Any, c: Any, y0: Any = None, return_state: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.cell = ARXCell(a, b, c, name="arx")
        self.y0 = None if y0 is None else [float(v) for v in np.reshape(y0, -1)]
        self.return_state = bool(return_state)
        self.rnn = keras.layers.RNN(
            self.cell, return_sequences=True, return_state=self.return_state, name="arx_loop"
        )

    def call(self, u, y0=None, initial_state=None):
        if initial_state is None:
            initial_state = self.rest_state(u, y0)
        if keras.backend.backend() == "torch":  # keras.layers.RNN would trace at one length
            return self._torch_loop(u, list(initial_state))
        return self.rnn(u, initial_state=list(initial_state))

    def _torch_loop(self, u, states):
        import torch

        cell = self.cell
        w = torch.as_tensor(cell._w, device=u.device)
        c = torch.as_tensor(cell.c.astype("float32"), device=u.device)
        u_past = states[1] if cell.nb > 1 else u[:, 0, :0]
        y, y_past, u_past = _arx_script()(u, w, c, states[0], u_past)
        if not self.return_state:
            return y
        return [y, y_past, *([u_past] if cell.nb > 1 else [])]

    def rest_state(self, u, y0=None) -> list:
        """The states at rest at ``y0`` (or the layer's) and ``u[:, 0]``."""
        if y0 is None:
            if self.y0 is None:
                raise ValueError("LinearSimulation needs `y0` or `initial_state`.")
            y0 = ops.zeros_like(u[:, 0, :1]) + np.float32(self.y0)
        states = [ops.tile(y0, (1, self.cell.na))]
        if self.cell.nb > 1:
            states.append(ops.tile(u[:, 0, :], (1, self.cell.nb - 1)))
        return states

    def compute_output_shape(self, u_shape, y0_shape=None, initial_state_shape=None):
        out = (*u_shape[:2], self.cell.n_outputs)
        if not self.return_state:
            return out
        return [out, *((u_shape[0], size) for size in self.cell.state_size)]

    def get_config(self) -> dict:
        cell = self.cell
        return {
            **super().get_config(),
            "a": cell.a.tolist(),
            "b": cell.b.tolist(),
            "c": cell.c.tolist(),
            "y0": self.y0,
            "return_state": self.return_state,
        }


_ARX_SCRIPT: list = []


def _arx_script():
    """The ARX loop as a TorchScript function: one ONNX ``Loop`` over any number of steps."""
    if not _ARX_SCRIPT:
        import torch

        def arx_loop(u, w, c, y_past, u_past):
            n_y, n_u = y_past.shape[1], u_past.shape[1]
            outputs = []
            for k in range(u.shape[1]):
                u_k = u[:, k]
                y = torch.matmul(torch.cat([y_past, u_k, u_past], dim=1), w) + c
                y_past = torch.cat([y, y_past], dim=1)[:, :n_y]
                u_past = torch.cat([u_k, u_past], dim=1)[:, :n_u]
                outputs.append(y)
            return torch.stack(outputs, dim=1), y_past, u_past

        _ARX_SCRIPT.append(torch.jit.script(arx_loop))
    return _ARX_SCRIPT[0]
