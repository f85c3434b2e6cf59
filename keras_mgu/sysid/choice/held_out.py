"""The samples the choice scores and nothing fits: a held-out start or end of the estimation record.

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

With :attr:`RecipeConfig.held_out_at <keras_mgu.sysid.RecipeConfig>`
``"end"`` the tail is set aside instead, the last ``held_out`` share of the
last experiment, next to the validation record where that continues it::

    estimation  = [ other experiments | last experiment | tail ]
    fitted on   = [ other experiments | last experiment ]
    scored on   =   tail (simulated from its first n measured samples) + validation

The fitted record then keeps the experiment's start (a tank filling, a
plant leaving rest: a regime the head design would take from every run),
and the free run "from the estimation start" reads the fitted record's
first samples.

Nothing is held out where the part would be shorter than
:data:`MIN_HELD_OUT` samples, or would leave fewer than :data:`MIN_FITTED`
of its experiment to fit: the choice then scores the estimation record as
the defaults do (``held_out=0``).
"""

from __future__ import annotations

import dataclasses

from keras_mgu.datasets import Record, SysIdData
from keras_mgu.sysid.config_checks import check_held_out, check_held_out_at

__all__ = ["MIN_FITTED", "MIN_HELD_OUT", "hold_out"]

#: The fewest samples a held-out head has (its first ``n`` start its simulation).
MIN_HELD_OUT = 100
#: The fewest samples of the held-out part's experiment left to fit.
MIN_FITTED = 400


def hold_out(
    data: SysIdData, fraction: float, at: str = "start"
) -> tuple[SysIdData, Record | None]:
    """``(the data fitted on, the held-out part)`` (module docstring).

    Args:
        data: Estimation, validation and test records.
        fraction: The share of the experiment held out, in ``[0, 0.5]``;
            ``0``: none.
        at: ``"start"``: the first ``fraction`` of the estimation record's
            first experiment; ``"end"``: the last ``fraction`` of its last.

    Returns:
        ``data`` with that part of its estimation record removed, and the
        part (``None``, and ``data`` itself, where none is held out).
    """
    check_held_out(fraction)
    check_held_out_at(at)
    est = data.estimation
    first, stop = est.experiments[0 if at == "start" else -1]
    b = int(round(fraction * (stop - first)))
    if b < MIN_HELD_OUT or (stop - first) - b < MIN_FITTED:
        return data, None
    name = None if est.name is None else f"{est.name} (held out)"
    if at == "start":
        part, rest = est.slice(0, b, name=name), est.slice(b, None)
    else:
        part, rest = est.slice(stop - b, stop, name=name), est.slice(0, stop - b)
    return dataclasses.replace(data, estimation=rest), part
