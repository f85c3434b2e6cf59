import pytest

from keras_mgu import native


@pytest.fixture(autouse=True, params=["native", "backend-loops"])
def kernel_loops(request):
    """Every kernel test runs on the native loops and on the backend's own loops."""
    if request.param == "native":
        assert native.status().available, native.status().reason
        yield request.param
    else:
        with native.turned_off():
            yield request.param
