"""One measurement in a fresh Python process, for the benchmarks that time whole calls.

A child process starts with nothing imported, built or compiled, as a user's
script does; it prints its measurement as one line ``RESULT <json>``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def run_child(
    code: str, argv: list[str], backend: str, label: str, env: dict | None = None,
    cwd: str | None = None,
) -> Any:  # fmt: skip
    """Run ``code`` (``python -c``) with ``argv`` on ``backend``; the JSON of its ``RESULT`` line.

    ``env``: more environment variables; ``cwd``: the child's folder (the
    first place ``python -c`` imports from).

    Raises ``RuntimeError`` with ``label`` and the end of the child's stderr
    when it fails or prints no result.
    """
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=False,
        cwd=cwd,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise RuntimeError(f"{label} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[0][len("RESULT ") :])
