"""The polynomial NARX class in the recipe: one run refines the fitted model's coefficients.

The model a run starts from is the class's least-squares fit, its lags,
degree and terms chosen on the free run
(:func:`~keras_mgu.sysid.models.polynomial.fit_polynomial`, the same for every
run of the class; its names are handed on here). Then, as the other lag
classes train, the chosen terms' coefficients are refined on the simulation
error of short windows started from measured outputs
(:func:`~keras_mgu.sysid.training.lag_run.train_lag_model`, Adam at
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

from keras_mgu.datasets import Record
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.models.arx import LinearModel
from keras_mgu.sysid.models.polynomial import (
    DEGREES,
    LAGS,
    MAX_TERMS,
    PolynomialNarx,
    fit_polynomial,
    free_run_errors,
    output_box,
)
from keras_mgu.sysid.training.lag_run import lag_config, train_lag_model, window_schedule
from keras_mgu.sysid.training.run import RunResult

__all__ = [
    "DEGREES",
    "LAGS",
    "LEARNING_RATE",
    "MAX_TERMS",
    "fit_polynomial",
    "free_run_errors",
    "output_box",
    "polynomial_config",
    "train_polynomial_run",
]

#: Adam's learning rate of the refinement: a tenth of the other lag classes', whose rate
#: moved the coefficients of the zoo's hardening oscillator off their least-squares values
#: without a better validation check (0.135 at 1e-3 against 0.053 at 1e-4, standardised).
LEARNING_RATE = 1e-4


def polynomial_config(config: RecipeConfig, linear: LinearModel, n_samples: int) -> RecipeConfig:
    """``config`` resolved for the polynomial class: the linear class's window and work.

    ``n_initial`` is the longest lag of :data:`LAGS` (a run's own, once fitted,
    is its model's) and the learning rate :data:`LEARNING_RATE`.
    """
    resolved = lag_config(config, linear, n_samples, "linear")
    return dataclasses.replace(resolved, n_initial=max(LAGS), learning_rate=LEARNING_RATE)


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

    ``fitted``, the least-squares model
    (:func:`~keras_mgu.sysid.models.polynomial.fit_polynomial`, the same for
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
