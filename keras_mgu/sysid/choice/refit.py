"""The kept runs trained again on the whole estimation record, once the choice is made.

The choice (:mod:`~keras_mgu.sysid.choice.restarts`) is made on runs that
did not fit the estimation record's held-out start
(:mod:`~keras_mgu.sysid.choice.held_out`). Once it has chosen a class and the
runs it keeps, :func:`refit_kept` trains those runs again, each with its
seed and settings, on the whole estimation record (the held-out start
included), so that the model kept has seen every estimation sample::

    choice:  runs fitted on the rest, scored on the head and validation  ->  class, members
    refit:   the members again, fitted on the whole record                ->  the model kept

Each keeps the signal path it was chosen with (the standardisation, linear
model and input delay of the rest of the record: a polynomial's terms, for
one, were chosen in those signals). A polynomial keeps its terms, their
coefficients fitted again by least squares
(:func:`~keras_mgu.sysid.models.polynomial.refit_polynomial`), then refined
as its run was; a lag class keeps its settings; a network class takes the
window and batch the recipe derives from the whole record. Each refitted run
keeps the held-out run's choice error (its figures in the report are those
the choice read); its validation error is its own. Where a refitted run runs
off (:mod:`~keras_mgu.sysid.choice.runoff`), the held-out run is kept in its
place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import keras

from keras_mgu.datasets import SysIdData
from keras_mgu.sysid.choice.candidates import Structure, model_classes
from keras_mgu.sysid.choice.restarts import Restarts
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.judging.extrapolation import EstimationRange
from keras_mgu.sysid.models.polynomial import refit_polynomial

__all__ = ["refit_kept"]


def refit_kept(
    found,
    data: SysIdData,
    config: RecipeConfig,
    winner: Structure,
    polynomial_fit=None,
    population: bool = True,
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
):
    """``found`` (an :class:`~keras_mgu.sysid.Identification`) with its kept runs refitted.

    Args:
        found: The identification the choice made, its runs fitted without
            the held-out start.
        data: The whole records (the estimation record with its start).
        config: The recipe's settings.
        winner: The class chosen, with the settings its runs trained with.
        polynomial_fit: The polynomial class's least-squares fit on the rest
            of the record (its structure is kept), or None.
        population, verbose, callbacks: As :func:`~keras_mgu.sysid.identify`'s.

    Returns:
        ``found`` with each kept run replaced by its refit and the estimation
        ranges of the whole record.
    """
    try:
        option = _option_on(data, config, winner)
    except (ValueError, StopIteration):  # the whole record does not give the class: keep them
        return found
    kept = sorted(set(found.members) or {found.best})
    again = Restarts(data, [option], len(kept), population, verbose, callbacks)
    if option.name == "polynomial" and polynomial_fit is not None:
        est, _ = again.records[option.name]
        again.polynomial_fit = refit_polynomial(est, polynomial_fit)
    refits = again.train([(option, found.runs[k].seed) for k in kept], "refit")
    runs = list(found.runs)
    for k, run in zip(kept, refits, strict=True):
        if run.not_kept is None:
            runs[k] = dataclasses.replace(
                run, choice_error=runs[k].choice_error, horizon_rmse=runs[k].horizon_rmse
            )
    est = data.estimation
    return dataclasses.replace(found, runs=runs, ranges=EstimationRange.of(est.u, est.y))


def _option_on(data: SysIdData, config: RecipeConfig, winner: Structure) -> Structure:
    """``winner``'s class to train on the whole of ``data`` (module docstring).

    Its signal path stays ``winner``'s (the standardisation, the linear model
    and the input delay of the rest of the record): the polynomial's terms
    and the lag classes' loops were chosen in those signals. A lag class
    keeps its settings too (its windows do not depend on the record's
    length); a network class takes those the recipe derives from the whole
    record (its window, batch and initial state do), with ``winner``'s capacity.
    """
    if winner.linear is not None:
        return winner
    classes = dataclasses.replace(config, model_classes=(winner.name,))
    option = next(o for o in model_classes(data, classes)[0] if o.name == winner.name)
    capacity = {"units": winner.config.units, "learning_rate": winner.config.learning_rate}
    resolved = dataclasses.replace(option.config, **capacity)
    return dataclasses.replace(winner, config=resolved)
