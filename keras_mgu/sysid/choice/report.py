"""The recipe's report: the settings of every class tried, a line per run, the class table.

What :func:`~keras_mgu.sysid.identify` prints with ``verbose >= 1``, and the
class table it keeps (:attr:`~keras_mgu.sysid.Identification.class_table`)
with the warning line where no network beats the linear models.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from keras_mgu.datasets import Record, SysIdData
from keras_mgu.sysid.choice.candidates import Structure
from keras_mgu.sysid.choice.racing import RACE_FACTOR
from keras_mgu.sysid.config import RecipeConfig
from keras_mgu.sysid.models.arx import LINEAR_SHARE_MAX, order_search_note
from keras_mgu.sysid.models.delay import describe_input_delay
from keras_mgu.sysid.training.lag_run import one_step_iterations
from keras_mgu.sysid.training.run import RunResult

__all__ = [
    "capacity_line",
    "class_table",
    "describe_class_table",
    "held_out_line",
    "linear_not_beaten",
    "print_settings",
    "ran_off_lines",
    "run_line",
    "stop_note",
    "test_like_rmse",
    "why_no_prior",
]


def run_line(run: RunResult, name: str, kind: str, done: int) -> str:
    """The progress line of a trained run (``kind`` ``"run"``, the ``done``-th) or screening."""
    units = (run.config.units or (0,))[0]
    label = {"run": f"run {done}", "refit": "refit"}.get(kind, f"screening {units} units")
    scores = (
        f"choice RMSE {run.choice_rmse:.4f} (validation {test_like_rmse(run):.4f}, "
        f"horizon {run.horizon_rmse:.4f}; standardised)"
    )
    if run.polynomial is not None:
        p = run.polynomial
        return (
            f"{label} ({name}, seed {run.seed}, least squares, then learning rate "
            f"{run.config.learning_rate:g}): {scores}, {len(p.terms)} terms of degree <= "
            f"{p.degree}, lags na={p.na} nb={p.nb}, best at iteration {run.best_iteration} "
            f"(0: the least-squares fit), {run.seconds:.0f} s{_off(run)}"
        )
    total = one_step_iterations(name, run.config) + run.config.iterations
    return (
        f"{label} ({name}, seed {run.seed}, learning rate {run.config.learning_rate:g}): "
        f"{scores}, best at iteration {run.best_iteration} of {total}, {run.seconds:.0f} s"
        f"{_off(run)}{stop_note(run)}"
    )


def _off(run: RunResult) -> str:
    if run.not_kept is not None:
        return f"; {run.not_kept}: not kept"
    if run.edge_worse:  # reported; acted on with RecipeConfig(edge_guard=True)
        return f"; {run.edge.describe()}: above the ARX model's"
    return ""


def stop_note(run: RunResult) -> str:
    """Where a race stopped ``run`` and on what figures (:mod:`~keras_mgu.sysid.choice.racing`);
    empty where it ran all its iterations."""
    stop = run.stopped
    if not stop:
        return ""
    return (
        f"; stopped at iteration {stop['iteration']} of {stop['iterations']}: its validation "
        f"so far keeps its choice RMSE above {stop['floor']:.4f}, over {RACE_FACTOR:g} x the "
        f"best finished run's {stop['reference']:.4f}"
    )


def ran_off_lines(runs: list[RunResult]) -> list[str]:
    """One line per run the choice keeps out (:attr:`RunResult.not_kept`), saying why: its
    free run ran off (and where), or it errs more than the ARX model at the record's edges."""
    return [
        f"not kept: run {k + 1} ({run.structure}, seed {run.seed}): {_why(run)}"
        for k, run in enumerate(runs)
        if run.not_kept is not None
    ]


def _why(run: RunResult) -> str:
    if run.ran_off is not None:
        return f"its free run {run.ran_off}"
    return f"it {run.not_kept}"


def capacity_line(chosen: RecipeConfig) -> str:
    """The line saying the capacity the screening chose."""
    return (
        f"capacity chosen on validation: {chosen.units[0]} units, learning rate "
        f"{chosen.learning_rate:g}"
    )


def class_table(
    runs: list[RunResult], options: list[Structure], arx: RunResult | None = None
) -> list[dict]:
    """Per class tried: its runs' best and median choice RMSE (standardised).

    A class whose first run a race stopped (:mod:`~keras_mgu.sysid.choice.racing`)
    says where: ``stopped_at`` (the iteration) of ``stopped_of``.

    Each row also gives its best run's two halves of it: ``validation`` (the
    validation record simulated from its first measured samples) and
    ``horizon`` (:class:`RunResult`), and where it was checked its error at
    the record's edges (:mod:`~keras_mgu.sysid.judging.edges`): ``edge``,
    the ARX model's on the same samples ``edge_arx``, and their number
    ``edge_samples``. ``arx``, the least-squares ARX model the lag classes
    start from, scored as a run, is the first row (``runs`` 0).
    """
    table = []
    if arx is not None:
        na, nb = arx.config.n_initial, arx.config.n_initial + 1
        table.append(_class_row(f"ARX({na}, {nb})", [arx], 0))
    for option in options:
        mine = [run for run in runs if run.structure == option.name]
        table.append(_class_row(option.name, mine, len(mine)))
    return table


def _class_row(name: str, runs: list[RunResult], count: int) -> dict:
    scores = [run.choice_rmse for run in runs]
    best = runs[int(np.argmin(scores))]
    row = {
        "class": name, "runs": count, "best": float(np.min(scores)),
        "median": float(np.median(scores)), "validation": test_like_rmse(best),
        "horizon": float(best.horizon_rmse),
    }  # fmt: skip
    if best.edge is not None and best.edge.samples:
        row["edge"], row["edge_arx"] = float(best.edge.rmse), float(best.edge.linear_rmse)
        row["edge_samples"] = best.edge.samples
    stopped = [run.stopped for run in runs if run.stopped]
    if stopped:  # the class's first run, stopped by its race
        row["stopped_at"], row["stopped_of"] = stopped[0]["iteration"], stopped[0]["iterations"]
    return row


def test_like_rmse(run: RunResult) -> float:
    """The validation half of ``run``'s choice RMSE (from its first measured samples); all of
    it where no start of the estimation record was held out (``horizon_rmse`` NaN)."""
    if np.isnan(run.horizon_rmse):
        return float(run.choice_rmse)
    squared = 2 * run.choice_rmse**2 - run.horizon_rmse**2
    return float(np.sqrt(max(squared, 0.0))) if np.isfinite(squared) else float("inf")


def describe_class_table(table: list[dict], chosen: str) -> str:
    """The class table in lines, the chosen class marked, and a warning where ARX is not beaten."""
    lines = [
        "choice RMSE (standardised; validation and the free run through the estimation "
        "record or its held-out start, equally weighted) of each class tried, best / median of "
        "its runs, and the best run's validation | horizon; its error on the validation "
        "samples at the estimation record's edges, beside the ARX model's there:"
    ]
    for row in table:
        mark = "  <- chosen" if row["class"] == chosen else ""
        runs = "least squares" if row["runs"] == 0 else f"{row['runs']} run(s)"
        if "stopped_at" in row:
            runs += f", stopped at iteration {row['stopped_at']} of {row['stopped_of']}"
        nan = float("nan")
        parts = f"{row.get('validation', nan):.4f} | {row.get('horizon', nan):.4f}"
        if "edge" in row:
            parts += f"; edge {row['edge']:.4f}, ARX there {row['edge_arx']:.4f}"
        lines.append(
            f"  {row['class']:<16} {row['best']:.4f} / {row['median']:.4f}  ({parts}; {runs})"
            + mark
        )
    warning = linear_not_beaten(table)
    return "\n".join(lines + ([warning] if warning else []))


def linear_not_beaten(table: list[dict]) -> str | None:
    """One line saying no nonlinear class beats the linear models on the choice, or None."""
    linear = [row["best"] for row in table if row["runs"] == 0 or row["class"] == "linear"]
    networks = [row["best"] for row in table if row["runs"] > 0 and row["class"] != "linear"]
    if linear and networks and not min(networks) < min(linear):
        return (
            "warning: no network beats the linear model (ARX, or the linear class) on the "
            "choice; the chosen model is linear, or no better than it."
        )
    return None


def print_settings(
    data: SysIdData,
    options: list[Structure],
    restarts: int,
    classes: Sequence[str],
    table: list,
    head: Record | None = None,
    at: str = "start",
) -> None:
    """The recipe's settings in lines: ``data`` is what the runs fit, ``head`` what is held out."""
    extra = f", first one run of each of {len(options)} classes" if len(options) > 1 else ""
    print(f"recipe: {data.estimation.n_samples} estimation samples, {restarts} restart(s){extra}")
    if head is not None:
        print(f"  {held_out_line(head, at)}", flush=True)
    for line in delay_and_order_lines(options, table):
        print(f"  {line}", flush=True)
    tried = {o.name for o in options}
    if "linear+network" in classes and "linear+network" not in tried:
        several = len(data.estimation.experiments) > 1
        print(f"  linear+network: not tried: {why_no_prior(table, several)}", flush=True)
    if "polynomial" in classes and "polynomial" not in tried:
        print(f"  polynomial: not tried: {WHY_NO_POLYNOMIAL}", flush=True)
    for option in options:
        config, linear = option.config, option.path.linear
        if option.linear is not None:
            _print_lag_settings(option)
            continue
        state = config.initial_state
        if state == "encoder":
            state += f" of {config.n_initial} samples"
        print(
            f"  {option.name}: {config.cell.upper()} {list(config.units)}, {state} initial "
            f"state, linear model {'none' if linear is None else f'ARX{linear.orders}'}, window "
            f"{config.window} x batch {config.batch_size}, {config.iterations} iterations, "
            f"learning rate {config.learning_rate:g}, weight decay {config.weight_decay:.3g}"
            + ("" if config.time_budget is None else f", all runs within {config.time_budget:g} s"),
            flush=True,
        )


def held_out_line(head: Record, at: str = "start") -> str:
    """What the choice scores where a start (``at="start"``) or end of the estimation record
    is held out."""
    where = "first" if at == "start" else "last"
    return (
        f"choice: on the validation record and the estimation record's {where} "
        f"{head.n_samples} samples, held out (nothing is fitted to them; the horizon figures "
        "are theirs)"
    )


def delay_and_order_lines(options: list[Structure], table: list[dict]) -> list[str]:
    """The input delay every class sees (estimated or given) and the ARX order search, in lines.

    The order search's line says where it ended at its ceiling
    (:func:`~keras_mgu.sysid.models.arx.order_search_note`).
    """
    first = options[0]
    delay = first.path.input_delay
    given = first.config.input_delay is not None
    if len(delay) == 1:
        seen = f"u(k - {delay[0]})" if delay[0] else "u(k)"
    else:
        seen = ", ".join(f"u{i}(k - {nk})" if nk else f"u{i}(k)" for i, nk in enumerate(delay))
    lines = [f"{describe_input_delay(delay, given)}: every class sees {seen}"]
    table = table or next((o.orders_table for o in options if o.orders_table), [])
    if table:
        best = min(table, key=_val_rmse)
        tried = ", ".join(str(row["na"]) for row in table)
        lines.append(
            f"ARX orders: ARX({best['na']}, {best['nb']}) simulates validation best "
            f"(na tried: {tried}; nb = na + 1)"
        )
        note = order_search_note(table)
        if note is not None:
            lines.append(f"ARX orders: {note}")
    return lines


#: Why the polynomial class is left out of the defaults on an integrating plant.
WHY_NO_POLYNOMIAL = (
    "the ARX model integrates (a pole on or outside the unit circle); a polynomial's free run "
    "of such a plant drifts on a new experiment though it simulates these records well (name "
    "it in model_classes to try it, or hold out part of the estimation record: held_out)"
)


def why_no_prior(table: list[dict], several: bool) -> str:
    """Why the network on the linear model's residual is not a candidate."""
    if several:
        return "the estimation record holds several experiments"
    if not table:
        return "linear_prior=False"
    best = min(table, key=_val_rmse)
    share = best["validation_rmse"] / best["baseline_rmse"]
    return (
        f"the best ARX model (na={best['na']}) simulates the validation record at "
        f"{share:.0%} of the constant predictor's RMSE, more than the "
        f"{LINEAR_SHARE_MAX:.0%} that makes it a base for the network"
    )


def _print_lag_settings(option: Structure) -> None:
    config, (na, nb) = option.config, option.linear.orders
    if option.name == "polynomial":
        print(
            "  polynomial: monomials of the lagged outputs and inputs chosen by FROLS, lags, "
            "degree and terms on the free run, least squares; then its coefficients refined on "
            f"windows {config.window} x batch {config.batch_size}, {config.iterations} "
            f"iterations, learning rate {config.learning_rate:g}, where validation measures better",
            flush=True,
        )
        return
    branch = {"narx": "MLP", "linear": "no branch"}.get(option.name, config.cell.upper())
    units = "" if option.name == "linear" else f" {list(config.units)}"
    print(
        f"  {option.name}: ARX({na}, {nb}) with {branch}{units} in its loop, "
        f"state from the {config.n_initial} measured samples before each window, window "
        f"{config.window} x batch {config.batch_size}, {_lag_iterations(option)}, "
        f"learning rate {config.learning_rate:g}, no weight decay",
        flush=True,
    )


def _lag_iterations(option: Structure) -> str:
    """How a lag run's iterations count: its one-step ones first, then its window ones."""
    one, windows = one_step_iterations(option.name, option.config), option.config.iterations
    if not one:
        return f"{windows} iterations"
    return (
        f"{windows} iterations after {one} one-step ones (iterations 1-{one} one-step, "
        f"{one + 1}-{one + windows} on windows)"
    )


def _val_rmse(row: dict) -> float:
    return row["validation_rmse"]
