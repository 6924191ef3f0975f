"""Launch-configuration checks, ceil_div and the backend switch, all without a GPU."""
from __future__ import annotations

import numpy as np
import pytest

import kernels
from kernels import backend
from kernels.compile import LaunchConfigError, LaunchLimits, _clean_log, ceil_div, check_launch, load_kernel

H100 = LaunchLimits(max_shared_optin=227 * 1024, name="NVIDIA H100")


@pytest.mark.parametrize("a, b, expected", [(0, 256, 0), (1, 256, 1), (256, 256, 1), (257, 256, 2),
                                            (10**9, 1024, 976563)])
def test_ceil_div(a, b, expected):
    assert ceil_div(a, b) == expected
    assert ceil_div(a, b) * b >= a > (ceil_div(a, b) - 1) * b or a == 0


def test_ceil_div_refuses_zero():
    with pytest.raises(ValueError, match="divisor must be positive"):
        ceil_div(10, 0)


def test_dims_are_normalised_to_three():
    assert check_launch(10, 256, 0, H100) == ((10, 1, 1), (256, 1, 1))
    assert check_launch((4, 3), (16, 16), 0, H100) == ((4, 3, 1), (16, 16, 1))
    assert check_launch(np.int64(7), (np.int32(32), 2, 2), 0, H100) == ((7, 1, 1), (32, 2, 2))


@pytest.mark.parametrize("grid, block, text", [
    (0, 256, "grid.x is 0; every grid dimension must be at least 1"),
    (4, (16, -1), "block.y is -1"),
    (3.5, 256, "grid.x must be an int, got float 3.5 (use ceil_div"),
    ((1, 2, 3, 4), 32, "grid must be an int or a tuple of 1 to 3 ints"),
    ((1, 70000), 32, "grid.y is 70000 but at most 65535 blocks are allowed along y; put the large dimension in x"),
    (1, 2048, "block.x is 2048 but at most 1024"),
    (1, (32, 32, 2), "a block of 32x32x2 = 2048 threads exceeds the limit of 1024 threads per block on NVIDIA H100"),
    (1, (1, 1, 65), "block.z is 65 but at most 64"),
    (1, True, "block must be an int or a tuple"),
])
def test_bad_launch_configurations(grid, block, text):
    with pytest.raises(LaunchConfigError) as e:
        check_launch(grid, block, 0, H100, kernel="k")
    assert str(e.value).startswith("k: ") and text in str(e.value)


def test_kernel_thread_limit_from_registers_or_launch_bounds():
    check_launch(1, 256, 0, H100, kernel_max_threads=256)
    with pytest.raises(LaunchConfigError, match="more than this kernel can run \\(256"):
        check_launch(1, 512, 0, H100, kernel_max_threads=256)


def test_dynamic_shared_memory_needs_opt_in_above_48_kb():
    check_launch(1, 128, 48 * 1024, H100)
    with pytest.raises(LaunchConfigError, match=r"kernel.max_dynamic_shared_memory = 65536"):
        check_launch(1, 128, 64 * 1024, H100, max_dynamic_shared=48 * 1024)
    check_launch(1, 128, 64 * 1024, H100, max_dynamic_shared=100 * 1024)
    with pytest.raises(LaunchConfigError, match="exceed the 232448 bytes one block can have on NVIDIA H100"):
        check_launch(1, 128, 228 * 1024, H100, max_dynamic_shared=228 * 1024)
    with pytest.raises(LaunchConfigError, match=r"\+4096 static"):
        check_launch(1, 128, 226 * 1024, H100, static_shared=4096, max_dynamic_shared=226 * 1024)
    with pytest.raises(LaunchConfigError, match="shared_mem must be a number of bytes"):
        check_launch(1, 128, -1, H100)


def test_compile_log_paths_are_replaced_by_the_source_name():
    log = ('/tmp/tmpab12/8f3e_2.cubin.cu(7): error: identifier "y" is undefined\n'
           '1 error detected in the compilation of "/tmp/tmpab12/8f3e_2.cubin.cu".')
    assert _clean_log(log, "ch/k.cu") == ('ch/k.cu(7): error: identifier "y" is undefined\n'
                                          '1 error detected in the compilation of "ch/k.cu".')


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(backend, "_probe", lambda: (False, "CuPy could not be imported (ImportError)"))
    monkeypatch.delenv(backend.ENV_VAR, raising=False)


def test_backend_without_gpu(no_gpu):
    from kernels.cpu import xp

    assert backend.backend_name() == "cpu" and not backend.gpu_available()
    assert backend.array_module() is xp


def test_backend_env_override(no_gpu, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(backend.ENV_VAR, "cupy")
    assert backend.backend_name() == "cupy"
    with pytest.raises(backend.NoGPUError, match="CuPy could not be imported"):
        backend.require_gpu("this")
    monkeypatch.setenv(backend.ENV_VAR, "quantum")
    with pytest.raises(ValueError, match="use one of cupy, cpu"):
        backend.backend_name()


def test_forced_cpu_names_the_variable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(backend, "_probe", lambda: (True, ""))
    monkeypatch.setenv(backend.ENV_VAR, "cpu")
    assert backend.backend_name() == "cpu"
    with pytest.raises(backend.NoGPUError, match="COURSE_BACKEND=cpu is set"):
        backend.require_gpu("load_kernel")


def test_load_kernel_forced_to_cupy_without_gpu_says_what_to_do(no_gpu, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(backend.ENV_VAR, "cupy")
    with pytest.raises(kernels.NoGPUError) as e:
        load_kernel('extern "C" __global__ void k(int n) {}', "k")
    msg = str(e.value)
    assert msg.startswith("load_kernel('k') needs a CUDA GPU, but CuPy could not be imported")
    assert "Runtime > Change runtime type > T4 GPU" in msg and "install CuPy" in msg


def test_load_kernel_without_gpu_runs_on_the_cpu_backend(no_gpu):
    kernel = load_kernel('extern "C" __global__ void twice(float* x, int n)\n'
                         '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\n', "twice")
    assert kernel.backend == "cpu"
    x = backend.array_module().arange(5, dtype=np.float32)
    kernel(1, 32, (x, 5))
    assert x.get().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
