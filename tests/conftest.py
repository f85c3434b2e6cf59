import os

import keras
import numpy as np
import pytest


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend {keras.backend.backend()}"


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Each test starts from a clean Keras session and the float32 policy."""
    keras.backend.clear_session(free_memory=False)
    keras.config.set_dtype_policy("float32")
    np.random.seed(0)
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def shared_data_dir():
    """The shared benchmark data folder, if this checkout has one beside it."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.abspath(os.path.join(here, "..", "..", "shared", "data"))
