"""An identification's errors on measured records: those the choice weighs, and its scores.

:class:`RecordErrors` is a base of :class:`~keras_mgu.sysid.Identification`:
its methods simulate with the identification's own ``simulate`` and
standardise with its signal path (``path.outer``). The choice
(:mod:`~keras_mgu.sysid.choice.restarts`) weighs, in standardised units,

* :meth:`~RecordErrors.test_like_error`: a record simulated from its first
  ``n`` measured outputs and scored after them, as a test record is;
* :meth:`~RecordErrors.horizon_error`: the same for each experiment of the
  estimation record (or of its held-out head, which no run fitted:
  :mod:`~keras_mgu.sysid.choice.held_out`), a horizon far longer than the
  training windows;
* :meth:`~RecordErrors.choice_error`: the two weighed equally;

with ``n`` the measured samples that start them (:meth:`~RecordErrors.measured_n`).
:meth:`~RecordErrors.validation_error` is the validation record's error as
training scored it, and :meth:`~RecordErrors.score` the RMSE of a record in
physical units, by either convention of :mod:`~keras_mgu.sysid.judging.scoring`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from keras_mgu.datasets import Record
from keras_mgu.sysid.judging.scoring import equal_weights, error_rmse, score

__all__ = ["RecordErrors"]


class RecordErrors:
    """The errors of an identification on records (module docstring).

    A base of :class:`~keras_mgu.sysid.Identification`, whose ``simulate``,
    ``resolve_n_initial``, ``path`` and ``config`` it reads.
    """

    def validation_error(self, data: Any) -> np.ndarray:
        """The simulation error of ``data.validation``, ``(N_scored, n_outputs)``, standardised.

        A validation record that continues the estimation record is simulated
        after it (from the estimation start), every sample scored; a separate
        one from its own first ``n_initial`` samples (and the input delay's
        :attr:`~keras_mgu.sysid.models.signals.SignalPath.dead_samples` more:
        before them its delayed inputs precede the record), scored after them.
        """
        val, outer = data.validation, self.path.outer
        if self.config.validation_continues:
            est = data.estimation
            y_sim = self.simulate(np.concatenate([est.u, val.u]))[est.n_samples :]
            return outer.transform_y(y_sim) - outer.transform_y(val.y)
        n = self.config.n_initial
        if n is not None and self.path.dead_samples:
            n = min(n + self.path.dead_samples, val.n_samples - 1)
        y_sim = self.simulate(val.u, val.y[:n])
        return outer.transform_y(y_sim[n:]) - outer.transform_y(val.y[n:])

    def horizon_error(self, record: Record | None) -> np.ndarray:
        """Each experiment of ``record`` run free, its error ``(N_scored, n_outputs)`` standardised.

        ``record`` is the estimation record (as :func:`~keras_mgu.sysid.identify`
        scores it by default), its held-out head
        (:mod:`~keras_mgu.sysid.choice.held_out`), or any other record
        (``None``: no samples). Each experiment is
        simulated from its first ``n`` measured samples (``n``:
        :meth:`measured_n`), as a test record is, and scored after them: a
        horizon far longer than the windows a lag class or an encoder model
        trains on, so that a drift or a slow instability shows.
        """
        errors = self.horizon_errors(record)
        if not errors:
            return np.zeros((0, len(self.path.outer.y_mean)))
        return np.concatenate(errors)

    def horizon_errors(self, record: Record | None) -> list[np.ndarray]:
        """:meth:`horizon_error` of each experiment of ``record``, one array each."""
        if record is None:
            return []
        n = self.measured_n()
        return [
            self.test_like_error(record.slice(first, stop))
            for first, stop in record.experiments
            if stop - first > n
        ]

    def choice_error(self, data: Any, held_out: Record | None = None) -> np.ndarray:
        """The error :func:`~keras_mgu.sysid.identify` chooses by, flattened.

        The validation record simulated from its first measured samples
        (:meth:`test_like_error`) and ``held_out``'s (:meth:`horizon_error`:
        the estimation record's held-out head; ``None``: the estimation
        record), each scaled so that the squared RMSE of the result is the
        mean of their two mean squares: the validation record alone can rank
        runs unlike a test record (a run that validates well over a short
        record and drifts over a long one). The estimation record rewards a
        run for fitting it; a held-out head does not.
        """
        start = data.estimation if held_out is None else held_out
        return equal_weights(self.test_like_error(data.validation), self.horizon_error(start))

    def test_like_error(self, record: Any) -> np.ndarray:
        """``record`` simulated from its first ``n`` measured samples, as a test is scored.

        ``(N - n, n_outputs)``, standardised; ``n`` as :meth:`horizon_error`'s.
        Every class is scored alike here, whatever protocol its training
        validated with (a learned-state network continues the estimation
        record, a lag class starts from the validation record's own lags).
        """
        outer = self.path.outer
        n = min(self.measured_n(), record.n_samples - 1)
        y_sim = self.simulate(record.u, record.y[:n])
        return outer.transform_y(y_sim[n:]) - outer.transform_y(record.y[n:])

    def measured_n(self) -> int:
        """The measured samples ``n`` that start the choice's simulations.

        The protocol's ``n`` (``resolve_n_initial()``: else 50), or more: at
        least the chosen run's own ``config.n_initial`` (a lag class's longest
        lag, an encoder's history) plus the input delay, so that every class
        starts from as many measured samples as it reads and no delayed input
        from before the record is read. :meth:`test_like_error` and
        :meth:`horizon_errors` simulate from the first ``n`` samples of a
        record and score the samples after them.
        """
        own = (self.config.n_initial or 1) + self.path.dead_samples
        return max(self.resolve_n_initial(), own)

    def validation_rmse(self, data: Any) -> float:
        """RMSE of ``data.validation`` in standardised output units, as training scored it.

        See :meth:`validation_error`; a non-finite RMSE is ``inf``.
        """
        return error_rmse(self.validation_error(data))

    def score(self, record: Record, convention: str = "all", n_initial: int | None = None) -> float:
        """RMSE of the simulation of ``record`` (see :mod:`keras_mgu.sysid.judging.scoring`).

        ``"all"``: simulated from ``u`` alone, every sample scored.
        ``"benchmark"``: the first ``n`` measured outputs set the state
        (``n``: ``n_initial``, else the data's protocol ``n``, else 50) and
        samples ``n`` onward are scored; ``n = 0`` is the ``"all"`` score.
        """
        if convention != "benchmark":
            return score(record.y, self.simulate(record.u), convention)
        n = self.resolve_n_initial(n_initial)
        if n == 0:  # no measured output given: the simulation from ``u`` alone
            return score(record.y, self.simulate(record.u), "all")
        y_sim = self.simulate(record.u, record.y[:n])
        return score(record.y, y_sim, "benchmark", n)
