"""What the plots share: a figure on the Agg canvas, PNG paths, channel names, scales."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from keras_mgu._atomic import write_atomically


def import_matplotlib() -> tuple[Any, Any]:
    """``(Figure, FigureCanvasAgg)``; an ImportError that names the ``plot`` extra without it."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(
            "keras_mgu.plotting needs matplotlib; install it with `pip install keras-mgu[plot]`."
        ) from err
    return Figure, FigureCanvasAgg


def new_figure(figsize: tuple[float, float]) -> Any:
    """A figure of ``figsize`` inches with the constrained layout, drawn on its own Agg canvas.

    The global matplotlib backend is left untouched.
    """
    figure_cls, canvas_cls = import_matplotlib()
    fig = figure_cls(figsize=figsize, layout="constrained")
    canvas_cls(fig)
    return fig


def png_path(path: str | os.PathLike) -> str:
    """``path`` as a string; a ValueError unless it ends in ``.png``."""
    path = os.fspath(path)
    if not path.lower().endswith(".png"):
        raise ValueError(f"`path` must end in '.png'; got '{path}'.")
    return path


def save_png(fig: Any, path: str, dpi: int = 100) -> str:
    """Write ``fig`` as a PNG to a temporary file beside ``path``, renamed over it; ``path``."""
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=dpi))
    return path


def moving_average(values: Any, window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` values (fewer at the start).

    ``out[i] = mean(values[max(0, i - window + 1) : i + 1])``.
    """
    values = np.asarray(values, dtype=np.float64)
    return np.array([values[max(0, i - window + 1) : i + 1].mean() for i in range(len(values))])


def maybe_log_scale(ax: Any, *series: Any, ratio: float = 50.0) -> None:
    """Log y axis when all finite values are positive and span more than ``ratio`` times."""
    finite = np.concatenate([np.asarray(s, dtype=np.float64).ravel() for s in series] or [[]])
    finite = finite[np.isfinite(finite)]
    if finite.size and finite.min() > 0 and finite.max() / finite.min() > ratio:
        ax.set_yscale("log")


def channel_names(names: Any, count: int, prefix: str) -> list[str]:
    """``names`` when there are ``count`` of them, else ``prefix0``, ``prefix1``, ..."""
    names = list(names or ())
    return names if len(names) == count else [f"{prefix}{i}" for i in range(count)]
