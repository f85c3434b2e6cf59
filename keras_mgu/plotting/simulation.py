"""The figure of :func:`keras_mgu.plotting.plot_simulation`: measured and simulated outputs.

One panel per output (its name, RMSE and fit % in its title), the band
around the simulation, the samples outside the estimation range shaded grey,
the inputs in a panel below; one legend for the whole figure, below the
panels, so that it covers no data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_mgu.plotting._common import channel_names, new_figure

#: The inputs' colours, apart from the measured (blue) and simulated (orange) outputs'.
_INPUT_COLOURS = ["tab:gray", "tab:purple", "tab:brown", "tab:olive", "tab:cyan", "tab:pink"]
#: The colours of further simulations beside the model's (a reference model).
_OTHER_COLOURS = ["tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive"]
#: The band: a see-through fill, drawn over the curves, with a solid outline.
BAND_STYLE = {"facecolor": (1.0, 0.5, 0.05, 0.3), "edgecolor": "#c85a00", "linewidth": 0.7,
              "zorder": 1.5}  # fmt: skip


def simulation_figure(
    time: Any, y: Any, y_sim: Any, output_names: tuple[str, ...] = (), title: str = "",
    label: str = "simulation", scored_from: int = 0, residual: bool = False,
    band: tuple[Any, Any] | None = None, others: Sequence[tuple[str, Any]] = (),
    u: Any = None, input_names: tuple[str, ...] = (), outside: Any = None,
    band_label: str = "band",
) -> Any:  # fmt: skip
    """One axes per output, in their order, then (with ``u``) one axes of the inputs, all
    sharing the time axis; the arguments are :func:`~keras_mgu.plotting.plot_simulation`'s.

    ``time`` ``(N,)``, ``y`` and ``y_sim`` ``(N, n_outputs)`` (or ``(N,)``).
    """
    t = np.asarray(time, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    y = y[:, None] if y.ndim == 1 else y
    y_sim = np.asarray(y_sim, dtype=np.float64).reshape(y.shape)
    names = channel_names(output_names, y.shape[1], "y")
    inputs = _inputs(u, len(t))
    heights = [1.0] * len(names) + ([0.6] if inputs is not None else [])
    fig = new_figure((9, 1.6 + 2.4 * sum(heights)))
    axes = fig.subplots(len(heights), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]  # fmt: skip
    if inputs is not None:
        _plot_inputs(axes[-1], t, inputs, channel_names(input_names, inputs.shape[1], "u"))
    if outside is not None:
        for ax in axes:
            _shade_outside(ax, t, np.asarray(outside, dtype=bool).reshape(len(t)))
    for i, (ax, name) in enumerate(zip(axes[: len(names)], names, strict=True)):
        if band is not None:
            lower, upper = (np.asarray(b, dtype=np.float64).reshape(y.shape)[:, i] for b in band)
            centre = 0.0 if residual else y_sim[:, i]
            _draw_band(ax, t, centre + lower - y_sim[:, i], centre + upper - y_sim[:, i],
                       band_label)  # fmt: skip
        if residual:
            error = y[:, i] - y_sim[:, i]
            ax.plot(t, error, color="tab:red", lw=1, label="residual (measured - simulated)")
            ax.axhline(0.0, color="k", lw=0.5)
        else:
            _plot_outputs(ax, t, y[:, i], y_sim[:, i], label, others, y.shape, i)
        _title_panel(ax, name, y[:, i : i + 1], y_sim[:, i : i + 1], int(scored_from))
    axes[-1].set_xlabel("time [s]")
    _figure_legend(fig, axes)
    if title:
        fig.suptitle(title)
    return fig


def _inputs(u: Any, n: int) -> np.ndarray | None:
    """``u`` as ``(N, n_inputs)`` (None stays None); a ValueError for another length."""
    if u is None:
        return None
    inputs = np.asarray(u, dtype=np.float64)
    inputs = inputs[:, None] if inputs.ndim == 1 else inputs
    if inputs.ndim != 2 or len(inputs) != n:
        raise ValueError(
            f"`u` must be (N,) or (N, n_inputs) with N={n} samples; received shape {np.shape(u)}."
        )
    return inputs


def _draw_band(ax: Any, t: np.ndarray, low: np.ndarray, high: np.ndarray, label: str) -> None:
    """The band ``low..high`` ``(N,)``: a see-through fill over the curves, outlined."""
    ax.fill_between(t, low, high, label=label, **BAND_STYLE)


def _plot_outputs(
    ax: Any, t: np.ndarray, y: np.ndarray, y_sim: np.ndarray, label: str,
    others: Sequence[tuple[str, Any]], shape: tuple[int, int], i: int,
) -> None:  # fmt: skip
    """Output ``i``: measured ``y`` ``(N,)``, simulated ``y_sim`` ``(N,)`` and ``others``."""
    ax.plot(t, y, label="measured", lw=1.2, color="tab:blue")
    ax.plot(t, y_sim, label=label, lw=1.2, color="tab:orange")
    for k, (other_label, other) in enumerate(others):
        other = np.asarray(other, dtype=np.float64).reshape(shape)
        colour = _OTHER_COLOURS[k % len(_OTHER_COLOURS)]
        ax.plot(t, other[:, i], label=other_label, lw=0.9, ls="--", color=colour)


def _title_panel(ax: Any, name: str, y: np.ndarray, y_sim: np.ndarray, n: int) -> None:
    """Title ``name: RMSE r, fit f % from sample n`` of ``y``, ``y_sim`` ``(N, 1)``; grid."""
    from keras_mgu.sysid.judging.scoring import fit_percent, rmse

    score = rmse(y[n:, 0], y_sim[n:, 0])
    fit = fit_percent(y[n:], y_sim[n:])[0]
    since = f" from sample {n}" if n else ""
    ax.set_title(f"{name}: RMSE {score:.4g}, fit {fit:.1f} %{since}", fontsize="medium")
    ax.set_ylabel(name)
    ax.grid(True, alpha=0.3)


def _figure_legend(fig: Any, axes: Sequence[Any]) -> None:
    """One legend of every labelled curve of ``axes`` (each label once), below the panels.

    The lines first (measured, simulated, the others, the inputs), then the shaded areas.
    """
    from matplotlib.lines import Line2D

    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(text, handle)
    handles = dict(sorted(handles.items(), key=lambda item: not isinstance(item[1], Line2D)))
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="outside lower center",
                   ncols=min(3, len(handles)), fontsize="small")  # fmt: skip


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
    ax.grid(True, alpha=0.3)
