"""What ``keras-mgu identify`` prints and writes: data summary, scores, plots, results.json."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from keras_mgu.cli.errors import UsageError

__all__ = [
    "fixed",
    "format_settings",
    "plot_results",
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


def print_data(backend: str, name: str, data: Any, n_initial: int) -> None:
    """Backend, record sizes and channels, and how the test record is scored."""
    est, val, test = data.estimation, data.validation, data.test
    print(f"backend: {backend}")
    print(
        f"data: {name}; estimation {est.n_samples}, validation {val.n_samples}, "
        f"test {test.n_samples} samples; inputs {list(test.input_names)}, "
        f"outputs {list(test.output_names)}; sample time {test.ts:g} s"
    )
    protocol = getattr(data, "protocol", None)
    line = f"scoring: test RMSE over all samples, and from sample {n_initial} on (benchmark)"
    if protocol is not None:
        line += f"; protocol {getattr(protocol, 'name', '?')}: also in {_unit(protocol)}"
        line += f" (x{protocol.scale:g})"
    print(line, flush=True)


def print_scores(kind: str, row: Mapping[str, Any], test: Any, n_initial: int, protocol: Any):
    """One model's test scores (and in the protocol's unit when there is one)."""
    print(
        f"{kind} test RMSE: {fixed(row['rmse'])} (all), {fixed(row['rmse_benchmark'])} "
        f"(from sample {n_initial}); std of the test output: {fixed(np.std(test.y))}"
    )
    if protocol is not None:
        print(
            f"{kind} test RMSE in {_unit(protocol)}: {row['rmse_in_unit']:.4g} (all), "
            f"{row['rmse_benchmark_in_unit']:.4g} (from sample {n_initial})"
        )


def _plot_series(plt: Any, kind: str, record: Any, y_sim: np.ndarray, name: str, out: str) -> str:
    from keras_mgu.sysid import rmse

    t = record.time
    fig, ax = plt.subplots(figsize=(9, 3.5), layout="constrained")
    if name == "simulation":
        ax.plot(t, record.y[:, 0], label="measured", lw=1.2)
        ax.plot(t, y_sim[:, 0], label=f"{kind} free-run simulation", lw=1.2)
        ax.legend()
    else:
        ax.plot(t, record.y[:, 0] - y_sim[:, 0], color="tab:red", lw=1)
        ax.axhline(0.0, color="k", lw=0.5)
    ax.set_xlabel("time [s]")
    ax.set_ylabel(record.output_names[0])
    ax.set_title(f"{kind}: {name} on the test record (RMSE {rmse(record.y, y_sim):.3f})")
    path = os.path.join(out, f"test_{name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_results(kind: str, record: Any, y_sim: np.ndarray, stopper: Any, out: str) -> str:
    """``test_simulation.png``, ``test_residual.png`` and ``training.png`` in the folder ``out``.

    Measured vs simulated output, the residual and the training curves.

    Returns the line to print: the files written, or why there are none
    (matplotlib is the optional ``plot`` extra).
    """
    if importlib.util.find_spec("matplotlib") is None:
        return "plots: skipped (matplotlib is not installed: pip install 'keras-mgu[plot]')"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from keras_mgu.plotting import plot_training

    os.makedirs(out, exist_ok=True)
    names = ("simulation", "residual")
    paths = [_plot_series(plt, kind, record, y_sim, name, out) for name in names]
    paths.append(plot_training(stopper, os.path.join(out, "training.png")))
    return "plots: " + ", ".join(paths)


def read_results(out: str) -> dict[str, Any]:
    """The runs recorded in ``<out>/results.json`` (``{}`` when there is none).

    Raises:
        UsageError: the file is not a results.json of this format (``{"runs": {...}}``),
            so it is never overwritten.
    """

    path = os.path.join(out, "results.json")
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            runs = json.load(f).get("runs")
    except (OSError, ValueError, AttributeError) as err:
        raise UsageError(f"cannot extend {path}: {err}; choose another --out") from err
    if not isinstance(runs, dict):
        raise UsageError(
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
                  protocol: Any) -> None:  # fmt: skip
    """The results table, the test output's spread and, last, ``test RMSE: <MGU, all>``."""
    header = "| model | outputs | parameters | training s | test RMSE (all) | "
    header += f"test RMSE (from sample {n_initial}) |"
    if protocol is not None:
        unit = _unit(protocol)
        header += f" all [{unit}] | from sample {n_initial} [{unit}] |"
    print("\n" + header)
    print("|---" * (header.count("|") - 1) + "|")
    for kind, r in results.items():
        line = f"| {kind} | {r['name']}/ | {r['params']} | {r['seconds']:.0f} | "
        line += f"{fixed(r['rmse'])} | "
        line += f"{fixed(r['rmse_benchmark'])} |"
        if protocol is not None:
            line += f" {r['rmse_in_unit']:.4g} | {r['rmse_benchmark_in_unit']:.4g} |"
        print(line)
    print(f"std of the test output: {fixed(np.std(test.y))}")
    first = next(iter(results.values()))
    print(f"test RMSE: {fixed(first['rmse'])}")
