"""The identification recipe, :func:`identify`: the candidates, their restarts, the choice.

1. The candidates (:mod:`~keras_mgu.sysid.choice.candidates`): with
   ``config.held_out``, a start (or with ``held_out_at="end"`` an end) of
   the estimation record set aside (:mod:`~keras_mgu.sysid.choice.held_out`:
   nothing below fits it); the
   data standardised with the (rest of the) estimation record's statistics;
   an ARX model fitted
   first; per class tried (``config.model_classes``, default all), the
   settings the config leaves open derived from the record.
2. The restarts (:mod:`~keras_mgu.sysid.choice.restarts`): one run of every
   class from ``seed``, trained (:mod:`~keras_mgu.sysid.training`) and scored
   by its choice error (the validation record's simulation error and the
   free run through the estimation record from its first measured samples,
   equally weighted; with a held-out part, the free run through that part,
   which no run fitted); the class whose run scores best gets
   the remaining ``restarts - 1`` runs (seeds ``seed + 1000 k``). Every run
   is a fixed amount of work: the same model whatever the machine's load
   (``config.time_budget`` caps the wall time instead).
3. The choice: the best run of the winning class, or with
   ``config.selection="ensemble"`` an average of its runs chosen greedily on
   the same error (:mod:`~keras_mgu.sysid.choice.selection`); with a
   held-out part and ``config.refit``, the runs it keeps are then trained
   again on the whole estimation record (:mod:`~keras_mgu.sysid.choice.refit`).
4. The judging it keeps (:mod:`~keras_mgu.sysid.judging.calibration`): the
   horizon up to which a lag class predicts from measured lags, each
   horizon's mix of its prediction with the ARX reference's, calibrated on
   the validation record (its k-step predictions made once for the mix and
   the band), and the band (its free run's errors pooled with those on the
   held-out part, where one is, of the runs the choice scored, which did not
   fit it). The test record is never seen.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras

from keras_mgu.datasets import Record, SysIdData
from keras_mgu.sysid.choice.candidates import model_classes
from keras_mgu.sysid.choice.held_out import hold_out
from keras_mgu.sysid.choice.outside_range import describe_outside_range
from keras_mgu.sysid.choice.refit import refit_kept
from keras_mgu.sysid.choice.report import describe_class_table, print_settings
from keras_mgu.sysid.choice.restarts import Restarts
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.identification import Identification
from keras_mgu.sysid.judging.calibration import calibrate

__all__ = ["identify"]


def identify(
    data: SysIdData | Record | Sequence[Record],
    config: RecipeConfig | None = None,
    restarts: int = 3,
    seed: int = 0,
    verbose: int | str = 0,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    population: bool = True,
) -> Identification:
    """Identify a simulation model of ``data`` (physical units) with the recipe (module docstring).

    Args:
        data: Estimation, validation and test records, or a Record (or a list
            of Records, separate experiments) whose end validates
            (:meth:`~keras_mgu.datasets.SysIdData.coerce`); ``data.test`` is not used.
        config: The recipe's settings (default :class:`RecipeConfig`; ``None``
            fields are derived from the record).
        restarts: Runs of the winning class to choose from.
        seed: Seed of the first run.
        verbose: ``0``: silent; ``1``: the settings, a line per run (on a
            terminal also one line that follows each run's iterations as it
            trains) and the class table; ``2``: also Keras's own progress
            lines (``fit(verbose=2)``).
        callbacks: Passed to every network run's ``fit``, which calls their
            batch hooks once per block of steps
            (:func:`~keras_mgu.sysid.training.trainer.execution_block`).
        population: Train runs that share their optimiser settings at once, as
            one population (the same numbers as one by one, in less time;
            first runs that race stop together, where every one is behind,
            :mod:`~keras_mgu.sysid.choice.racing`, so a run that one by one
            would stop at its checkpoint can run on beside one that may win).
    """
    data, config = SysIdData.coerce(data), RecipeConfig.checked(config, restarts)
    fitted, head = hold_out(data, config.held_out, config.held_out_at)
    options, linear_table = model_classes(fitted, config, held_out=head is not None)
    if verbose:
        print_settings(
            fitted, options, restarts, config.classes, linear_table, head, config.held_out_at
        )
    trained = Restarts(
        fitted, options, restarts, population, verbose, callbacks, head, config.held_out_at
    )
    runs = trained.first_runs(seed)
    winner, capacity_table = trained.winner(runs, seed)
    runs += trained.more_runs(winner, seed)
    chosen = trained.chosen(runs, winner, linear_table, capacity_table, config)
    found = chosen
    if head is not None and config.refit:
        if verbose:
            print(f"refit: the kept runs trained again on all {data.estimation.n_samples} "
                  "estimation samples", flush=True)  # fmt: skip
        found = refit_kept(
            chosen, data, config, winner, trained.polynomial_fit, population, verbose, callbacks
        )
    found = calibrate(found, data.validation, held_out=head, held_out_model=chosen)
    if verbose:
        print(describe_class_table(found.class_table, winner.name), flush=True)
        print(describe_outside_range(found), flush=True)
    return found
