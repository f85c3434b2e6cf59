"""The figure of :func:`keras_mgu.plotting.plot_trials`: a sweep's validation RMSE per trial."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from keras_mgu.plotting._common import new_figure


def trials_figure(table: list[Mapping[str, Any]]) -> Any:
    """A point per trial of ``table`` (rows with ``validation_rmse``), the best starred.

    The best so far is a line, failed trials (NaN) are crosses at the bottom, and
    the x axis marks whole trial numbers.
    """
    from matplotlib.ticker import MaxNLocator

    fig = new_figure((8, 4))
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
