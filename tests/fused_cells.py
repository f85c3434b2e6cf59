"""Small user-style :class:`keras_mgu.FusedCell` subclasses for the fused-path tests.

* ``PeepholeLSTMCell``: two states ``[h, c]``, output ``h``.
* ``UserGRUCell``: one state; the reset gate applied after the recurrent matmul.
* ``ReadoutCell``: output ``tanh(h) V`` of a different size than its state,
  and an identity ``project_inputs`` (so the step does all the work).

Tests that need the MGU on the generic engine use :class:`keras_mgu.MGUCell`
with ``own_kernel = False``.
"""

from __future__ import annotations

import keras
from keras import ops

import keras_mgu


@keras.saving.register_keras_serializable(package="keras_mgu_tests")
class PeepholeLSTMCell(keras_mgu.FusedCell):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = [units, units]
        self.output_size = units

    def build(self, input_shape):
        d, u = input_shape[-1], self.units
        self.kernel = self.add_weight(shape=(d, 4 * u), name="kernel")
        self.recurrent_kernel = self.add_weight(
            shape=(u, 4 * u), initializer="orthogonal", name="recurrent_kernel"
        )
        self.peephole = self.add_weight(shape=(3 * u,), initializer="zeros", name="peephole")
        self.bias = self.add_weight(shape=(4 * u,), initializer="zeros", name="bias")

    def project_inputs(self, inputs):
        return ops.matmul(inputs, self.kernel) + self.bias

    def step(self, projected, states):
        h, c = states
        z = projected + ops.matmul(h, self.recurrent_kernel)
        zi, zf, zc, zo = ops.split(z, 4, axis=-1)
        pi, pf, po = ops.split(self.peephole, 3)
        i = ops.sigmoid(zi + pi * c)
        f = ops.sigmoid(zf + pf * c)
        c = f * c + i * ops.tanh(zc)
        o = ops.sigmoid(zo + po * c)
        h = o * ops.tanh(c)
        return h, [h, c]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@keras.saving.register_keras_serializable(package="keras_mgu_tests")
class UserGRUCell(keras_mgu.FusedCell):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units
        self.output_size = units

    def build(self, input_shape):
        d, u = input_shape[-1], self.units
        self.kernel = self.add_weight(shape=(d, 3 * u), name="kernel")
        self.recurrent_kernel = self.add_weight(
            shape=(u, 3 * u), initializer="orthogonal", name="recurrent_kernel"
        )
        self.bias = self.add_weight(shape=(2, 3 * u), initializer="zeros", name="bias")

    def project_inputs(self, inputs):
        return ops.matmul(inputs, self.kernel) + self.bias[0]

    def step(self, projected, states):
        h = states[0]
        xz, xr, xh = ops.split(projected, 3, axis=-1)
        rz, rr, rh = ops.split(ops.matmul(h, self.recurrent_kernel) + self.bias[1], 3, axis=-1)
        z = ops.sigmoid(xz + rz)
        r = ops.sigmoid(xr + rr)
        hh = ops.tanh(xh + r * rh)
        h = z * h + (1.0 - z) * hh
        return h, [h]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@keras.saving.register_keras_serializable(package="keras_mgu_tests")
class ReadoutCell(keras_mgu.FusedCell):
    """``h_t = tanh(x_t W + h_{t-1} U)``, output ``tanh(h_t) V`` of ``outputs`` features."""

    def __init__(self, units, outputs, **kwargs):
        super().__init__(**kwargs)
        self.units, self.outputs = units, outputs
        self.state_size = [units]
        self.output_size = outputs

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units), name="recurrent")
        self.readout = self.add_weight(shape=(self.units, self.outputs), name="readout")

    def step(self, projected, states):
        h = ops.matmul(projected, self.kernel) + ops.matmul(states[0], self.recurrent_kernel)
        h = ops.tanh(h)
        return ops.matmul(ops.tanh(h), self.readout), [h]

    def get_config(self):
        return {**super().get_config(), "units": self.units, "outputs": self.outputs}
