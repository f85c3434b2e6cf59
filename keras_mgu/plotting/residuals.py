"""The figure of :func:`keras_mgu.plotting.plot_residual_analysis`: a residual's correlations."""

from __future__ import annotations

from typing import Any

from keras_mgu.plotting._common import channel_names, new_figure


def residual_analysis_figure(analysis: Any, title: str = "") -> Any:
    """A :class:`~keras_mgu.sysid.ResidualAnalysis` drawn: one column per output, by name.

    Each column: the residual's autocorrelation, then its cross-correlation
    with each input, each with the confidence band (axes row by row).
    """
    n_out, n_in = analysis.cross_correlation.shape[:2]
    outputs = channel_names(analysis.output_names, n_out, "y")
    inputs = channel_names(analysis.input_names, n_in, "u")
    fig = new_figure((4 + 4 * n_out, 2.4 * (1 + n_in)))
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
