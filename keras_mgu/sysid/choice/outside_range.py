"""What the chosen model does outside its estimation range, and the evidence it was kept on.

Each class has one behaviour where its signals leave the range of the
estimation record:

* NARX and the loop fade to their ARX model (the ``anchor``) as a regressor
  leaves its range (:mod:`~keras_mgu.sysid.models.loop_cell`);
* the polynomial class follows its own polynomial;
* the network classes follow their network (and linear model), unclipped;
* the linear class and the ARX model extrapolate as the linear models they are.

The evidence: the chosen run's error on the validation samples at the
estimation record's edges beside the least-squares ARX model's
(:mod:`~keras_mgu.sysid.judging.edges`; with ``RecipeConfig(edge_guard=True)``
a nonlinear run that errs more there is not kept), and that its free runs
stayed inside the output box (:mod:`~keras_mgu.sysid.choice.runoff`; a run
that leaves it is not kept).
:func:`outside_range` gives both for ``results.json``,
:func:`describe_outside_range` in a line for the report.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BEHAVIOURS", "describe_outside_range", "outside_range"]

#: Each class's behaviour outside its estimation range, in words.
BEHAVIOURS = {
    "narx": "fades to its ARX model as a regressor leaves the range it spans over the "
    "estimation record",
    "loop": "fades to its ARX model as a regressor leaves the range it spans over the "
    "estimation record",
    "polynomial": "follows its own polynomial",
    "network": "follows its network, unclipped",
    "linear+network": "follows its linear model plus its network's correction, unclipped",
    "linear": "extrapolates as the linear model it is",
}


def outside_range(found: Any) -> dict[str, Any]:
    """The chosen class, its behaviour outside the range and the evidence, as plain values.

    ``{"class", "behaviour", "edge"}``: ``edge`` is the chosen run's
    :meth:`~keras_mgu.sysid.judging.edges.EdgeCheck.to_dict` (None where it was
    not checked: no ARX model, or a model read from a file).
    """
    run = found.runs[found.best]
    edge = getattr(run, "edge", None)
    return {
        "class": run.structure,
        "behaviour": BEHAVIOURS.get(run.structure, "follows its own law"),
        "edge": None if edge is None else edge.to_dict(),
    }


def describe_outside_range(found: Any) -> str:
    """:func:`outside_range` in a line of the report."""
    entry, run = outside_range(found), found.runs[found.best]
    line = f"outside the estimation range: the chosen {entry['class']} {entry['behaviour']}"
    edge = run.edge
    if edge is None or not edge.samples:
        return line + "; no edge samples on validation to judge it by"
    if not edge.decides:
        verdict = "too few samples to decide"
    elif not edge.worse:
        verdict = "at most the ARX model's"
    elif entry["class"] == "linear":
        verdict = "a linear model, not held to it"
    elif not getattr(run.config, "edge_guard", False):
        verdict = "above it (reported; RecipeConfig(edge_guard=True) keeps such runs out)"
    else:
        verdict = "above it, kept only because no run of the class tried is below it"
    return f"{line}; {edge.describe()}: {verdict}"
