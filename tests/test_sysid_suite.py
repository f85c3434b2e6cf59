"""benchmarks/sysid_suite.py's report of the scores from the protocol's n and its previous n."""

import importlib.util
import json
import os

from tests.helpers import BACKEND_INDEPENDENT

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def load_suite():
    path = os.path.join(ROOT, "benchmarks", "sysid_suite.py")
    spec = importlib.util.spec_from_file_location("sysid_suite", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
def test_report_puts_the_peer_rows_after_their_benchmark(tmp_path):
    suite, out, peers = load_suite(), tmp_path / "suite", tmp_path / "peers"
    write_result(out, 0, test=0.30, runs=[{"validation_rmse": 0.25}])
    write_result(out, 1, test=0.50, runs=[{"validation_rmse": 0.35}])
    write_peer_result(peers, "cascaded_tanks", 1, 0.70, 0.40, 70.0)
    write_peer_result(peers, "cascaded_tanks", 0, 0.60, 0.30, 66.0)
    write_peer_result(peers, "cascaded_tanks", 2, 0.90, 0.20, 68.0)
    write_peer_result(peers, "emps", 0, 5.0, 0.5, 200.0)
    lines = suite.report(str(out), str(peers)).splitlines()
    assert lines[2:] == [
        "| cascaded_tanks | jax | 0 1 | 0.3 / 0.5 V | 0.4 V | 0.5 V | 0.4 V | 0.300 | 60 s |",
        "| cascaded_tanks | SUBNET (deepSI 0.4.4) | 0 1 2 | 0.6 / 0.7 / 0.9 V | 0.7 V | 0.9 V "
        "| - | 0.300 | 68 s |",
        "| emps | SUBNET (deepSI 0.4.4) | 0 | 5 V | 5 V | 5 V | - | 0.500 | 200 s |",
    ]
    assert suite.report(str(out), None).splitlines()[2:] == lines[2:3]
    commands = suite.peer_commands(str(peers)).splitlines()
    assert commands[3:5] == [
        "PYTHONPATH=$PWD /work/peers-venv/bin/python benchmarks/peers/subnet.py --benchmarks "
        f"{name}"
        for name in ("cascaded_tanks", "emps")
    ]
    assert suite.peer_commands(str(tmp_path / "none")) == ""
