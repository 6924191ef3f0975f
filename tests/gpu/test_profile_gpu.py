"""The T4 profile on a real GPU: kernels are compute_75 PTX, the limits are a T4's, the pool is capped."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

COPY = 'extern "C" __global__ void copy(const float* x, float* y, int n) ' \
       '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }'
NEWER = r'''
extern "C" __global__ void warp_sum(const unsigned* x, unsigned* out)
{
    out[threadIdx.x] = __reduce_add_sync(0xffffffffu, x[threadIdx.x]);   // sm_80 and later
}
'''
SHARED = r'''
extern "C" __global__ void stage(float* y)
{
    extern __shared__ float buf[];
    buf[threadIdx.x] = threadIdx.x;
    __syncthreads();
    y[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}
'''


@pytest.fixture
def t4(k):
    """The T4 profile for one test, the real GPU again afterwards."""
    from kernels.profile import gpu_profile

    with gpu_profile("t4") as chosen:
        yield chosen


def real_cc(k) -> int:
    import cupy

    return int(cupy.cuda.Device().compute_capability)


def test_kernels_are_compute_75_ptx_and_still_correct(k, t4):
    import cupy

    if real_cc(k) <= 75:
        pytest.skip("the profile is for GPUs newer than the T4")
    kernel = k.load_kernel(COPY, "copy")
    assert kernel.attributes["ptx_version"] == 75                   # compiled for compute_75 ...
    assert kernel.attributes["binary_version"] == real_cc(k)        # ... and JIT-compiled for this GPU
    x = cupy.arange(1000, dtype=cupy.float32)
    y = cupy.zeros_like(x)
    kernel(k.ceil_div(1000, 256), 256, (x, y, 1000))
    assert bool((x == y).all())
    elementwise = cupy.ElementwiseKernel("float32 a", "float32 b", "b = a * 2", "t4_double")
    assert bool((elementwise(x) == 2 * x).all())                     # CuPy's own kernels run too


CP_ASYNC = r'''
extern "C" __global__ void stage_async(const float* x, float* y)
{
    __shared__ float tile[32];
    unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&tile[threadIdx.x]));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(dst), "l"(x + threadIdx.x));
    asm volatile("cp.async.wait_all;");
    __syncthreads();
    y[threadIdx.x] = tile[threadIdx.x];
}
'''


def test_nothing_newer_than_sm_75_compiles(k, t4):
    from kernels.profile import gpu_profile

    with pytest.raises(k.CudaCompileError):
        k.load_kernel(NEWER, "warp_sum")
    with pytest.raises(Exception):          # the driver's JIT of compute_75 PTX refuses cp.async
        k.load_kernel(CP_ASYNC, "stage_async")
    with gpu_profile(None):
        if real_cc(k) >= 80:
            assert k.load_kernel(CP_ASYNC, "stage_async") is not None


def test_without_the_profile_the_real_target_is_back(k, t4):
    from kernels.profile import gpu_profile

    with gpu_profile(None):
        kernel = k.load_kernel(COPY, "copy")
        assert kernel.attributes["ptx_version"] != 75 or real_cc(k) == 75
        assert k.load_kernel(NEWER, "warp_sum") is not None
        assert k.device_info().name == k.device_info().name.removeprefix("T4 profile on ")


def test_device_info_and_provenance_name_the_profile(k, t4):
    from kernels.device import physical_device_info

    info = k.device_info()
    real = physical_device_info()
    assert info.name == f"T4 profile on {real.name}"
    assert (info.compute_capability, info.sm_count, info.shared_per_block_optin) == ("7.5", 40, 65536)
    record = k.provenance()
    assert record["profile"] == "t4" and record["physical_gpu"] == real.name
    assert "not Tesla T4 measurements" in record["profile_note"]


def test_a_launch_beyond_64_kb_is_refused(k, t4):
    import cupy

    from kernels.compile import LaunchConfigError

    kernel = k.load_kernel(SHARED, "stage")
    with pytest.raises(LaunchConfigError, match="65536 bytes per block of T4 profile on"):
        kernel.max_dynamic_shared_memory = 96 * 1024
    kernel.max_dynamic_shared_memory = 64 * 1024
    y = cupy.zeros(256, dtype=cupy.float32)
    kernel(1, 256, (y,), shared_mem=64 * 1024)
    assert float(y[0]) == 255.0


def test_the_memory_pool_is_capped_at_the_t4s_memory(k, t4):
    import cupy

    from kernels.profile import T4

    pool = cupy.get_default_memory_pool()
    assert pool.get_limit() == T4.memory_bytes
    with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
        cupy.empty(T4.memory_bytes + 2**30, dtype=cupy.uint8)
    pool.free_all_blocks()


def test_the_gemm_chapter_takes_its_t4_branch(k, t4):
    from kernels.chapters import gemm

    cc = k.device_info().compute_capability
    assert not gemm.has_cp_async(cc)
    names = [rung.family for rung in gemm.chapter_rungs(cc)]
    assert not any("cp_async" in name for name in names)


def test_the_t4_profile_tool_runs_a_notebook_copy_and_a_check(k, tmp_path, monkeypatch):
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tools"))
    import t4_profile

    notebook = root / "exercises" / "gpu_architecture" / "axpby_grid_stride.ipynb"
    before = notebook.read_bytes()
    with monkeypatch.context() as patch:  # for the notebook's kernel only: nothing is compiled here meanwhile
        patch.setenv("COURSE_GPU_PROFILE", "t4")
        row = t4_profile.run_notebook_copy(notebook, tmp_path, timeout=600)
    assert notebook.read_bytes() == before
    assert row.status == "ok", row
    assert row.peak_gpu_bytes and row.peak_gpu_bytes > 0
    from kernels.profile import gpu_profile

    with gpu_profile("t4"):
        (result,) = t4_profile.exercise_checks(["gpu_architecture/axpby_grid_stride"])
    assert result["status"] == "ok", result
    assert result["peak_gpu_bytes"] > 0


def test_the_occupancy_calculator_answers_for_a_t4(k, t4):
    """48 KB of dynamic shared memory per block: one block fits on a T4's 64 KB SM, four on an H100's."""
    import cupy

    kernel = k.load_kernel(SHARED, "stage")
    kernel.max_dynamic_shared_memory = 48 * 1024
    assert kernel.blocks_per_sm(128, 48 * 1024) == 1
    assert cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.raw.kernel.ptr, 128, 48 * 1024) == 1
    with k.gpu_profile(None):
        assert kernel.blocks_per_sm(128, 48 * 1024) > 1
