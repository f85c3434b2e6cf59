"""The polynomial NARX class in the recipe: its lags, degree and terms chosen on the free run.

For each output-lag count ``na`` of :data:`LAGS` (``nb = na + 1``: the inputs
``u_t .. u_{t-na}``) and each degree of :data:`DEGREES`, FROLS
(:func:`~keras_mgu.sysid.models.polynomial.frols`) orders the candidate
monomials on the standardised estimation record (every experiment's rows
together) and gives the least-squares coefficients of its first ``k``
terms, ``k = 1 .. MAX_TERMS``. Every one of these models runs free, in
NumPy, through

* the validation record, from its first ``L`` measured samples, and
* each estimation experiment from its first ``L`` (at most
  :data:`HORIZON_SAMPLES` samples of it),

and is scored as the recipe scores its classes, the two mean squares equally
weighted (:meth:`~keras_mgu.sysid.Identification.choice_error`): the lowest
score keeps its ``na``, degree and ``k``. A model whose free run leaves
``[min - s/2, max + s/2]`` of the estimation outputs (``s`` their span) on
either record is not kept (it runs off), and every free run is clamped to
``[min - s, max + s]`` (so it stays finite; the guard is saved with the
model). The least-squares fit costs seconds and depends on the data alone.

Then, as the other lag classes train, the chosen terms' coefficients are
refined on the simulation error of short windows started from measured
outputs (:func:`~keras_mgu.sysid.training.lag_run.train_lag_model`, Adam at
:data:`LEARNING_RATE`, windows drawn by the run's seed), and the validation
record's free run keeps the best coefficients, the least-squares ones
included: the refinement stays only where it measures better. The terms do
not change.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import keras
import numpy as np

from keras_mgu.datasets import Record
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.models.arx import LinearModel
from keras_mgu.sysid.models.polynomial import (
    PolynomialNarx,
    candidate_terms,
    frols,
    lag_regressors,
    term_values,
)
from keras_mgu.sysid.training.lag_run import lag_config, train_lag_model, window_schedule
from keras_mgu.sysid.training.run import RunResult

__all__ = [
    "DEGREES",
    "LAGS",
    "LEARNING_RATE",
    "MAX_TERMS",
    "fit_polynomial",
    "polynomial_config",
    "train_polynomial_run",
]

#: Output lags ``na`` tried (``nb = na + 1``), and degrees.
LAGS, DEGREES = (2, 3, 4, 6), (1, 2, 3)
#: Most terms per output.
MAX_TERMS = 40
#: Most samples of each estimation experiment run free in the choice.
HORIZON_SAMPLES = 20_000
#: Adam's learning rate of the refinement: a tenth of the other lag classes', whose rate
#: moved the coefficients of the zoo's hardening oscillator off their least-squares values
#: without a better validation check (0.135 at 1e-3 against 0.053 at 1e-4, standardised).
LEARNING_RATE = 1e-4


def output_box(y: np.ndarray, share: float) -> tuple[np.ndarray, np.ndarray]:
    """``(min - share s, max + share s)`` per output channel of ``y`` ``(N, n_outputs)``."""
    lo, hi = y.min(axis=0), y.max(axis=0)
    span = np.maximum(hi - lo, 1e-12)
    return lo - share * span, hi + share * span


def _rows(record: Record, na: int, nb: int) -> tuple[np.ndarray, np.ndarray]:
    """Regressors and targets of every experiment of ``record``, stacked."""
    lag, regressors, targets = max(na, nb - 1), [], []
    for first, stop in record.experiments:
        if stop - first > lag:
            u, y = record.u[first:stop], record.y[first:stop]
            regressors.append(lag_regressors(u, y, na, nb))
            targets.append(y[lag:])
    return np.concatenate(regressors), np.concatenate(targets)


def _family(
    estimation: Record, na: int, degree: int, max_terms: int, limits: tuple
) -> tuple[PolynomialNarx, np.ndarray]:
    """FROLS on ``estimation``: the model of every term and ``(K, K_all, n_outputs)`` nested sets.

    Coefficient set ``k - 1`` uses each output's first ``k`` terms.
    """
    nb, n_outputs = na + 1, estimation.y.shape[1]
    regressors, targets = _rows(estimation, na, nb)
    candidates = candidate_terms(regressors.shape[1], degree)
    values = term_values(regressors, candidates)
    fits = [frols(values, targets[:, i], min(max_terms, len(candidates))) for i in range(n_outputs)]
    used = sorted({int(c) for chosen, _, _ in fits for c in chosen})
    where = {c: j for j, c in enumerate(used)}
    depth = max(len(chosen) for chosen, _, _ in fits)
    sets = np.zeros((depth, len(used), n_outputs))
    err = np.zeros((len(used), n_outputs))
    for i, (chosen, ratios, coefficients) in enumerate(fits):
        columns = [where[int(c)] for c in chosen]
        err[columns, i] = ratios
        for k in range(depth):
            row = coefficients[min(k, len(chosen) - 1)]
            sets[k, columns, i] = row
    model = PolynomialNarx(
        na, nb, degree, candidates[used], sets[-1], err, estimation.u.shape[1], n_outputs, limits
    )
    return model, sets


def free_run_errors(
    model: PolynomialNarx, sets: np.ndarray, record: Record, keep: tuple, max_samples: int | None
) -> tuple[np.ndarray, int]:
    """Each set's summed squared free-run error on ``record``'s experiments, and the samples scored.

    A set whose run leaves ``keep`` gets ``inf``.
    """
    total, count = np.zeros(len(sets)), 0
    for first, stop in record.experiments:
        stop = stop if max_samples is None else min(stop, first + max_samples)
        if stop - first <= model.lag:
            continue
        u, y = record.u[first:stop], record.y[first:stop]
        with np.errstate(all="ignore"):
            y_sim = model.simulate_batch(u, y[: model.lag], sets)[:, model.lag :]
        error = y_sim - y[model.lag :]
        sums = np.sum(error**2, axis=(1, 2))
        inside = np.all((y_sim >= keep[0]) & (y_sim <= keep[1]), axis=(1, 2))
        total += np.where(inside & np.isfinite(sums), sums, np.inf)
        count += error.shape[1] * error.shape[2]
    return total, count


def polynomial_config(config: RecipeConfig, linear: LinearModel, n_samples: int) -> RecipeConfig:
    """``config`` resolved for the polynomial class: the linear class's window and work.

    ``n_initial`` is the longest lag of :data:`LAGS` (a run's own, once fitted,
    is its model's) and the learning rate :data:`LEARNING_RATE`.
    """
    resolved = lag_config(config, linear, n_samples, "linear")
    return dataclasses.replace(resolved, n_initial=max(LAGS), learning_rate=LEARNING_RATE)


def fit_polynomial(
    estimation: Record,
    validation: Record,
    lags: tuple[int, ...] = LAGS,
    degrees: tuple[int, ...] = DEGREES,
    max_terms: int = MAX_TERMS,
) -> tuple[PolynomialNarx, list[dict]]:
    """The polynomial NARX model the free run chooses (module docstring), and the table.

    Args:
        estimation, validation: Standardised records.
        lags, degrees, max_terms: The structures tried.

    Returns:
        The model and one row per ``(na, degree)``: ``na``, ``nb``,
        ``degree``, ``terms`` (the ``k`` it keeps) and ``score`` (the choice
        RMSE, standardised; ``inf``: every ``k`` ran off).
    """
    limits, keep = output_box(estimation.y, 1.0), output_box(estimation.y, 0.5)
    best, best_score, table = None, np.inf, []
    for na in lags:
        for degree in degrees:
            model, sets = _family(estimation, na, degree, max_terms, limits)
            est, n_est = free_run_errors(model, sets, estimation, keep, HORIZON_SAMPLES)
            val, n_val = free_run_errors(model, sets, validation, keep, None)
            parts = [s / n for s, n in ((est, n_est), (val, n_val)) if n]
            scores = np.sqrt(np.mean(parts, axis=0))
            k = int(np.argmin(scores))
            table.append({"na": na, "nb": na + 1, "degree": degree, "terms": k + 1,
                          "score": float(scores[k])})  # fmt: skip
            if scores[k] < best_score or best is None:
                best, best_score = _nested(model, sets, k), scores[k]
    return best, table


def _nested(model: PolynomialNarx, sets: np.ndarray, k: int) -> PolynomialNarx:
    """``model`` with coefficient set ``k`` (each output's first ``k + 1`` terms) alone."""
    coefficients = sets[k]
    used = np.any(coefficients != 0, axis=1)
    err = np.where(coefficients != 0, model.err, 0.0)
    return dataclasses.replace(
        model, terms=model.terms[used], coefficients=coefficients[used], err=err[used]
    )


def train_polynomial_run(
    estimation: Record,
    validation: Record,
    fitted: PolynomialNarx,
    config: RecipeConfig,
    seed: int,
    verbose: int = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
) -> RunResult:
    """One run of the polynomial class on standardised records (module docstring).

    ``fitted``, the least-squares model (:func:`fit_polynomial`, the same for
    every run of the class), has its coefficients refined on the simulation
    error of windows (``config``'s window, iterations and learning rate,
    windows drawn by ``seed``) where that simulates the validation record
    better (:func:`~keras_mgu.sysid.training.lag_run.train_lag_model`, the
    start kept otherwise). The run's ``config.n_initial`` is the model's lag.
    """
    start = time.perf_counter()
    model = fitted.keras_model()
    schedule = window_schedule(config)
    info = train_lag_model(model, estimation, validation, schedule, seed, verbose, callbacks)
    config = dataclasses.replace(config, n_initial=fitted.lag, units=())
    seconds = time.perf_counter() - start
    run = RunResult(model, seed, info["score"], info["iteration"], seconds, None, config)
    run.polynomial = fitted.with_keras_coefficients(model)
    run.validation_history = info["history"]
    return run
