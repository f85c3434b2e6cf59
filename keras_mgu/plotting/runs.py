"""The figure of :func:`keras_mgu.plotting.plot_runs`: what training did in each run.

An identification (:func:`keras_mgu.sysid.identify`) trains several runs of
several model classes. Each run is drawn by name and class (``run 3
(narx)``, numbered from 1 in training order), all against the same x axis,
the iteration (optimiser steps; a lag class's one-step phase counts too):

* its validation checks (the early-stopping score, the validation RMSE in
  standardised units unless ``score_weights`` says otherwise) with its best
  check starred;
* its training loss (the MSE of the training windows, Keras's running mean
  over each epoch), where the run recorded one: the network classes do, the
  lag classes (NARX, the loop, the linear and polynomial classes) check
  validation alone.

A run with no checks recorded (a run read from a model file keeps none) or
with one check alone is named in the legend as such.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from keras_mgu.plotting._common import maybe_log_scale, new_figure

_COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
            "tab:pink", "tab:gray", "tab:olive", "tab:cyan"]  # fmt: skip
_STYLES = ["-", "--", ":", "-."]


@dataclasses.dataclass
class RunCurves:
    """One run's curves, as :func:`runs_figure` draws them.

    Attributes:
        label: ``"run 3 (narx)"``.
        checks: ``(n_checks, 2)``: each validation check's iteration and score.
        loss: ``(n_batches, 2)``: each training batch's iteration and the training
            loss then (``(0, 2)`` where none was recorded).
        best: ``(iteration, score)`` of the best check; None where none is finite.
        score: What the checks' score is: ``"val_rmse"``, or the weighted sum
            (``"0.8 val_rmse + 0.2 loss"``).
        note: What else the legend says of it (``"of its linear model's residual"``).
    """

    label: str
    checks: np.ndarray
    loss: np.ndarray
    best: tuple[int, float] | None
    score: str = "val_rmse"
    note: str = ""


def run_curves(run: Any, number: int) -> RunCurves:
    """The curves of ``run`` (a :class:`~keras_mgu.sysid.RunResult`), called run ``number``.

    From its early stopping (``run.stopper``: the checks' ``score``, the
    batches' ``loss``) where it has one, else from ``run.validation_history``
    (``(iteration, validation RMSE)`` pairs, a lag class's); the best check is
    ``(run.best_iteration, run.validation_score)``. A network on a linear
    model's residual (``run.path.linear``) checks that residual, standardised
    again: its note says so.
    """
    stopper, note = getattr(run, "stopper", None), ""
    if stopper is not None:
        checks = [(r["iteration"], r["score"]) for r in stopper.history]
        loss = [(r["iteration"], r["loss"]) for r in stopper.train_history if "loss" in r]
        score = _score_name(stopper.weights)
        if getattr(getattr(run, "path", None), "linear", None) is not None:
            note = "of its linear model's residual"
    else:
        checks, loss, score = list(getattr(run, "validation_history", ()) or ()), [], "val_rmse"
    value = float(run.validation_score)
    best = (int(run.best_iteration), value) if checks and np.isfinite(value) else None
    label = f"run {number} ({run.structure})"
    return RunCurves(label, _pairs(checks), _pairs(loss), best, score, note)


def _pairs(rows: Sequence[tuple[float, float]]) -> np.ndarray:
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), 2)


def _score_name(weights: Mapping[str, float]) -> str:
    """``"val_rmse"`` for that name alone at weight 1, else ``"0.8 val_rmse + 0.2 loss"``."""
    if len(weights) == 1 and float(next(iter(weights.values()))) == 1.0:
        return next(iter(weights))
    return " + ".join(f"{float(w):g} {name}" for name, w in weights.items())


def runs_figure(runs: Sequence[Any], title: str = "", kept: Sequence[int] = ()) -> Any:
    """Every run's validation checks (best starred) and training loss, one colour per run.

    Args:
        runs: The runs (:attr:`keras_mgu.sysid.Identification.runs`), or their
            :class:`RunCurves`.
        title: The figure's title (default: ``"Training of each run"``).
        kept: Indices (from 0) of the runs the model keeps: drawn thicker, named so.

    Returns:
        The figure: the validation axes last, above it the training loss's
        where any run recorded a loss; one legend, below the axes.
    """
    curves = [c if isinstance(c, RunCurves) else run_curves(c, k + 1) for k, c in enumerate(runs)]
    if not curves:
        raise ValueError("`runs` is empty: there are no runs to draw.")
    with_loss = [c for c in curves if len(c.loss)]
    rows = -(-(len(curves) + 1) // 2)  # the legend's, two columns
    fig = new_figure((10, (7.5 if with_loss else 4.5) + 0.2 * rows))
    axes = fig.subplots(2 if with_loss else 1, 1, sharex=True, squeeze=False)[:, 0]
    kept = set(kept)
    for k, c in enumerate(curves):
        style = {"color": _COLOURS[k % 10], "ls": _STYLES[k // 10 % 4],
                 "lw": 2.2 if k in kept else 1.2}  # fmt: skip
        _draw_run(axes, c, style, k in kept)
    _label_validation(axes[-1], curves)
    if with_loss:
        _label_loss(axes[0], curves, with_loss)
    axes[-1].set_xlabel("iteration (optimiser steps)")
    _legend(fig, axes)
    fig.suptitle(title or "Training of each run")
    return fig


def _draw_run(axes: Sequence[Any], c: RunCurves, style: dict, kept: bool) -> None:
    """Run ``c``'s checks and best (last axes) and loss (first axes, if two)."""
    ax = axes[-1]
    name = c.label + (", kept" if kept else "")
    if c.best is not None:
        name += f": best {c.best[1]:.4g} at {c.best[0]}"
    if c.score != "val_rmse":
        name += f" (score {c.score})"
    if c.note:
        name += f" ({c.note})"
    if len(c.checks) == 0:
        ax.plot([], [], " ", label=f"{c.label}: no checks recorded, nothing to draw")
        return
    if len(c.checks) == 1:
        name += " (one check: no curve)"
    ax.plot(c.checks[:, 0], c.checks[:, 1], marker="o", markersize=3, label=name, **style)
    if c.best is not None:
        ax.plot(*c.best, "*", color=style["color"], markersize=14, markeredgecolor="k",
                markeredgewidth=0.6, zorder=4)  # fmt: skip
    if len(axes) > 1 and len(c.loss):
        axes[0].plot(c.loss[:, 0], c.loss[:, 1], **{**style, "lw": style["lw"] * 0.8})


def _label_validation(ax: Any, curves: Sequence[RunCurves]) -> None:
    values = [c.checks[:, 1] for c in curves if len(c.checks)]
    maybe_log_scale(ax, *values, ratio=10.0)
    plain = all(c.score == "val_rmse" for c in curves)
    ax.set_ylabel("validation RMSE (standardised)" if plain else "early-stopping score")
    ax.set_title("Validation at each check (star: the run's best, the weights it keeps)",
                 fontsize="medium")  # fmt: skip
    ax.grid(True, alpha=0.3)


def _label_loss(ax: Any, curves: Sequence[RunCurves], with_loss: Sequence[RunCurves]) -> None:
    maybe_log_scale(ax, *(c.loss[:, 1] for c in with_loss), ratio=10.0)
    ax.set_ylabel("training loss (MSE)")
    n, total = len(with_loss), len(curves)
    which = f"all {n} runs" if n == total else f"{n} of the {total} runs; the others record none"
    ax.set_title(f"Training loss, running mean over each epoch ({which})", fontsize="medium")
    ax.grid(True, alpha=0.3)


def _legend(fig: Any, axes: Sequence[Any]) -> None:
    """One legend, below the axes: a line per run (its best), the star explained."""
    from matplotlib.lines import Line2D

    handles, labels = axes[-1].get_legend_handles_labels()
    star = Line2D([], [], ls="none", marker="*", color="0.4", markersize=12, markeredgecolor="k")
    fig.legend([star, *handles], ["best check of a run", *labels], loc="outside lower center",
               ncols=2, fontsize="small")  # fmt: skip
