"""benchmarks/sysid_suite.py: benchmark names, zoo scores and the report's tables."""

import json
import os

import numpy as np
import pytest

from keras_mgu.datasets import Normalizer, zoo_plant
from keras_mgu.sysid import Identification, select_linear_model
from tests.helpers import BACKEND_INDEPENDENT, END_TO_END, load_script

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def load_suite():
    return load_script("benchmarks", "sysid_suite.py")


def write_result(folder, seed, **fields):
    result = {"benchmark": "cascaded_tanks", "backend": "jax", "seed": seed, "unit": "V",
              "n_initial": 50, "test": 0.3, "test_all": 0.4, "seconds": 60.0, "chosen": 0,
              "runs": [], **fields}  # fmt: skip
    path = folder / "cascaded_tanks" / f"jax_seed{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))


@BACKEND_INDEPENDENT
def test_previous_n_table_gives_both_medians(tmp_path):
    suite = load_suite()
    write_result(tmp_path, 0, test=0.30, previous_n_initial=5, test_previous_n=0.32)
    write_result(tmp_path, 1, test=0.50, previous_n_initial=5, test_previous_n=0.52)
    write_result(tmp_path, 2, test=0.40, previous_n_initial=5, test_previous_n=0.48)
    write_result(tmp_path, 3, n_initial=5, test=0.1)  # scored before the change: one n only
    lines = suite.previous_n_table(str(tmp_path)).splitlines()
    assert lines[2:] == ["| cascaded_tanks | jax | 0 1 2 | 50 | 0.4 V | 5 | 0.48 V |"]


def write_peer_result(folder, benchmark, seed, test, validation_rmse, seconds):
    result = {"benchmark": benchmark, "peer": "subnet", "seed": seed, "unit": "V", "n_initial": 50,
              "test": test, "validation": 2 * validation_rmse, "validation_rmse": validation_rmse,
              "iterations": 900, "seconds": seconds, "deepsi_version": "0.4.4",
              "command": f"python benchmarks/peers/subnet.py --benchmarks {benchmark}"}  # fmt: skip
    path = folder / benchmark / f"subnet_seed{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))


@BACKEND_INDEPENDENT
def test_benchmarks_name_zoo_plants_beside_the_measured_ones(capsys):
    suite = load_suite()
    args = suite.parse_args(["--benchmarks", "emps", "zoo:duffing", "zoo:two-mass-drive"])
    assert args.benchmarks == ["emps", "zoo:duffing", "zoo:two_mass_drive"]
    assert suite.result_path("out", "zoo:duffing", "jax", 1) == os.path.join(
        "out", "zoo_duffing", "jax_seed1.json"
    )
    with pytest.raises(SystemExit):
        suite.parse_args(["--benchmarks", "zoo:silverbox"])
    assert "unknown benchmark 'zoo:silverbox'; expected one of" in capsys.readouterr().err


@BACKEND_INDEPENDENT
def test_zoo_data_has_the_fixed_data_seed_whatever_the_run_seed():
    suite = load_suite()
    data, plant = suite.load_data(suite.parse_args([]), "zoo:overflowing_tanks")
    reference = zoo_plant("overflowing_tanks", seed=suite.ZOO_DATA_SEED)
    assert data is plant.data and plant.beyond_start == reference.beyond_start
    np.testing.assert_array_equal(data.test.y, reference.data.test.y)
    np.testing.assert_array_equal(plant.beyond.u, reference.beyond.u)


class _RampModel:
    """Simulates a record as its measured output plus a ramp (0 to 1) after ``y_initial``."""

    n_initial = None
    score = Identification.score
    resolve_n_initial = Identification.resolve_n_initial

    def __init__(self, records):
        self.records, self.given = records, []

    def simulate(self, u, y_initial=None):
        self.given.append(np.array(y_initial))
        y = next(r.y for r in self.records if np.array_equal(r.u, u)).copy()
        y += np.linspace(0.0, 1.0, len(u))[:, None]
        y[: len(y_initial)] = y_initial
        return y


@BACKEND_INDEPENDENT
def test_zoo_scores_split_the_beyond_record_at_its_start():
    suite = load_suite()
    plant = zoo_plant("duffing", n_samples=400, seed=3)
    model = _RampModel([plant.data.test, plant.beyond])
    n, start = 30, plant.beyond_start
    scores = suite.zoo_scores(model, plant, n)
    ramp = np.linspace(0.0, 1.0, 400)
    assert scores["within"] == pytest.approx(np.sqrt(np.mean(ramp[n:] ** 2)))
    assert scores["beyond_before"] == pytest.approx(np.sqrt(np.mean(ramp[n:start] ** 2)))
    assert scores["beyond_after"] == pytest.approx(np.sqrt(np.mean(ramp[start:] ** 2)))
    assert scores["ratio"] == pytest.approx(scores["beyond_after"] / scores["within"])
    np.testing.assert_array_equal(model.given[0], plant.beyond.y[:n])  # its own first n outputs
    with pytest.raises(ValueError, match="leaves its range at 320; expected more than 320"):
        suite.zoo_scores(model, plant, start)


def write_zoo_result(folder, plant, seed, within, before, after, config=None, runs=()):
    result = {"benchmark": f"zoo:{plant}", "backend": "jax", "seed": seed, "unit": "",
              "n_initial": 50, "test": within, "test_all": within, "seconds": 9.0, "chosen": 1,
              "restarts": 3, "population": True, "config": config or {}, "runs": list(runs),
              "zoo": {"within": within, "beyond_before": before, "beyond_after": after,
                      "ratio": after / within}}  # fmt: skip
    path = folder / f"zoo_{plant}" / f"jax_seed{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))


@BACKEND_INDEPENDENT
def test_report_puts_the_peer_rows_after_their_benchmark(tmp_path):
    suite, out, peers = load_suite(), tmp_path / "suite", tmp_path / "peers"
    write_result(out, 0, test=0.30, runs=[{"validation_rmse": 0.25}])
    write_result(out, 1, test=0.50, runs=[{"validation_rmse": 0.35}])
    write_peer_result(peers, "cascaded_tanks", 1, 0.70, 0.40, 70.0)
    write_peer_result(peers, "cascaded_tanks", 0, 0.60, 0.30, 66.0)
    write_peer_result(peers, "cascaded_tanks", 2, 0.90, 0.20, 68.0)
    write_peer_result(peers, "emps", 0, 5.0, 0.5, 200.0)
    floors = {"cascaded_tanks": {"arx": {"model": "ARX(2, 3)", "test": 0.55}, "reference": None}}
    lines = suite.report(str(out), str(peers), floors).splitlines()
    assert lines[2:] == [
        "| cascaded_tanks | jax | 0 1 | 0.3 / 0.5 V | 0.4 V | 0.5 V | 0.55 V | 0.4 V | 0.300 "
        "| 60 s |",
        "| cascaded_tanks | SUBNET (deepSI 0.4.4) | 0 1 2 | 0.6 / 0.7 / 0.9 V | 0.7 V | 0.9 V "
        "| 0.55 V | - | 0.300 | 68 s |",
        "| emps | SUBNET (deepSI 0.4.4) | 0 | 5 V | 5 V | 5 V | - | - | 0.500 | 200 s |",
    ]
    without = lines[2].replace("| 0.55 V |", "| - |")
    assert suite.report(str(out), None).splitlines()[2:] == [without]
    commands = suite.peer_commands(str(peers)).splitlines()
    assert commands[3:5] == [
        f"PYTHONPATH=$PWD peers-venv/bin/python benchmarks/peers/subnet.py --benchmarks {name}"
        for name in ("cascaded_tanks", "emps")
    ]
    assert suite.peer_commands(str(tmp_path / "none")) == ""


@BACKEND_INDEPENDENT
def test_tsfast_rows_are_labelled_by_version_and_time_cap(tmp_path):
    suite, peers = load_suite(), tmp_path / "peers"
    for seed, cap, test in ((0, None, 0.7), (1, None, 0.8), (0, 25.0, 0.5)):
        result = {"benchmark": "cascaded_tanks", "peer": "tsfast_gru", "seed": seed, "unit": "V",
                  "test": test, "validation_rmse": 0.9, "seconds": 25.0 if cap else 280.0,
                  "seconds_cap": cap, "tsfast_version": "0.5.0",
                  "command": "python benchmarks/peers/tsfast_gru.py --seeds 0"}  # fmt: skip
        name = f"tsfast_gru_seed{seed}" + ("_s25" if cap else "") + ".json"
        (peers / "cascaded_tanks").mkdir(parents=True, exist_ok=True)
        (peers / "cascaded_tanks" / name).write_text(json.dumps(result))
    write_peer_result(peers, "cascaded_tanks", 0, 0.60, 0.30, 66.0)
    groups = suite.load_peer_results(str(peers))
    assert sorted(label for _, label in groups) == [
        "SUBNET (deepSI 0.4.4)",
        "tsfast GRU (0.5.0, cut at 25 s)",
        "tsfast GRU (0.5.0, its 10 epochs)",
    ]
    assert [r["test"] for r in groups[("cascaded_tanks", "tsfast GRU (0.5.0, its 10 epochs)")]] == [
        0.7, 0.8
    ]  # fmt: skip
    commands = suite.peer_commands(str(peers))
    assert "PYTHONPATH=$PWD peers-tsfast-venv/bin/python benchmarks/peers/tsfast_gru.py" in commands
    assert "PYTHONPATH=$PWD peers-venv/bin/python benchmarks/peers/subnet.py" in commands


@BACKEND_INDEPENDENT
def test_sysidentpy_rows_have_no_seed_and_join_the_zoo_table(tmp_path):
    suite, out, peers = load_suite(), tmp_path / "suite", tmp_path / "peers"
    write_zoo_result(out, "duffing", 0, 0.1, 0.12, 0.4, runs=({}, {"validation_rmse": 0.3}))
    zoo = {"within": 0.01, "beyond_before": 0.02, "beyond_after": 0.5, "ratio": 50.0}
    for benchmark, unit, test, scores in (("cascaded_tanks", "V", 0.9, None),
                                          ("zoo:duffing", "", 0.01, zoo)):  # fmt: skip
        command = f"python benchmarks/peers/sysidentpy_narx.py --records {benchmark}"
        result = {"benchmark": benchmark, "peer": "sysidentpy_frols", "seed": None, "unit": unit,
                  "test": test, "validation_rmse": 0.2, "seconds": 30.0, "zoo": scores,
                  "sysidentpy_version": "0.9.0", "command": command}  # fmt: skip
        folder = peers / benchmark.replace(":", "_")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sysidentpy_frols.json").write_text(json.dumps(result))
    row = "| cascaded_tanks | SysIdentPy FROLS (0.9.0) | - | 0.9 V | 0.9 V | 0.9 V | - | - |"
    assert row + " 0.200 | 30 s |" in suite.report(str(out), str(peers)).splitlines()
    lines = suite.zoo_table(str(out), None, str(peers)).splitlines()
    assert [line.split(" | ")[:3] for line in lines[2:]] == [
        ["| duffing", "jax", "0"], ["| duffing", "SysIdentPy FROLS (0.9.0)", "-"]
    ]  # fmt: skip
    assert lines[3].endswith("| 0.5 (median 0.5) | 50 (median 50) | - | - |")
    environment = "PYTHONPATH=$PWD ../peers-sysidentpy-venv/bin/"
    assert environment + command in suite.peer_commands(str(peers))


@BACKEND_INDEPENDENT
def test_zoo_table_gives_each_seed_and_the_medians(tmp_path):
    suite = load_suite()
    write_result(tmp_path, 0)  # a measured benchmark: not in the zoo table
    write_zoo_result(tmp_path, "duffing", 0, 0.1, 0.12, 0.4)
    write_zoo_result(tmp_path, "duffing", 1, 0.3, 0.32, 0.6)
    write_zoo_result(tmp_path, "bouc_wen", 0, 2.0, 2.5, 10.0)
    write_zoo_result(tmp_path, "bouc_wen", 1, 2.0, 2.5, 10.0, config={"units": [8]})
    floors = {
        "zoo:duffing": {
            "arx": {"model": "ARX(8, 9)", "within": 0.28, "beyond_after": 1.25},
            "reference": {"model": "cubic NARX (na=8)", "within": 0.006, "beyond_after": 0.67},
        },
        "zoo:bouc_wen": {"arx": {"model": "ARX(8, 9)", "within": 2.0, "beyond_after": 9.0},
                         "reference": None},
    }  # fmt: skip
    lines = suite.zoo_table(str(tmp_path), floors).splitlines()
    assert lines[2:] == [
        "| bouc_wen | jax | 0 1 | 2 / 2 (median 2) | 2.5 / 2.5 (median 2.5) | "
        "10 / 10 (median 10) | 5 / 5 (median 5) | ARX(8, 9) 2 / 9 | none |",
        "| duffing | jax | 0 1 | 0.1 / 0.3 (median 0.2) | 0.12 / 0.32 (median 0.22) | "
        "0.4 / 0.6 (median 0.5) | 4 / 2 (median 3) | ARX(8, 9) 0.28 / 1.25 | "
        "cubic NARX (na=8) 0.006 / 0.67 |",
    ]
    assert suite.zoo_table(str(tmp_path)).splitlines()[2].endswith("| 5 / 5 (median 5) | - | - |")
    folder = os.path.relpath(tmp_path, ROOT)
    assert suite.zoo_commands(str(tmp_path)) == [
        "python benchmarks/sysid_suite.py --backend jax --benchmarks zoo:bouc_wen --seeds 1 "
        f"--restarts 3 --config '{{\"units\": [8]}}' --out {folder}",
        "python benchmarks/sysid_suite.py --backend jax --benchmarks zoo:bouc_wen --seeds 0 "
        f"--restarts 3 --out {folder}",
        "python benchmarks/sysid_suite.py --backend jax --benchmarks zoo:duffing --seeds 0 1 "
        f"--restarts 3 --out {folder}",
    ]


@BACKEND_INDEPENDENT
def test_zoo_commands_give_each_config_its_own_line(tmp_path):
    suite = load_suite()
    write_zoo_result(tmp_path, "duffing", 0, 0.1, 0.1, 0.2, config={"linear_prior": True})
    assert suite.zoo_commands(str(tmp_path))[0].endswith(
        """--restarts 3 --config '{"linear_prior": true}' --out """
        + os.path.relpath(tmp_path, ROOT)
    )


@END_TO_END
def test_a_zoo_run_scores_every_restart_within_and_beyond(monkeypatch):
    """Two restarts of 4 iterations on 400 samples, of the network and the linear class (each
    class's graphs cost compiling time; the recipe's tests try every class)."""
    suite = load_suite()
    plant = zoo_plant("duffing", n_samples=400)
    monkeypatch.setattr(suite, "load_data", lambda args, benchmark: (plant.data, plant))
    identified = []

    def identify(*args, **kwargs):
        identified.append(sysid_identify(*args, **kwargs))
        return identified[-1]

    sysid_identify = suite.sysid_identify
    monkeypatch.setattr(suite, "sysid_identify", identify)
    config = '{"units": [4], "iterations": 4, "steps_per_epoch": 2, "validation_checks": 2, ' \
        '"model_classes": ["network", "linear"]}'  # fmt: skip
    args = suite.parse_args(["--benchmarks", "zoo:duffing", "--restarts", "2", "--config", config])
    result = suite.run_one(args, "zoo:duffing", 5)
    found, n, start = identified[0], suite.ZOO_N_INITIAL, plant.beyond_start
    assert result["n_initial"] == n and result["unit"] == "" and result["data_seed"] == 0
    assert result["structure"] == found.runs[found.best].structure
    assert result["members"] == list(found.members)
    # The top-level scores are the kept model's (the runs it averages), each run's its own.
    kept = [(result, found)] + [(run, found.run_alone(k)) for k, run in enumerate(result["runs"])]
    for scores, model in kept:
        y_sim = model.simulate(plant.beyond.u, plant.beyond.y[:n])
        after = np.sqrt(np.mean((plant.beyond.y[start:] - y_sim[start:]) ** 2))
        assert scores["zoo"]["beyond_after"] == pytest.approx(after)
        assert scores["zoo"]["within"] == pytest.approx(scores["test"])


@BACKEND_INDEPENDENT
def test_zoo_runs_table_gives_every_restart_within_and_beyond(tmp_path):
    suite = load_suite()
    runs = [
        {"structure": "network", "seed": 4, "zoo": {"within": 0.2, "beyond_after": 3.0}},
        {"structure": "linear+network", "seed": 4, "zoo": {"within": 0.1, "beyond_after": 0.5}},
    ]
    write_zoo_result(tmp_path, "duffing", 4, 0.1, 0.1, 0.5, runs=runs)
    lines = suite.zoo_runs_table(str(tmp_path)).splitlines()
    row = "| duffing | jax | 4 | network (4) 0.2 / 3 ; *linear+network (4) 0.1 / 0.5 |"
    assert lines[2:] == [row]


@BACKEND_INDEPENDENT
def test_the_linear_model_alone_is_scored_on_the_zoo_records_from_its_first_output():
    suite = load_suite()
    plant = zoo_plant("two_mass_drive", n_samples=600)
    norm = Normalizer.fit(plant.data.estimation)
    est, val = norm.transform(plant.data.estimation), norm.transform(plant.data.validation)
    model, _ = select_linear_model(est, val)
    scores = suite.zoo_scores(suite.suite_zoo.LinearAlone(model, norm), plant, 40)
    beyond, start = norm.transform(plant.beyond), plant.beyond_start
    y_sim = model.simulate(beyond.u, beyond.y[0]) * norm.y_std + norm.y_mean  # at rest at y[0]
    error = plant.beyond.y - y_sim
    assert scores["beyond_before"] == pytest.approx(np.sqrt(np.mean(error[40:start] ** 2)))
    assert scores["beyond_after"] == pytest.approx(np.sqrt(np.mean(error[start:] ** 2)))


@BACKEND_INDEPENDENT
def test_each_result_records_the_command_that_makes_it_again():
    suite = load_suite()
    out = os.path.join(ROOT, "benchmarks", "x")
    worker = ["--worker", "wh2009", "1", "--restarts", "32", "--config", '{"effort": 4}',
              "--data-root", suite.DEFAULT_ROOT, "--out", out]  # fmt: skip
    command = suite.reproducing_command(suite.parse_args(worker), "wh2009", "torch", 1)
    assert command == (
        "python benchmarks/sysid_suite.py --backend torch --benchmarks wh2009 --seeds 1 "
        "--restarts 32 --config '{\"effort\": 4}' --out benchmarks/x"
    )
    # Defaults are left out; a data folder outside the project stays as given.
    defaults = suite.parse_args(["--worker", "emps", "0", "--data-root", "/elsewhere/data"])
    assert suite.reproducing_command(defaults, "emps", "jax", 0) == (
        "python benchmarks/sysid_suite.py --backend jax --benchmarks emps --seeds 0 "
        "--data-root /elsewhere/data"
    )
    # Zoo plants are generated, so no data folder is named for them.
    zoo = suite.parse_args(["--worker", "zoo:duffing", "0", "--data-root", "/elsewhere/data"])
    assert "--data-root" not in suite.reproducing_command(zoo, "zoo:duffing", "jax", 0)


@BACKEND_INDEPENDENT
def test_own_class_references_beat_the_arx_floor_by_a_clear_factor():
    """Least squares only (no training): the cubic NARX on the hardening oscillator, the
    NARX in sin(theta) on the pendulum and the cubic NARX with cross terms on the Van der Pol
    oscillator, scored like a run, against the ARX floor."""
    suite = load_suite()
    for name, label in (
        ("hardening_oscillator", "cubic NARX"),
        ("pendulum", "sine NARX"),
        ("van_der_pol", "cubic NARX with cross terms"),
    ):
        plant = zoo_plant(name, seed=suite.ZOO_DATA_SEED)
        floors = suite.floors(plant.data, plant)
        arx, own = floors["arx"], floors["reference"]
        assert own["model"].startswith(label + " (na=")
        assert arx["test"] == arx["within"] and own["test"] == own["within"]
        assert own["within"] < arx["within"] / 5
        assert own["beyond_before"] < arx["beyond_before"] / 5
        # The ARX floor is the model of --linear, scored on the records of the run.
        model, norm, _, test = suite.linear_on_test(plant.data)
        if model is not None:
            assert arx["model"] == f"ARX{model.orders}" and arx["test"] == pytest.approx(test)
    # Bent this far, no ARX order explains the hardening oscillator's validation record:
    # the floor is the best order all the same, marked.
    hardening = suite.floors(*suite.load_data(suite.parse_args([]), "zoo:hardening_oscillator"))
    assert hardening["arx"]["model"].endswith(", rejected")
    assert hardening["arx"]["within"] > 0.2 * zoo_plant("hardening_oscillator").data.test.y.std()


@BACKEND_INDEPENDENT
def test_floors_option_prints_each_plants_floors(capsys):
    suite = load_suite()
    assert suite.main(["--floors", "pendulum"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| pendulum")]
    plant = zoo_plant("pendulum", seed=suite.ZOO_DATA_SEED)
    floors = suite.floors(plant.data, plant)
    assert [row.split("|")[2].strip() for row in rows] == ["ARX", "own class"]
    assert f"{floors['reference']['within']:.3g}" in rows[1]


@BACKEND_INDEPENDENT
def test_floors_of_a_plant_without_its_own_class_and_of_a_measured_record():
    suite = load_suite()
    plant = zoo_plant("two_mass_drive", n_samples=600)
    floors = suite.floors(plant.data, plant)
    assert floors["reference"] is None
    assert set(floors["arx"]) == {"model", "test", "within", "beyond_before", "beyond_after",
                                  "ratio", "beyond_start", "beyond_factor"}  # fmt: skip
    measured = suite.floors(plant.data)  # no plant: the protocol's test score alone
    assert measured["reference"] is None and set(measured["arx"]) == {"model", "test"}
    assert measured["arx"]["test"] == pytest.approx(floors["arx"]["within"])
    table = suite.suite_zoo.floors_table({"two_mass_drive": floors}).splitlines()
    assert table[2].startswith(f"| two_mass_drive | ARX | {floors['arx']['model']} | ")
    assert table[3] == "| two_mass_drive | own class | none | - | - | - | - |"
