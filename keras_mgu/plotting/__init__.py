"""Plots as PNG files: training curves, a simulation of a test record, its residual analysis.

* :func:`plot_training`: a Keras run's per-iteration loss, validation checks
  and best point (a :class:`~keras_mgu.callbacks.WeightedEarlyStopping`
  callback), or its per-epoch History.
* :func:`plot_runs`: every run of an identification (``keras-mgu identify``'s
  ``training.png``), by run and class: validation checks with each run's best,
  training loss where recorded, against the iteration.
* :func:`plot_trials`: the validation RMSE of each trial of a sweep.
* :func:`plot_simulation`: measured and simulated outputs (or the residual),
  one panel per output, by name, the band around the simulation, and the
  inputs in a panel below them; one legend below the panels.
* :func:`plot_residual_analysis`: a residual's autocorrelation and its
  cross-correlation with each input, one column per output.

Each ``plot_*`` writes the figure of its ``*_figure`` function (one module
per kind of plot: :mod:`~keras_mgu.plotting.training`,
:mod:`~keras_mgu.plotting.runs`, :mod:`~keras_mgu.plotting.trials`,
:mod:`~keras_mgu.plotting.simulation`, :mod:`~keras_mgu.plotting.residuals`)
to a temporary file beside ``path``, renamed over it, and returns ``path``.

Needs matplotlib (``pip install keras-mgu[plot]``). Figures are drawn on the
Agg canvas directly, so the global matplotlib backend is left untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from keras_mgu.plotting._common import moving_average, png_path, save_png
from keras_mgu.plotting.residuals import residual_analysis_figure
from keras_mgu.plotting.runs import RunCurves, run_curves, runs_figure
from keras_mgu.plotting.simulation import simulation_figure
from keras_mgu.plotting.training import training_figure
from keras_mgu.plotting.trials import trials_figure

__all__ = [
    "RunCurves",
    "moving_average",
    "plot_residual_analysis",
    "plot_runs",
    "plot_simulation",
    "plot_training",
    "plot_trials",
    "residual_analysis_figure",
    "run_curves",
    "runs_figure",
    "simulation_figure",
    "training_figure",
    "trials_figure",
]


def plot_training(history_or_callback: Any, path: str | os.PathLike, window: int = 5) -> str:
    """Draw training curves and save them as a PNG at ``path``.

    From a :class:`~keras_mgu.callbacks.WeightedEarlyStopping` callback: the
    training loss per iteration, raw and as a trailing mean over ``window``
    iterations, the validation values of each check, and the weighted score
    of each check with the best one marked. From a ``keras.callbacks.History``
    (or its ``.history`` dict): one panel per metric with training and
    validation curves per epoch, the learning rate if logged, and the best
    ``val_loss`` (else ``loss``) marked.

    The file is written to a temporary file in the same folder and renamed
    over ``path``. Returns ``path``.
    """
    path = png_path(path)
    return save_png(training_figure(history_or_callback, window), path)


def plot_runs(
    runs: Sequence[Any], path: str | os.PathLike, title: str = "", kept: Sequence[int] = ()
) -> str:
    """Every run of an identification drawn as a PNG at ``path`` (:func:`runs_figure`).

    ``runs`` are :attr:`keras_mgu.sysid.Identification.runs`; ``kept`` the
    indices of those the model keeps (:attr:`~keras_mgu.sysid.Identification.kept`),
    drawn thicker. Returns ``path``.
    """
    path = png_path(path)
    return save_png(runs_figure(runs, title, kept), path)


def plot_trials(table: list[Mapping[str, Any]], path: str | os.PathLike) -> str:
    """Draw the validation RMSE of each trial of a sweep, the best marked; save a PNG at ``path``.

    ``table`` is :attr:`keras_mgu.sysid.TuneResult.table` (rows with ``trial``,
    ``status`` and ``validation_rmse``); failed trials are drawn as crosses at
    the bottom. The file is written atomically. Returns ``path``.
    """
    path = png_path(path)
    if not table:
        raise ValueError("`table` has no trials to draw.")
    return save_png(trials_figure(table), path)


def plot_simulation(
    time: Any, y: Any, y_sim: Any, path: str | os.PathLike, output_names: tuple[str, ...] = (),
    title: str = "", label: str = "simulation", scored_from: int = 0, residual: bool = False,
    band: tuple[Any, Any] | None = None, others: Sequence[tuple[str, Any]] = (),
    u: Any = None, input_names: tuple[str, ...] = (), outside: Any = None,
    band_label: str = "band",
) -> str:  # fmt: skip
    """Measured and simulated outputs, one panel per output, saved as a PNG at ``path``.

    Each panel is titled by its output's name (``y0``, ``y1``, ... when not
    given) with the RMSE and fit % of that output from sample
    ``scored_from`` on. With ``residual`` the panels show ``y - y_sim``
    instead. ``label`` names the simulated curve; ``band`` ``(lower,
    upper)``, each shaped as ``y``, is drawn around it (around zero for the
    residual: ``y_sim - lower``, ``y_sim - upper``) as a see-through fill
    over the curves with an outline, named ``band_label`` in the legend;
    ``others`` are further ``(label, simulation)`` curves drawn beside it (a
    reference model).
    ``u`` ``(N, n_inputs)`` (or ``(N,)``), the inputs of the same samples,
    is drawn in one more panel below the outputs on the same time axis, each
    input by its name (``input_names``; ``u0``, ``u1``, ... when not given).
    ``outside`` ``(N,)`` (booleans) marks the samples outside the estimation
    range, shaded grey in every panel. One legend, below the panels, names
    every curve. Written atomically; returns ``path``.
    """
    path = png_path(path)
    fig = simulation_figure(
        time, y, y_sim, output_names, title, label, scored_from, residual, band, others, u,
        input_names, outside, band_label,
    )  # fmt: skip
    return save_png(fig, path, dpi=110)


def plot_residual_analysis(analysis: Any, path: str | os.PathLike, title: str = "") -> str:
    """A :class:`~keras_mgu.sysid.ResidualAnalysis` as a PNG at ``path``; returns ``path``.

    One column per output (by name): the residual's autocorrelation, then its
    cross-correlation with each input, each with the confidence band.
    """
    path = png_path(path)
    return save_png(residual_analysis_figure(analysis, title), path)
