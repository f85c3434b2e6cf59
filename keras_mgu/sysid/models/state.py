"""The initial state of a new experiment, from its first measured samples.

A simulation model (:func:`~keras_mgu.sysid.build_simulator`) is given the
first ``n`` samples of an experiment, inputs ``u_hist`` ``(n, n_inputs)`` and
measured outputs ``y_hist`` ``(n, n_outputs)`` (standardised, as the model
sees them), and estimates its state at the start of sample ``n``:

* **Encoder models** read the ``lag`` samples before sample ``n``
  (:func:`encoder_history`); with fewer than ``lag`` given, the first sample
  is repeated in front of them: the plant is taken to be at rest at its first
  values before the record.
* **Learned-state models** fit their state to the samples
  (:func:`fit_initial_state`): the state ``h`` at the start of the record
  minimises::

      J(h) = sum_{k < n} |y_sim(k; h) - y_hist[k]|^2 + lam |h - s|^2

  (``s`` the learned state) by Levenberg-Marquardt steps (Gauss-Newton with
  an adaptive damping ``mu``: raised tenfold after a step that does not
  lower ``J``, lowered after one that does), the Jacobian of ``y_sim`` taken
  by finite differences in one batched simulation.
"""

from __future__ import annotations

import weakref

import keras
import numpy as np

from keras_mgu.kernels import native_inference

__all__ = ["encoder_history", "fit_initial_state", "state_model"]

#: Levenberg-Marquardt trials, finite-difference step and the pull towards ``s``.
STEPS, FD_STEP, DAMPING = 20, 1e-3, 1e-2
#: Simulated steps (histories x (states + 1) x samples) per batched fit simulation.
CHUNK_STEPS = 2**20


def encoder_history(u_hist: np.ndarray, y_hist: np.ndarray, lag: int) -> tuple[np.ndarray, ...]:
    """``(u_past (B, lag, n_inputs), y_past (B, lag, n_outputs))`` from ``n >= 1`` samples.

    ``u_hist``, ``y_hist``: ``(n, channels)`` (then ``B = 1``) or ``(B, n,
    channels)``, ``B`` experiments' histories of the same length.
    """
    u_hist, y_hist = np.asarray(u_hist), np.asarray(y_hist)
    if u_hist.ndim == 2:
        u_hist, y_hist = u_hist[None], y_hist[None]
    n = u_hist.shape[1]
    if n < lag:
        pad = lag - n
        u_hist = np.concatenate([np.repeat(u_hist[:, :1], pad, axis=1), u_hist], axis=1)
        y_hist = np.concatenate([np.repeat(y_hist[:, :1], pad, axis=1), y_hist], axis=1)
    as32 = lambda a: np.asarray(a[:, -lag:], dtype="float32")  # noqa: E731
    return as32(u_hist), as32(y_hist)


def _recurrent_layers(model: keras.Model) -> tuple[str, list[keras.layers.Layer]]:
    cell = model.name.removesuffix("_simulator")
    layers = [layer for layer in model.layers if layer.name.startswith(f"{cell}_")]
    layers.sort(key=lambda layer: int(layer.name.rsplit("_", 1)[1]))
    if not layers:
        raise ValueError(f"{model.name!r} is not a model made by build_simulator.")
    return cell, layers


def state_model(model: keras.Model) -> tuple[keras.Model, list[np.ndarray]]:
    """The same network with its initial states as inputs, and the learned states.

    Returns ``(m, states)``: ``m([u, *h0])`` simulates ``u`` ``(batch, steps,
    n_inputs)`` from the given states (one ``(batch, units)`` array per state
    of each layer, the order of ``states``), sharing ``model``'s weights.
    ``m`` is made once per network and kept while the network lives, so its
    compiled prediction serves every later fit; ``states`` are read at each
    call.
    """
    cell, layers = _recurrent_layers(model)
    n_states = 2 if cell == "lstm" else 1
    states = [
        _learned_state(model, i, j, layer.units)
        for i, layer in enumerate(layers)
        for j in range(n_states)
    ]
    sim = _STATE_MODELS.get(model)
    if sim is None:
        sim = _STATE_MODELS[model] = _make_state_model(model, layers, n_states)
    return sim, states


#: Each network's state model (:func:`state_model`), while the network lives.
_STATE_MODELS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _make_state_model(
    model: keras.Model, layers: list[keras.layers.Layer], n_states: int
) -> keras.Model:
    u = keras.Input((None, model.inputs[-1].shape[-1]), name="u")
    h, inputs = u, []
    for i, layer in enumerate(layers):
        h0 = [keras.Input((layer.units,), name=f"h0_{i}_{j}") for j in range(n_states)]
        inputs += h0
        h = layer(h, initial_state=h0)
    y = model.get_layer("head")(h)
    if any(layer.name == "linear" for layer in model.layers):
        y = keras.layers.Add()([y, model.get_layer("linear")(u)])
    return keras.Model([u, *inputs], y)


def _learned_state(model: keras.Model, i: int, j: int, units: int) -> np.ndarray:
    try:
        layer = model.get_layer(f"initial_state_{i}_{j}")
    except ValueError:
        return np.zeros(units, dtype="float32")
    return keras.ops.convert_to_numpy(layer.state).astype("float32")


def fit_initial_state(
    model: keras.Model, u_hist: np.ndarray, y_hist: np.ndarray
) -> tuple[keras.Model, list[np.ndarray]]:
    """The learned-state model's states fitted to ``n`` measured samples.

    Args:
        model: A learned-state simulator (one input ``u``).
        u_hist, y_hist: ``(n, n_inputs)`` and ``(n, n_outputs)``, standardised;
            or ``(B, n, n_inputs)`` and ``(B, n, n_outputs)``: ``B``
            histories, each fitted on its own (one batched simulation per
            Levenberg-Marquardt trial, in chunks of :data:`CHUNK_STEPS`
            simulated steps).

    Returns:
        ``(m, states)`` as :func:`state_model`, the states fitted: each
        ``(units,)``, or ``(B, units)`` for ``B`` histories.
    """
    sim, states = state_model(model)
    sizes = [len(s) for s in states]
    prior = np.concatenate(states).astype(np.float64)
    u = np.asarray(u_hist, dtype="float32")
    y = np.asarray(y_hist, dtype=np.float64)
    single = u.ndim == 2
    if single:
        u, y = u[None], y[None]
    per_history = (len(prior) + 1) * u.shape[1]
    chunk = max(1, CHUNK_STEPS // per_history)
    theta = np.concatenate(
        [_fit_states(sim, sizes, prior, u[i : i + chunk], y[i : i + chunk]) for i in
         range(0, len(u), chunk)]
    )  # fmt: skip
    parts = np.split(theta.astype("float32"), np.cumsum(sizes)[:-1], axis=1)
    return sim, [p[0] for p in parts] if single else parts


def _fit_states(
    sim: keras.Model, sizes: list[int], prior: np.ndarray, u: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """Levenberg-Marquardt fit of ``B`` histories' states; ``theta`` ``(B, n_states)``.

    Each history has its own damping ``mu`` and its own accepted steps.
    """
    batch, d = len(u), len(prior)
    target = y.reshape(batch, -1)
    lam = DAMPING * u.shape[1]
    probes = np.vstack([np.zeros(d), FD_STEP * np.eye(d)])  # theta, then theta + step e_i

    def outputs(rows: np.ndarray, thetas: np.ndarray) -> np.ndarray:
        """Simulated outputs ``(len(rows), M, n * n_outputs)`` for ``thetas`` ``(rows, M, d)``."""
        m = thetas.shape[1]
        flat = thetas.reshape(-1, d).astype("float32")
        parts = np.split(flat, np.cumsum(sizes)[:-1], axis=1)
        with native_inference():  # a model of its own, never exported
            ys = sim.predict_on_batch([np.repeat(u[rows], m, axis=0), *parts])
        return np.asarray(ys, dtype=np.float64).reshape(len(rows), m, -1)

    def cost(residual: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.einsum("bp,bp->b", residual, residual) + lam * np.sum((t - prior) ** 2, axis=1)

    theta = np.tile(prior, (batch, 1))
    mu, stale = np.full(batch, 1e-3), np.ones(batch, dtype=bool)
    now, gram, grad = np.zeros(batch), np.zeros((batch, d, d)), np.zeros((batch, d))
    everyone = np.arange(batch)
    for _ in range(STEPS):
        rows = np.flatnonzero(stale)
        if len(rows):
            ys = outputs(rows, theta[rows][:, None] + probes[None])
            residual = ys[:, 0] - target[rows]
            jac = (ys[:, 1:] - ys[:, :1]).transpose(0, 2, 1) / FD_STEP  # (rows, P, d)
            now[rows] = cost(residual, theta[rows])
            gram[rows] = np.einsum("bpi,bpj->bij", jac, jac)
            grad[rows] = np.einsum("bpi,bp->bi", jac, residual) + lam * (theta[rows] - prior)
        damping = lam + mu * (1.0 + np.einsum("bii->b", gram) / d)
        lhs = gram + damping[:, None, None] * np.eye(d)
        trial = theta + np.linalg.solve(lhs, -grad[..., None])[..., 0]
        stale = cost(outputs(everyone, trial[:, None])[:, 0] - target, trial) < now
        theta[stale] = trial[stale]
        mu = np.where(stale, mu / 3.0, mu * 10.0)
    return theta
