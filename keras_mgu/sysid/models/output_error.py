"""The linear class: the ARX model refined on the simulation error (an output-error fit).

Least squares fits the ARX model to the one-step error; a simulation model is
judged on its free run, where the one-step fit can be far from the best
linear simulator. This class starts at the least-squares ARX solution and
trains its coefficients alone on the simulation error of the lag classes'
windows (:func:`~keras_mgu.sysid.training.lag_run.train_lag_model`, no one-step phase)::

    r_t = [y_{t-1}, ..., y_{t-na}, u_t, ..., u_{t-nb+1}]      (simulated y, measured u)
    y_t = r_t W + c                                           W, c: the ARX to start

so :func:`~keras_mgu.sysid.identify` always has the field's linear baseline
fitted by simulation error among its candidates: its choice is never worse
than linear on what it chooses by. The model is an
:class:`~keras_mgu.sysid.models.loop_cell.ArxLoopCell` without a branch (``"mlp"``
with no hidden layer: one more linear term, zero at the start), so it
simulates, predicts, saves and exports as NARX does.
"""

from __future__ import annotations

import keras

from keras_mgu.sysid.models.arx import LinearModel
from keras_mgu.sysid.models.lag_model import arx_loop_model

__all__ = ["build_output_error"]


def build_output_error(linear: LinearModel, lag: int | None = None) -> keras.Model:
    """The linear simulator ``[u_past, y_past, u] -> y`` started at ``linear``.

    Args:
        linear: The ARX model (standardised signals) it starts from.
        lag: Measured samples read before a window (default ``max(na, nb - 1)``).
    """
    return arx_loop_model(linear, lag=lag, name="linear")
