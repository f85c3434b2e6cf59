"""Why ``FusedRNN`` and ``keras.layers.RNN`` train at the same speed on JAX.

Both run a cell through one ``jax.lax.scan``; this script compiles the gradient
of ``sum(outputs**2)`` with respect to the layer's weights for each, on the
cells of ``examples/custom_cells.py``, and prints the size of the two compiled
XLA programs (while loops, instructions, fusions) and whether the programs
given to XLA are the same line for line (names and source locations aside).
The same program means equal speed is the expected result.

Usage::

    KERAS_BACKEND=jax python benchmarks/custom_cells_jax_program.py --shape S
"""

from __future__ import annotations

import argparse
import os
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.custom_cells import SHAPES, _cells_module  # noqa: E402


def programs(layer, x) -> tuple[list[str], tuple[int, int, int]]:
    """The gradient of ``sum(layer(x)**2)`` for ``layer``'s weights.

    Returns the HLO lines given to XLA, with instruction names and source
    locations removed, and (while loops, instructions, fusions) of the
    compiled program.
    """
    import jax
    import jax.numpy as jnp

    weights = [v.value for v in layer.trainable_variables]

    def loss(weights):
        outputs, _ = layer.stateless_call(weights, [], x)
        return jnp.sum(outputs * outputs)

    lowered = jax.jit(jax.grad(loss)).lower(weights)
    given = re.sub(r"metadata=\{[^}]*\}", "", lowered.as_text(dialect="hlo"))
    given = re.sub(r"[%\w.\-]+\.\d+", "N", given)
    compiled = lowered.compile().as_text()
    size = (
        len(re.findall(r"\bwhile\(", compiled)),
        len(re.findall(r"^\s+\S+ = ", compiled, re.M)),
        len(re.findall(r"fusion\(", compiled)),
    )
    return [line.strip() for line in given.splitlines()], size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="S", choices=list(SHAPES))
    args = parser.parse_args(argv)
    import keras

    import keras_mgu

    if keras.backend.backend() != "jax":
        raise SystemExit("this compares JAX programs: set KERAS_BACKEND=jax")
    cells = _cells_module()
    batch, steps, features, units = SHAPES[args.shape]
    x = np.random.default_rng(0).standard_normal((batch, steps, features)).astype("float32")
    header = "FusedRNN: while loops / instructions / fusions | RNN: the same | same program"
    print(f"| cell | {header} |")
    print("|---|---|---|---|")
    for name in cells.CUSTOM_CELLS:
        lines, sizes = [], []
        for wrapper in (keras_mgu.FusedRNN, keras.layers.RNN):
            layer = wrapper(cells.CUSTOM_CELLS[name](units), return_sequences=True)
            layer.build((batch, steps, features))
            given, size = programs(layer, x)
            lines.append(given)
            sizes.append(" / ".join(map(str, size)))
        same = "yes" if lines[0] == lines[1] else "no"
        print(f"| {name} | {sizes[0]} | {sizes[1]} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
