"""README.md's quick-start figures against a fresh run of the quick start, per backend.

For each backend named, runs the quick start's job as README.md gives it
(``examples/system_identification.py``, the built-in simulated tanks, seed 0)
in a fresh process with ``KERAS_BACKEND`` set, reads the figures it prints
(the last line's ``test RMSE``, the test output's standard deviation, the
band's coverage, the one-step prediction beside the ARX model's and the last
sample's, the class chosen) and compares each with the digits README.md
prints for that backend, rounded as README.md rounds them: ``same`` where
the digits repeat (they do on the machine README.md names), ``close`` where
the figure is within :data:`TOLERANCE` of README's (another CPU rounds
float32 training differently: the native loops are built for it, and the
frameworks pick their kernels for it; the class chosen and the data's
figures must still be the same). Exit status 1 where one is not close.
``tests/test_readme.py`` runs it for TensorFlow (the backend README.md
quotes first) in CI; the others are checked before a release:

    python benchmarks/readme_figures.py --backends tensorflow jax
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
#: How far a figure of a fresh run on another machine may be from README's (relative).
TOLERANCE = 0.05


@dataclasses.dataclass(frozen=True)
class Figure:
    """A figure README.md prints for a backend, and where a run prints it.

    ``readme``: a regular expression on README.md whose group 1 is the
    figure as printed there; ``run``: one on the run's output whose group 1
    is the value; ``scale``: the factor from the run's value to README's
    unit (100 for a share printed in %).
    """

    name: str
    readme: str
    run: str
    scale: float = 1.0


#: The figures README.md's quick start prints, per backend.
FIGURES = {
    "tensorflow": (
        Figure("test RMSE", r"\(`test RMSE: ([0-9.]+)`\)\s+against", r"^test RMSE: ([0-9.]+)$"),
        Figure(
            "test output std",
            r"output standard deviation of ([0-9.]+) V",
            r"^std of the test output: ([0-9.]+)$",
        ),  # fmt: skip
        Figure(
            "class chosen", r"the recurrent (network) alone is chosen", r"<- chosen\n", scale=0.0
        ),  # fmt: skip
    ),
    "jax": (
        Figure("test RMSE", r"\(`test RMSE: ([0-9.]+)`; [0-9.]+ V on", r"^test RMSE: ([0-9.]+)$"),
        Figure(
            "band coverage",
            r"band of 0\.95 holding ([0-9.]+) %",
            r"band 0\.95 .*?inside it ([0-9.]+) \(simulation\)",
            scale=100.0,
        ),  # fmt: skip
        Figure(
            "one-step RMSE",
            r"one-step prediction ([0-9.]+) V against",
            r"1-step-ahead prediction, scored from sample \d+: RMSE ([0-9.]+)",
        ),  # fmt: skip
        Figure(
            "ARX one-step RMSE",
            r"against the ARX model's ([0-9.]+) V",
            r"ARX one-step RMSE ([0-9.]+)",
        ),  # fmt: skip
        Figure(
            "last-sample RMSE",
            r"the last sample's ([0-9.]+) V\.",
            r"last-sample predictor RMSE ([0-9.]+)",
        ),  # fmt: skip
    ),
}


def readme_text() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return " ".join(f.read().split())  # one line: README's sentences wrap anywhere


def quick_start(backend: str, out: str) -> tuple[str, float]:
    """The quick start's output on ``backend`` (a fresh process) and its wall seconds."""
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, os.path.join(ROOT, "examples", "system_identification.py")]
    start = time.perf_counter()
    done = subprocess.run([*command, "--out", out], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"the quick start failed on {backend}: {done.stderr[-2000:]}")
    return done.stdout, seconds


def _decimals(text: str) -> int:
    return len(text.partition(".")[2])


def compare(backend: str, output: str, readme: str) -> list[dict]:
    """Each figure of ``backend``: README's, the run's rounded alike, and whether they agree."""
    rows = []
    for figure in FIGURES[backend]:
        printed = re.search(figure.readme, readme)
        if printed is None:
            raise ValueError(f"README.md no longer has the {backend} figure {figure.name!r}")
        want = printed.group(1)
        if figure.scale == 0.0:  # a class name: the line of the class table marked chosen
            chosen = re.search(r"^\s+(\S+)\s.*<- chosen$", output, re.MULTILINE)
            got = chosen.group(1) if chosen else "?"
            close = got == want
        else:
            found = re.search(figure.run, output, re.MULTILINE)
            value = float(found.group(1)) * figure.scale if found else float("nan")
            got = f"{value:.{_decimals(want)}f}"
            close = abs(value - float(want)) <= TOLERANCE * abs(float(want))
        rows.append({"backend": backend, "figure": figure.name, "readme": want, "run": got,
                     "same": got == want, "close": bool(close)})  # fmt: skip
    return rows


def check(backend: str) -> tuple[list[dict], float]:
    """Run the quick start on ``backend`` and compare its figures with README.md's."""
    with tempfile.TemporaryDirectory() as out:
        output, seconds = quick_start(backend, out)
    return compare(backend, output, readme_text()), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["tensorflow", "jax"],
                        choices=sorted(FIGURES))  # fmt: skip
    args = parser.parse_args(argv)
    status = 0
    print(f"| backend | figure | README.md | fresh run | same | within {TOLERANCE:.0%} |")
    print("|---|---|---|---|---|---|")
    for backend in args.backends:
        rows, seconds = check(backend)
        for row in rows:
            same, close = ("yes" if row["same"] else "no"), ("yes" if row["close"] else "NO")
            print(f"| {backend} | {row['figure']} | {row['readme']} | {row['run']} | {same} | "
                  f"{close} |")  # fmt: skip
            status |= not row["close"]
        print(f"| {backend} | wall seconds (this machine) | | {seconds:.0f} | | |", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
