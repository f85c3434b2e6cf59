"""One short identification of every class, shared by the modules that read it (once a process)."""

import pytest

from tests.fixtures.make_recorded_identification import identified


@pytest.fixture(scope="session")
def short_duffing():
    """``(plant, found)``: a Duffing oscillator, every class, short training, two restarts."""
    return identified()
