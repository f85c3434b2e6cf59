"""A model judged on a measured experiment: simulation, k-step prediction, fit %, residuals.

:func:`evaluate` gathers what a researcher reads off a test record (the
numbers ``keras-mgu identify`` and ``keras-mgu simulate`` print and store),
each under one name:

* ``rmse``, ``fit_percent``: the free-run simulation from the inputs alone
  (the model's start state), every sample scored.
* ``from_n``: the simulation from the state the first ``n`` measured outputs
  set, samples ``n`` onward scored (the benchmark convention); none for
  ``n = 0``, where it would be the free run again.
* ``prediction``: the ``k``-step-ahead prediction
  (:meth:`~keras_mgu.sysid.Identification.predict`), samples ``n`` onward
  scored; none for ``n = 0`` (a prediction starts from measured outputs).
* ``residuals``: :func:`~keras_mgu.sysid.residual_analysis` of the residual
  of the simulation scored in ``from_n`` (the free run's for ``n = 0``).
* ``headline``: the score to quote for the experiment. The free run starts
  from the estimation record's start state, which fits an experiment that
  starts where the estimation record did (``same_start``: a benchmark whose
  protocol says so, ``Protocol.same_initial_state``); any other experiment is
  quoted by ``from_n``, the simulation from its own first ``n`` measured
  outputs (``found.score(record, "benchmark")``), and by the free run only
  for ``n = 0``.
* ``outputs``: the scores of each output, by its name.
* ``band``: the level of the band (:mod:`~keras_mgu.sysid.judging.band`) drawn
  around ``from_n``'s simulation (its ``lower``, ``upper``) and the
  prediction's, and the fraction of the measured samples inside it from
  sample ``n`` on (``coverage``): of the simulation and of the 1- and
  10-step predictions; and of the simulation, per output
  (``coverage_by_output``) and for every output at once (``joint_coverage``,
  the samples where all are inside); none without a calibrated band or for
  ``n = 0``.
* ``extrapolation``: where the experiment leaves the estimation range (its
  inputs, or the scored simulation's outputs), from sample ``n`` on: the
  share of the samples outside it and the band's coverage there
  (:func:`~keras_mgu.sysid.judging.extrapolation.extrapolation`); none for a
  model that keeps no range (a file saved before ranges were kept).
* ``reference``: the figures the model is set beside, from sample ``n`` on:
  the ARX reference model's simulation from the first ``n`` outputs and
  one-step prediction (``Identification.arx``), and the last-sample
  predictor ``y_pred[t] = y[t - 1]``; none for ``n = 0`` or where not asked
  for (``reference=False``: ``keras-mgu simulate`` prints none).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from keras_mgu.sysid.judging.band import (
    check_level,
    coverage,
    coverage_by_output,
    joint_coverage,
)
from keras_mgu.sysid.judging.extrapolation import extrapolation
from keras_mgu.sysid.judging.residuals import MAX_LAG, ResidualAnalysis, residual_analysis
from keras_mgu.sysid.judging.scoring import fit_percent, rmse

__all__ = ["COVERAGE_HORIZONS", "DEFAULT_BAND", "Evaluation", "evaluate"]

#: The level of the band :func:`evaluate` draws and measures by default.
DEFAULT_BAND = 0.95
#: The prediction horizons whose band coverage :func:`evaluate` measures.
COVERAGE_HORIZONS = (1, 10)


@dataclasses.dataclass
class Evaluation:
    """Scores of one model on one measured experiment (physical units; see the module).

    Attributes:
        n_initial: ``n``, the measured outputs that set the state.
        simulation: The free-run simulation ``(N, n_outputs)``.
        rmse, fit_percent: Of ``simulation``, all samples (fit % per output).
        from_n: ``{"rmse", "fit_percent", "simulation"}`` of the simulation from
            the first ``n`` outputs, scored from sample ``n``; None for ``n = 0``.
        prediction: ``{"steps_ahead", "rmse", "fit_percent", "y_pred"}``, the
            k-step-ahead prediction ``y_pred`` ``(N, n_outputs)`` scored from
            sample ``n``; None for ``n = 0`` or when no ``k`` was asked for.
        residuals: The residual analysis (see the module).
        outputs: Each output's scores by its name (``y0``, ``y1``, ... when
            not given): ``rmse``, ``fit_percent`` of ``simulation`` and, for
            ``n > 0``, ``rmse_from_n``, ``fit_percent_from_n`` of ``from_n``.
        same_start: Whether the experiment starts where the estimation record
            did (see :attr:`headline`).
        band: ``{"level", "coverage": {"simulation", "1", "10"},
            "coverage_by_output", "joint_coverage"}`` (see the module), or None.
        reference: ``{"arx": {"simulation", "one_step"} or None,
            "last_sample"}`` RMSEs (see the module), or None.
        reference_simulation: The ARX reference's simulation from the first
            ``n`` outputs ``(N, n_outputs)``, or None.
        extrapolation: ``{"share", "inputs_share", "outputs_share", "samples",
            "coverage"}`` (see the module), or None.
        outside: The ``(N,)`` mask of the scored samples outside the
            estimation range (what the plots mark), or None.
    """

    n_initial: int
    simulation: np.ndarray
    rmse: float
    fit_percent: list[float]
    from_n: dict[str, Any] | None
    prediction: dict[str, Any] | None
    residuals: ResidualAnalysis
    outputs: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    same_start: bool = False
    band: dict[str, Any] | None = None
    reference: dict[str, Any] | None = None
    reference_simulation: np.ndarray | None = None
    extrapolation: dict[str, Any] | None = None
    outside: np.ndarray | None = None

    @property
    def headline(self) -> dict[str, Any]:
        """The score to quote (see the module), with its simulation and where it starts.

        ``{"rmse", "fit_percent", "simulation", "scored_from", "start"}``:
        ``scored_from`` is its first scored sample, ``start`` says in words
        what sets its state.
        """
        if self.from_n is None or self.same_start:
            start = "the estimation record's start state"
            return {"rmse": self.rmse, "fit_percent": self.fit_percent,
                    "simulation": self.simulation, "scored_from": 0, "start": start}  # fmt: skip
        n = self.n_initial
        return {**self.from_n, "scored_from": n, "start": f"the first {n} measured outputs"}

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers and lists (no simulations or predictions), for ``results.json``."""
        return {
            "n_initial": self.n_initial,
            "rmse": self.rmse,
            "fit_percent": self.fit_percent,
            "from_n": _scores_only(self.from_n),
            "prediction": _scores_only(self.prediction),
            "residuals": self.residuals.to_dict(),
            "headline": _scores_only(self.headline),
            "outputs": self.outputs,
            "band": self.band,
            "reference": self.reference,
            "extrapolation": self.extrapolation,
        }


def _scores_only(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """``entry`` without its arrays (``simulation``, ``y_pred``)."""
    if entry is None:
        return None
    return {k: v for k, v in entry.items() if not isinstance(v, np.ndarray)}


def _scores(y: np.ndarray, y_hat: np.ndarray) -> dict[str, Any]:
    return {"rmse": rmse(y, y_hat), "fit_percent": fit_percent(y, y_hat).tolist()}


def _by_output(
    y: np.ndarray, free: np.ndarray, from_n: dict[str, Any] | None, n: int, names: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    """Each output's scores by its name (see :attr:`Evaluation.outputs`)."""
    names = tuple(names) or tuple(f"y{i}" for i in range(y.shape[1]))
    table = {}
    for i, name in enumerate(names):
        row = _scores(y[:, i : i + 1], free[:, i : i + 1])
        table[name] = {"rmse": row["rmse"], "fit_percent": row["fit_percent"][0]}
        if from_n is not None:
            row = _scores(y[n:, i : i + 1], from_n["simulation"][n:, i : i + 1])
            table[name].update(rmse_from_n=row["rmse"], fit_percent_from_n=row["fit_percent"][0])
    return table


def evaluate(
    found: Any, u: Any, y: Any, n_initial: int, steps_ahead: int | None = None,
    input_names: tuple[str, ...] = (), output_names: tuple[str, ...] = (),
    same_start: bool = False, band: float | None = DEFAULT_BAND, max_lag: int = MAX_LAG,
    reference: bool = True,
) -> Evaluation:  # fmt: skip
    """Simulate, predict and analyse ``found`` (an :class:`Identification`) on ``u``, ``y``.

    Args:
        found: The identified model.
        u, y: The experiment ``(N, n_inputs)``, ``(N, n_outputs)``, physical units.
        n_initial: ``n``, ``0 <= n < N``: the measured outputs that set the state.
        steps_ahead: ``k >= 1`` for the k-step-ahead prediction, or None.
        input_names, output_names: Channel names for the residual analysis and
            :attr:`Evaluation.outputs`.
        same_start: Whether the experiment starts where the estimation record
            did (a benchmark's ``Protocol.same_initial_state``): then the free
            run is the :attr:`~Evaluation.headline`.
        band: The level of the band drawn and measured (None: none); the
            model's calibrated band is used (``found.band``), none if it has
            none.
        max_lag: The lags of the residual analysis (fewer where the record is shorter).
        reference: Whether to score the ARX reference and the last-sample
            predictor beside the model (:attr:`Evaluation.reference`); without
            them the ARX model's network is not made nor simulated.
    """
    u, y = np.asarray(u, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = int(n_initial)
    if not 0 <= n < len(y):
        raise ValueError(f"`n_initial` must be in [0, N={len(y)}); received {n_initial!r}.")
    level = None if band is None or getattr(found, "band", None) is None else check_level(band)
    free = found.simulate(u)
    wants_reference, reference, reference_simulation = reference, None, None
    from_n = prediction = bands = None
    scored = free
    if n > 0:
        scored = found.simulate(u, y[:n])
        from_n = {**_scores(y[n:], scored[n:]), "simulation": scored}
        horizons = set() if steps_ahead is None else {int(steps_ahead)}
        if level is not None:
            horizons |= set(COVERAGE_HORIZONS)
        # every horizon from one simulation (Identification.predictions)
        predictions = found.predictions(u, y, sorted(horizons), n_initial=n) if horizons else {}
        if steps_ahead is not None:
            y_k = predictions[int(steps_ahead)]
            prediction = {"steps_ahead": int(steps_ahead), **_scores(y[n:], y_k[n:]), "y_pred": y_k}
        if level is not None:
            bands = _band(found, y, n, level, from_n, prediction, predictions)
        if wants_reference:
            reference, reference_simulation = _reference(found, u, y, n)
    lag = min(max_lag, len(y) - n - 1)
    residuals = residual_analysis(
        (y - scored)[n:], u[n:], max_lag=max(lag, 1), output_names=output_names,
        input_names=input_names,
    )  # fmt: skip
    whole = _scores(y, free)
    outputs = _by_output(y, free, from_n, n, output_names)
    beyond = mask = None
    if getattr(found, "ranges", None) is not None:
        drawn = (from_n["lower"], from_n["upper"]) if from_n and "lower" in from_n else None
        beyond = extrapolation(found.ranges, u, y, scored, n, drawn)
        mask = beyond.pop("mask")
    return Evaluation(
        n, free, whole["rmse"], whole["fit_percent"], from_n, prediction, residuals, outputs,
        bool(same_start), bands, reference, reference_simulation, beyond, mask,
    )  # fmt: skip


def _band(
    found: Any, y: np.ndarray, n: int, level: float, from_n: dict[str, Any],
    prediction: dict[str, Any] | None, predictions: dict[int, np.ndarray],
) -> dict[str, Any]:  # fmt: skip
    """The band's level and coverage; draws it into ``from_n`` and ``prediction`` (in place).

    ``predictions``: the prediction of each horizon of :data:`COVERAGE_HORIZONS` (and more).
    """
    trajectory = found.band.around(from_n["simulation"], level, measured=n)
    from_n["lower"], from_n["upper"] = trajectory.lower, trajectory.upper
    cover = {"simulation": coverage(y, trajectory, n)}
    for k in COVERAGE_HORIZONS:
        drawn = found.band.around(predictions[k], level, k, measured=n)
        cover[str(k)] = coverage(y, drawn, n)
    if prediction is not None:
        k = prediction["steps_ahead"]
        drawn = found.band.around(prediction["y_pred"], level, k, measured=n)
        prediction["lower"], prediction["upper"] = drawn.lower, drawn.upper
        prediction["coverage"] = coverage(y, drawn, n)
    return {
        "level": level,
        "coverage": cover,
        "coverage_by_output": coverage_by_output(y, trajectory, n),
        "joint_coverage": joint_coverage(y, trajectory, n),
    }


def _reference(
    found: Any, u: np.ndarray, y: np.ndarray, n: int
) -> tuple[dict[str, Any], np.ndarray | None]:
    """The ARX reference's and the last-sample predictor's RMSE from sample ``n`` on.

    Also the ARX reference's simulation (None without one).
    """
    arx = found.reference() if hasattr(found, "reference") else None
    figures = simulation = None
    if arx is not None:
        simulation = arx.simulate(u, y[:n])
        figures = {
            "simulation": rmse(y[n:], simulation[n:]),
            "one_step": rmse(y[n:], arx.predict(u, y, steps_ahead=1, n_initial=n)[n:]),
        }
    return {"arx": figures, "last_sample": rmse(y[n:], y[n - 1 : -1])}, simulation
