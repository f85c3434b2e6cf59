"""The test suite (``tests/conftest.py`` holds its markers and fixtures).

Under pytest-xdist with several workers, PyTorch's OpenMP threads sleep while
they wait (``OMP_WAIT_POLICY=PASSIVE``, unless the variable is set): the
workers share the cores, where a spinning wait slows every worker several-fold
(``benchmarks/RESULTS.md``, "PyTorch's OpenMP wait policy"; the command line
sets the same for its PyTorch jobs). OpenMP reads it when PyTorch loads, so it
is set here, before ``tests/conftest.py`` imports Keras.
"""

import os

if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
