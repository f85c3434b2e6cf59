"""One short identification of every class, shared by the modules that read it.

Its tests are grouped (``xdist_group("short_duffing")``) so that one worker
runs them all and identifies once.
"""

import pytest

from tests.fixtures.make_recorded_identification import identified

SHORT_DUFFING = pytest.mark.xdist_group("short_duffing")


@pytest.fixture(scope="session")
def short_duffing():
    """``(plant, found)``: a Duffing oscillator, every class, short training, two restarts."""
    return identified()
