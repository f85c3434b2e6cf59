"""The simulation model: inputs ``u`` to outputs ``y``, free-run, from an initial state.

::

    h_0          = s  or  E(u_past, y_past)  (learned state, or the encoder)
    h_t          = MGU(x_t, h_{t-1})          (one or more stacked layers)
    y_t          = h_t V + x_t L + c          (``Dense`` head, plus a linear path)

``x`` is the standardised input. The learned initial state ``s`` is the state
of the plant where the estimation record starts; test records of benchmarks
that start from the same state (such as Cascaded Tanks) use it as well.

With ``encoder_lag=n`` the model instead takes the ``n`` samples *before* the
simulated ones, ``u_past`` ``(batch, n, n_inputs)`` and ``y_past``
``(batch, n, n_outputs)``, and an encoder (a one-hidden-layer ``tanh``
network on the flattened samples, as in subspace-encoder models) maps them to
the initial state of every layer. Training windows cut anywhere in a long
record then start from an estimated state, and a new experiment starts from
the state its first measured outputs imply.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

from keras_mgu._quiet import set_random_seed
from keras_mgu.layer import MGU

#: Recurrent layers the simulator can be built from, with their state count.
CELLS = {"mgu": (MGU, 1), "gru": (keras.layers.GRU, 1), "lstm": (keras.layers.LSTM, 2)}

__all__ = ["LearnedInitialState", "build_simulator"]


@keras.saving.register_keras_serializable(package="keras_mgu")
class LearnedInitialState(keras.layers.Layer):
    """A trainable state vector ``s`` ``(units,)``, broadcast to the batch.

    Call it on the input sequence ``(batch, steps, features)``; it returns
    ``(batch, units)`` copies of ``s``, to pass as ``initial_state`` of a
    recurrent layer.

    Args:
        units: The state size.
        initializer: Initializer of ``s`` (default zeros).
    """

    def __init__(self, units: int, initializer: str = "zeros", **kwargs) -> None:
        super().__init__(**kwargs)
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValueError(f"`units` must be a positive integer; received {units!r}.")
        self.units = units
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape: tuple) -> None:
        self.state = self.add_weight(
            shape=(self.units,), initializer=self.initializer, name="state"
        )

    def call(self, inputs):
        batch = ops.shape(inputs)[0]
        return ops.broadcast_to(ops.cast(self.state, self.compute_dtype), (batch, self.units))

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return (input_shape[0], self.units)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            "initializer": keras.initializers.serialize(self.initializer),
        }


def _check_units(units: Sequence[int]) -> tuple[int, ...]:
    units = (units,) if isinstance(units, int) else tuple(units)
    if not units or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in units):
        raise ValueError(
            f"`units` must be a positive integer or a non-empty list of them; received {units!r}."
        )
    return units


def build_simulator(
    n_inputs: int,
    n_outputs: int,
    units: int | Sequence[int] = 32,
    linear_path: bool = True,
    learn_initial_state: bool = True,
    unit_forget_bias: bool = False,
    seed: int | None = None,
    cell: str = "mgu",
    encoder_lag: int | None = None,
    encoder_units: int = 64,
) -> keras.Model:
    """A free-run simulation model ``u (batch, steps, n_inputs) -> y (batch, steps, n_outputs)``.

    Args:
        n_inputs, n_outputs: Channel counts.
        units: State size of each stacked MGU layer.
        linear_path: Add a linear map of the current input to the output
            (``x_t L``), beside the recurrent path.
        learn_initial_state: Start every layer from a learned state (see
            :class:`LearnedInitialState`) instead of zeros.
        unit_forget_bias: Passed to :class:`keras_mgu.MGU`. ``False`` (forget
            gate half open at the start) suits plants that are slow next to
            the sample time.
        seed: Seeds the weight initialisation (``keras.utils.set_random_seed``).
        cell: ``"mgu"`` (default), or ``"gru"`` / ``"lstm"`` (Keras's built-in
            layers, for comparison; the LSTM learns both of its states; their
            settings keep Keras's cuDNN path open on a GPU).
        encoder_lag: ``None``: one input ``u`` and the learned (or zero)
            initial state. An int ``n >= 1``: inputs ``[u_past, y_past, u]``
            and the encoder's initial states (``learn_initial_state`` is then
            ignored).
        encoder_units: Hidden units of the encoder.
    """
    units = _check_units(units)
    if cell not in CELLS:
        raise ValueError(f"`cell` must be one of {sorted(CELLS)}; received {cell!r}.")
    layer_cls, n_states = CELLS[cell]
    for name, count in (("n_inputs", n_inputs), ("n_outputs", n_outputs)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"`{name}` must be a positive integer; received {count!r}.")
    if seed is not None:
        set_random_seed(seed)
    u = keras.Input((None, n_inputs), name="u")
    if encoder_lag is None:
        inputs, states = [u], _learned_states(u, units, n_states, learn_initial_state)
    else:
        inputs, states = _encoder(n_inputs, n_outputs, encoder_lag, encoder_units, units, n_states)
        inputs = [*inputs, u]
    h = u
    extra = {"unit_forget_bias": unit_forget_bias} if cell != "gru" else {}
    for i, n in enumerate(units):
        layer = layer_cls(n, return_sequences=True, name=f"{cell}_{i}", **extra)
        h = layer(h, initial_state=states[i])
    y = keras.layers.Dense(n_outputs, name="head")(h)
    if linear_path:
        y = keras.layers.Add(name="y")([y, keras.layers.Dense(n_outputs, name="linear")(u)])
    return keras.Model(inputs if len(inputs) > 1 else u, y, name=f"{cell}_simulator")


def _learned_states(u, units: tuple[int, ...], n_states: int, learned: bool) -> list:
    """Per layer: ``n_states`` learned ``(batch, n)`` states, or None (zeros)."""
    if not learned:
        return [None] * len(units)
    return [
        [LearnedInitialState(n, name=f"initial_state_{i}_{j}")(u) for j in range(n_states)]
        for i, n in enumerate(units)
    ]


def _encoder(n_inputs: int, n_outputs: int, lag: int, hidden: int, units, n_states: int):
    """Inputs ``[u_past, y_past]`` and, per layer, the encoded ``(batch, n)`` states."""
    if isinstance(lag, bool) or not isinstance(lag, int) or lag < 1:
        raise ValueError(f"`encoder_lag` must be a positive integer or None; received {lag!r}.")
    u_past = keras.Input((lag, n_inputs), name="u_past")
    y_past = keras.Input((lag, n_outputs), name="y_past")
    past = keras.layers.Concatenate(name="past")([u_past, y_past])
    z = keras.layers.Flatten(name="past_flat")(past)
    z = keras.layers.Dense(hidden, activation="tanh", name="encoder_hidden")(z)
    states = [
        [keras.layers.Dense(n, name=f"encoder_state_{i}_{j}")(z) for j in range(n_states)]
        for i, n in enumerate(units)
    ]
    return [u_past, y_past], states
