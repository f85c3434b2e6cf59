"""The figure of :func:`keras_mgu.plotting.plot_training`: a Keras run's curves.

From a :class:`~keras_mgu.callbacks.WeightedEarlyStopping` callback: the
training loss per iteration, raw and smoothed, the validation values of each
check and the weighted score with the best check marked (one panel when the
score is one checked value). From a ``keras.callbacks.History`` (or its
``.history`` dict): one panel per metric per epoch, the best marked.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral
from typing import Any

import keras
import numpy as np

from keras_mgu.callbacks.early_stopping import WeightedEarlyStopping
from keras_mgu.plotting._common import maybe_log_scale, moving_average, new_figure

_RAW_STYLE = {"color": "tab:blue", "alpha": 0.35, "linewidth": 0.8}
_SMOOTH_STYLE = {"color": "tab:blue", "linewidth": 1.8}
_CHECK_COLOURS = ["tab:orange", "tab:green", "tab:brown", "tab:cyan", "tab:olive", "tab:pink"]


def training_figure(history_or_callback: Any, window: int = 5) -> Any:
    """The figure of :func:`~keras_mgu.plotting.plot_training` (8 x 6 inches).

    Raises:
        ValueError: ``window`` is no int >= 1, or there is nothing recorded yet.
        TypeError: neither a callback, a History nor a dict.
    """
    if isinstance(window, bool) or not isinstance(window, Integral) or window < 1:
        raise ValueError(f"`window` must be an int >= 1; got {window!r}.")
    if isinstance(history_or_callback, WeightedEarlyStopping):
        if not history_or_callback.history and not history_or_callback.train_history:
            raise ValueError(
                "The WeightedEarlyStopping callback has no records yet; run `fit` first."
            )
        fig = new_figure((8, 6))
        _plot_callback(fig, history_or_callback, int(window))
        return fig
    history, epochs = _history_dict(history_or_callback)
    fig = new_figure((8, 6))
    _plot_history(fig, history, epochs)
    return fig


def _plot_callback(fig: Any, callback: WeightedEarlyStopping, window: int) -> None:
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
    maybe_log_scale(ax_curves, *series)
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
    maybe_log_scale(ax, values)
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
