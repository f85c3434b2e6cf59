"""What the chosen class does outside its range, and the evidence, in words and numbers."""

import types

import pytest

from keras_mgu.sysid.choice.outside_range import (
    BEHAVIOURS,
    describe_outside_range,
    outside_range,
)
from keras_mgu.sysid.judging.edges import MIN_EDGE_SAMPLES, EdgeCheck
from tests.helpers import BACKEND_INDEPENDENT


def _found(structure, edge, guard=True):
    config = types.SimpleNamespace(edge_guard=guard)
    run = types.SimpleNamespace(structure=structure, edge=edge, config=config)
    return types.SimpleNamespace(runs=[types.SimpleNamespace(), run], best=1)


@BACKEND_INDEPENDENT
@pytest.mark.parametrize(
    "structure, edge, verdict",
    [
        ("narx", EdgeCheck(40, 0.1, 0.2), "at most the ARX model's"),
        ("polynomial", EdgeCheck(MIN_EDGE_SAMPLES - 1, 0.3, 0.2), "too few samples to decide"),
        ("linear", EdgeCheck(40, 0.3, 0.2), "a linear model, not held to it"),
        ("loop", EdgeCheck(40, 0.3, 0.2), "above it, kept only because no run"),
        ("network", EdgeCheck(40, 0.3, 0.2), "above it (reported; RecipeConfig(edge_guard=True)"),
    ],
)
def test_the_line_gives_the_behaviour_the_figures_and_the_verdict(structure, edge, verdict):
    found = _found(structure, edge, guard=structure != "network")
    line = describe_outside_range(found)
    assert line.startswith(f"outside the estimation range: the chosen {structure} ")
    assert BEHAVIOURS[structure] in line and verdict in line
    assert f"edge RMSE {edge.rmse:.4f} against the ARX model's {edge.linear_rmse:.4f}" in line
    entry = outside_range(found)
    assert entry == {
        "class": structure,
        "behaviour": BEHAVIOURS[structure],
        "edge": {"samples": edge.samples, "rmse": edge.rmse, "linear_rmse": edge.linear_rmse,
                 "worse": edge.worse},
    }  # fmt: skip


@BACKEND_INDEPENDENT
def test_without_edge_samples_it_says_so():
    assert describe_outside_range(_found("network", None)).endswith(
        "no edge samples on validation to judge it by"
    )
    assert outside_range(_found("network", None))["edge"] is None
