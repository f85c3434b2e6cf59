"""The NARX class: ``y_t = ARX(lags) + MLP(lags)``, the network starting at zero.

::

    r_t = [y_{t-1}, ..., y_{t-na}, u_t, ..., u_{t-nb+1}]       lagged outputs and inputs
    y_t = r_t W + c + MLP(r_t)                                  W, c: the least-squares ARX

The linear part starts at the least-squares ARX solution and the network's
last layer at zero, so a fresh model is the ARX model. It trains on the
one-step error first (every ``y`` lag measured), then on the simulation error
of short windows started from the measured lags
(:func:`~keras_mgu.sysid.training.lag_run.train_lag_model`). Its free run is an
:class:`~keras_mgu.sysid.models.loop_cell.ArxLoopCell` with the ``"mlp"`` branch,
whose state is the lags, run by :class:`keras_mgu.FusedRNN`.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras

from keras_mgu._quiet import set_random_seed
from keras_mgu.sysid.models.arx import LinearModel
from keras_mgu.sysid.models.lag_model import arx_loop_model

__all__ = ["build_narx"]


def build_narx(
    linear: LinearModel,
    lag: int | None = None,
    hidden: Sequence[int] = (64, 64),
    seed: int | None = None,
    bounds: tuple | None = None,
    anchor: LinearModel | None = None,
) -> keras.Model:
    """The NARX simulator ``[u_past, y_past, u] -> y`` started at ``linear``.

    Args:
        linear: The ARX model (standardised signals) whose orders and
            coefficients the model starts from.
        lag: Measured samples the model reads before a window (default
            ``max(na, nb - 1)``, all it needs).
        hidden: The network's ``tanh`` hidden layer sizes.
        seed: Seeds the network's initialisation.
        bounds, anchor: The regressors' estimation range, outside which the
            model fades to ARX model ``anchor`` (default ``linear``), as
            :func:`~keras_mgu.sysid.models.lag_model.arx_loop_model` takes them.
    """
    if seed is not None:
        set_random_seed(seed)
    return arx_loop_model(linear, "mlp", hidden, lag, bounds, anchor, name="narx")
