"""Device info, ceilings, benchmark and check() on a real GPU (run with: pytest -m gpu)."""
from __future__ import annotations

import datetime

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

BUGGY_VECTOR_ADD = r"""
extern "C" __global__ void vector_add_bug(const float* x, const float* y, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) {  // off by one: the last element is never written
        out[i] = x[i] + y[i];
    }
}
"""


@pytest.fixture(scope="module")
def cupy():
    from kernels.backend import gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU and CuPy")
    import cupy

    return cupy


def test_device_info_is_sane(cupy) -> None:
    from kernels.device import device_info

    info = device_info()
    assert info is device_info()  # cached
    assert info.name and info.sm_count >= 1 and info.warp_size == 32
    major, minor = (int(v) for v in info.compute_capability.split("."))
    assert f"{major}{minor}" == cupy.cuda.Device().compute_capability and major >= 5
    assert info.max_threads_per_block == 1024
    assert info.max_threads_per_sm >= info.max_threads_per_block
    assert info.max_blocks_per_sm >= 16
    assert info.regs_per_sm >= 65536 and info.regs_per_block >= 32768
    assert info.shared_per_block == 48 * 1024
    assert info.shared_per_block_optin >= info.shared_per_block
    assert info.shared_per_sm >= info.shared_per_block_optin
    assert info.l2_bytes >= 1 << 20
    assert info.memory_bytes >= 4 << 30
    free, total = cupy.cuda.runtime.memGetInfo()
    assert info.memory_bytes == total
    assert info.cuda_runtime.count(".") == 1 and info.cuda_driver.count(".") == 1
    assert info.cupy_version == cupy.__version__
    if info.sm_clock_khz is not None:
        assert 300_000 < info.sm_clock_khz < 4_000_000
    if info.theoretical_dram_gbps is not None:
        assert 100 < info.theoretical_dram_gbps < 20_000
    text = str(info.table())
    assert info.name in text and str(info.sm_count) in text
    assert "<table>" in info.table()._repr_html_()


def test_provenance_keys(cupy) -> None:
    from kernels.device import provenance

    p = provenance()
    assert set(p) == {"gpu", "compute_capability", "cuda_runtime", "cuda_driver", "cupy", "date"}
    assert p["date"] == datetime.date.today().isoformat()
    assert all(isinstance(v, str) and v for v in p.values())


def test_ceilings_are_plausible(cupy) -> None:
    from kernels.ceilings import ceilings
    from kernels.device import device_info

    info = device_info()
    c = ceilings()
    assert c is ceilings()  # measured once
    assert c.device == info.name and c.sm_count == info.sm_count and c.l2_bytes == info.l2_bytes
    assert c.copy_gbps > 100
    peak = info.theoretical_dram_gbps
    if peak is not None:
        assert 0.3 * peak <= c.copy_gbps <= 1.1 * peak, (c.copy_gbps, peak)
    assert c.fma_tflops > 1
    if info.sm_clock_khz is not None:
        upper = info.sm_count * 128 * 2 * info.sm_clock_khz * 1e3 / 1e12
        assert c.fma_tflops < 1.1 * upper, (c.fma_tflops, upper)
    assert "measured" in str(c)


def test_benchmark_tiny_kernel_is_positive_and_repeatable(cupy) -> None:
    from kernels.compile import ceil_div, load_kernel
    from kernels.timing import benchmark, gbps

    n = 1 << 20
    x = cupy.ones(n, dtype=np.float32)
    y = cupy.ones(n, dtype=np.float32)
    out = cupy.empty(n, dtype=np.float32)
    k = load_kernel("gpu_architecture/vector_add.cu", "vector_add")
    launch = lambda: k((ceil_div(n, 256),), (256,), (x, y, out, np.int32(n)))  # noqa: E731
    a = benchmark(launch, repeat=30)
    b = benchmark(launch, repeat=30)
    assert a.n == 30 and a.min_ms > 0
    assert 0.5 < a.median_ms / b.median_ms < 2.0
    assert gbps(3 * 4 * n, a) > 10
    assert float(out[-1]) == 2.0


def test_launch_overhead_is_not_timed(cupy) -> None:
    from kernels.compile import load_kernel
    from kernels.timing import benchmark, host_timer

    # A one-element kernel takes a few microseconds on the GPU; queuing it from Python takes
    # longer. The lead-in keeps the GPU busy while Python queues it, so events see only the GPU.
    x = cupy.ones(1, dtype=np.float32)
    out = cupy.empty(1, dtype=np.float32)
    k = load_kernel("gpu_architecture/vector_add.cu", "vector_add")
    launch = lambda: k((1,), (32,), (x, x, out, np.int32(1)))  # noqa: E731
    events = benchmark(launch, repeat=50, flush_l2=False)
    host = host_timer(launch, sync=True, repeat=50)
    assert events.median_ms < 0.015, str(events)
    assert events.median_ms < host.median_ms


def test_flush_makes_a_cache_resident_kernel_slower(cupy) -> None:
    from kernels.compile import ceil_div, load_kernel
    from kernels.device import device_info
    from kernels.timing import benchmark

    # Three arrays that together fit in L2 comfortably: without the flush they stay cached.
    n = max(device_info().l2_bytes // (4 * 3 * 4), 1 << 16)
    x = cupy.ones(n, dtype=np.float32)
    y = cupy.ones(n, dtype=np.float32)
    out = cupy.empty(n, dtype=np.float32)
    k = load_kernel("gpu_architecture/vector_add.cu", "vector_add")
    launch = lambda: k((ceil_div(n, 256),), (256,), (x, y, out, np.int32(n)))  # noqa: E731
    hot = benchmark(launch, repeat=50, flush_l2=False)
    cold = benchmark(launch, repeat=50, flush_l2=True)
    assert cold.median_ms > hot.median_ms


def test_check_with_real_kernels(cupy) -> None:
    from kernels.check import check, rand
    from kernels.compile import ceil_div, load_kernel

    n = 100_003
    good = load_kernel("gpu_architecture/vector_add.cu", "vector_add")
    bad = load_kernel(BUGGY_VECTOR_ADD, "vector_add_bug")

    def run(kernel):
        return check(lambda x, y, out: kernel((ceil_div(n, 256),), (256,), (x, y, out, np.int32(n))),
                     lambda x, y: x + y, inputs={"x": rand(n), "y": rand(n)},
                     outputs={"out": ((n,), np.float32)})

    ok = run(good)
    assert ok.ok, str(ok)
    failed = run(bad)
    assert not failed.ok
    assert failed.outputs[0].unwritten == 1
    assert failed.outputs[0].first_mismatches[0][0] == (n - 1,)
