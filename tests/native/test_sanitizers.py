"""The C API of the native loops under AddressSanitizer and UndefinedBehaviorSanitizer.

``mgu_c_api.cc`` is built with the core library's flags and the sanitizers
into a temporary directory; a fresh Python with the sanitizer runtimes
preloaded then calls its forward and backward loops on random shapes
(``tests/native/numpy_loops.py``: empty batches, odd units, 1 to 4 groups,
masks, both layouts, 1 to 4 threads, float32 and float64) and checks the
outputs against the NumPy loops.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from keras_mgu.native import build
from tests.helpers import BACKEND_INDEPENDENT

ROOT = Path(__file__).resolve().parents[2]
#: Added to the core library's flags (the last -O wins). Variable locations are
#: not needed for the reports' stack traces, and leaving them out makes the
#: build markedly faster.
SANITIZER_FLAGS = (
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
    "-O1",
    "-g",
    "-fno-var-tracking",
)
RUNTIMES = ("libasan.so", "libubsan.so")
#: What a sanitizer writes when it finds something.
REPORTS = ("AddressSanitizer", "UndefinedBehaviorSanitizer", "LeakSanitizer", "runtime error:")


def _compile(cxx: str, source: Path, target: Path, extra: tuple[str, ...] = ()) -> str | None:
    """Build ``target``: None, or the compiler's complaint."""
    command = [
        cxx, *build.FLAGS, *extra, *SANITIZER_FLAGS, f"-I{build.SOURCE_DIR}", str(source),
        "-o", str(target),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    return None if result.returncode == 0 else (result.stderr or result.stdout)[-3000:]


def _runtimes(cxx: str) -> list[str]:
    """The sanitizer runtimes' paths, or [] when the compiler does not know one of them."""
    paths = []
    for name in RUNTIMES:
        result = subprocess.run(
            [cxx, f"-print-file-name={name}"], capture_output=True, text=True, timeout=60
        )
        path = Path(result.stdout.strip())
        if result.returncode != 0 or not path.is_absolute() or not path.exists():
            return []
        paths.append(str(path))
    return paths


def _sanitized_library(tmp_path: Path) -> tuple[Path, list[str]]:
    """The sanitized core library and the runtimes to preload; skips where they cannot be had."""
    try:
        cxx = build.compiler()
    except build.BuildError as error:
        pytest.skip(f"no compiler: {error}")
    probe = tmp_path / "probe.cc"
    probe.write_text('extern "C" int keras_mgu_probe(int* p) { return p[0] << 1; }\n')
    if _compile(cxx, probe, tmp_path / "probe.so") is not None:
        pytest.skip(f"{cxx} cannot build with {' '.join(SANITIZER_FLAGS)}")
    runtimes = _runtimes(cxx)
    if not runtimes:
        pytest.skip(f"{cxx} knows no sanitizer runtimes {RUNTIMES}")
    library, source = tmp_path / "libkeras_mgu_core_sanitized.so", build.SOURCE_DIR / "mgu_c_api.cc"
    # As build.py: with OpenMP where the compiler has it, else the std::thread split.
    if _compile(cxx, source, library, build.OPENMP_FLAGS) is not None:
        complaint = _compile(cxx, source, library)
        assert complaint is None, complaint
    return library, runtimes


@BACKEND_INDEPENDENT
def test_the_c_api_is_clean_under_the_sanitizers(tmp_path):
    library, runtimes = _sanitized_library(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "LD_PRELOAD": " ".join(runtimes),
        "ASAN_OPTIONS": "detect_leaks=0",
        "UBSAN_OPTIONS": "print_stacktrace=1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "tests.native.numpy_loops", str(library)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-6000:]
    assert "CASES 40 FAILED 0" in result.stdout
    reports = [line for line in result.stderr.splitlines() if any(r in line for r in REPORTS)]
    assert not reports, result.stderr[-6000:]
