"""Two builds of the native core library side by side: the same results, and their speed.

Loads two ``libkeras_mgu_core-*.so`` files (for example this checkout's and
an older commit's) in one process and, for each shape, checks that their
forward states and backward gradients are equal bit for bit, then times
``keras_mgu.native.forward`` and ``backward`` on each, alternating the order
every round, and prints the medians and the ratio new / old.

Build the library of another commit in its own worktree and cache (``python
-c`` imports the worktree's ``keras_mgu``), then compare it with this
checkout's::

    git worktree add /tmp/old COMMIT
    (cd /tmp/old && KERAS_MGU_CACHE_DIR=/tmp/old_cache python -c \\
        "from keras_mgu.native import build; print(build.library_path('core'))")
    python benchmarks/native_compare.py /tmp/old_cache/libkeras_mgu_core-*.so \\
        "$(python benchmarks/native_compare.py --build)"
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from keras_mgu import native

#: (steps, batch, units, groups): one sequence per run of a grouped population,
#: one sequence, and training batches.
SHAPES = [
    (1024, 31, 32, 31), (1024, 1, 32, 1), (1024, 1, 8, 1), (1024, 32, 32, 1),
    (500, 32, 64, 1), (1000, 32, 8, 1),
]  # fmt: skip


def use(path: str) -> None:
    """Make ``keras_mgu.native`` call the core library at ``path``."""
    native.core.cache_clear()
    native._load.cache_clear()
    native.library_path = lambda kind: path


def inputs(steps: int, batch: int, units: int, groups: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    xw = (0.5 * rng.normal(size=(steps, batch, 2 * units))).astype("float32")
    h0 = np.zeros((batch, units), "float32")
    u = (rng.normal(size=(groups, units, 2 * units)) / np.sqrt(units)).astype("float32")
    d_hs = rng.normal(size=(steps, batch, units)).astype("float32")
    return xw, h0, u[0] if groups == 1 else u, d_hs


def compare(paths: dict[str, str], shape: tuple, rounds: int, calls: int) -> str:
    xw, h0, u, d_hs = inputs(*shape)
    results = {}
    for name, path in paths.items():
        use(path)
        hs, saved = native.forward(xw, h0, u, None)
        results[name] = (hs, *native.backward(d_hs, None, saved, u, None))
    same = all(np.array_equal(a, b) for a, b in zip(*results.values(), strict=True))
    times = {name: {"forward": [], "backward": []} for name in paths}
    for r in range(rounds):
        for name in list(paths) if r % 2 == 0 else list(paths)[::-1]:
            use(paths[name])
            start = time.perf_counter()
            for _ in range(calls):
                hs, saved = native.forward(xw, h0, u, None)
            middle = time.perf_counter()
            for _ in range(calls):
                native.backward(d_hs, None, saved, u, None)
            times[name]["forward"].append((middle - start) / calls)
            times[name]["backward"].append((time.perf_counter() - middle) / calls)
    cells = []
    for what in ("forward", "backward"):
        old, new = (statistics.median(times[name][what]) * 1e3 for name in paths)
        cells.append(f"{old:.2f} | {new:.2f} | {new / old:.2f}")
    steps, batch, units, groups = shape
    return (
        f"| {steps} | {batch} | {units} | {groups} | {'yes' if same else 'NO'} | "
        + " | ".join(cells)
        + " |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", nargs="?", help="the first core library (.so)")
    parser.add_argument("new", nargs="?", help="the second core library (.so)")
    parser.add_argument("--build", action="store_true",
                        help="build this checkout's core library and print its path")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--calls", type=int, default=5, help="calls timed together per round")
    args = parser.parse_args(argv)
    if args.build:
        print(native.build.library_path("core"))
        return
    if args.old is None or args.new is None:
        parser.error("give the two libraries to compare (or --build)")
    paths = {"old": args.old, "new": args.new}
    threads = native.max_threads() or "all"
    print(f"float32, max threads {threads}; medians of {args.rounds} rounds (ms)")
    print()
    print("| steps | batch | units | groups | bit-equal | forward old | new | new/old "
          "| backward old | new | new/old |")  # fmt: skip
    print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for shape in SHAPES:
        print(compare(paths, shape, args.rounds, args.calls), flush=True)


if __name__ == "__main__":
    main()
