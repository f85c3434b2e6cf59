"""The samples the choice scores and nothing fits: the estimation record's held-out start.

With :attr:`RecipeConfig.held_out <keras_mgu.sysid.RecipeConfig>` above
zero, the recipe (:func:`~keras_mgu.sysid.identify`) chooses among its runs
on errors of samples none of them was fitted to. The validation record is
one such piece, but training also stops on it, and it can be short. The
other is set aside here, before anything is fitted: the first ``held_out``
share of the estimation record's first experiment::

    estimation  = [ head | rest of the first experiment | other experiments ]
    fitted on   =        [ rest of the first experiment | other experiments ]
    scored on   =   head (simulated from its first n measured samples) + validation

Everything fitted sees only the rest: the standardisation, the input delay,
the ARX orders, the polynomial's terms and every run's training. Each run
simulates the head from its first ``n`` measured samples, as a test record
is scored: a horizon longer than the training windows, on samples no run
trained on, where a drift or a memorised record shows. The head still holds
the experiment's start, so its first samples start the identification's free
run "from the estimation start" (an encoder reads them; a learned state was
learned at the first sample fitted).

No head is held out where it would be shorter than :data:`MIN_HELD_OUT`
samples, or would leave fewer than :data:`MIN_FITTED` of the first
experiment to fit: the choice then scores the estimation record as the
defaults do (``held_out=0``).
"""

from __future__ import annotations

import dataclasses

from keras_mgu.datasets import Record, SysIdData
from keras_mgu.sysid.config_checks import check_held_out

__all__ = ["MIN_FITTED", "MIN_HELD_OUT", "hold_out_head"]

#: The fewest samples a held-out head has (its first ``n`` start its simulation).
MIN_HELD_OUT = 100
#: The fewest samples of the first experiment left to fit.
MIN_FITTED = 400


def hold_out_head(data: SysIdData, fraction: float) -> tuple[SysIdData, Record | None]:
    """``(the data fitted on, the held-out head)``: the first ``fraction`` of the estimation
    record's first experiment set aside (module docstring).

    Args:
        data: Estimation, validation and test records.
        fraction: The share of the first experiment held out, in ``[0, 0.5]``;
            ``0``: none.

    Returns:
        ``data`` with its estimation record's head removed, and the head
        (``None``, and ``data`` itself, where none is held out).
    """
    check_held_out(fraction)
    est = data.estimation
    first, stop = est.experiments[0]
    b = int(round(fraction * (stop - first)))
    if b < MIN_HELD_OUT or (stop - first) - b < MIN_FITTED:
        return data, None
    name = None if est.name is None else f"{est.name} (held out)"
    head = est.slice(0, b, name=name)
    return dataclasses.replace(data, estimation=est.slice(b, None)), head
