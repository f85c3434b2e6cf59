"""The candidates: the model classes :func:`~keras_mgu.sysid.identify` tries, and their settings.

Each :class:`Structure` is one class on the record: the network alone, the
network on the residual of the ARX model fitted first (where that model
explains the validation record, :func:`structures`), NARX, the loop and the
linear class (:func:`lag_structures`, on the ARX model refitted at the lag
classes' order). Their settings follow from the record and that model
(:meth:`~keras_mgu.sysid.RecipeConfig.resolved`,
:func:`~keras_mgu.sysid.training.lag_run.lag_config`).

Every class sees the inputs delayed by the record's dead time
(:func:`input_delay`: given in ``config.input_delay``, else estimated,
:mod:`~keras_mgu.sysid.models.delay`): the ARX models here are fitted on
the delayed records, and each structure's signal path delays the inputs of
every record it trains on or simulates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from keras_mgu.datasets import Normalizer, Record, SysIdData
from keras_mgu.sysid.choice.racing import QUICK_CLASSES
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.models.arx import LinearModel, select_linear_model
from keras_mgu.sysid.models.delay import (
    check_input_delay,
    delay_inputs,
    estimate_input_delay,
    without_dead_samples,
)
from keras_mgu.sysid.models.signals import SignalPath
from keras_mgu.sysid.training.lag_run import LAG_CLASSES, lag_config, lag_orders
from keras_mgu.sysid.training.polynomial_run import polynomial_config
from keras_mgu.sysid.training.run import shortest

__all__ = [
    "Structure",
    "delayed_data",
    "input_delay",
    "lag_structures",
    "model_classes",
    "structures",
]


@dataclasses.dataclass
class Structure:
    """One model class: the network alone, on a linear model's residual, NARX or the loop.

    Attributes:
        name: One of :data:`~keras_mgu.sysid.config.MODEL_CLASSES`.
        path: Physical signals to the network's and back.
        config: The settings resolved for it.
        linear: The ARX model a lag class (``"narx"``, ``"loop"``,
            ``"linear"``) starts from (standardised signals); None for the
            others.
        anchor: The ARX model of the order chosen on validation, which NARX
            and the loop fade to outside the estimation range; None for the
            others.
        orders_table: A lag class's ARX order search on validation
            (:func:`~keras_mgu.sysid.models.arx.select_linear_model`'s table);
            empty for the others.
    """

    name: str
    path: SignalPath
    config: RecipeConfig
    linear: LinearModel | None = None
    anchor: LinearModel | None = None
    orders_table: list = dataclasses.field(default_factory=list)


def input_delay(data: SysIdData, config: RecipeConfig) -> tuple[int, ...]:
    """Each input's delay: ``config.input_delay`` as given (one integer: every input's), else
    :func:`~keras_mgu.sysid.models.delay.estimate_input_delay` on the estimation record,
    checked on the validation record."""
    given = check_input_delay(config.input_delay, data.estimation.n_inputs)
    if given is not None:
        return given
    return estimate_input_delay(data.estimation, data.validation)


def delayed_data(data: SysIdData, delay: tuple[int, ...]) -> SysIdData:
    """``data`` with the estimation and validation inputs delayed, each experiment without its
    dead samples (:func:`~keras_mgu.sysid.models.delay.without_dead_samples`: their outputs
    answer inputs from before it), so that no ARX fit, order score or standardisation reads
    an input the plant never had."""
    if not any(delay):
        return data
    records = {
        name: without_dead_samples(
            dataclasses.replace(record, u=delay_inputs(record.u, delay, record.boundaries)), delay
        )
        for name, record in (("estimation", data.estimation), ("validation", data.validation))
    }
    return dataclasses.replace(data, **records)


def lag_structures(
    data: SysIdData, config: RecipeConfig, classes: Sequence[str],
    delay: tuple[int, ...] | None = None,
) -> list:  # fmt: skip
    """The lag classes among ``classes``, each with its ARX model and settings.

    The ARX model is refitted by least squares on the standardised estimation
    record at the lag classes' order (:func:`~keras_mgu.sysid.training.lag_run.lag_orders`
    of the order :func:`~keras_mgu.sysid.models.arx.select_linear_model` chooses);
    the order that simulates validation best, refitted, is the anchor that
    NARX and the loop fade to outside the estimation range (where the
    validation record is too short for any, the lag-order ARX). ``delay``:
    the inputs' (default :func:`input_delay`).
    """
    wanted = [name for name in LAG_CLASSES if name in classes]
    if not wanted:
        return []
    delay = input_delay(data, config) if delay is None else delay
    data = delayed_data(data, delay)
    outer = Normalizer.fit(data.estimation)
    est, val = outer.transform(data.estimation), outer.transform(data.validation)
    chosen, table = select_linear_model(est, val, continues=False)
    na = lag_orders(chosen)
    linear = LinearModel.fit(est.u, est.y, na)
    anchor = chosen
    if anchor is None and table:
        anchor = LinearModel.fit(est.u, est.y, min(table, key=_val_rmse)["na"])
    n = est.n_samples
    return [
        Structure(
            name,
            SignalPath(outer, input_delay=delay),
            polynomial_config(config, linear, n)
            if name == "polynomial"
            else lag_config(config, linear, n, name),
            linear,
            anchor,
            table,
        )
        for name in wanted
    ]


def structures(
    data: SysIdData, config: RecipeConfig, delay: tuple[int, ...] | None = None
) -> tuple[list[Structure], list[dict]]:
    """The structures the restarts try, and the linear models fitted (orders, validation RMSE).

    The linear model is fitted on the standardised estimation record. With
    ``config.linear_prior`` ``None`` both structures are tried where it
    explains the validation record
    (:func:`~keras_mgu.sysid.models.arx.select_linear_model`), else the network
    alone; ``True`` or ``False`` force one. An estimation record of several
    experiments (``Record.boundaries``) trains the network alone (``True``
    is refused): the linear model is fitted and simulated on one experiment.
    ``delay``: the inputs' (default :func:`input_delay`).
    """
    delay = input_delay(data, config) if delay is None else delay
    data = delayed_data(data, delay)
    outer = Normalizer.fit(data.estimation)
    est, val = outer.transform(data.estimation), outer.transform(data.validation)
    n, lag = est.n_samples, data.n_initial
    several = {"shortest_experiment": shortest(est)}
    plain = Structure(
        "network",
        SignalPath(outer, input_delay=delay),
        config.resolved(n, lag, linear_prior=False, **several),
    )
    if len(est.experiments) > 1 and config.linear_prior:
        raise ValueError(
            "`linear_prior=True` needs one estimation experiment: the linear model is fitted "
            f"and simulated on one record, and this one holds {len(est.experiments)}."
        )
    if config.linear_prior is False or len(est.experiments) > 1:
        return [plain], []
    continues = plain.config.validation_continues
    linear, table = select_linear_model(est, val, continues=continues)
    if linear is None and config.linear_prior and table:
        linear = LinearModel.fit(est.u, est.y, min(table, key=_val_rmse)["na"])
    if linear is None:
        return [plain], table
    y_lin = linear.simulate(est.u, est.y[0])
    inner = Normalizer.fit(Record(np.concatenate([est.u, y_lin], axis=1), est.y - y_lin))
    resolved = config.resolved(
        n, lag, time_constant=linear.time_constant, linear_prior=True, **several
    )
    prior = Structure("linear+network", SignalPath(outer, linear, inner, delay), resolved)
    return ([prior] if config.linear_prior else [plain, prior]), table


def _val_rmse(row: dict) -> float:
    return row["validation_rmse"]


def model_classes(
    data: SysIdData, config: RecipeConfig, held_out: bool = False
) -> tuple[list[Structure], list[dict]]:
    """The classes :func:`identify` tries (``config.model_classes``, else every one).

    With the defaults, the polynomial class is left out where the lag
    classes' ARX model integrates (an infinite time constant: a pole on or
    outside the unit circle) and no start of the estimation record is held
    out (``held_out`` False; ``config.held_out`` asks for one, a short record
    may give none: :mod:`~keras_mgu.sysid.choice.held_out`): a polynomial
    that simulates the estimation and validation records well can still
    drift on another experiment of such a plant (EMPS: 260 mm against the
    network's 5.6), and the estimation record it fitted does not show it.
    Where a start is held out it is tried, and a drift must show on samples
    it did not fit; named in ``model_classes``, it
    is tried anyway. Returns the structures and the table of the linear
    models fitted, the quick classes first
    (:data:`~keras_mgu.sysid.choice.racing.QUICK_CLASSES`: the others race
    against them, :mod:`~keras_mgu.sysid.choice.racing`).
    """
    classes, delay = config.classes, input_delay(data, config)
    lag = lag_structures(data, config, classes, delay)
    lag.sort(key=lambda o: o.name not in QUICK_CLASSES)  # stable: the others keep their order
    if config.model_classes is None and not held_out:  # no polynomial of an integrator
        lag = [o for o in lag if o.name != "polynomial" or np.isfinite(o.linear.time_constant)]
    options, table = [], []
    if {"network", "linear+network"} & set(classes):
        options, table = structures(data, config, delay)
        options = [o for o in options if o.name in classes]
    if not options and not lag:  # "linear+network" alone, where the linear model is no candidate
        raise ValueError(
            "`model_classes` asks for 'linear+network' alone, but the linear model does "
            "not explain the validation record; add 'network' or a lag class."
        )
    return lag + options, table  # the order runs are trained in, so "run k" is runs[k - 1]
