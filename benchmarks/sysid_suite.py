"""The identification recipe on the measured benchmarks: per-run JSON and the result tables.

For each benchmark and seed S it runs ``sysid.identify(data, config,
restarts=R, seed=S)`` in a fresh process on the chosen backend, the library's
defaults unless ``--config`` changes settings, and scores the model it
returns (the run, or the average of runs, kept on validation) on
the test record under the benchmark's protocol (the first ``n`` measured
outputs set the state, RMSE from sample ``n`` on, in the protocol's unit) and
over every sample from the estimation record's start. Every restart is
scored on test too, for the report only: the choice among restarts is made on
validation. Each run goes to ``--out/BENCHMARK/BACKEND_seedS.json``.

``--report`` turns the JSON files into the markdown tables of README.md and
``benchmarks/RESULTS.md``: per benchmark and backend the per-seed scores,
median, worst, the ARX floor (:func:`floors`: the ``--linear`` model, fitted
and scored when the report is made; a dash where the data are absent), the
score of the simulation from the estimation start (no measured test output
used), the median validation RMSE of the chosen runs
(standardised units: what variants are compared by) and the median wall time
of ``identify`` (all restarts). Where the protocol's ``n`` changed with
``nonlinear-benchmarks`` 1.0.1 (``Protocol.previous_n_initial``: Cascaded Tanks
5, now 50), every run is scored from both samples, and a second table gives
both medians. Where ``--peers`` (default ``benchmarks/results/peers``) holds
results of ``benchmarks/peers/`` (deepSI's SUBNET, tsfast's GRU and
SysIdentPy's polynomial NARX on the same records and protocol), each
benchmark's rows are followed by the peers', and the commands that made them
are printed below the table; the zoo table has the peers' zoo rows too.

A zoo plant (``keras_mgu.datasets.zoo_plant``) is named ``zoo:NAME`` beside
the measured benchmarks: its default length, its data seed fixed (0) while
the run's seed varies. It has no protocol: its scores are in the output's
unit, simulated from the state its first ``ZOO_N_INITIAL`` measured outputs
give and scored after them, on the test record (within the estimation input's
range) and on the ``beyond`` record, split at ``beyond_start`` into the part
within range and the part beyond it. ``--report`` adds a table of the zoo
plants: within, beyond (before and after), and after / within, beside the
plant's floors scored the same way: the ARX model and, where the plant has
one, its own model class fitted by least squares
(``zoo_polynomial_narx.own_class_reference``: a cubic NARX for the Duffing
oscillators, a NARX in ``sin(theta)`` for the pendulum, a cubic NARX with
cross terms for the Van der Pol oscillator).

Usage::

    python benchmarks/sysid_suite.py --backend jax --seeds 0 1 2 3 4
    python benchmarks/sysid_suite.py --backend torch --benchmarks emps --seeds 0 1 2
    python benchmarks/sysid_suite.py --report
    python benchmarks/sysid_suite.py --linear          # the linear model alone, for comparison
    python benchmarks/sysid_suite.py --floors hardening_oscillator pendulum   # zoo floors
    python benchmarks/sysid_suite.py --backend jax --benchmarks wh2009 \\
        --config '{"units": [64]}' --out benchmarks/results/suite_variants/units_64
    python benchmarks/sysid_suite.py --backend jax --benchmarks zoo:duffing zoo:bouc_wen \\
        --seeds 0 1 --out benchmarks/results/zoo
    python benchmarks/sysid_suite.py --backend jax --benchmarks zoo:heated_tank --seeds 0 \\
        --shift-input 13 --out benchmarks/results/suite_shifted   # the dead time taken out by hand

The data come from ``--data-root`` (default ``../shared/data`` beside the
checkout), one folder per benchmark as ``keras_mgu.datasets.load_benchmark``
reads them.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from benchmarks import suite_zoo, zoo_polynomial_narx  # noqa: E402
from benchmarks.suite_zoo import (  # noqa: E402
    ZOO_COLUMNS,
    ZOO_DATA_SEED,
    ZOO_N_INITIAL,
    ZOO_PREFIX,
    is_zoo,
    load_zoo_plant,
    zoo_scores,
)

DEFAULT_OUT = os.path.join(HERE, "results", "suite")
DEFAULT_PEERS = os.path.join(HERE, "results", "peers")
DEFAULT_ROOT = os.path.join(HERE, "..", "..", "shared", "data")
BENCHMARKS = ("cascaded_tanks", "wh2009", "emps")
SELECTION_RULES = ("best", "ensemble")


def benchmark_name(text: str) -> str:
    """A measured benchmark's name, or ``zoo:NAME`` for a zoo plant (``-`` read as ``_``)."""
    from keras_mgu.datasets.zoo import ZOO

    if text in BENCHMARKS:
        return text
    if text.startswith(ZOO_PREFIX):
        plant = text[len(ZOO_PREFIX) :].replace("-", "_")
        if plant in ZOO:
            return ZOO_PREFIX + plant
    zoo = " ".join(ZOO_PREFIX + name for name in ZOO)
    raise argparse.ArgumentTypeError(
        f"unknown benchmark {text!r}; expected one of {' '.join(BENCHMARKS)} {zoo}"
    )


def result_folder(benchmark: str) -> str:
    """Folder name of a benchmark's results (``zoo:duffing`` -> ``zoo_duffing``)."""
    return benchmark.replace(":", "_")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("tensorflow", "jax", "torch"), default="jax")
    parser.add_argument(
        "--benchmarks", nargs="+", type=benchmark_name, default=list(BENCHMARKS),
        help=f"{' '.join(BENCHMARKS)} or zoo:NAME (a zoo plant)",
    )  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--one-by-one", action="store_true",
                        help="train the restarts one by one (identify(population=False)), as the "
                        "committed tables were")  # fmt: skip
    parser.add_argument("--config", default="{}", help="RecipeConfig settings as a JSON object")
    parser.add_argument("--shift-input", type=int, default=0, metavar="N",
                        help="zoo plants: every record's input shifted by N samples by hand "
                        "(u(k - N) beside y(k))")  # fmt: skip
    parser.add_argument("--data-root", default=DEFAULT_ROOT, help="folder of benchmark folders")
    parser.add_argument("--out", default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--report", action="store_true", help="print the tables and exit")
    parser.add_argument("--peers", default=DEFAULT_PEERS,
                        help="the peers' results folder for --report ('' for none)")  # fmt: skip
    parser.add_argument(
        "--linear", action="store_true", help="score the linear model alone on each benchmark"
    )
    parser.add_argument("--floors", nargs="+", metavar="PLANT",
                        help="print these zoo plants' floors (ARX, own class)")  # fmt: skip
    parser.add_argument("--worker", nargs=2, metavar=("BENCHMARK", "SEED"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def recipe_config(overrides: dict):
    """The library's default settings with ``overrides`` (lists become tuples)."""
    from keras_mgu import sysid

    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    return sysid.RecipeConfig(**fields)


def load_data(args: argparse.Namespace, benchmark: str):
    """``(SysIdData, ZooPlant or None)`` of a measured benchmark or of a zoo plant."""
    from keras_mgu import datasets

    if is_zoo(benchmark):
        plant = load_zoo_plant(benchmark, args.shift_input)
        return plant.data, plant
    return datasets.load_benchmark(benchmark, os.path.join(args.data_root, benchmark)), None


def unit_and_scale(data) -> tuple[str, float]:
    """The protocol's unit and scale of the published figures; the output's unit (``""``, 1)."""
    protocol = data.protocol
    return ("", 1.0) if protocol is None else (protocol.unit, protocol.scale)


def run_one(args: argparse.Namespace, benchmark: str, seed: int) -> dict:
    """Identify one benchmark with one seed; scores of the model kept and of every restart.

    ``structure`` is the best run's; ``members`` the runs the kept model
    averages (empty: the best run alone).
    """
    import keras

    data, plant = load_data(args, benchmark)
    overrides = json.loads(args.config)
    start = time.perf_counter()
    found = sysid_identify(data, overrides, args.restarts, seed, not args.one_by_one)
    seconds = time.perf_counter() - start
    unit, scale = unit_and_scale(data)
    n = data.n_initial or ZOO_N_INITIAL
    previous = None if data.protocol is None else data.protocol.previous_n_initial
    runs = []
    for k, run in enumerate(found.runs):
        member = found.run_alone(k)
        runs.append(
            {
                "seed": run.seed,
                "structure": run.structure,
                "resolved": _jsonable(dataclasses.asdict(run.config)),
                "validation": run.validation_score,
                "validation_rmse": run.validation_rmse,
                "choice_rmse": run.choice_rmse,
                "best_iteration": run.best_iteration,
                "seconds": round(run.seconds, 1),
                "test": scale * member.score(data.test, "benchmark", n),
                "test_all": scale * member.score(data.test),
                "ran_off": run.ran_off,
                "not_kept": run.not_kept,
                "edge": None if run.edge is None else run.edge.to_dict(),
            }
        )
        if previous is not None:
            score = member.score(data.test, "benchmark", previous)
            runs[-1]["test_previous_n"] = scale * score
        if plant is not None:
            runs[-1]["zoo"] = zoo_scores(member, plant, n)
        print(f"  {benchmark} seed {seed}: {runs[-1]}", file=sys.stderr, flush=True)
    ensemble = dataclasses.replace(found, members=tuple(range(len(found.runs))))
    from keras_mgu.sysid.choice.restarts import selection_pool

    pool = selection_pool(found.runs, found.runs[found.best].structure)
    errors = [found.runs[k].validation_error for k in pool]
    chosen = runs[found.best]
    return {
        "benchmark": benchmark,
        "backend": keras.backend.backend(),
        "seed": seed,
        "restarts": args.restarts,
        "population": not args.one_by_one,
        "config": overrides,
        "linear_models": found.linear_table,
        "capacity_screening": found.capacity_table,
        "unit": unit,
        "n_initial": n,
        "previous_n_initial": previous,
        "seconds": round(seconds, 1),
        "chosen": found.best,
        "members": list(found.members),
        "selection": found.runs[found.best].config.selection,
        "structure": chosen["structure"],
        "test": scale * found.score(data.test, "benchmark", n),
        "test_all": scale * found.score(data.test),
        **(
            {}
            if previous is None
            else {"test_previous_n": scale * found.score(data.test, "benchmark", previous)}
        ),
        **(
            {}
            if plant is None
            else {"data_seed": ZOO_DATA_SEED, "zoo": zoo_scores(found, plant, n)}
        ),
        "runs": runs,
        "ensemble": {
            "validation_rmse": ensemble.validation_rmse(data),
            "test": scale * ensemble.score(data.test, "benchmark", n),
        },
        "rules": {
            rule: _rule_result(found, pool, errors, rule, data, n) for rule in SELECTION_RULES
        },
        "validation_halves": _halves(errors),
    }


def _rule_result(found, pool, errors, rule: str, data, n: int) -> dict:
    """What selection ``rule`` keeps of the pool's runs, and its scores (test for the report)."""
    from keras_mgu.sysid.choice.selection import select

    members = tuple(pool[k] for k in select(errors, rule))
    kept = dataclasses.replace(found, members=members)
    scale = unit_and_scale(data)[1]
    return {
        "members": list(kept.members),
        "validation_rmse": kept.validation_rmse(data),
        "test": scale * kept.score(data.test, "benchmark", n),
        "test_all": scale * kept.score(data.test),
    }


def _halves(errors) -> dict:
    """Each rule chosen on the first half of the validation record, scored on the second.

    The runs' early stopping saw the whole validation record; the choice
    among them sees the first half only.
    """
    from keras_mgu.sysid.choice.selection import select

    half = len(errors[0]) // 2
    out = {}
    for rule in SELECTION_RULES:
        picked = select([e[:half] for e in errors], rule)
        second = np.mean([errors[k][half:] for k in picked], axis=0)
        rmse = float(np.sqrt(np.mean(second**2)))
        out[rule] = {"members": list(picked), "second_half_rmse": rmse}
    return out


def sysid_identify(data, overrides: dict, restarts: int, seed: int, population: bool = True):
    from keras_mgu import sysid

    return sysid.identify(
        data, recipe_config(overrides), restarts=restarts, seed=seed, verbose=0,
        population=population,
    )  # fmt: skip


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def result_path(out: str, benchmark: str, backend: str, seed: int) -> str:
    return os.path.join(out, result_folder(benchmark), f"{backend}_seed{seed}.json")


def run_all(args: argparse.Namespace) -> None:
    """Each (benchmark, seed) in a fresh process, its JSON written as it finishes."""
    for benchmark in args.benchmarks:
        for seed in args.seeds:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", benchmark, str(seed),
                   "--restarts", str(args.restarts), "--config", args.config,
                   "--data-root", args.data_root, "--out", args.out,
                   "--shift-input", str(args.shift_input),
                   *(["--one-by-one"] if args.one_by_one else [])]  # fmt: skip
            env = {**os.environ, "KERAS_BACKEND": args.backend}
            print(f"== {benchmark}, {args.backend}, seed {seed}", flush=True)
            subprocess.run(cmd, env=env, check=True)


def _same_path(a: str, b: str) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def _shown_path(path: str) -> str:
    """``path`` relative to the project root when it lies inside it, for a portable command."""
    root = os.path.dirname(HERE)
    full = os.path.normpath(os.path.abspath(path))
    return os.path.relpath(full, root) if full.startswith(root + os.sep) else full


def reproducing_command(args: argparse.Namespace, benchmark: str, backend: str, seed: int) -> str:
    """The command, run from the project root, that makes this one result file again.

    Options left at their defaults are left out, paths inside the project are
    relative, so the command carries no machine's folders.
    """
    parts = ["python", "benchmarks/sysid_suite.py", "--backend", backend,
             "--benchmarks", benchmark, "--seeds", str(seed)]  # fmt: skip
    if args.restarts != 3:
        parts += ["--restarts", str(args.restarts)]
    if args.one_by_one:
        parts.append("--one-by-one")
    if json.loads(args.config):
        parts += ["--config", shlex.quote(args.config)]
    if args.shift_input:
        parts += ["--shift-input", str(args.shift_input)]
    if not is_zoo(benchmark) and not _same_path(args.data_root, DEFAULT_ROOT):
        parts += ["--data-root", shlex.quote(_shown_path(args.data_root))]
    if not _same_path(args.out, DEFAULT_OUT):
        parts += ["--out", shlex.quote(_shown_path(args.out))]
    return " ".join(parts)


def worker(args: argparse.Namespace) -> None:
    benchmark, seed = args.worker[0], int(args.worker[1])
    result = run_one(args, benchmark, seed)
    result["command"] = reproducing_command(args, benchmark, result["backend"], seed)
    path = result_path(args.out, benchmark, result["backend"], seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)
    print(
        f"{benchmark} {result['backend']} seed {seed}: test {result['test']:.4g} "
        f"{result['unit']} (from sample {result['n_initial']}), {result['seconds']:.0f} s",
        flush=True,
    )


def load_results(out: str) -> dict[tuple[str, str], list[dict]]:
    """The per-run files of folder ``out``, grouped by (benchmark, backend)."""
    rows: dict[tuple[str, str], list[dict]] = {}
    for path in sorted(glob.glob(os.path.join(out, "*", "*_seed*.json"))):
        with open(path) as f:
            result = json.load(f)
        rows.setdefault((result["benchmark"], result["backend"]), []).append(result)
    return rows


def _groups(out: str):
    """``(benchmark, backend, results by seed)``, benchmarks in suite order."""
    order = {name: i for i, name in enumerate(BENCHMARKS)}
    for (benchmark, backend), results in sorted(
        load_results(out).items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])
    ):
        yield benchmark, backend, sorted(results, key=lambda r: r["seed"])


def report(out: str, peers: str | None = None, floors: dict[str, dict] | None = None) -> str:
    """Markdown: one row per benchmark and backend, then the peers' rows of that benchmark.

    ``peers`` is a folder of ``benchmarks/peers/`` results
    (``BENCHMARK/*.json``); ``None`` or a missing folder: no peer rows.
    ``floors``: benchmark -> :func:`floors`, whose ARX test RMSE every row of
    the benchmark shows (a dash where missing).
    """
    lines = [
        "| benchmark | backend | seeds | test RMSE per seed | median | worst | ARX floor | "
        "from the estimation start, median | validation RMSE, median | identify time, median |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    floors = floors or {}
    rows: dict[str, list[str]] = {}
    for benchmark, backend, results in _groups(out):
        rows.setdefault(benchmark, []).append(
            _row(benchmark, backend, results, statistics.median(r["test_all"] for r in results),
                 _validation_median(results), floors.get(benchmark))
        )  # fmt: skip
    for (benchmark, label), results in load_peer_results(peers).items():
        validation = f"{statistics.median(r['validation_rmse'] for r in results):.3f}"
        rows.setdefault(benchmark, []).append(
            _row(benchmark, label, results, None, validation, floors.get(benchmark))
        )
    order = {name: i for i, name in enumerate(BENCHMARKS)}
    for benchmark in sorted(rows, key=lambda name: (order.get(name, 99), name)):
        lines.extend(rows[benchmark])
    return "\n".join(lines)


def _row(
    benchmark: str, label: str, results: list[dict], start, validation: str, floor=None
) -> str:
    """One table row; ``start``: the median score from the estimation start, or None (a dash).

    ``floor``: the benchmark's :func:`floors` (its ARX test RMSE), or None (a dash).
    """
    unit = results[0]["unit"]
    tests = [r["test"] for r in results]
    arx = None if floor is None or floor["arx"] is None else floor["arx"]["test"]
    return (
        f"| {benchmark} | {label} | {suite_zoo.seeds_cell(results)} | "
        f"{' / '.join(f'{v:.3g}' for v in tests)} {unit} | "
        f"{statistics.median(tests):.3g} {unit} | {max(tests):.3g} {unit} | "
        f"{'-' if arx is None else f'{arx:.3g} {unit}'} | "
        f"{'-' if start is None else f'{start:.3g} {unit}'} | {validation} | "
        f"{statistics.median(r['seconds'] for r in results):.0f} s |"
    )


#: Each peer's environment (``benchmarks/peers/README.md``).
PEER_ENVIRONMENTS = {
    "subnet": "peers-venv",
    "tsfast_gru": "peers-tsfast-venv",
    "sysidentpy_frols": "../peers-sysidentpy-venv",
}


def peer_label(result: dict) -> str:
    """A peer row's name: the peer, its toolkit's version and, for tsfast, its time cap.

    ``"SUBNET (deepSI 0.4.4)"``; ``"tsfast GRU (0.5.0, its 10 epochs)"`` or
    ``"tsfast GRU (0.5.0, cut at 25 s)"``; ``"SysIdentPy FROLS (0.9.0)"``.
    """
    if result["peer"] == "sysidentpy_frols":
        return f"SysIdentPy FROLS ({result['sysidentpy_version']})"
    if result["peer"] == "tsfast_gru":
        cap = result.get("seconds_cap")
        budget = "its 10 epochs" if cap is None else f"cut at {cap:g} s"
        return f"tsfast GRU ({result['tsfast_version']}, {budget})"
    return f"{result['peer'].upper()} (deepSI {result['deepsi_version']})"


def load_peer_results(peers: str | None) -> dict[tuple[str, str], list[dict]]:
    """The peers' per-run files, ``(benchmark, peer_label) -> results by seed``; empty when none.

    A deterministic peer's result has no seed (``None``).
    """
    groups: dict[tuple[str, str], list[dict]] = {}
    if not peers:
        return groups
    for path in sorted(glob.glob(os.path.join(peers, "*", "*.json"))):
        with open(path) as f:
            result = json.load(f)
        groups.setdefault((result["benchmark"], peer_label(result)), []).append(result)
    return {key: sorted(group, key=lambda r: r["seed"] or 0) for key, group in groups.items()}


def peer_commands(peers: str | None) -> str:
    """Markdown: the commands that made the peers' results (each in its peer's environment)."""
    runs = [r for group in load_peer_results(peers).values() for r in group]
    commands = sorted(
        {f"PYTHONPATH=$PWD {PEER_ENVIRONMENTS[r['peer']]}/bin/{r['command']}" for r in runs}
    )
    if not commands:
        return ""
    return (
        "Peer rows: deepSI's SUBNET, tsfast's GRU and SysIdentPy's FROLS on the same records and "
        "protocol, each in its own environment (`benchmarks/peers/README.md`); a row's time is its "
        "training (and SUBNET's test simulation; SysIdentPy's: its whole choice of degree and "
        "lags):\n\n```bash\n" + "\n".join(commands) + "\n```"
    )


def previous_n_table(out: str) -> str:
    """Markdown: medians from the protocol's ``n`` and from its earlier ``n``, where both exist.

    Runs scored before the protocol's ``n`` changed record one ``n`` only;
    they are left out.
    """
    lines = [
        "| benchmark | backend | seeds | n | median from sample n | previous n | "
        "median from the previous n |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for benchmark, backend, results in _groups(out):
        results = [r for r in results if "test_previous_n" in r]
        if not results:
            continue
        unit = results[0]["unit"]
        n = "/".join(sorted({str(r["n_initial"]) for r in results}))
        previous = "/".join(sorted({str(r["previous_n_initial"]) for r in results}))
        lines.append(
            f"| {benchmark} | {backend} | {' '.join(str(r['seed']) for r in results)} | {n} | "
            f"{_median(results, 'test'):.3g} {unit} | {previous} | "
            f"{_median(results, 'test_previous_n'):.3g} {unit} |"
        )
    return "\n".join(lines)


def rules_table(out: str) -> str:
    """Markdown: the selection rules on the same runs (seeds whose results record them).

    Per benchmark and backend, medians over seeds: each rule's validation
    RMSE and test score, how many seeds the ensemble rule averaged two runs
    or more, and each rule chosen on the first half of the validation record
    and scored on the second half (no test data involved).
    """
    lines = [
        "| benchmark | backend | seeds | test, best run | test, ensemble | validation, best run | "
        "validation, ensemble | seeds averaged | 2nd half of validation, best run | "
        "2nd half of validation, ensemble |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for benchmark, backend, results in _groups(out):
        results = [r for r in results if "rules" in r]
        if not results:
            continue
        unit = results[0]["unit"]
        best, ens = ("rules", "best"), ("rules", "ensemble")
        halves = [("validation_halves", rule, "second_half_rmse") for rule in SELECTION_RULES]
        averaged = sum(len(set(r["rules"]["ensemble"]["members"])) > 1 for r in results)
        lines.append(
            f"| {benchmark} | {backend} | {' '.join(str(r['seed']) for r in results)} | "
            f"{_median(results, *best, 'test'):.3g} {unit} | "
            f"{_median(results, *ens, 'test'):.3g} {unit} | "
            f"{_median(results, *best, 'validation_rmse'):.4f} | "
            f"{_median(results, *ens, 'validation_rmse'):.4f} | {averaged} of {len(results)} | "
            f"{_median(results, *halves[0]):.4f} | {_median(results, *halves[1]):.4f} |"
        )
    return "\n".join(lines)


def runs_table(out: str) -> str:
    """Markdown: every run of every seed (structure, validation RMSE, test score); * = kept."""
    lines = [
        "| benchmark | backend | seed S | runs: structure (seed) validation RMSE / test |",
        "|---|---|---|---|",
    ]
    for (benchmark, backend), results in sorted(load_results(out).items()):
        for r in sorted(results, key=lambda r: r["seed"]):
            cells = [
                f"{'*' if k == r['chosen'] else ''}{run.get('structure', 'network')} "
                f"({run['seed']}) {run.get('validation_rmse', float('nan')):.3f} / "
                f"{run['test']:.3g}"
                for k, run in enumerate(r["runs"])
            ]
            lines.append(f"| {benchmark} | {backend} | {r['seed']} | {' ; '.join(cells)} |")
    return "\n".join(lines)


def zoo_table(out: str, floors: dict[str, dict] | None = None, peers: str | None = None) -> str:
    """Markdown: the zoo plants of folder ``out`` and their floors (``suite_zoo.zoo_table``).

    Each plant's rows are followed by the peers' zoo results (folder ``peers``), a row per peer.
    """
    peer_rows = [(b, label, results) for (b, label), results in load_peer_results(peers).items()]
    peer_rows.sort(key=lambda row: row[:2])
    rows = sorted([*_groups(out), *peer_rows], key=lambda row: row[0])  # stable: the suite's first
    return suite_zoo.zoo_table(rows, floors)


def zoo_runs_table(out: str) -> str:
    """Markdown: every run of the zoo plants of folder ``out`` (``suite_zoo.zoo_runs_table``)."""
    return suite_zoo.zoo_runs_table(_groups(out))


def zoo_commands(out: str) -> list[str]:
    """The commands that wrote the zoo results of folder ``out``, paths from the checkout."""
    return suite_zoo.zoo_commands(load_results(out), os.path.relpath(out, os.path.dirname(HERE)))


def linear_on_test(data) -> tuple:
    """The linear model of ``--linear`` (ARX order chosen on validation) and its test RMSE.

    Returns ``(model, normalizer, table, test RMSE in the protocol's unit)``:
    ``table`` is :func:`keras_mgu.sysid.select_linear_model`'s (one row per
    order, with its standardised validation RMSE); ``model`` and the RMSE are
    None when no order explains the validation record. The test record is
    simulated at rest at its first measured output and scored from sample
    ``n`` on.
    """
    from keras_mgu import datasets, sysid

    norm = datasets.Normalizer.fit(data.estimation)
    est, val, test = (norm.transform(r) for r in (data.estimation, data.validation, data.test))
    continues = data.estimation.n_samples <= 2048  # the validation layout of the recipe
    model, table = sysid.select_linear_model(est, val, continues=continues)
    if model is None:
        return None, norm, table, None
    n, (_, scale) = data.n_initial or ZOO_N_INITIAL, unit_and_scale(data)
    y_sim = norm.inverse_transform_y(model.simulate(test.u, test.y[0]))
    return model, norm, table, scale * sysid.rmse(data.test.y[n:], y_sim[n:])


def floors(data, plant=None) -> dict:
    """A record's floors: least-squares models, no training, scored as the suite scores a run.

    ``arx``: the model of ``--linear`` (:func:`linear_on_test`: the ARX order
    that simulates validation best, simulated at rest at the first measured
    output): ``model`` (``"ARX(na, nb)"``, ``", rejected"`` added where
    ``select_linear_model`` keeps no linear model because even the best order
    leaves more than ``LINEAR_SHARE_MAX`` of the constant's validation RMSE)
    and ``test``, the test RMSE under the protocol (in its unit; from sample
    ``ZOO_N_INITIAL`` for a zoo plant). For a zoo ``plant`` it adds
    :func:`suite_zoo.zoo_scores`'s ``within``, ``beyond_before``,
    ``beyond_after`` and ``ratio``. ``reference``: a zoo plant's own class
    fitted by least squares (``zoo_polynomial_narx.own_class_reference``),
    the same scores; None for a measured benchmark or a plant without one.
    A simulation that diverges scores ``inf``.
    """
    from keras_mgu import sysid

    model, norm, table, _ = linear_on_test(data)
    label = "" if model is None else f"ARX{model.orders}"
    if model is None and table:  # the best order all the same, for the floor
        na = min(table, key=lambda row: row["validation_rmse"])["na"]
        est = norm.transform(data.estimation)
        model = sysid.LinearModel.fit(est.u, est.y, na)
        label = f"ARX{model.orders}, rejected"
    n, scale = data.n_initial or ZOO_N_INITIAL, unit_and_scale(data)[1]
    arx = None
    if model is not None:
        linear = suite_zoo.LinearAlone(model, norm)
        arx = {"model": label, "test": scale * linear.score(data.test, "benchmark", n)}
        if plant is not None:
            arx.update(zoo_scores(linear, plant, n))
    reference = None
    own = None if plant is None else zoo_polynomial_narx.own_class_reference(plant)
    if own is not None:
        reference = {"model": own.name, **zoo_scores(own, plant, n)}
        reference["test"] = reference["within"]
    for scores in (arx, reference):
        for key, value in (scores or {}).items():
            if isinstance(value, float) and not np.isfinite(value):
                scores[key] = float("inf")
    return {"arx": arx, "reference": reference}


def report_floors(args: argparse.Namespace) -> dict[str, dict]:
    """:func:`floors` of every benchmark with results in ``args.out`` or ``args.peers``.

    A measured benchmark whose data are not under ``args.data_root`` is left out.
    """
    out = {}
    found = {benchmark for benchmark, _ in load_results(args.out)}
    found |= {benchmark for benchmark, _ in load_peer_results(args.peers)}
    for benchmark in sorted(found):
        if not is_zoo(benchmark) and not os.path.isdir(os.path.join(args.data_root, benchmark)):
            continue
        data, plant = load_data(args, benchmark)
        out[benchmark] = floors(data, plant)
    return out


def linear_alone(args: argparse.Namespace) -> str:
    """Each benchmark's linear model alone (order chosen on validation), scored like the recipe.

    A zoo plant's line adds its scores within range and on the beyond record.
    """
    lines = []
    for benchmark in args.benchmarks:
        data, plant = load_data(args, benchmark)
        model, norm, _, rmse = linear_on_test(data)
        n, (unit, _) = data.n_initial or ZOO_N_INITIAL, unit_and_scale(data)
        lines.append(f"{benchmark}: ARX{model.orders}, test RMSE {rmse:.3g} {unit}".rstrip())
        if plant is not None:
            scores = zoo_scores(suite_zoo.LinearAlone(model, norm), plant, n)
            lines[-1] += ", " + ", ".join(f"{key} {scores[key]:.3g}" for key, _ in ZOO_COLUMNS)
    return "\n".join(lines)


def _median(results: list[dict], *keys: str) -> float:
    """Median over ``results`` of ``result[keys[0]][keys[1]]...``."""
    values = []
    for result in results:
        for key in keys:
            result = result[key]
        values.append(result)
    return statistics.median(values)


def _validation_median(results: list[dict]) -> str:
    """Median over seeds of the chosen run's validation RMSE (standardised), or a dash."""
    values = [r["runs"][r["chosen"]].get("validation_rmse") for r in results]
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):.3f}" if len(values) == len(results) else "-"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        commands, floors_found = peer_commands(args.peers), report_floors(args)
        print(report(args.out, args.peers, floors_found) + (f"\n\n{commands}" if commands else "")
              + "\n\nFrom the protocol's n and from its previous n:\n\n"
              + previous_n_table(args.out) + "\n\nSelection rules on the same runs:\n\n"
              + rules_table(args.out) + "\n\nEvery run:\n\n" + runs_table(args.out))  # fmt: skip
        commands = zoo_commands(args.out)
        if commands or any(is_zoo(name) for name, _ in load_peer_results(args.peers)):
            title = f"Zoo plants (output's unit, from sample {ZOO_N_INITIAL})"
            table = zoo_table(args.out, floors_found, args.peers)
            print(f"\n{title}:\n\n{table}\n\n" + "\n".join(commands))
        if commands:
            runs = "Every run of the zoo plants (structure, seed, within / beyond after)"
            print(f"\n{runs}:\n\n{zoo_runs_table(args.out)}")
    elif args.floors:
        plants = [load_zoo_plant(f"zoo:{name}") for name in args.floors]
        print(suite_zoo.floors_table({p.name: floors(p.data, p) for p in plants}))
    elif args.linear:
        print(linear_alone(args))
    elif args.worker:
        worker(args)
    else:
        run_all(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
