"""Where a training step of a user cell spends its time on TensorFlow: ``FusedRNN`` by part.

For each cell and shape of ``benchmarks/custom_cells.py`` (default: the GRU at
S and the peephole LSTM at M), one process builds the models and times, in
interleaved rounds (so that load changes on the machine hit all parts alike):

* ``forward loop``: the fused engine's XLA forward loop alone (outputs, final
  carry and the saved carries);
* ``reverse loop``: the backward loop of per-step VJPs alone;
* ``rows VJP``: the after-loop VJP of ``step`` over all ``T * B`` rows alone;
* ``layer fwd``: the ``FusedRNN`` layer's call in a ``tf.function``;
* ``layer fwd+bwd``: the layer's call and its gradients with respect to its
  weights (a ``GradientTape`` on the layer alone, in a ``tf.function``);
* ``train step``: ``model.train_on_batch`` of ``Input -> rnn -> Dense(1)``
  (Adam, MSE), as in the benchmark;
* ``Dense-only train step``: the same model without the recurrent layer
  (Keras's own overhead per step);
* the same ``layer fwd``, ``layer fwd+bwd`` and ``train step`` for
  ``keras.layers.RNN`` on the same cell (the cell-loop baseline).

``--settings`` profiles the fused layer under several settings of the
TensorFlow engine side by side, e.g. ``hoist=1 hoist=0`` (``HOIST_PROJECTION``:
the projection hoisted out of the loop or inside each step) or ``loopw=1``
(``LOOP_WEIGHT_GRADIENTS``: the weight gradients summed inside the reverse
loop, ``reverse loop, weight gradients in it``, instead of the ``rows VJP``);
by default the engine's own choice runs.

Usage::

    KERAS_BACKEND=tensorflow python benchmarks/custom_cells_profile.py
    KERAS_BACKEND=tensorflow python benchmarks/custom_cells_profile.py --cases GRU:S LSTM:M LSTM:S

Median and minimum milliseconds per call over ``--repeats`` rounds are printed
as a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.custom_cells import SHAPES, _cells_module  # noqa: E402


def _parts(cell_name: str, shape: tuple, settings: dict, cells) -> dict:
    """``{part name: zero-argument callable}`` for one cell, shape and engine settings."""
    import keras
    import tensorflow as tf

    import keras_mgu
    from keras_mgu.fused.engines import tensorflow as engine

    batch, steps, features, units = shape
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((batch, steps, features)).astype("float32"))
    y = tf.constant(rng.standard_normal((batch, steps, 1)).astype("float32"))
    saved = {name: getattr(engine, name) for name in settings}
    for name, value in settings.items():
        setattr(engine, name, value)
    tag = f" ({_describe(settings)})" if settings else ""
    try:
        keras.utils.set_random_seed(0)
        layer = keras_mgu.FusedRNN(cells.CUSTOM_CELLS[cell_name](units), return_sequences=True)
        model = keras.Sequential([keras.Input((steps, features)), layer, keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
        parts = _layer_parts(layer, model, x, y, "FusedRNN", tag)

        # The engine's compiled pieces, on the inputs the layer gives them.
        cell = layer.cell
        do_hoist = engine.hoist_projection(cell)
        step = layer._step_function(False, project=not do_hoist)
        compiled = engine._compiled(step)
        p = engine._time_major(cell.project_inputs(x) if do_hoist else x)
        carry = [tf.zeros((batch, s)) for s in np.atleast_1d(cell.state_size)]
        weights = [tf.convert_to_tensor(v.value) for v in cell.variables]
        outputs, final, prev = compiled["forward"](p, None, carry, weights)
        d_out = tf.ones_like(outputs)
        d_final = [tf.zeros_like(f) for f in final]
        reverse = tf.function(
            lambda *a: engine._reverse_loop(step, *a), jit_compile=True, autograph=False
        )
        rows = tf.function(lambda *a: engine._rows_vjp(step, *a), jit_compile=True, autograph=False)
        whole = tf.function(
            lambda *a: engine._reverse_loop_all(step, *a), jit_compile=True, autograph=False
        )
        _, cotangents = reverse(d_out, d_final, p, None, prev, weights)
        parts[f"forward loop{tag}"] = lambda: compiled["forward"](p, None, carry, weights)
        parts[f"reverse loop{tag}"] = lambda: reverse(d_out, d_final, p, None, prev, weights)
        parts[f"rows VJP{tag}"] = lambda: rows(d_out, cotangents, p, None, prev, weights)
        parts[f"reverse loop, weight gradients in it{tag}"] = lambda: whole(
            d_out, d_final, p, None, prev, weights
        )
    finally:
        for name, value in saved.items():
            setattr(engine, name, value)
    return parts


def _layer_parts(layer, model, x, y, label: str, tag: str = "") -> dict:
    import tensorflow as tf

    @tf.function
    def forward():
        return layer(x)

    @tf.function
    def forward_backward():
        with tf.GradientTape() as tape:
            out = layer(x)
            loss = tf.reduce_sum(out * out)
        return tape.gradient(loss, layer.trainable_variables)

    for f in (forward, forward_backward):  # trace now, under the projection setting asked for
        f()
    model.train_on_batch(x, y)
    return {
        f"{label} layer fwd{tag}": forward,
        f"{label} layer fwd+bwd{tag}": forward_backward,
        f"{label} train step{tag}": lambda: model.train_on_batch(x, y),
    }


def _baselines(cell_name: str, shape: tuple, cells) -> dict:
    import keras
    import tensorflow as tf

    batch, steps, features, units = shape
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((batch, steps, features)).astype("float32"))
    y = tf.constant(rng.standard_normal((batch, steps, 1)).astype("float32"))
    keras.utils.set_random_seed(0)
    layer = keras.layers.RNN(cells.CUSTOM_CELLS[cell_name](units), return_sequences=True)
    model = keras.Sequential([keras.Input((steps, features)), layer, keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    parts = _layer_parts(layer, model, x, y, "RNN")
    dense = keras.Sequential([keras.Input((steps, features)), keras.layers.Dense(1)])
    dense.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    dense.train_on_batch(x, y)
    parts["Dense-only train step"] = lambda: dense.train_on_batch(x, y)
    return parts


def _time(parts: dict, repeats: int, calls: int) -> dict:
    """``{part: [seconds per call, ...]}``, parts interleaved in every round."""
    import keras

    times = {name: [] for name in parts}
    for fn in parts.values():  # warm-up
        keras.ops.convert_to_numpy(keras.tree.flatten(fn())[0])
    for _ in range(repeats):
        for name, fn in parts.items():
            for _ in range(calls):
                start = time.perf_counter()
                keras.ops.convert_to_numpy(keras.tree.flatten(fn())[0])
                times[name].append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=["GRU:S", "LSTM:M"], help="CELL:SHAPE")
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["engine"],
        help="engine settings to profile side by side: 'engine' (its defaults) or "
        "comma-separated flags, e.g. hoist=1,loopw=0,unroll=2 (HOIST_PROJECTION, "
        "LOOP_WEIGHT_GRADIENTS, UNROLL)",
    )
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--calls", type=int, default=3, help="timed calls per part and round")
    args = parser.parse_args(argv)
    import keras

    if keras.backend.backend() != "tensorflow":
        raise SystemExit("the profile is of the TensorFlow engine: set KERAS_BACKEND=tensorflow")
    cells = _cells_module()
    print(f"load average at start: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"command: python benchmarks/custom_cells_profile.py {' '.join(argv or sys.argv[1:])}")
    for case in args.cases:
        cell_name, label = case.split(":")
        shape = SHAPES[label]
        parts = {}
        for setting in args.settings:
            parts.update(_parts(cell_name, shape, _parse(setting), cells))
        parts.update(_baselines(cell_name, shape, cells))
        times = _time(parts, args.repeats, args.calls)
        b, t, d, h = shape
        print(f"\n### {cell_name} at {label}: batch {b}, steps {t}, features {d}, units {h}\n")
        print("| part | median ms | min ms |")
        print("|---|---:|---:|")
        for name in sorted(parts, key=_order):
            ts = times[name]
            print(f"| {name} | {1000 * statistics.median(ts):.1f} | {1000 * min(ts):.1f} |")
        sys.stdout.flush()
    return 0


FLAGS = {"hoist": "HOIST_PROJECTION", "loopw": "LOOP_WEIGHT_GRADIENTS", "unroll": "UNROLL"}


def _parse(setting: str) -> dict:
    """``"hoist=1,loopw=0"`` -> ``{"HOIST_PROJECTION": True, "LOOP_WEIGHT_GRADIENTS": False}``."""
    if setting == "engine":
        return {}
    pairs = (item.split("=") for item in setting.split(","))
    return {FLAGS[k]: int(v) if k == "unroll" else bool(int(v)) for k, v in pairs}


def _describe(settings: dict) -> str:
    short = {v: k for k, v in FLAGS.items()}
    return ",".join(f"{short[k]}={int(v)}" for k, v in settings.items())


def _order(name: str) -> tuple:
    """Engine pieces first, then the fused layer, the cell loop and Keras alone."""
    rank = ["forward loop", "reverse loop", "rows VJP", "FusedRNN", "RNN", "Dense"]
    return (next(i for i, r in enumerate(rank) if name.startswith(r)), name)


if __name__ == "__main__":
    sys.exit(main())
