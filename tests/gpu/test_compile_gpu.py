"""load_kernel on a real GPU: launches, argument and launch checks, shared memory opt-in, resources."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")

from kernels import KernelArgumentError, NoGPUError, ceil_div, load_kernel, resource_report  # noqa: E402
from kernels.compile import LaunchConfigError  # noqa: E402
from kernels.nvrtc import CudaCompileError  # noqa: E402

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''

# Reverses each block's chunk through dynamic shared memory of blockDim.x * per_thread floats.
BIG_SHARED = r'''
extern "C" __global__ void reverse_chunks(const float* x, float* y, int per_thread)
{
    extern __shared__ float tile[];
    int chunk = blockDim.x * per_thread;
    const float* in = x + blockIdx.x * chunk;
    for (int i = threadIdx.x; i < chunk; i += blockDim.x) tile[i] = in[i];
    __syncthreads();
    for (int i = threadIdx.x; i < chunk; i += blockDim.x) y[blockIdx.x * chunk + i] = tile[chunk - 1 - i];
}
'''

TEMPLATE = r'''
template <typename T, int SCALE>
__global__ void scale(T* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= SCALE; }
'''


@pytest.fixture(scope="module")
def saxpy():
    return load_kernel(SAXPY, "saxpy")


def test_launch_matches_numpy(saxpy):
    n = 100_003  # not a multiple of the block
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    d_x, d_y = cp.asarray(x), cp.asarray(y)
    saxpy(ceil_div(n, 256), 256, (2.5, d_x, d_y, n))
    np.testing.assert_allclose(cp.asnumpy(d_y), 2.5 * x + y, rtol=1e-6, atol=1e-6)


def test_launch_on_a_stream(saxpy):
    n = 1000
    x, y = cp.ones(n, cp.float32), cp.zeros(n, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    saxpy(ceil_div(n, 128), 128, (3.0, x, y, n), stream=stream)
    stream.synchronize()
    assert float(y.sum()) == 3.0 * n


def test_cached(saxpy):
    assert load_kernel(SAXPY, "saxpy") is saxpy


def test_int_over_int32_raises(saxpy):
    x = cp.zeros(4, cp.float32)
    with pytest.raises(KernelArgumentError, match="does not fit in int32; declare the parameter as long long"):
        saxpy(1, 32, (1.0, x, x, 2**31 + 5))


def test_non_contiguous_view_raises(saxpy):
    m = cp.zeros((64, 64), cp.float32)
    with pytest.raises(KernelArgumentError, match="not C-contiguous"):
        saxpy(1, 64, (1.0, m[:, 0], m[0], 64))
    with pytest.raises(KernelArgumentError, match="not C-contiguous"):
        saxpy(1, 64, (1.0, m.T, m, 64))


def test_float64_array_for_float_pointer_raises(saxpy):
    with pytest.raises(KernelArgumentError, match="expected an array of float32, got an array of float64"):
        saxpy(1, 32, (1.0, cp.zeros(32), cp.zeros(32, cp.float32), 32))


def test_numpy_array_raises(saxpy):
    with pytest.raises(KernelArgumentError, match="cupy.asarray"):
        saxpy(1, 32, (1.0, np.zeros(32, np.float32), cp.zeros(32, cp.float32), 32))


def test_bad_block_raises(saxpy):
    x = cp.zeros(32, cp.float32)
    with pytest.raises(LaunchConfigError, match="threads per block"):
        saxpy(1, (32, 64), (1.0, x, x, 32))


def test_more_than_48_kb_dynamic_shared_memory_after_opt_in():
    kernel = load_kernel(BIG_SHARED, "reverse_chunks")
    threads, per_thread, blocks = 256, 64, 3  # 64 KB of floats per block
    nbytes = threads * per_thread * 4
    x = cp.arange(blocks * threads * per_thread, dtype=cp.float32)
    y = cp.zeros_like(x)
    with pytest.raises(LaunchConfigError, match=f"kernel.max_dynamic_shared_memory = {nbytes}"):
        kernel(blocks, threads, (x, y, per_thread), shared_mem=nbytes)
    kernel.max_dynamic_shared_memory = nbytes
    assert kernel.max_dynamic_shared_memory == nbytes
    kernel(blocks, threads, (x, y, per_thread), shared_mem=nbytes)
    expected = cp.asnumpy(x).reshape(blocks, -1)[:, ::-1].ravel()
    np.testing.assert_array_equal(cp.asnumpy(y), expected)


def test_attributes(saxpy):
    attrs = saxpy.attributes
    assert attrs["num_regs"] > 0 and attrs["max_threads_per_block"] >= 256
    assert {"local_size_bytes", "shared_size_bytes", "max_dynamic_shared_size_bytes"} <= set(attrs)
    assert saxpy.raw is not None and saxpy.name == "saxpy" and [p.name for p in saxpy.params] == ["a", "x", "y", "n"]


def test_template_kernel_by_name_expression():
    kernel = load_kernel(TEMPLATE, "scale", name_expression="scale<double, 3>")
    x = cp.ones(10, cp.float64)
    kernel(1, 32, (x, 10))
    assert float(x.sum()) == 30.0
    with pytest.raises(KernelArgumentError, match="float64"):
        kernel(1, 32, (cp.ones(10, cp.float32), 10))


def test_cpp_kernel_without_extern_c():
    kernel = load_kernel("__global__ void add_one(int* x, int n)\n"
                         "{ int i = threadIdx.x; if (i < n) x[i] += 1; }\n", "add_one")
    x = cp.arange(5, dtype=cp.int32)
    kernel(1, 32, (x, 5))
    assert cp.asnumpy(x).tolist() == [1, 2, 3, 4, 5]


def test_compile_error_surfaces_the_line():
    with pytest.raises(CudaCompileError, match=r"kernel.cu\(3\): error"):
        load_kernel('extern "C" __global__ void bad(float* y)\n{\n    y[0] = nope;\n}\n', "bad")


def test_resource_report_on_the_gpu():
    report = resource_report(SAXPY, "saxpy")
    assert report.arch == f"sm_{cp.cuda.Device().compute_capability}"
    assert 0 < report.registers <= 255 and report.shared_bytes == 0
    assert report.spills in (False, None)  # None: the CuPy-attributes fallback without cuda-bindings


def test_no_gpu_error_is_a_runtime_error():
    assert issubclass(NoGPUError, RuntimeError)
