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
