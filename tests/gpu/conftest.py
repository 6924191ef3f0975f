"""Shared fixtures of the GPU test set (``pytest -m gpu`` on a machine with a CUDA GPU)."""
import pytest


@pytest.fixture(scope="session")
def k():
    """The kernels package, skipping the test when there is no CuPy or no CUDA GPU."""
    pytest.importorskip("cupy")
    import kernels

    if not kernels.gpu_available():
        pytest.skip("no CUDA GPU")
    return kernels
