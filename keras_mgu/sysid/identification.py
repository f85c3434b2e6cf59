"""The identified model: simulation in physical units, from a learned or an estimated state.

:class:`Identification` (what :func:`~keras_mgu.sysid.identify` returns)
simulates a new experiment from its inputs and, optionally, its first ``n``
measured outputs (:mod:`~keras_mgu.sysid.models.state` estimates the state from
them); each run's :class:`~keras_mgu.sysid.models.signals.SignalPath` maps the
physical signals to the network's and back. Its errors on records, which
the choice weighs and a test scores, are its base
:class:`~keras_mgu.sysid.judging.record_errors.RecordErrors`'s; what it
calibrates on the validation record (the lag classes' window horizons, the
prediction mix, the band) is :mod:`~keras_mgu.sysid.judging.calibration`'s.
"""

from __future__ import annotations

import collections
import dataclasses
import os
from typing import Any

import keras
import numpy as np

from keras_mgu.datasets import Normalizer, Protocol, Record
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.files import kmgu
from keras_mgu.sysid.judging import calibration
from keras_mgu.sysid.judging.band import Band, Trajectory, check_level
from keras_mgu.sysid.judging.extrapolation import EstimationRange
from keras_mgu.sysid.judging.prediction import RunSimulator, check_signal
from keras_mgu.sysid.judging.prediction_mix import PredictionMix, last_sample_predictions
from keras_mgu.sysid.judging.record_errors import RecordErrors
from keras_mgu.sysid.models.delay import describe_input_delay
from keras_mgu.sysid.models.signals import SignalPath

__all__ = ["BENCHMARK_N_INITIAL", "Identification"]

#: Measured samples that set the state when neither the caller nor the protocol says.
BENCHMARK_N_INITIAL = 50


@dataclasses.dataclass
class Identification(RecordErrors):
    """The result of :func:`identify`: the chosen run and every restart.

    ``simulate`` and ``score`` work in physical units.

    Attributes:
        runs: Every restart (:class:`~keras_mgu.sysid.RunResult`, each with its
            model, resolved settings and signal path).
        best: Index of the run with the best validation score (``model``,
            ``path`` and ``config`` are its).
        n_initial: The data's protocol ``n`` (measured outputs a test record
            gives to set the state), or None.
        start: The estimation record's first ``u``, ``y`` samples (physical),
            the history that encoder models start from when no measured
            outputs are given.
        linear_table: The linear models tried, with their validation RMSE
            (:func:`~keras_mgu.sysid.models.arx.select_linear_model`).
        members: Runs whose simulations are averaged, a repeated index
            weighing more (``(3, 3, 0)``: ``(2 y_3 + y_0) / 3``); empty: the
            best run alone (see :mod:`~keras_mgu.sysid.choice.selection`).
        input_names, output_names: The estimation record's channel names.
        ts: Its sampling period in seconds (None: unknown).
        protocol: The data's scoring protocol
            (:class:`~keras_mgu.datasets.Protocol`), or None.
        capacity_table: With ``RecipeConfig(capacity="search")``: the
            screening runs' units, learning rate, iterations and validation
            RMSE (:mod:`~keras_mgu.sysid.choice.capacity`); else empty.
        class_table: Per model class tried: ``class``, ``runs``, the ``best``
            and ``median`` validation RMSE of its runs (standardised), with a
            first row for the ARX model where a lag class ran (``runs`` 0).
        band: The errors the band around a simulation or prediction is
            drawn from (:class:`~keras_mgu.sysid.judging.band.Band`, calibrated on
            the validation record), or None (a file saved before bands, or
            a run taken alone: :meth:`with_band` calibrates one).
        arx: The least-squares ARX model the lag classes start from, as a
            :class:`~keras_mgu.sysid.RunResult` (the reference every report
            sets the chosen model beside), or None.
        ranges: Each input's and output's range over the estimation record
            (:class:`~keras_mgu.sysid.judging.extrapolation.EstimationRange`):
            where an experiment leaves it, :func:`~keras_mgu.sysid.evaluate`
            says how much and how the band holds there; None for a file
            saved before ranges were kept.
        prediction_mix: Each horizon's mix of the k-step prediction with
            the ARX reference's and the last sample, fitted on the validation record
            (:mod:`~keras_mgu.sysid.judging.prediction_mix`); None: the
            model's prediction alone.

    :meth:`save` writes it to one file and :func:`keras_mgu.sysid.load`
    reads it back (:mod:`~keras_mgu.sysid.files.kmgu`); a loaded one simulates and
    scores the same, but its runs have no early-stopping history
    (``RunResult.stopper`` is None).
    """

    runs: list
    best: int
    n_initial: int | None = None
    start: tuple[np.ndarray, np.ndarray] | None = None
    linear_table: list = dataclasses.field(default_factory=list)
    members: tuple[int, ...] = ()
    input_names: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    ts: float | None = None
    protocol: Protocol | None = None
    capacity_table: list = dataclasses.field(default_factory=list)
    class_table: list = dataclasses.field(default_factory=list)
    band: Band | None = None
    arx: Any = None
    ranges: EstimationRange | None = None
    prediction_mix: PredictionMix | None = None

    @property
    def kept(self) -> tuple[int, ...]:
        """The runs the model averages, repeats as weights: ``members``, or the best run alone."""
        return self.members or (self.best,)

    @property
    def model(self) -> keras.Model:
        """The chosen run's network (standardised units; see ``path``)."""
        return self.runs[self.best].model

    @property
    def path(self) -> SignalPath:
        """The chosen run's signal path (physical signals to the network's)."""
        return self.runs[self.best].path

    @property
    def config(self) -> RecipeConfig:
        """The chosen run's resolved settings."""
        return self.runs[self.best].config

    @property
    def normalizer(self) -> Normalizer:
        """Standardisation with the estimation record's statistics."""
        return self.path.outer

    @property
    def stopping_scores(self) -> list[float]:
        """Each run's best early-stopping score (the weighted ``score_weights``, network units).

        Not the validation RMSE the runs are chosen on (``run.validation_rmse``,
        standardised physical units, the validation record alone).
        """
        return [run.validation_score for run in self.runs]

    @property
    def validation_scores(self) -> list[float]:
        """The older name of :attr:`stopping_scores`."""
        return self.stopping_scores

    def simulate(
        self, u: Any, y_initial: Any = None, band: float | None = None
    ) -> np.ndarray | Trajectory:
        """Free-run simulation ``(N, n_outputs)`` of inputs ``u`` ``(N, n_inputs)``.

        Args:
            u: The experiment's inputs, physical units.
            y_initial: ``None``, or its first ``n`` measured outputs
                ``(n, n_outputs)``, ``1 <= n < N``: the state the simulation
                starts from is estimated from them and ``u[:n]`` (encoder, or
                a state fitted to them). The first ``n`` rows of the result
                are then ``y_initial`` itself. Without them the experiment is
                taken to start as the estimation record did (the learned
                state, or the encoder on that record's first samples).
            band: None, or a level in ``(0, 1)`` such as ``0.95``: then a
                :class:`~keras_mgu.sysid.judging.band.Trajectory` ``(y, lower,
                upper)`` is returned, the band holding the measured output
                with about that probability (calibrated on the validation
                record, :mod:`~keras_mgu.sysid.judging.band`; width zero on
                ``y_initial``'s rows).
        """
        level = self._band_level(band)
        outer = self.path.outer
        u = check_signal("u", u, len(outer.u_mean))
        if y_initial is not None:
            y_initial = check_signal("y_initial", y_initial, len(outer.y_mean))
            if not 1 <= len(y_initial) < len(u):
                raise ValueError(
                    f"`y_initial` has {len(y_initial)} samples; give between 1 and {len(u) - 1} "
                    f"(fewer than the {len(u)} samples of `u`, so that some are left to simulate)."
                )
        counts = collections.Counter(self.kept)
        sims = [RunSimulator(self.runs[k], self.start).simulate(u, y_initial) for k in counts]
        y = np.average(sims, axis=0, weights=list(counts.values()))
        if level is None:
            return y
        return self.band.around(y, level, measured=0 if y_initial is None else len(y_initial))

    def predict(
        self, u: Any, y: Any, steps_ahead: int = 1, n_initial: int | None = None,
        band: float | None = None,
    ) -> np.ndarray | Trajectory:  # fmt: skip
        """The ``steps_ahead``-step-ahead prediction ``(N, n_outputs)`` of a measured experiment.

        Sample ``t`` is predicted from what the measured samples up to
        ``t - k`` give. The lag classes start from the ``n`` measured samples
        before ``s = max(n, t - k + 1)`` (as :meth:`simulate` sets a state
        from ``y_initial``) and run ``t - s + 1 <= k`` steps free on the
        inputs: ``y_pred[t] = simulate(u[s-n : t+1], y[s-n : s])[-1]``. The
        network classes, whose network keeps its own state, add to the
        simulation from the first ``n`` samples the prediction of its
        residual from the residuals up to ``t - k`` (the run's noise model):
        ``y_pred[t] = y_sim[t] + e_hat(t | t - k)``. The first ``n`` rows
        are ``y`` itself; ``k = 1``: one step ahead; ``k >= N - n``: the
        simulation from the first ``n`` samples. Details and cost:
        :mod:`~keras_mgu.sysid.judging.prediction`.

        Args:
            u, y: The experiment's inputs ``(N, n_inputs)`` and measured
                outputs ``(N, n_outputs)``, physical units.
            steps_ahead: ``k >= 1``.
            n_initial: ``n``, the measured samples that set each state
                (``1 <= n < N``; default as :meth:`score`'s ``"benchmark"``:
                the data's protocol ``n``, else 50).
            band: None, or a level in ``(0, 1)``: a
                :class:`~keras_mgu.sysid.judging.band.Trajectory` as :meth:`simulate`'s,
                the band of the ``k``-step prediction.
        """
        level = self._band_level(band)
        y_pred = self.predictions(u, y, (steps_ahead,), n_initial)[steps_ahead]
        if level is None:
            return y_pred
        n = self.resolve_n_initial(n_initial)
        return self.band.around(y_pred, level, int(steps_ahead), measured=n)

    def predictions(
        self, u: Any, y: Any, horizons: Any, n_initial: int | None = None
    ) -> dict[int, np.ndarray]:
        """:meth:`predict` for each ``k`` of ``horizons``, by ``k``, from one simulation.

        The same numbers as one :meth:`predict` per horizon, at about the
        cost of the longest (:meth:`~keras_mgu.sysid.judging.prediction.RunSimulator.predictions`).
        """
        outer = self.path.outer
        u = check_signal("u", u, len(outer.u_mean))
        y = check_signal("y", y, len(outer.y_mean))
        if len(y) != len(u):
            raise ValueError(f"`u` has {len(u)} samples and `y` {len(y)}; give the same number.")
        for k in horizons:
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
                raise ValueError(f"`steps_ahead` must be an integer >= 1; received {k!r}.")
        n = self.resolve_n_initial(n_initial)
        if not 1 <= n < len(u):
            raise ValueError(
                f"`n_initial` must be in [1, N={len(u)}) to leave samples to predict; received {n}."
            )
        horizons = tuple(int(k) for k in horizons)
        counts = collections.Counter(self.kept)
        preds = [
            RunSimulator(self.runs[k], self.start).predictions(u, y, horizons, n) for k in counts
        ]
        weights = list(counts.values())
        mean = {k: np.average([p[k] for p in preds], axis=0, weights=weights) for k in horizons}
        if self.prediction_mix is None or self.arx is None:
            return mean
        reference = self.reference().predictions(u, y, horizons, n)
        last = last_sample_predictions(y, horizons, n)
        free = self.simulate(u, y[:n]) if self.prediction_mix.reads_free_run else None
        mixed = self.prediction_mix.mixed(mean, reference, last, free)
        for k in horizons:  # a mix of equal rows rounds in its last bit: the measured ones
            mixed[k][:n] = y[:n]
        return mixed

    def with_window_horizons(self, record: Record, n_initial: int | None = None) -> Identification:
        """This identification with its lag-class members' window horizons chosen on ``record``
        (:func:`~keras_mgu.sysid.judging.calibration.with_window_horizons`)."""
        return calibration.with_window_horizons(self, record, n_initial)

    def with_prediction_mix(self, record: Record, n_initial: int | None = None) -> Identification:
        """This identification with each horizon's mix of its prediction and the ARX reference's
        fitted on ``record`` (:func:`~keras_mgu.sysid.judging.calibration.with_prediction_mix`)."""
        return calibration.with_prediction_mix(self, record, n_initial)

    def with_band(self, record: Record, n_initial: int | None = None) -> Identification:
        """This identification with its band calibrated on ``record``, one the networks did not
        train on (:func:`~keras_mgu.sysid.judging.calibration.with_band`)."""
        return calibration.with_band(self, record, n_initial)

    def _band_level(self, band: Any) -> float | None:
        if band is None:
            return None
        level = check_level(band)
        if self.band is None:
            raise ValueError(
                "This identification has no calibrated band (a model file saved before bands, "
                "or a run taken alone); calibrate one on a record it did not train on with "
                "`found = found.with_band(record)`."
            )
        return level

    def resolve_n_initial(self, n_initial: int | None = None) -> int:
        """The measured samples that set the state: ``n_initial``, the protocol's ``n``, else 50."""
        if n_initial is not None:
            return int(n_initial)
        return self.n_initial or BENCHMARK_N_INITIAL

    def save(self, filepath: str | os.PathLike) -> str:
        """Write this identification to one model file (``.kmgu``); returns its path.

        See :mod:`keras_mgu.sysid.files.kmgu`: every run, its network, signal
        path and settings, the record's names and protocol; written to a
        temporary file in the same folder and renamed, so an earlier file at
        ``filepath`` survives a failed save.
        """
        return kmgu.write_model_file(self, filepath)

    def describe(self) -> str:
        """What the chosen model is, in lines: its class and members, a polynomial's equation.

        Then the input delay (dead time; estimated or given) and the ARX
        reference's orders. For each polynomial NARX run it keeps, the
        selected terms with their coefficients and error reduction ratios
        (FROLS), in the estimation
        record's standardised signals (their means and deviations given).
        """
        from keras_mgu.sysid.models.polynomial import describe_polynomial

        members = sorted(set(self.kept))
        names = ", ".join(f"run {k + 1} ({self.runs[k].structure})" for k in members)
        lines = [f"the chosen model: {names}" + (", averaged" if len(members) > 1 else "")]
        given = self.config.input_delay is not None
        delay = describe_input_delay(self.path.input_delay, given, self.input_names)
        if self.arx is not None:  # its order: the measured samples that set its state
            na = self.arx.config.n_initial
            delay += f"; the ARX reference ARX({na}, {na + 1}) on the delayed inputs"
        lines.append(delay)
        for k in members:
            run = self.runs[k]
            if run.polynomial is not None:
                lines.append(describe_polynomial(
                    run.polynomial, self.input_names, self.output_names, run.path.outer
                ))  # fmt: skip
        return "\n".join(lines)

    def polynomial_terms(self) -> list[dict]:
        """The terms of the polynomial runs kept, each row with its ``run``; empty where none is.

        Rows as :meth:`~keras_mgu.sysid.models.polynomial.PolynomialNarx.term_table`'s.
        """
        rows = []
        for k in sorted(set(self.kept)):
            model = self.runs[k].polynomial
            if model is not None:
                table = model.term_table(self.input_names, self.output_names)
                rows += [{"run": k + 1, **row} for row in table]
        return rows

    def reference(self) -> Identification | None:
        """The ARX reference model (:attr:`arx`) as an identification of its own, or None."""
        if self.arx is None:
            return None
        return Identification([self.arx], 0, self.n_initial, self.start, ts=self.ts)

    def run_alone(self, k: int) -> Identification:
        """This identification with run ``k`` alone kept (without the ensemble's band)."""
        return dataclasses.replace(self, best=k, members=(), band=None, prediction_mix=None)


def load(filepath: str | os.PathLike) -> Identification:
    """The :class:`Identification` saved in ``filepath`` (a ``.kmgu`` model file).

    What is kept and what is refused (with a ``ModelFileError``, a
    ``ValueError``): :func:`keras_mgu.sysid.files.kmgu.read_model_file`.
    """
    return Identification(**kmgu.read_model_file(filepath))
