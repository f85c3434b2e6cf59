"""Zoo plants in the benchmark suite: names, scores within and beyond range, the report's table.

A zoo plant (:func:`keras_mgu.datasets.zoo_plant`) is named ``zoo:NAME`` in
``sysid_suite.py``; its data seed is fixed (:data:`ZOO_DATA_SEED`) while the
run's seed varies. The zoo has no protocol: scores are RMSEs in the output's
unit of simulations from the state the first :data:`ZOO_N_INITIAL` measured
outputs give, scored after them.
"""

from __future__ import annotations

import json
import statistics

ZOO_PREFIX = "zoo:"
#: Data seed of every zoo plant (the run's seed varies, the experiment stays).
ZOO_DATA_SEED = 0
#: Measured outputs that set a zoo simulation's state (the zoo has no protocol;
#: ``Identification.score``'s default ``n``).
ZOO_N_INITIAL = 50


def is_zoo(benchmark: str) -> bool:
    return benchmark.startswith(ZOO_PREFIX)


def load_zoo_plant(benchmark: str, shift_input: int = 0):
    """The ``ZooPlant`` of ``zoo:NAME``: its default length, the fixed data seed.

    ``shift_input``: every record's input column shifted by that many samples by hand,
    ``u(k - shift_input)`` beside ``y(k)`` (each record ``shift_input`` samples shorter, the
    beyond record's ``beyond_start`` as many earlier): a dead time taken out before the
    recipe sees the data.
    """
    import dataclasses

    from keras_mgu import datasets

    plant = datasets.zoo_plant(benchmark[len(ZOO_PREFIX) :], seed=ZOO_DATA_SEED)
    if shift_input == 0:
        return plant

    def shifted(record):
        n = shift_input
        return dataclasses.replace(record, u=record.u[:-n], y=record.y[n:])

    data = plant.data
    records = {name: shifted(getattr(data, name)) for name in ("estimation", "validation", "test")}
    data = dataclasses.replace(data, **records)
    return dataclasses.replace(plant, data=data, beyond=shifted(plant.beyond),
                               beyond_start=plant.beyond_start - shift_input)  # fmt: skip


def zoo_scores(found, plant, n: int) -> dict:
    """RMSEs of a zoo plant's simulations from its first ``n`` measured outputs, output's unit.

    ``within``: the test record, samples ``n`` on. ``beyond_before`` and
    ``beyond_after``: the ``beyond`` record (one simulation), samples ``n``
    to ``beyond_start`` and ``beyond_start`` on. ``ratio``: after / within.
    """
    from keras_mgu import sysid

    beyond, start = plant.beyond, plant.beyond_start
    if not n < start:
        raise ValueError(f"the beyond record leaves its range at {start}; expected more than {n}")
    y_sim = found.simulate(beyond.u, beyond.y[:n])
    within = found.score(plant.data.test, "benchmark", n)
    after = sysid.rmse(beyond.y[start:], y_sim[start:])
    return {
        "within": within,
        "beyond_before": sysid.rmse(beyond.y[n:start], y_sim[n:start]),
        "beyond_after": after,
        "ratio": after / within,
        "beyond_start": start,
        "beyond_factor": plant.beyond_factor,
    }


class LinearAlone:
    """A linear model alone, simulated as ``--linear`` does: at rest at the first given output.

    ``simulate`` and ``score`` take the arguments of ``Identification``'s,
    in physical units, so :func:`zoo_scores` scores it like the recipe.
    """

    def __init__(self, model, normalizer):
        self.model, self.normalizer = model, normalizer

    def simulate(self, u, y_initial):
        norm = self.normalizer
        y0 = norm.transform_y(y_initial[:1])[0]
        y_sim = norm.inverse_transform_y(self.model.simulate(norm.transform_u(u), y0))
        y_sim[: len(y_initial)] = y_initial
        return y_sim

    def score(self, record, convention: str, n: int) -> float:
        from keras_mgu import sysid

        return sysid.score(record.y, self.simulate(record.u, record.y[:n]), convention, n)


def seeds_cell(results: list[dict]) -> str:
    """The seeds of a row's results, ``-`` for a result without one (a deterministic peer)."""
    return " ".join("-" if r.get("seed") is None else str(r["seed"]) for r in results)


ZOO_COLUMNS = (
    ("within", "test, within range"),
    ("beyond_before", "beyond record, before"),
    ("beyond_after", "beyond record, after"),
    ("ratio", "after / within"),
)


def floor_cell(floor: dict | None) -> str:
    """``"MODEL within / beyond after"`` of a floor (:func:`sysid_suite.floors`), or none."""
    if floor is None:
        return "none"
    return f"{floor['model']} {floor['within']:.3g} / {floor['beyond_after']:.3g}"


def floors_table(floors: dict[str, dict]) -> str:
    """Markdown: each zoo plant's floors, ``floors``: plant -> :func:`sysid_suite.floors`.

    Per plant the ARX floor and the own-class reference (or none), scored as
    :func:`zoo_scores` scores a network, in the output's unit.
    """
    lines = [
        "| plant | floor | model | " + " | ".join(title for _, title in ZOO_COLUMNS) + " |",
        "|---|---|---|" + "---:|" * len(ZOO_COLUMNS),
    ]
    for plant, floor in floors.items():
        for kind, title in (("arx", "ARX"), ("reference", "own class")):
            scores = floor[kind]
            if scores is None:
                lines.append(f"| {plant} | {title} | none |" + " - |" * len(ZOO_COLUMNS))
                continue
            cells = " | ".join(f"{scores[key]:.3g}" for key, _ in ZOO_COLUMNS)
            lines.append(f"| {plant} | {title} | {scores['model']} | {cells} |")
    return "\n".join(lines)


def zoo_table(groups, floors: dict[str, dict] | None = None) -> str:
    """Markdown: per zoo plant and backend, each score per seed and its median over seeds.

    ``groups``: ``(benchmark, backend, results by seed)``; other benchmarks
    are left out. Scores of the chosen run, in the output's unit: the test
    record (within the estimation input's range), the ``beyond`` record before
    and after ``beyond_start``, and after / within; then the plant's floors
    (``floors``: benchmark -> :func:`sysid_suite.floors`, a dash where
    missing), each as within / beyond after: the ARX model and the plant's
    own class fitted by least squares (or none).
    """
    floors = floors or {}
    lines = [
        "| plant | backend | seeds | " + " | ".join(title for _, title in ZOO_COLUMNS) + " | "
        "ARX floor: within / beyond after | own class: within / beyond after |",
        "|---|---|---|" + "---:|" * len(ZOO_COLUMNS) + "---|---|",
    ]
    for benchmark, backend, results in groups:
        if not is_zoo(benchmark):
            continue
        cells = []
        for key, _ in ZOO_COLUMNS:
            values = [r["zoo"][key] for r in results]
            per_seed = " / ".join(f"{v:.3g}" for v in values)
            cells.append(f"{per_seed} (median {statistics.median(values):.3g})")
        floor = floors.get(benchmark)
        kinds = ("arx", "reference")
        cells += ["-", "-"] if floor is None else [floor_cell(floor[kind]) for kind in kinds]
        plant = benchmark[len(ZOO_PREFIX) :]
        lines.append(f"| {plant} | {backend} | {seeds_cell(results)} | {' | '.join(cells)} |")
    return "\n".join(lines)


def zoo_runs_table(groups) -> str:
    """Markdown: every run of every zoo seed, ``*`` the run kept: structure (seed) within / after.

    ``groups`` as for :func:`zoo_table`; "after": RMSE of the ``beyond``
    record after ``beyond_start``, output's unit.
    """
    lines = [
        "| plant | backend | seed S | runs: structure (seed) within / beyond after |",
        "|---|---|---|---|",
    ]
    for benchmark, backend, results in groups:
        if not is_zoo(benchmark):
            continue
        for r in results:
            cells = [
                f"{'*' if k == r['chosen'] else ''}{run['structure']} ({run['seed']}) "
                f"{run['zoo']['within']:.3g} / {run['zoo']['beyond_after']:.3g}"
                for k, run in enumerate(r["runs"])
            ]
            plant = benchmark[len(ZOO_PREFIX) :]
            lines.append(f"| {plant} | {backend} | {r['seed']} | {' ; '.join(cells)} |")
    return "\n".join(lines)


def zoo_commands(results: dict[tuple[str, str], list[dict]], folder: str) -> list[str]:
    """The suite commands that wrote the zoo ``results`` (by benchmark and backend) to ``folder``.

    One command per setting (backend, restarts, config, population) and set of
    seeds, naming the plants run with them.
    """
    seeds: dict[tuple, set] = {}
    for (benchmark, backend), runs in results.items():
        if not is_zoo(benchmark):
            continue
        for r in runs:
            setting = (backend, r["restarts"], json.dumps(r["config"]), r.get("population", True))
            seeds.setdefault((setting, benchmark), set()).add(r["seed"])
    plants: dict[tuple, list[str]] = {}
    for (setting, benchmark), plant_seeds in sorted(seeds.items()):
        plants.setdefault((setting, tuple(sorted(plant_seeds))), []).append(benchmark)
    commands = []
    for ((backend, restarts, config, population), run_seeds), names in sorted(plants.items()):
        command = (
            f"python benchmarks/sysid_suite.py --backend {backend} "
            f"--benchmarks {' '.join(names)} --seeds {' '.join(map(str, run_seeds))} "
            f"--restarts {restarts}"
        )
        if config != "{}":
            command += f" --config '{config}'"
        if not population:
            command += " --one-by-one"
        commands.append(f"{command} --out {folder}")
    return commands
