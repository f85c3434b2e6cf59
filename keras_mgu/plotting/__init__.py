"""Plots as PNG files: training curves, a simulation of a test record, its residual analysis.

* :func:`plot_training`: per-iteration loss, validation checks, best point.
* :func:`plot_trials`: the validation RMSE of each trial of a sweep.
* :func:`plot_simulation`: measured and simulated outputs (or the residual),
  one panel per output, by name, and the inputs in a panel below them.
* :func:`plot_residual_analysis`: a residual's autocorrelation and its
  cross-correlation with each input, one column per output.

Needs matplotlib (``pip install keras-mgu[plot]``). Figures are drawn on the
Agg canvas directly, so the global matplotlib backend is left untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

import keras
import numpy as np

from keras_mgu._atomic import write_atomically
from keras_mgu.callbacks.early_stopping import WeightedEarlyStopping

_RAW_STYLE = {"color": "tab:blue", "alpha": 0.35, "linewidth": 0.8}
_SMOOTH_STYLE = {"color": "tab:blue", "linewidth": 1.8}
_CHECK_COLOURS = ["tab:orange", "tab:green", "tab:brown", "tab:cyan", "tab:olive", "tab:pink"]
#: The inputs' colours, apart from the measured (blue) and simulated (orange) outputs'.
_INPUT_COLOURS = ["tab:gray", "tab:purple", "tab:brown", "tab:olive", "tab:cyan", "tab:pink"]


def _import_matplotlib() -> tuple[Any, Any]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(
            "plot_training needs matplotlib; install it with `pip install keras-mgu[plot]`."
        ) from err
    return Figure, FigureCanvasAgg


def moving_average(values: Any, window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` values (fewer at the start).

    ``out[i] = mean(values[max(0, i - window + 1) : i + 1])``.
    """
    values = np.asarray(values, dtype=np.float64)
    return np.array([values[max(0, i - window + 1) : i + 1].mean() for i in range(len(values))])


def _maybe_log_scale(ax: Any, *series: Any) -> None:
    """Log y axis when all values are positive and span more than 50x."""
    finite = np.concatenate([np.asarray(s, dtype=np.float64).ravel() for s in series] or [[]])
    finite = finite[np.isfinite(finite)]
    if finite.size and finite.min() > 0 and finite.max() / finite.min() > 50:
        ax.set_yscale("log")


def _plot_callback(fig: Any, callback: WeightedEarlyStopping, window: int) -> None:
    if not callback.history and not callback.train_history:
        raise ValueError("The WeightedEarlyStopping callback has no records yet; run `fit` first.")
    train = [r for r in callback.train_history if "loss" in r]
    if _score_is_one_check(callback) and not train:
        _plot_single_check(fig.subplots(1, 1), callback)
        return
    ax_curves, ax_score = fig.subplots(2, 1, sharex=True)
    series = []
    if train:
        it = np.array([r["iteration"] for r in train])
        loss = np.array([r["loss"] for r in train], dtype=np.float64)
        ax_curves.plot(it, loss, label="training loss (epoch running mean)", **_RAW_STYLE)
        ax_curves.plot(
            it, moving_average(loss, window), label=f"smoothed ({window})", **_SMOOTH_STYLE
        )
        series.append(loss)
    checks_it = np.array([r["iteration"] for r in callback.history])
    check_names = [n for n in callback.weights if n.startswith("val_") or not train]
    for name, colour in zip(check_names, _CHECK_COLOURS * len(check_names), strict=False):
        values = np.array([r[name] for r in callback.history], dtype=np.float64)
        ax_curves.plot(checks_it, values, "o-", color=colour, markersize=3, label=name)
        series.append(values)
    _maybe_log_scale(ax_curves, *series)
    ax_curves.set_ylabel("value")
    ax_curves.set_title("Training and validation")
    ax_curves.legend(loc="best", fontsize="small")

    scores = np.array([r["score"] for r in callback.history], dtype=np.float64)
    ax_score.plot(checks_it, scores, "o-", color="tab:purple", markersize=3, label="score")
    _mark_best(ax_score, callback)
    for ax in (ax_curves, ax_score):
        ax.grid(True, alpha=0.3)
        if callback.best_iteration is not None:
            ax.axvline(callback.best_iteration, color="tab:red", linestyle=":", linewidth=1)
    ax_score.set_xlabel("iteration")
    ax_score.set_ylabel("weighted score")
    ax_score.legend(loc="best", fontsize="small")


def _score_is_one_check(callback: WeightedEarlyStopping) -> bool:
    """Whether the score is one checked value itself (one name, weight 1)."""
    return len(callback.weights) == 1 and float(next(iter(callback.weights.values()))) == 1.0


def _plot_single_check(ax: Any, callback: WeightedEarlyStopping) -> None:
    """One panel: the score, which is the one value checked, its best marked."""
    name = next(iter(callback.weights))
    it = np.array([r["iteration"] for r in callback.history])
    values = np.array([r["score"] for r in callback.history], dtype=np.float64)
    ax.plot(it, values, "o-", color="tab:purple", markersize=3, label=f"{name} (the score)")
    _maybe_log_scale(ax, values)
    _mark_best(ax, callback)
    if callback.best_iteration is not None:
        ax.axvline(callback.best_iteration, color="tab:red", linestyle=":", linewidth=1)
    ax.grid(True, alpha=0.3)
    ax.set_xlabel("iteration")
    ax.set_ylabel(name)
    ax.set_title(f"Early-stopping score: {name}")
    ax.legend(loc="best", fontsize="small")


def _mark_best(ax: Any, callback: WeightedEarlyStopping) -> None:
    best = [r for r in callback.history if r["iteration"] == callback.best_iteration]
    if best and np.isfinite(callback.best_score):
        ax.plot(
            [callback.best_iteration],
            [callback.best_score],
            "*",
            color="tab:red",
            markersize=14,
            label=f"best {callback.best_score:.4g} @ {callback.best_iteration}",
        )


def _plot_history(fig: Any, history: Mapping[str, Any], epochs: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    names = [n for n in history if not n.startswith("val_") and n != "learning_rate"]
    names += [n[4:] for n in history if n.startswith("val_") and n[4:] not in history]
    panels = names + (["learning_rate"] if "learning_rate" in history else [])
    if not panels:
        raise ValueError("The history has no metrics to plot.")
    axes = np.atleast_1d(fig.subplots(len(panels), 1, sharex=True))
    for ax, name in zip(axes, panels, strict=True):
        for key, style in ((name, "-"), (f"val_{name}", "--")):
            if key in history:
                values = np.asarray(history[key], dtype=np.float64)
                ax.plot(epochs[: len(values)], values, style, marker="o", markersize=3, label=key)
        if name == "learning_rate":
            ax.set_yscale("log")
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    _mark_best_epoch(axes, panels, history, epochs)
    axes[-1].set_xlabel("epoch")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))


def _mark_best_epoch(axes: Any, panels: list, history: Mapping[str, Any], epochs: Any) -> None:
    """Star the lowest finite ``val_loss`` (else ``loss``) on the loss panel."""
    best_key = "val_loss" if "val_loss" in history else "loss" if "loss" in history else None
    if best_key is not None:
        values = np.asarray(history[best_key], dtype=np.float64)
        if np.isfinite(values).any():
            i = int(np.nanargmin(np.where(np.isfinite(values), values, np.nan)))
            ax = axes[panels.index("loss")]
            ax.plot(
                [epochs[i]],
                [values[i]],
                "*",
                color="tab:red",
                markersize=14,
                label=f"best {best_key} {values[i]:.4g} @ epoch {epochs[i]}",
            )
            ax.legend(loc="best", fontsize="small")


def _history_dict(obj: Any) -> tuple[dict[str, Any], np.ndarray]:
    if isinstance(obj, keras.callbacks.History):
        history, epochs = obj.history, getattr(obj, "epoch", None)
    elif isinstance(obj, Mapping):
        history, epochs = obj, None
    else:
        raise TypeError(
            "plot_training takes a WeightedEarlyStopping callback, a keras History or its "
            f"`.history` dict; got {type(obj).__name__}."
        )
    if not history:
        raise ValueError("The history is empty; run `fit` first.")
    n = max(len(v) for v in history.values())
    epochs = np.arange(1, n + 1) if not epochs else np.asarray(epochs) + 1
    return dict(history), epochs


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
    path = os.fspath(path)
    if not path.lower().endswith(".png"):
        raise ValueError(f"`path` must end in '.png'; got '{path}'.")
    if isinstance(window, bool) or not isinstance(window, Integral) or window < 1:
        raise ValueError(f"`window` must be an int >= 1; got {window!r}.")
    figure_cls, canvas_cls = _import_matplotlib()
    fig = figure_cls(figsize=(8, 6), layout="constrained")
    canvas_cls(fig)
    if isinstance(history_or_callback, WeightedEarlyStopping):
        _plot_callback(fig, history_or_callback, int(window))
    else:
        history, epochs = _history_dict(history_or_callback)
        _plot_history(fig, history, epochs)
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    return path


def plot_trials(table: list[Mapping[str, Any]], path: str | os.PathLike) -> str:
    """Draw the validation RMSE of each trial of a sweep, the best marked; save a PNG at ``path``.

    ``table`` is :attr:`keras_mgu.sysid.TuneResult.table` (rows with ``trial``,
    ``status`` and ``validation_rmse``); failed trials are drawn as crosses at
    the bottom. The file is written atomically. Returns ``path``.
    """
    path = os.fspath(path)
    if not path.lower().endswith(".png"):
        raise ValueError(f"`path` must end in '.png'; got '{path}'.")
    if not table:
        raise ValueError("`table` has no trials to draw.")
    fig = _trials_figure(table)
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    return path


def _trials_figure(table: list[Mapping[str, Any]]):
    """The figure of :func:`plot_trials`: a point per trial (whole trial numbers on the x axis)."""
    from matplotlib.ticker import MaxNLocator

    figure_cls, canvas_cls = _import_matplotlib()
    fig = figure_cls(figsize=(8, 4), layout="constrained")
    canvas_cls(fig)
    ax = fig.add_subplot()
    scores = np.array([float(row["validation_rmse"]) for row in table])
    ok = np.isfinite(scores)
    x = np.arange(len(table))
    ax.plot(x[ok], scores[ok], "o", label="trial")
    if ok.any():
        best = int(np.nanargmin(np.where(ok, scores, np.nan)))
        ax.plot([best], [scores[best]], "r*", markersize=14, label=f"best (trial {best})")
        ax.plot(x[ok], np.minimum.accumulate(scores[ok]), "-", alpha=0.5, label="best so far")
    if (~ok).any():
        bottom = np.nanmin(scores) if ok.any() else 0.0
        ax.plot(x[~ok], np.full((~ok).sum(), bottom), "kx", label="failed")
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("validation RMSE (standardised)")
    ax.legend()
    return fig


def plot_simulation(
    time: Any, y: Any, y_sim: Any, path: str | os.PathLike, output_names: tuple[str, ...] = (),
    title: str = "", label: str = "simulation", scored_from: int = 0, residual: bool = False,
    band: tuple[Any, Any] | None = None, others: Sequence[tuple[str, Any]] = (),
    u: Any = None, input_names: tuple[str, ...] = (), outside: Any = None,
) -> str:  # fmt: skip
    """Measured and simulated outputs, one panel per output, saved as a PNG at ``path``.

    Each panel is titled by its output's name (``y0``, ``y1``, ... when not
    given) with the RMSE and fit % of that output from sample
    ``scored_from`` on. With ``residual`` the panels show ``y - y_sim``
    instead. ``label`` names the simulated curve; ``band`` ``(lower,
    upper)``, each shaped as ``y``, is shaded around it (around zero for the
    residual: ``y_sim - lower``, ``y_sim - upper``); ``others`` are further
    ``(label, simulation)`` curves drawn beside it (a reference model).
    ``u`` ``(N, n_inputs)`` (or ``(N,)``), the inputs of the same samples,
    is drawn in one more panel below the outputs on the same time axis, each
    input by its name (``input_names``; ``u0``, ``u1``, ... when not given).
    ``outside`` ``(N,)`` (booleans) marks the samples outside the estimation
    range, shaded grey in every panel.
    Written atomically; returns ``path``.
    """
    path = _png_path(path)
    fig = simulation_figure(
        time, y, y_sim, output_names, title, label, scored_from, residual, band, others, u,
        input_names, outside,
    )  # fmt: skip
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    return path


def simulation_figure(
    time: Any, y: Any, y_sim: Any, output_names: tuple[str, ...] = (), title: str = "",
    label: str = "simulation", scored_from: int = 0, residual: bool = False,
    band: tuple[Any, Any] | None = None, others: Sequence[tuple[str, Any]] = (),
    u: Any = None, input_names: tuple[str, ...] = (), outside: Any = None,
) -> Any:  # fmt: skip
    """The figure of :func:`plot_simulation`: one axes per output, in their order, then (with
    ``u``) one axes of the inputs, all sharing the time axis."""
    from keras_mgu.sysid.judging.scoring import fit_percent, rmse

    t = np.asarray(time, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    y = y[:, None] if y.ndim == 1 else y
    y_sim = np.asarray(y_sim, dtype=np.float64).reshape(y.shape)
    names = _channel_names(output_names, y.shape[1], "y")
    inputs = None if u is None else np.asarray(u, dtype=np.float64)
    if inputs is not None:
        inputs = inputs[:, None] if inputs.ndim == 1 else inputs
        if inputs.ndim != 2 or len(inputs) != len(t):
            raise ValueError(
                f"`u` must be (N,) or (N, n_inputs) with N={len(t)} samples; received shape "
                f"{np.shape(u)}."
            )
    heights = [1.0] * len(names) + ([0.6] if inputs is not None else [])
    figure_cls, canvas_cls = _import_matplotlib()
    fig = figure_cls(figsize=(9, 1.2 + 2.4 * sum(heights)), layout="constrained")
    canvas_cls(fig)
    axes = fig.subplots(len(heights), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]  # fmt: skip
    if inputs is not None:
        _plot_inputs(axes[-1], t, inputs, _channel_names(input_names, inputs.shape[1], "u"))
    if outside is not None:
        for ax in axes:
            _shade_outside(ax, t, np.asarray(outside, dtype=bool).reshape(len(t)))
    n = int(scored_from)
    for i, (ax, name) in enumerate(zip(axes[: len(names)], names, strict=True)):
        centre = np.zeros_like(y_sim[:, i]) if residual else y_sim[:, i]
        if band is not None:
            lower, upper = (np.asarray(b, dtype=np.float64).reshape(y.shape)[:, i] for b in band)
            ax.fill_between(t, centre + lower - y_sim[:, i], centre + upper - y_sim[:, i],
                            color="tab:orange", alpha=0.25, lw=0, label="band")  # fmt: skip
        if residual:
            ax.plot(t, y[:, i] - y_sim[:, i], color="tab:red", lw=1)
            ax.axhline(0.0, color="k", lw=0.5)
        else:
            ax.plot(t, y[:, i], label="measured", lw=1.2)
            ax.plot(t, y_sim[:, i], label=label, lw=1.2)
            for other_label, other in others:
                other = np.asarray(other, dtype=np.float64).reshape(y.shape)
                ax.plot(t, other[:, i], label=other_label, lw=0.9, ls="--")
            ax.legend(loc="best", fontsize="small")
        score = rmse(y[n:, i], y_sim[n:, i])
        fit = fit_percent(y[n:, i : i + 1], y_sim[n:, i : i + 1])[0]
        since = f" from sample {n}" if n else ""
        ax.set_title(f"{name}: RMSE {score:.4g}, fit {fit:.1f} %{since}", fontsize="medium")
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("time [s]")
    if title:
        fig.suptitle(title)
    return fig


def _shade_outside(ax: Any, t: np.ndarray, outside: np.ndarray) -> None:
    """Shade each span of samples marked ``outside`` (the estimation range) grey."""
    edges = np.flatnonzero(np.diff(np.r_[0, outside.astype(np.int8), 0]))
    for k, (start, stop) in enumerate(zip(edges[::2], edges[1::2], strict=True)):
        label = "outside the estimation range" if k == 0 else None
        ax.axvspan(t[start], t[stop - 1], color="0.5", alpha=0.2, lw=0, label=label)


def _plot_inputs(ax: Any, t: np.ndarray, u: np.ndarray, names: list[str]) -> None:
    """The inputs ``u`` ``(N, n_inputs)`` in one axes, each by its name."""
    for j, name in enumerate(names):
        ax.plot(t, u[:, j], lw=1, color=_INPUT_COLOURS[j % len(_INPUT_COLOURS)], label=name)
    ax.set_title(f"input{'s' if len(names) > 1 else ''}: {', '.join(names)}", fontsize="medium")
    ax.set_ylabel(names[0] if len(names) == 1 else "inputs")
    if len(names) > 1:
        ax.legend(loc="best", fontsize="small")
    ax.grid(True, alpha=0.3)


def plot_residual_analysis(analysis: Any, path: str | os.PathLike, title: str = "") -> str:
    """A :class:`~keras_mgu.sysid.ResidualAnalysis` as a PNG at ``path``; returns ``path``.

    One column per output (by name): the residual's autocorrelation, then its
    cross-correlation with each input, each with the confidence band.
    """
    path = _png_path(path)
    fig = residual_analysis_figure(analysis, title)
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    return path


def residual_analysis_figure(analysis: Any, title: str = "") -> Any:
    """The figure of :func:`plot_residual_analysis` (axes row by row: output columns)."""
    n_out, n_in = analysis.cross_correlation.shape[:2]
    outputs = _channel_names(analysis.output_names, n_out, "y")
    inputs = _channel_names(analysis.input_names, n_in, "u")
    figure_cls, canvas_cls = _import_matplotlib()
    fig = figure_cls(figsize=(4 + 4 * n_out, 2.4 * (1 + n_in)), layout="constrained")
    canvas_cls(fig)
    axes = fig.subplots(1 + n_in, n_out, squeeze=False)
    for o, out in enumerate(outputs):
        panels = [(analysis.lags, analysis.autocorrelation[o], f"autocorrelation of e ({out})")]
        panels += [
            (analysis.cross_lags, analysis.cross_correlation[o, j], f"e ({out}) vs {name}")
            for j, name in enumerate(inputs)
        ]
        for ax, (lags, values, text) in zip(axes[:, o], panels, strict=True):
            ax.stem(lags, values, basefmt=" ")
            ax.axhspan(-analysis.band, analysis.band, color="tab:blue", alpha=0.15,
                       label=f"{analysis.confidence:.0%} band")  # fmt: skip
            ax.set_title(text, fontsize="medium")
            ax.grid(True, alpha=0.3)
        axes[-1, o].set_xlabel("lag [samples]")
    axes[0, 0].legend(loc="upper right", fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


def _channel_names(names: Any, count: int, prefix: str) -> list[str]:
    """``names`` when there are ``count`` of them, else ``prefix0``, ``prefix1``, ..."""
    names = list(names or ())
    return names if len(names) == count else [f"{prefix}{i}" for i in range(count)]


def _png_path(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    if not path.lower().endswith(".png"):
        raise ValueError(f"`path` must end in '.png'; got '{path}'.")
    return path
