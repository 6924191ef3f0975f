"""load_module on every backend: a module's kernels (checked like load_kernel's) and its globals as arrays.

The CPU variant runs by default; the CuPy variant with ``pytest -m gpu`` on a machine with a GPU.
"""
from __future__ import annotations

import numpy as np
import pytest

from kernels.compile import Kernel, Module
from kernels.declarations import module_globals
from kernels.errors import GlobalNotFoundError, KernelArgumentError, KernelNotFoundError, LaunchConfigError, NoGPUError

SCALE_TABLE = r"""
#define ENTRIES 8

__constant__ float scale_c[ENTRIES];           // written from the host through get_global
__device__ unsigned int launches;               // counted by the kernels
__device__ float4 corners[2];

extern "C" __global__ void scale_by_table(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * scale_c[i % ENTRIES];
    if (i == 0) atomicAdd(&launches, 1u);
}

extern "C" __global__ void copy_table(float* __restrict__ out)
{
    if (threadIdx.x < ENTRIES) out[threadIdx.x] = scale_c[threadIdx.x];
}

template <int K>
__global__ void add_k(int* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += K;
}
"""


@pytest.fixture
def module(k) -> Module:
    return k.load_module(SCALE_TABLE, name_expressions=["add_k<3>"])


def test_two_kernels_share_a_constant_array_written_through_get_global(k, module: Module):
    xp = k.xp
    scale = module.get_global("scale_c")
    assert scale.shape == (8,) and scale.dtype == np.float32        # from the declaration
    table = np.random.default_rng(16).random(8, dtype=np.float32)
    scale[...] = xp.asarray(table)                                   # into constant memory
    out = xp.zeros(8, np.float32)
    module.get_function("copy_table")((1,), (32,), (out,))
    assert np.array_equal(out.get(), table)
    x = xp.asarray(np.arange(100, dtype=np.float32))
    y = xp.zeros(100, np.float32)
    launches = module.get_global("launches")
    before = int(launches.get())
    module.get_function("scale_by_table")((4,), (32,), (x, y, 100))
    assert np.array_equal(y.get(), np.arange(100, dtype=np.float32) * table[np.arange(100) % 8])
    assert launches.shape == () and int(launches.get()) == before + 1   # __device__ state, seen by the host


def test_kernels_are_checked_like_load_kernels_and_are_the_same_objects(k, module: Module):
    kernel = module.get_function("scale_by_table")
    assert isinstance(kernel, Kernel) and kernel.backend == k.name and kernel is module.get_function("scale_by_table")
    xp = k.xp
    with pytest.raises(KernelArgumentError, match="expected an array of float32"):
        kernel((1,), (32,), (xp.zeros(8, np.float64), xp.zeros(8, np.float32), 8))
    with pytest.raises(LaunchConfigError, match="block.x is 2048"):
        kernel((1,), (2048,), (xp.zeros(8, np.float32), xp.zeros(8, np.float32), 8))
    alone = k.load_kernel(SCALE_TABLE, "copy_table")
    assert alone is k.load_kernel(SCALE_TABLE, "copy_table")          # compiled once, one object
    assert alone is k.load_module(SCALE_TABLE).get_function("copy_table")  # load_kernel is load_module's kernel


def test_template_instantiations_from_name_expressions(k, module: Module):
    xp = k.xp
    y = xp.zeros(40, np.int32)
    module.get_function("add_k<3>")((2,), (32,), (y, 40))
    assert y.get().tolist() == [3] * 40
    assert repr(module.get_function("add_k<3>")) == "<Kernel add_k<3>(int* y, int n)>"


def test_one_name_expression_given_as_a_string_is_refused(k):
    with pytest.raises(TypeError, match=r"name_expressions is a list of strings, e.g. name_expressions=\['add_k<3>'\]"):
        k.load_module(SCALE_TABLE, name_expressions="add_k<3>")


def test_a_files_listed_instantiations_are_in_its_module(k):
    module = k.load_module("coalescing/transpose.cu")
    assert "transpose_tiled<32, 8, 1>" in module.kernel_names and "transpose_naive" in module.kernel_names
    assert module.get_function("transpose_tiled<32, 8, 1>").expression == "transpose_tiled<32, 8, 1>"


def test_a_missing_kernel_is_named_with_what_the_module_has(module: Module):
    with pytest.raises(KernelNotFoundError) as e:
        module.get_function("scale_by_tabel")
    message = str(e.value)
    assert "\n" not in message and "'scale_by_tabel'" in message
    assert message.endswith("kernels: add_k<3>, scale_by_table, copy_table")
    with pytest.raises(KernelNotFoundError, match=r"add_k is a template kernel: name its instantiation when "
                                                  r"loading, e.g. load_module\(\.\.\., name_expressions="):
        module.get_function("add_k<4>")


def test_a_missing_global_is_named_with_what_the_module_has(module: Module):
    with pytest.raises(GlobalNotFoundError) as e:
        module.get_global("scale")
    message = str(e.value)
    assert "\n" not in message and "'scale'" in message
    assert message.endswith("globals: scale_c, launches, corners")
    assert isinstance(e.value, KernelNotFoundError)                  # a name this module lacks, either way


def test_global_views_follow_the_declaration_or_what_is_asked(module: Module):
    corners = module.get_global("corners")
    assert corners.shape == (2, 4) and corners.dtype == np.float32    # float4[2]: a last axis of 4
    as_bytes = module.get_global("scale_c", dtype=np.uint8)
    assert as_bytes.shape == (32,)                                    # the same 32 bytes, seen as bytes
    assert module.get_global("scale_c", shape=(2, 4)).shape == (2, 4)
    with pytest.raises(ValueError, match=r"scale_c has 32 bytes; an array of shape \(9,\) and dtype float32 needs 36"):
        module.get_global("scale_c", shape=9)


def test_a_global_of_a_struct_type_needs_a_dtype(k):
    module = k.load_module("struct Pair { int a, b; };\n__device__ Pair pair;\n"
                         'extern "C" __global__ void k(int* y) { y[0] = pair.a + pair.b; }\n')
    with pytest.raises(ValueError, match=r"pair is a Pair; say how to view it, e.g. get_global\('pair', dtype="):
        module.get_global("pair")
    pair = module.get_global("pair", dtype=np.int32, shape=2)
    pair[...] = k.xp.asarray(np.array([4, 5], np.int32))
    y = k.xp.zeros(1, np.int32)
    module.get_function("k")((1,), (1,), (y,))
    assert int(y.get()[0]) == 9


def test_blocks_per_sm_is_cudas_occupancy_answer_on_a_gpu(k, module: Module):
    kernel = module.get_function("copy_table")
    if k.on_cpu:
        with pytest.raises(NoGPUError, match="copy_table.blocks_per_sm asks CUDA's occupancy calculator"):
            kernel.blocks_per_sm(256)
        return
    import cupy

    expected = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.raw.kernel.ptr, 256, 0)
    assert kernel.blocks_per_sm(256) == kernel.blocks_per_sm((16, 16)) == expected >= 1


def test_module_globals_are_read_from_the_source():
    code = ("#define N 4\nconstexpr int M = 2 * N;\n__constant__ float a[N][M], b[3u];\nstatic __device__ int hidden;\n"
            "__device__ inline float twice(float x) { return 2 * x; }\nnamespace inner { __device__ int mangled; }\n"
            'extern "C" {\n__constant__ int table[4] = {1, 2, 3, 4};\n}\n__device__ __shared__ float no;\n')
    found = module_globals(code)
    assert list(found) == ["a", "b", "table"]
    assert found["a"].shape(code) == (4, 8) and found["b"].shape(code) == (3,) and found["table"].dtype == "int32"
    assert module_globals("__constant__ float c[K];\n")["c"].shape("__constant__ float c[K];\n", ["-DK=5"]) == (5,)
