"""What ``keras-mgu identify`` prints and writes: data summary, scores, plots, results.json."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from keras_mgu.cli.errors import OptionError

__all__ = [
    "fixed",
    "format_settings",
    "model_label",
    "plot_results",
    "describe_selection",
    "print_data",
    "print_scores",
    "print_summary",
    "protocol_summary",
    "read_results",
    "write_results",
]


def fixed(value: float, digits: int = 4) -> str:
    """``value`` without exponent, at least ``digits`` decimals and ``digits`` significant ones."""
    value = float(value)
    if not math.isfinite(value) or value == 0:
        return f"{value:.{digits}f}"
    decimals = max(digits, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def format_settings(settings: Mapping[str, Any]) -> str:
    """``name=value, ...`` of a config's fields."""
    return ", ".join(f"{name}={value}" for name, value in settings.items())


def protocol_summary(protocol: Any) -> dict[str, Any] | None:
    """The scoring protocol's name, unit, scale and ``n_initial`` (``None`` without one)."""
    if protocol is None:
        return None
    fields = ("name", "unit", "scale", "n_initial")
    return {name: getattr(protocol, name) for name in fields if hasattr(protocol, name)}


def _unit(protocol: Any) -> str:
    return protocol.unit or "record units"


#: The scores' record without a test record: the validation record, which chose the model.
NO_TEST = (
    "no test record (--test): the scores below are the validation record's, the record that "
    "chose the model, so they flatter it"
)


def print_data(backend: str, name: str, data: Any, n_initial: int, role: str = "test") -> None:
    """Backend, record sizes and channels, and how the scored record (``role``) is scored.

    ``role="validation"``: no test record was given; the validation record is scored.
    """
    est, val, test = data.estimation, data.validation, data.test
    print(f"backend: {backend}")
    scored = f"test {test.n_samples} samples" if role == "test" else "no test record"
    print(
        f"data: {name}; estimation {est.n_samples}, validation {val.n_samples}, "
        f"{scored}; inputs {list(test.input_names)}, "
        f"outputs {list(test.output_names)}; sample time {test.ts:g} s"
    )
    if role != "test":
        print(NO_TEST)
    protocol = getattr(data, "protocol", None)
    line = f"scoring: {role} RMSE and fit % over all samples"
    if n_initial > 0:
        line += f", and from sample {n_initial} on (benchmark)"
    if protocol is not None:
        line += f"; protocol {getattr(protocol, 'name', '?')}: also in {_unit(protocol)}"
        line += f" (x{protocol.scale:g})"
    print(line, flush=True)


def _fit(values: Any) -> str:
    return ", ".join(f"{v:.1f}" for v in values) + " %"


def print_scores(
    kind: str, row: Mapping[str, Any], test: Any, n: int, protocol: Any, role: str = "test"
) -> None:
    """One model's scores on ``test`` (the ``role`` record): the scored figure first (the
    row's ``headline``), then the other simulation, k steps ahead, residuals."""
    free = (
        f"{kind} {role}, free run from the estimation record's start state, all {test.n_samples} "
        f"samples: RMSE {fixed(row['rmse'])}, fit {_fit(row['fit_percent'])}"
    )
    lines = [free]
    if n > 0:
        from_n = (
            f"{kind} {role}, the state set by the first {n} measured outputs, scored from sample "
            f"{n}: RMSE {fixed(row['rmse_benchmark'])}, fit {_fit(row['fit_percent_benchmark'])}"
        )
        lines.insert(0 if _scored_from_n(row) else 1, from_n)
    print("\n".join(lines))
    prediction = row.get("prediction")
    if prediction is not None:
        print(
            f"{kind} {role}, {prediction['steps_ahead']}-step-ahead prediction, scored from sample "
            f"{n}: RMSE {fixed(prediction['rmse'])}, fit {_fit(prediction['fit_percent'])}"
        )
    if protocol is not None:
        line = f"{kind} {role} RMSE in {_unit(protocol)}: {row['rmse_in_unit']:.4g} (all)"
        if n > 0:
            line += f", {row['rmse_benchmark_in_unit']:.4g} (from sample {n})"
        print(line)
    lines = (
        _band_line(kind, row.get("band"), role),
        _extrapolation_line(kind, row.get("extrapolation"), n, role),
        _reference_line(row.get("reference"), n, role),
    )
    for line in lines:
        if line:
            print(line)
    print_outputs(row, n)
    print(_spread(test, role))
    print(f"{kind} residuals {_residual_source(n)}: {row['residuals']['summary']}")


def _scored_from_n(row: Mapping[str, Any]) -> bool:
    """Whether the row's scored figure (``headline``) is the simulation from the first ``n``
    measured outputs, not the free run from the estimation record's start state."""
    return bool(row.get("headline", {}).get("scored_from"))


def _band_line(kind: str, band: Mapping[str, Any] | None, role: str = "test") -> str | None:
    """The band's level and the share of the scored record's samples inside it."""
    if band is None:
        return None
    cover = band["coverage"]
    steps = ", ".join(f"{cover[k]:.3f} ({k}-step)" for k in cover if k != "simulation")
    line = (
        f"{kind} {role}, band {band['level']:g} (calibrated on validation): share of the samples "
        f"inside it {cover['simulation']:.3f} (simulation), {steps}"
    )
    if len(band.get("coverage_by_output", ())) > 1:
        line += f"; every output at once {band['joint_coverage']:.3f} (simulation)"
    return line


def _extrapolation_line(
    kind: str, entry: Mapping[str, Any] | None, n: int, role: str = "test"
) -> str | None:
    """The share of the scored samples outside the estimation range, and the band there."""
    if entry is None:
        return None
    from keras_mgu.sysid.judging.extrapolation import describe_extrapolation

    return f"{kind} {role}, {describe_extrapolation(entry, n)}"


def _reference_line(reference: Mapping[str, Any] | None, n: int, role: str = "test") -> str | None:
    """The ARX reference's and the last-sample predictor's RMSE on the scored record."""
    if reference is None:
        return None
    line = f"reference on the {role}, from sample {n}: "
    arx = reference.get("arx")
    if arx is not None:
        line += (f"ARX simulation RMSE {fixed(arx['simulation'])}, ARX one-step RMSE "
                 f"{fixed(arx['one_step'])}; ")  # fmt: skip
    return line + f"last-sample predictor RMSE {fixed(reference['last_sample'])}"


def print_outputs(row: Mapping[str, Any], n: int) -> None:
    """Each output's RMSE and fit % by name, and the share of its samples inside the band, when
    there are several."""
    outputs = row.get("outputs") or {}
    if len(outputs) < 2:
        return
    band = row.get("band") or {}
    covers = band.get("coverage_by_output") or [None] * len(outputs)
    for (name, scores), cover in zip(outputs.items(), covers, strict=True):
        line = f"  output {name}: RMSE {fixed(scores['rmse'])}, fit {scores['fit_percent']:.1f} %"
        if "rmse_from_n" in scores:
            line += (f"; from sample {n}: RMSE {fixed(scores['rmse_from_n'])}, fit "
                     f"{scores['fit_percent_from_n']:.1f} %")  # fmt: skip
        if cover is not None:
            line += f"; inside the band {band['level']:g}: {cover:.3f} (simulation)"
        print(line)


def _spread(test: Any, role: str = "test") -> str:
    """``std of the test output: s`` (several outputs: each by name)."""
    stds = np.std(test.y, axis=0)
    if len(stds) == 1:
        return f"std of the {role} output: {fixed(stds[0])}"
    names = test.output_names or tuple(f"y{i}" for i in range(len(stds)))
    return f"std of the {role} outputs: " + ", ".join(
        f"{name} {fixed(value)}" for name, value in zip(names, stds, strict=True)
    )


def _residual_source(n: int) -> str:
    return f"of the simulation from sample {n}" if n > 0 else "of the free run"


def model_label(found: Any) -> str:
    """The model made, by its class and cell: ``"narx (MLP 64-64)"``, ``"network (MGU 32)"``.

    The classes without a network: ``"linear (ARX)"``, ``"polynomial"``.
    """
    from keras_mgu.cli.naming import kept_cell

    run, cell = found.runs[found.best], kept_cell(found)
    if cell is None:  # the linear class (the ARX model alone) or the polynomial NARX
        return f"{run.structure} (ARX)" if run.structure == "linear" else run.structure
    units = "-".join(str(n) for n in run.config.units)
    return f"{run.structure} ({cell.upper()} {units})"


def describe_selection(found: Any) -> str:
    """Which runs the model averages, in words (runs numbered from 1 in the order trained)."""
    from keras_mgu.sysid.choice.selection import describe_members

    rule = found.config.selection
    chosen = describe_members(found.kept, [run.structure for run in found.runs])
    how = "chosen greedily on the validation RMSE" if found.members else "best on validation"
    return f"model kept ({rule}): {chosen}, {how}"


#: The test record's plots, ``test_<name>.png``: the simulation and its residual.
SERIES_PLOTS = ("simulation", "residual")


def _plot_test(kind: str, record: Any, evaluation: Any, name: str, out: str, role: str) -> str:
    """``<role>_<name>.png``: the headline's simulation (or residual) of every output.

    With its band shaded and, beside the simulation, the ARX reference's
    simulation from the same measured outputs; below the simulation, the inputs.
    """
    from keras_mgu.plotting import plot_simulation

    head = evaluation.headline
    band = (head["lower"], head["upper"]) if "lower" in head else None
    level = (getattr(evaluation, "band", None) or {}).get("level")
    others, simulation = (), name != "residual"
    if evaluation.reference_simulation is not None and head["scored_from"] > 0:
        others = (("ARX reference", evaluation.reference_simulation),)
    return plot_simulation(
        record.time, record.y, head["simulation"], os.path.join(out, f"{role}_{name}.png"),
        tuple(record.output_names), title=f"{kind}: {name} on the {role} record",
        label=f"{kind}, simulated from {head['start']}", scored_from=head["scored_from"],
        residual=not simulation, band=band, others=others if simulation else (),
        u=record.u if simulation else None, input_names=tuple(record.input_names),
        outside=evaluation.outside, band_label=f"{level:g} band" if level else "band",
    )  # fmt: skip


def plot_results(
    kind: str, record: Any, evaluation: Any, found: Any, out: str, role: str = "test"
) -> str:
    """The scored record's plots (``test_*.png``, or ``validation_*.png`` for ``role``
    ``"validation"``), ``residuals.png`` and ``training.png`` in the folder ``out``.

    Measured vs simulated outputs and the residual, one panel per output (the
    simulation of the :attr:`~keras_mgu.sysid.Evaluation.headline`; the
    simulation's plot has the inputs in a panel below), the
    residual analysis (:func:`keras_mgu.sysid.residual_analysis`, one column
    per output) and the training of every run of ``found`` (the
    :class:`~keras_mgu.sysid.Identification`; :func:`keras_mgu.plotting.plot_runs`,
    none where ``found`` is None).

    Returns the line to print: the files written, or why there are none
    (matplotlib is the optional ``plot`` extra).
    """
    if importlib.util.find_spec("matplotlib") is None:
        return "plots: skipped (matplotlib is not installed: pip install 'keras-mgu[plot]')"
    from keras_mgu import plotting

    os.makedirs(out, exist_ok=True)
    paths = [_plot_test(kind, record, evaluation, name, out, role) for name in SERIES_PLOTS]
    title = f"{kind}: residual analysis {_residual_source(evaluation.n_initial)}"
    path = os.path.join(out, "residuals.png")
    paths.append(plotting.plot_residual_analysis(evaluation.residuals, path, title))
    if found is not None:
        title = f"{kind}: training of each of the {len(found.runs)} runs"
        path = os.path.join(out, "training.png")
        paths.append(plotting.plot_runs(found.runs, path, title, found.kept))
    return "plots: " + ", ".join(paths)


def read_results(out: str) -> dict[str, Any]:
    """The runs recorded in ``<out>/results.json`` (``{}`` when there is none).

    Raises:
        OptionError: the file is not a results.json of this format (``{"runs": {...}}``),
            so it is never overwritten.
    """

    path = os.path.join(out, "results.json")
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            runs = json.load(f).get("runs")
    except (OSError, ValueError, AttributeError) as err:
        raise OptionError(f"cannot extend {path}: {err}; choose another --out") from err
    if not isinstance(runs, dict):
        raise OptionError(
            f"{path} has no 'runs' table (written by an older version?); choose another --out"
        )
    return runs


def write_results(out: str, earlier: Mapping[str, Any], runs: Mapping[str, Any]) -> str:
    """Write ``{"runs": {**earlier, **runs}}`` to ``<out>/results.json`` atomically; its path.

    A run's name says its settings, so a run of the same settings replaces
    its earlier entry and the others are kept. The file is written to a
    temporary name and renamed: a crash never leaves a broken file.
    """
    from keras_mgu._atomic import write_atomically

    path = os.path.join(out, "results.json")
    text = json.dumps({"runs": {**earlier, **runs}}, indent=1, default=str)

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    write_atomically(path, write)
    return path


def print_summary(results: Mapping[str, Mapping[str, Any]], test: Any, n_initial: int,
                  protocol: Any, role: str = "test") -> None:  # fmt: skip
    """The results table, the scored output's spread and, last, ``test RMSE: <value>``
    (``validation RMSE: <value>`` where no test record was given: ``role``).

    The last line is the first model's :attr:`~keras_mgu.sysid.Evaluation.headline`
    (the row's ``headline``), the line before it says which simulation that is.

    ``wall s`` is the training's wall time (runs trained side by side count once).
    """
    columns = [("all, estimation start", "rmse", "fit_percent", "rmse_in_unit")]
    if n_initial > 0:
        later = (f"from sample {n_initial}", "rmse_benchmark", "fit_percent_benchmark",
                 "rmse_benchmark_in_unit")  # fmt: skip
        columns.insert(0 if _scored_from_n(next(iter(results.values()))) else 1, later)
    header = f"| model | outputs | parameters | wall s | {role} RMSE ({columns[0][0]}) |"
    header += f" fit % ({columns[0][0]}) |"
    header += "".join(f" {role} RMSE ({name}) |" for name, *_ in columns[1:])
    if protocol is not None:
        header += "".join(f" {name} [{_unit(protocol)}] |" for name, *_ in columns)
    print("\n" + header)
    print("|---" * (header.count("|") - 1) + "|")
    for kind, r in results.items():
        (_, rmse, fit, _), *rest = columns
        line = f"| {r.get('model', kind)} | {r['name']}/ | {r['params']} | "
        line += f"{r['wall_seconds']:.0f} | {fixed(r[rmse])} | {_fit(r[fit])[:-2]} |"
        line += "".join(f" {fixed(r[key])} |" for _, key, _, _ in rest)
        if protocol is not None:
            line += "".join(f" {r[key]:.4g} |" for *_, key in columns)
        print(line)
    print(_spread(test, role))
    first, kind = next(iter(results.values())), next(iter(results))
    head = first["headline"]
    scored = f"from sample {head['scored_from']}" if head["scored_from"] else "all samples"
    label = first.get("model", kind)
    print(f"{role} RMSE below: the {label}'s simulation from {head['start']}, {scored}")
    if role != "test":
        print(NO_TEST)
    print(f"{role} RMSE: {fixed(head['rmse'])}")
