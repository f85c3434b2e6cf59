"""The polynomial NARX model's equation in words: its regressors' and terms' names, its lines.

A term is an index triple into ``[r_t, 1]`` (the regressors of
:func:`~keras_mgu.sysid.models.polynomial.lag_regressors`, then the constant
one): :func:`regressor_names` names ``r_t`` in its order (``y(k-1)``,
``u(k)``), :func:`term_name` a term over them (``y(k-1)^2 u(k)``), and
:func:`describe_polynomial` writes a model's equation, each output's terms
with their coefficients and error reduction ratios, in the standardised
signals it was fitted in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["describe_polynomial", "regressor_names", "term_name"]


def regressor_names(
    input_names: Sequence[str], output_names: Sequence[str], na: int, nb: int
) -> list[str]:
    """Names of the regressors ``r_t`` in their order, e.g. ``y(k-1)``, ``u(k)``."""
    names = [f"{o}(k-{j})" for j in range(1, na + 1) for o in output_names]
    names += [f"{i}(k-{j})" for j in range(1, nb) for i in input_names]
    return names + [f"{i}(k)" for i in input_names]


def term_name(term: Sequence[int], names: Sequence[str]) -> str:
    """``"y(k-1)^2 u(k)"`` for a term's index triple over ``names`` (the constant: ``"1"``)."""
    counts: dict[int, int] = {}
    for i in term:
        if i < len(names):
            counts[int(i)] = counts.get(int(i), 0) + 1
    if not counts:
        return "1"
    return " ".join(names[i] + (f"^{p}" if p > 1 else "") for i, p in sorted(counts.items()))


def describe_polynomial(
    model: Any,
    input_names: Sequence[str],
    output_names: Sequence[str],
    scaling: Any = None,
) -> str:
    """The model's equation as lines: each output's terms, coefficient and ERR, in the order chosen.

    ``model``: a :class:`~keras_mgu.sysid.models.polynomial.PolynomialNarx`.
    ``scaling``: the :class:`~keras_mgu.datasets.Normalizer` whose standardised
    signals the terms are in (its means and deviations are printed).
    """
    inputs, outputs = model.channel_names(input_names, output_names)
    lines = [
        f"polynomial NARX: na={model.na}, nb={model.nb}, degree <= {model.degree}, "
        f"{len(model.terms)} terms; in standardised signals, x~ = (x - mean) / std:"
    ]
    if scaling is not None:
        stats = zip(
            [*inputs, *outputs],
            [*scaling.u_mean, *scaling.y_mean],
            [*scaling.u_std, *scaling.y_std],
        )
        lines.append("  " + ", ".join(f"{n}: mean {m:.6g}, std {s:.6g}" for n, m, s in stats))
    rows = model.term_table(inputs, outputs)
    for output in outputs:
        mine = [row for row in rows if row["output"] == output]
        lines.append(f"  {output}~(k) = sum of {len(mine)} terms:   coefficient   ERR")
        lines += [
            f"    {row['term']:<40} {row['coefficient']:+.6e}  {row['err']:.3e}" for row in mine
        ]
    return "\n".join(lines)
