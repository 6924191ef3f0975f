"""Shared fixtures of the GPU test set (``pytest -m gpu`` on a machine with a CUDA GPU).

The tests here need a GPU for what they test (timing, streams, graphs, device properties, the CPU
backend against the GPU). Kernel-correctness tests live in tests/kernel_checks/, where the fixture
``k`` runs each test on the CPU backend and, with ``-m gpu``, on CuPy.
"""
import pytest


@pytest.fixture(scope="session")
def k():
    """The kernels package, skipping the test when there is no CuPy or no CUDA GPU."""
    pytest.importorskip("cupy")
    import kernels

    if not kernels.gpu_available():
        pytest.skip("no CUDA GPU")
    return kernels
