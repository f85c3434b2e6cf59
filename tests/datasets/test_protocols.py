"""Tests of keras_mgu.datasets.protocols and SysIdData.protocol."""

from __future__ import annotations

import ast
import dataclasses
import os
import re

import numpy as np
import pytest

from keras_mgu.datasets import (
    NONLINEAR_BENCHMARKS_VERSION,
    PROTOCOLS,
    Protocol,
    Record,
    SysIdData,
    get_protocol,
)
from keras_mgu.datasets import protocols as protocols_module
from tests.helpers import BACKEND_INDEPENDENT

pytestmark = BACKEND_INDEPENDENT


def _protocol(**changes) -> Protocol:
    return dataclasses.replace(PROTOCOLS["wh2009"], **changes)


# --------------------------------------------------------------------------- the table


@pytest.mark.parametrize(
    "name, n_initial, previous, unit, scale, sampling_time, same_state",
    [
        ("cascaded_tanks", 50, 5, "V", 1.0, 4.0, True),
        ("wh2009", 50, None, "mV", 1000.0, 1 / 51200, False),
        ("emps", 20, None, "mm", 1000.0, 0.001, False),
        ("silverbox", 50, None, "mV", 1000.0, 1 / 610.35, False),
        ("ced", 10, 4, "", 1.0, 0.02, False),
    ],
)
def test_table_entries(name, n_initial, previous, unit, scale, sampling_time, same_state):
    """``n_initial`` as in nonlinear-benchmarks 1.0.1; ``previous_n_initial`` as up to 1.0.0."""
    assert NONLINEAR_BENCHMARKS_VERSION == "1.0.1"
    p = get_protocol(name)
    assert p is PROTOCOLS[name] and p.name == name
    assert (p.n_initial, p.previous_n_initial) == (n_initial, previous)
    assert (p.unit, p.scale) == (unit, scale)
    assert p.same_initial_state is same_state
    assert p.sampling_time == pytest.approx(sampling_time, rel=1e-12)
    assert p.estimation and p.test


def test_wh2009_splits_and_published_values():
    p = PROTOCOLS["wh2009"]
    assert p.estimation == "samples 5200:105200" and p.test == "samples 105200:184000"
    assert min(v for _, v in p.published) == 0.241
    assert "DATA_EMPS.csv" in PROTOCOLS["emps"].estimation
    assert "DATA_EMPS_PULSES.csv" in PROTOCOLS["emps"].test
    assert PROTOCOLS["ced"].published == ()


def test_get_protocol_reads_hyphens_as_underscores():
    assert get_protocol("cascaded-tanks") is get_protocol("cascaded_tanks")


def test_get_protocol_unknown_name():
    with pytest.raises(ValueError, match=r"Unknown benchmark protocol 'f16'.*'cascaded_tanks'"):
        get_protocol("f16")
    with pytest.raises(ValueError, match="expected one of"):
        get_protocol(None)


def test_score_in_unit_and_frozen():
    assert PROTOCOLS["wh2009"].score_in_unit(0.000241) == pytest.approx(0.241)
    assert PROTOCOLS["cascaded_tanks"].score_in_unit(0.5) == 0.5
    assert isinstance(PROTOCOLS["emps"].score_in_unit(np.float32(0.002)), float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROTOCOLS["wh2009"].n_initial = 3


@pytest.mark.parametrize(
    "changes, error, match",
    [
        ({"n_initial": -1}, ValueError, "n_initial.*>= 0"),
        ({"n_initial": 2.0}, TypeError, "n_initial.*int"),
        ({"n_initial": True}, TypeError, "n_initial.*int"),
        ({"previous_n_initial": -5}, ValueError, "previous_n_initial.*None or an int >= 0"),
        ({"previous_n_initial": 5.0}, ValueError, "previous_n_initial"),
        ({"scale": 0.0}, ValueError, "scale.*positive"),
        ({"sampling_time": float("nan")}, ValueError, "sampling_time.*positive"),
        ({"name": ""}, ValueError, "name"),
    ],
)
def test_protocol_validation(changes, error, match):
    with pytest.raises(error, match=match):
        _protocol(**changes)


def test_protocol_normalises_published():
    p = _protocol(published=[("a", 1), ("b", np.float64(0.5))])
    assert p.published == (("a", 1.0), ("b", 0.5))
    assert all(type(v) is float for _, v in p.published)


def test_protocols_module_imports_nothing_from_the_package():
    """records.py imports protocols.py, so protocols.py must not import the package."""
    tree = ast.parse(open(protocols_module.__file__, encoding="utf-8").read())
    modules = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    modules += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert modules and not [m for m in modules if m.startswith("keras_mgu")]


# --------------------------------------------------------------------------- against the READMEs

# How each README writes the sampling time the table gives.
_SAMPLING_TEXT = {
    "cascaded_tanks": lambda ts: f"Ts = {ts:g} s",
    "wh2009": lambda ts: f"{1 / ts:g} Hz",
    "emps": lambda ts: f"{1000 * ts:g} ms",
}


def _readme(shared_data_dir, name) -> str:
    path = os.path.join(shared_data_dir, name, "README.md")
    if not os.path.isfile(path):
        pytest.skip(f"the {name} README is not beside this checkout")
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("name", sorted(_SAMPLING_TEXT))
def test_table_matches_readme(shared_data_dir, name):
    text = _readme(shared_data_dir, name)
    p = PROTOCOLS[name]
    assert re.search(r"\bn = (\d+)", text).group(1) == str(p.n_initial)
    assert _SAMPLING_TEXT[name](p.sampling_time) in text
    # The split: sample ranges, file names or column names the description gives.
    for split in (p.estimation, p.test):
        tokens = re.findall(r"\d+:\d+|DATA_\w+\.csv|\b[uy](?:Est|Val)\b", split)
        assert tokens, split
        for token in tokens:
            assert token in text, (token, split)
    # Every published figure, and at least one of them followed by the unit.
    assert p.published
    for _, value in p.published:
        assert re.search(rf"(?<![\d.]){re.escape(f'{value:g}')}(?![\d])", text), value
    unit = re.escape(p.unit)
    assert any(re.search(rf"{re.escape(f'{v:g}')} {unit}\b", text) for _, v in p.published)
    assert ("same unknown initial state" in text) == p.same_initial_state


def test_readme_score_units(shared_data_dir):
    for name in ("wh2009", "emps"):
        text = _readme(shared_data_dir, name)
        assert f"RMSE of y - y_sim in **{PROTOCOLS[name].unit}**" in text


# --------------------------------------------------------------------------- SysIdData.protocol


def _records():
    rec = Record(np.zeros((6, 1)), np.ones((6, 1)), ts=0.5)
    return rec, rec.slice(0, 3), rec


def test_sysid_data_protocol_default_and_n_initial():
    plain = SysIdData(*_records())
    assert plain.protocol is None and plain.n_initial is None
    tagged = SysIdData(*_records(), protocol=PROTOCOLS["emps"])
    assert tagged.protocol is PROTOCOLS["emps"] and tagged.n_initial == 20
    again = dataclasses.replace(tagged, protocol=_protocol(n_initial=7))
    assert again.n_initial == 7 and again.protocol.name == "wh2009"


@pytest.mark.parametrize("bad", ["wh2009", 50, {"n_initial": 5}])
def test_sysid_data_rejects_non_protocol(bad):
    with pytest.raises(TypeError, match="`protocol` must be a Protocol or None"):
        SysIdData(*_records(), protocol=bad)
