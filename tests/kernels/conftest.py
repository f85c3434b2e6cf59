import pytest

from keras_mgu import kernels
from keras_mgu.native import status


@pytest.fixture(autouse=True, params=["native", "backend-loops"])
def kernel_loops(request, monkeypatch):
    """Every kernel test runs on the native loops and on the backend's own loops."""
    module = kernels.backend_module()
    native = request.param == "native"
    monkeypatch.setattr(module, "NATIVE", native)
    if native:
        assert status().available, status().reason
    return request.param
