"""The same command and seed give the same model as the recorded one (to 1e-6), on every backend.

The numbers were recorded with ``tests/fixtures/make_recorded_identification.py``
(per backend); a change of the code's layout must leave them as they are.
"""

import keras
import numpy as np

from tests.fixtures.make_recorded_identification import FOLDER, recorded_numbers

RECORDED = FOLDER / f"{keras.backend.backend()}.npz"


def test_identify_gives_the_recorded_model(short_duffing):
    now = recorded_numbers(*short_duffing)
    recorded = np.load(RECORDED)
    assert sorted(now) == sorted(recorded.files)
    assert list(now["structures"]) == list(recorded["structures"])
    assert str(now["chosen"]) == str(recorded["chosen"])
    for key in recorded.files:
        if key not in ("structures", "chosen"):
            np.testing.assert_allclose(now[key], recorded[key], rtol=0, atol=1e-6, err_msg=key)
