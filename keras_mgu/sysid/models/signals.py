"""Physical signals to what the network sees, and back: :class:`SignalPath`.

::

    u_d      = u delayed by input_delay (each input i: u_i(k - nk_i))   (records only)
    u_s, y_s = (u_d - u_mean) / u_std, (y - y_mean) / y_std     (estimation statistics)
    y_lin    = LinearModel.simulate(u_s, y0_s)                  (when a linear model is used)
    x        = inner([u_s, y_lin]),  target = inner(y_s - y_lin)  (standardised again)
    y        = outer^-1(inner^-1(y_net) + y_lin)                (the network's output back)

The recipe (:mod:`~keras_mgu.sysid.recipe`) makes one per structure when it
trains, and :class:`~keras_mgu.sysid.Identification` uses each run's to
simulate. The input delay (dead time, :mod:`~keras_mgu.sysid.models.delay`)
is applied once, to whole records: :meth:`SignalPath.record` and
:meth:`SignalPath.records` here (training), :meth:`SignalPath.delayed` in
:class:`~keras_mgu.sysid.judging.prediction.RunSimulator`'s entry points
(simulation and prediction); :meth:`SignalPath.inputs` takes inputs already
delayed, so that windows cut from a delayed record are not shifted again.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from keras_mgu.datasets import Normalizer, Record, SysIdData
from keras_mgu.sysid.models.arx import LinearModel
from keras_mgu.sysid.models.delay import delay_inputs, without_dead_samples

__all__ = ["SignalPath"]


@dataclasses.dataclass
class SignalPath:
    """Physical signals to the network's inputs and targets, and its outputs back.

    Attributes:
        outer: Standardisation with the estimation record's statistics.
        linear: The linear model fitted first (on standardised signals), or None.
        inner: Standardisation of ``[u_s, y_lin]`` and ``y_s - y_lin`` (None
            without a linear model).
        input_delay: Each input's delay in samples (dead time); empty: none.
    """

    outer: Normalizer
    linear: LinearModel | None = None
    inner: Normalizer | None = None
    input_delay: tuple[int, ...] = ()

    @property
    def dead_samples(self) -> int:
        """The longest input delay (0: none): how many samples of an experiment's start
        are driven by inputs from before it (:func:`~keras_mgu.sysid.models.delay.delay_inputs`
        holds the first input there), so that a simulation is scored after them."""
        return max(self.input_delay, default=0)

    def delayed(self, u: np.ndarray, boundaries: tuple[int, ...] = ()) -> np.ndarray:
        """Physical ``u`` ``(N, n_inputs)`` of whole experiments, each input delayed by its
        ``input_delay`` (:func:`~keras_mgu.sysid.models.delay.delay_inputs`)."""
        return delay_inputs(u, self.input_delay, boundaries)

    def inputs(self, u: np.ndarray, y0: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(x (N, n_net_inputs), y_lin (N, n_outputs) or None)`` for physical ``u``, ``y0``.

        ``u`` is already delayed (:meth:`delayed`).
        """
        u_s = self.outer.transform_u(u)
        if self.linear is None:
            return u_s, None
        y_lin = self.linear.simulate(u_s, self.outer.transform_y(y0))
        return self.inner.transform_u(np.concatenate([u_s, y_lin], axis=1)), y_lin

    def targets(self, y: np.ndarray, y_lin: np.ndarray | None) -> np.ndarray:
        """The network's targets for physical outputs ``y`` (``y_lin`` of the same samples)."""
        y_s = self.outer.transform_y(y)
        return y_s if y_lin is None else self.inner.transform_y(y_s - y_lin)

    def outputs(self, y_net: np.ndarray, y_lin: np.ndarray | None) -> np.ndarray:
        """Physical outputs from the network's outputs."""
        if y_lin is not None:
            y_net = self.inner.inverse_transform_y(y_net) + y_lin
        return self.outer.inverse_transform_y(y_net)

    def record(self, record: Record) -> Record:
        """``record`` as the network sees it, the linear model at rest at its first output.

        Its inputs are delayed here (each experiment at rest at its first input).
        """
        x, y_lin = self.inputs(self.delayed(record.u, record.boundaries), record.y[0])
        return Record(
            x, self.targets(record.y, y_lin), record.ts, name=record.name,
            boundaries=record.boundaries,
        )  # fmt: skip

    def trimmed(self, record: Record) -> Record:
        """:meth:`record` of ``record``, each experiment without its :attr:`dead_samples`
        (:func:`~keras_mgu.sysid.models.delay.without_dead_samples`): what a fit reads."""
        return without_dead_samples(self.record(record), self.input_delay)

    def records(
        self, data: SysIdData, continues: bool, learned_state: bool = False
    ) -> tuple[Record, Record]:
        """The estimation and validation records of ``data`` as the network sees them.

        With ``continues`` the validation record goes on from the estimation
        record: the linear model runs through both, from the first output.
        Otherwise each is on its own, without the dead samples a delay puts
        at each experiment's start (:attr:`dead_samples`: their outputs answer
        inputs from before the experiment), but for the estimation record of
        a ``learned_state`` model, whose state is that record's first sample.
        """
        est, val = data.estimation, data.validation
        if not continues:
            est = self.record(est) if learned_state else self.trimmed(est)
            return est, self.trimmed(val)
        joined = self.record(
            Record(
                np.concatenate([est.u, val.u]), np.concatenate([est.y, val.y]), est.ts,
                boundaries=est.boundaries,
            )
        )  # fmt: skip
        return joined.slice(0, est.n_samples), joined.slice(est.n_samples, None)
