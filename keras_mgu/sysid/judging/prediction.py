"""One run's free-run simulation and k-step-ahead prediction, in physical units.

:class:`RunSimulator` simulates a run's network through its
:class:`~keras_mgu.sysid.models.signals.SignalPath`, from the learned state or from
the state ``n`` measured samples give (:mod:`~keras_mgu.sysid.models.state`), for one
experiment or a batch of equally long windows at once.

k-step-ahead prediction (:meth:`RunSimulator.predict`). The network classes
(whose network runs from its own state, :data:`~keras_mgu.sysid.config.NETWORK_CLASSES`)
simulate once from the first ``n`` measured samples and add the prediction
of the residual by the run's noise model
(:mod:`~keras_mgu.sysid.judging.noise_model`), from the measured residuals up to
``t - k``::

    y_pred[t] = y_sim[t] + e_hat(t | t - k),    e = y - y_sim

at the cost of one simulation. The lag classes read measured lags, so each
prediction starts from them: with ``n`` measured samples setting each state
and ``s(t) = max(n, t - k + 1)``::

    y_pred[t] = simulate(u[s-n : t+1], y[s-n : s])[-1]      for t >= n
    y_pred[t] = y[t]                                        for t <  n

That prediction carries the noise of the measured lags into each window:
on a plant measured with noise, a lag class's prediction ten steps ahead
can err more than its simulation. So a lag class predicts from the lags
only up to its *window horizon*, chosen on the validation record
(:meth:`RunSimulator.choose_window_horizon`: the horizons of
:data:`WINDOW_HORIZONS` where the windows err less than the simulation with
the noise model), and longer horizons as a network class does.

The state at ``s`` is estimated from the ``n`` measured samples before it, as
:meth:`~keras_mgu.sysid.Identification.simulate` estimates it from
``y_initial``, then ``t - s + 1 <= k`` steps run free. ``k = 1`` is the
one-step-ahead prediction; ``k >= N - n`` is the simulation from the first
``n`` samples. The lag classes' encoders read the window's last lags. One
window from every start ``s``, ``K`` steps long, serves every horizon up to
``K`` at once (:meth:`RunSimulator.predictions`): ``O(N (n + K))`` simulated
steps, in chunks of :data:`CHUNK_SAMPLES`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import keras
import numpy as np

from keras_mgu.sysid.config import NETWORK_CLASSES
from keras_mgu.sysid.models.state import encoder_history, fit_initial_state

__all__ = ["CHUNK_SAMPLES", "RunSimulator", "check_signal"]

#: Samples (windows x window length) simulated per batched network call of ``predict``.
CHUNK_SAMPLES = 2**17
#: The horizons a lag class's two predictors are compared on (``choose_window_horizon``).
WINDOW_HORIZONS = (1, 2, 5, 10, 20, 50, 100)
#: The window horizon of a run whose windows err less at every horizon compared.
WINDOW_ALWAYS = 2**31 - 1


def check_signal(name: str, value: Any, channels: int) -> np.ndarray:
    """``value`` as a finite float64 array ``(N, channels)``; a ValueError naming ``name`` else."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != channels:
        raise ValueError(f"`{name}` must have shape (N, {channels}); received {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` contains NaN or inf; give finite measured values.")
    return arr


@dataclasses.dataclass
class RunSimulator:
    """One run's simulation in physical units (inputs already checked).

    Attributes:
        run: A :class:`~keras_mgu.sysid.RunResult` (model, path, config).
        start: The estimation record's first ``(u, y)`` samples, the history
            encoder models start from without measured outputs.
    """

    run: Any
    start: tuple[np.ndarray, np.ndarray] | None

    def simulate(self, u: np.ndarray, y_initial: np.ndarray | None) -> np.ndarray:
        """``(N, n_outputs)``: from the start state, or from ``y_initial`` ``(n, n_outputs)``.

        ``u`` is the physical input of one whole experiment; it is delayed
        here, once (the run's ``path.input_delay``).
        """
        return self._simulate(self.run.path.delayed(u), y_initial)

    def _simulate(self, u: np.ndarray, y_initial: np.ndarray | None) -> np.ndarray:
        """:meth:`simulate` of ``u`` already delayed."""
        if y_initial is None:
            return self._from_start(u)
        return self.simulate_windows(u[None], y_initial[None])[0]

    def simulate_windows(self, u: np.ndarray, y_initial: np.ndarray) -> np.ndarray:
        """``(B, T, n_outputs)`` for ``B`` windows ``u`` ``(B, T, n_inputs)``.

        Each window starts from the state its first ``n`` measured outputs
        ``y_initial`` ``(B, n, n_outputs)`` give (and its ``u[:, :n]``); the
        first ``n`` rows of each result are ``y_initial``. ``u`` is already
        delayed (windows cut from a delayed record).
        """
        path, n = self.run.path, y_initial.shape[1]
        xs, y_lins, hists = [], [], []
        for u_w, y_w in zip(u, y_initial):
            x, y_lin = path.inputs(u_w, y_w[0])
            xs.append(x)
            y_lins.append(y_lin)
            hists.append(path.targets(y_w, None if y_lin is None else y_lin[:n]))
        y_net = self._network(np.stack(xs), np.stack(hists))
        y = np.stack([path.outputs(y_b, lin) for y_b, lin in zip(y_net, y_lins)])
        y[:, :n] = y_initial
        return y

    def predict(self, u: np.ndarray, y: np.ndarray, steps_ahead: int, n: int) -> np.ndarray:
        """The ``steps_ahead``-step prediction ``(N, n_outputs)`` (module docstring)."""
        return self.predictions(u, y, (steps_ahead,), n)[steps_ahead]

    def predictions(
        self, u: np.ndarray, y: np.ndarray, horizons: tuple[int, ...], n: int
    ) -> dict[int, np.ndarray]:
        """The prediction ``(N, n_outputs)`` of each horizon ``k`` in ``horizons``, by ``k``.

        Horizons up to the run's window horizon (a lag class's) come from
        the windows (:meth:`window_predictions`), the others from one
        simulation and the noise model (:meth:`noise_predictions`). ``u`` is
        physical and delayed here, once, before it is cut into windows.
        """
        u = self.run.path.delayed(u)
        limit = self.window_horizon
        windowed = tuple(k for k in horizons if k <= limit)
        out = self.window_predictions(u, y, windowed, n) if windowed else {}
        rest = tuple(k for k in horizons if k > limit)
        return {**out, **(self.noise_predictions(u, y, rest, n) if rest else {})}

    @property
    def window_horizon(self) -> float:
        """The longest horizon predicted from measured lags: 0 for the network classes."""
        if self.run.structure in NETWORK_CLASSES:
            return 0
        limit = self.run.window_horizon
        return float("inf") if limit is None else limit

    def noise_predictions(
        self, u: np.ndarray, y: np.ndarray, horizons: tuple[int, ...], n: int
    ) -> dict[int, np.ndarray]:
        """``y_sim + e_hat(t | t - k)`` for each ``k``, from one simulation (module docstring).

        ``u`` already delayed (:meth:`~keras_mgu.sysid.models.signals.SignalPath.delayed`).
        """
        y_sim = self._simulate(u, y[:n])
        if self.run.noise is None:
            return {k: y_sim for k in horizons}
        return {k: y_sim + self.run.noise.predict(y - y_sim, k) for k in horizons}

    def window_predictions(
        self, u: np.ndarray, y: np.ndarray, horizons: tuple[int, ...], n: int
    ) -> dict[int, np.ndarray]:
        """Each ``k``'s prediction from the measured lags (module docstring).

        One window from each start ``s`` runs ``K = max(horizons)`` steps,
        and each ``k`` reads step ``t - s`` of the window from ``s = max(n,
        t - k + 1)``. ``u`` already delayed.
        """
        total = len(u)
        steps = min(max(horizons), total - n)
        sims = self._windows(u, y, n, steps)  # (total - n, steps, n_outputs), window from n + i
        t = np.arange(n, total)
        out = {}
        for k in horizons:
            start = np.maximum(n, t - k + 1)
            y_k = np.array(y, dtype=np.float64)
            y_k[n:] = sims[start - n, t - start]
            out[k] = y_k
        return out

    def _windows(self, u: np.ndarray, y: np.ndarray, n: int, steps: int) -> np.ndarray:
        """``(N - n, steps, n_outputs)``: from each start ``s = n + i``, ``steps`` simulated.

        Each window's state comes from the ``n`` measured samples before
        ``s``; inputs past the record's end repeat its last one (their
        outputs are never read).
        """
        padded = np.concatenate([u, np.repeat(u[-1:], steps, axis=0)])
        starts = np.arange(n, len(u))
        out = np.empty((len(starts), steps, y.shape[1]))
        chunk = max(1, CHUNK_SAMPLES // (n + steps))
        for i in range(0, len(starts), chunk):
            s = starts[i : i + chunk, None]
            sims = self.simulate_windows(padded[s + np.arange(-n, steps)], y[s + np.arange(-n, 0)])
            out[i : i + len(s)] = sims[:, n:]
        return out

    def choose_window_horizon(self, u: np.ndarray, y: np.ndarray, n: int) -> int:
        """The longest horizon of :data:`WINDOW_HORIZONS` up to which the windows err less.

        On a record the run did not train on (``u``, ``y``, the validation
        record): the largest ``K`` such that for every calibrated ``k <= K``
        the prediction from the measured lags has an RMSE at most that of the
        simulation with the noise model (0: none).
        """
        ks = tuple(k for k in WINDOW_HORIZONS if k < len(y) - n)
        if not ks:
            return 0
        u = self.run.path.delayed(u)  # physical: delayed once for both predictions
        windows = self.window_predictions(u, y, ks, n)
        noise = self.noise_predictions(u, y, ks, n)
        rmse = lambda y_hat: float(np.sqrt(np.mean((y_hat[n:] - y[n:]) ** 2)))  # noqa: E731
        limit = 0
        for k in ks:
            if not rmse(windows[k]) <= rmse(noise[k]):
                break
            limit = k
        return limit if limit < ks[-1] else WINDOW_ALWAYS

    def _from_start(self, u: np.ndarray) -> np.ndarray:
        """``u``'s free run from the estimation record's start state.

        A learned state is that start. An encoder reads the run's own first
        ``n_initial`` samples of the estimation record (``start`` holds the
        longest lag of every class; each run takes as many as it reads): the
        experiment is taken to start as that record did, so its first
        ``n_initial`` rows are the record's first outputs and ``u[:n_initial]``
        the inputs that go with them.
        """
        path, config = self.run.path, self.run.config
        if config.initial_state == "encoder":
            n = min(config.n_initial, len(self.start[1]), len(u) - 1)
            return self.simulate_windows(u[None], self.start[1][None, :n])[0]
        y0 = self.start[1][0] if self.start is not None else np.asarray(path.outer.y_mean)
        x, y_lin = path.inputs(u, y0)
        return path.outputs(self._call(x[None].astype("float32"))[0], y_lin)

    def _network(self, x: np.ndarray, y_hist: np.ndarray) -> np.ndarray:
        """The network's outputs ``(B, T, n_outputs)``; the ``n`` given samples first."""
        n, model = y_hist.shape[1], self.run.model
        if self.run.config.initial_state == "encoder":
            past = encoder_history(x[:, :n], y_hist, self.run.config.n_initial)
            y_net = self._call([*past, x[:, n:].astype("float32")])
            return np.concatenate([y_hist, y_net], axis=1)
        sim, states = fit_initial_state(model, x[:, :n], y_hist)
        return self._call([x.astype("float32"), *states], sim)

    def _call(self, inputs: Any, model: keras.Model | None = None) -> np.ndarray:
        model = model or self.run.model
        if keras.backend.backend() == "jax":
            # A direct call on JAX traces and compiles the recurrence's scan on every call;
            # Keras's predict step is compiled once per model and input shape.
            return np.asarray(model.predict_on_batch(inputs), dtype=np.float64)
        out = model(inputs, training=False)  # TensorFlow, PyTorch: no tracing per shape
        return keras.ops.convert_to_numpy(out).astype(np.float64)
