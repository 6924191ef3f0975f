"""Compiling for the CPU backend: unsupported GPU features are refused before compiling (with the
feature and the line), compiler errors name the reader's lines, CuPy's options are understood,
kernels are cached in memory and on disk, and nothing on this path imports CuPy.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kernels
from kernels.cpu import CompileError, RawKernel, RawModule, UnsupportedFeatureError, xp
from kernels.cpu import compile as cpu_compile
from kernels.cpu.compile import translate_options
from kernels.signature import KernelArgumentError, KernelNotFoundError

ROOT = Path(__file__).resolve().parents[1]

TRIVIAL = 'extern "C" __global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n'


# ------------------------------------------------------------------------- unsupported features

UNSUPPORTED = [
    ("tensor core", "#include <mma.h>\nusing namespace nvcuda;\n__global__ void k() {}\n", 1),
    ("tensor core", "__global__ void k() {\n  nvcuda::wmma::fragment<int, 16, 16, 16, float> f;\n}\n", 2),
    ("inline PTX", 'extern "C" __global__ void k(int* x) {\n  int v;\n'
                   '  asm volatile("mov.u32 %0, %%laneid;" : "=r"(v));\n  x[0] = v;\n}\n', 3),
    ("asynchronous copies", 'extern "C" __global__ void k(float* x) {\n  __shared__ float s[32];\n'
                            "  __pipeline_memcpy_async(&s[0], x, 4);\n}\n", 3),
    ("asynchronous copies", "#include <cuda/pipeline>\n__global__ void k() {}\n", 1),
    ("asynchronous copies", "__global__ void k(float* x) {\n  cuda::memcpy_async(x, x, 4, 0);\n}\n", 2),
    ("Tensor Memory Accelerator", "__global__ void k(const __grid_constant__ CUtensorMap map) {}\n", 1),
    ("thread block clusters", "__global__ void __cluster_dims__(2, 1, 1) k() {}\n", 1),
    ("grid-wide synchronization", "#include <cooperative_groups.h>\n__global__ void k() {\n"
                                  "  cooperative_groups::this_grid().sync();\n}\n", 3),
    ("dynamic parallelism", "__global__ void child() {}\n__global__ void parent() {\n  child<<<1, 1>>>();\n}\n", 3),
    ("textures", "__global__ void k(cudaTextureObject_t t, float* y) {\n  y[0] = tex1Dfetch<float>(t, 0);\n}\n", 1),
]


@pytest.mark.parametrize("feature,code,line", UNSUPPORTED, ids=[f"{u[0]}-{i}" for i, u in enumerate(UNSUPPORTED)])
def test_unsupported_features_are_refused_with_their_line(feature, code, line):
    with pytest.raises(UnsupportedFeatureError) as info:
        RawModule(code=code, filename="reader.cu")
    message = str(info.value)
    assert message.startswith(f"reader.cu:{line}: ") and feature in message and "needs a GPU" in message
    assert isinstance(info.value, kernels.CudaCompileError)


def test_a_comment_about_asm_is_not_a_feature():
    RawModule(code="// asm(...) would be PTX; <<<grid, block>>> is host syntax\n" + TRIVIAL)


def test_unsupported_feature_in_an_included_header_names_the_header(tmp_path: Path):
    (tmp_path / "lane.cuh").write_text('#pragma once\n\n__device__ int lane() {\n  int v;\n'
                                       '  asm("mov.u32 %0, %%laneid;" : "=r"(v));\n  return v;\n}\n')
    code = '#include "lane.cuh"\nextern "C" __global__ void k(int* y) { y[0] = lane(); }\n'
    with pytest.raises(UnsupportedFeatureError, match=r"^lane.cuh:5: inline PTX"):
        RawModule(code=code, options=(f"-I{tmp_path}",))


# ------------------------------------------------------------------------- compiler messages

def test_compile_error_names_the_readers_line_without_noise():
    code = 'extern "C" __global__ void bad(float* y)\n{\n    y[0] = nope;\n}\n'
    with pytest.raises(CompileError) as info:
        RawModule(code=code, filename="chapter/bad.cu")
    message = str(info.value)
    assert "chapter/bad.cu:3:12: error: 'nope' was not declared" in message.replace("‘", "'").replace("’", "'")
    assert "cuda_cpu.h" not in message and "kernel_unit" not in message and "/tmp" not in message
    assert "In file included from" not in message


def test_compile_error_in_a_header_names_the_header(tmp_path: Path):
    (tmp_path / "helpers.cuh").write_text("#pragma once\n__device__ float twice(float v)\n{\n    return 2 * w;\n}\n")
    code = '#include "helpers.cuh"\nextern "C" __global__ void k(float* y) { y[0] = twice(y[0]); }\n'
    with pytest.raises(CompileError) as info:
        RawModule(code=code, options=(f"--include-path={tmp_path}",))
    assert "helpers.cuh:4:" in str(info.value) and str(tmp_path) not in str(info.value).split("error")[0]


def test_line_numbers_survive_the_rewrites():
    code = ("extern __shared__ float buf[];\n"
            "__device__ __noinline__ float f(float v) { return v; }\n"
            "extern \"C\" __global__ void k(float* y)\n{\n    static __shared__ float s[4];\n"
            "    y[0] = buf[0] + s[0] + f(1.0f) + missing;\n}\n")
    with pytest.raises(CompileError, match=r"kernel.cu:6:\d+: error"):
        RawModule(code=code)


def test_a_name_expression_that_does_not_exist():
    code = "template <typename T> __global__ void scale(T* x) { x[0] *= 2; }\n"
    with pytest.raises(CompileError, match="scale<flaot>"):
        RawModule(code=code, name_expressions=["scale<flaot>"])
    module = RawModule(code=code, name_expressions=["scale<float>"])
    with pytest.raises(KernelNotFoundError, match="name_expressions"):
        module.get_function("scale<double>")


# ------------------------------------------------------------------------- options

def test_options_are_translated():
    build = translate_options(["-std=c++17", "-DBLOCK=128", "--define-macro=MODE", "-I/tmp/x", "--include-path=/y",
                               "-arch=sm_75", "-lineinfo", "--use_fast_math", "--gpu-architecture=compute_90",
                               "-maxrregcount=64", "-Xptxas", "-v", "-U", "NDEBUG"])
    assert build.defines == ("-DBLOCK=128", "-DMODE", "-UNDEBUG")
    assert build.include_dirs == ("/tmp/x", "/y") and build.cuda_arch == 900 and build.std == 17
    assert translate_options(["-std=c++20"]).std == 20 and translate_options(["-std=c++11"]).std == 17
    with pytest.raises(CompileError, match="unknown compiler option '--frobnicate'"):
        translate_options(["--frobnicate"])


def test_defines_and_arch_reach_the_source():
    code = ('extern "C" __global__ void k(int* y) { y[0] = SCALE * 10 + (__CUDA_ARCH__ >= 750);'
            ' y[1] = __CUDA_ARCH__; }\n')
    y = xp.zeros(2, np.int32)
    RawKernel(code, "k", options=("-DSCALE=7", "-arch=sm_75", "-lineinfo"))((1,), (1,), (y,))
    assert y.get().tolist() == [71, 750]


# ------------------------------------------------------------------------- kernels and modules

def test_cpp_kernels_without_extern_c_and_kernels_in_disabled_code():
    code = ("__global__ void add_one(int* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1; }\n"
            "#if 0\nextern \"C\" __global__ void gone(int* x) { x[0] = 0; }\n#endif\n"
            "namespace inner { __global__ void hidden(int* x) { x[0] = 5; } }\n")
    module = RawModule(code=code)
    assert "add_one" in module.entries and "gone" not in module.entries
    x = xp.arange(5, dtype=np.int32)
    module.get_function("add_one")((1,), (32,), (x, 5))
    assert x.get().tolist() == [1, 2, 3, 4, 5]
    RawModule(code=code, name_expressions=["inner::hidden"]).get_function("inner::hidden")((1,), (1,), (x,))
    assert int(x[0]) == 5


def test_kernel_arguments_are_checked_as_on_the_gpu():
    code = 'extern "C" __global__ void saxpy(float a, const float* x, float* y, int n)\n' \
           '{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }\n'
    kernel = RawKernel(code, "saxpy")
    x, y = xp.ones(10, np.float32), xp.zeros(10, np.float32)
    with pytest.raises(KernelArgumentError, match="does not fit in int32"):
        kernel((1,), (32,), (1.0, x, y, 2**31 + 5))
    with pytest.raises(KernelArgumentError, match="expected an array of float32, got an array of float64"):
        kernel((1,), (32,), (1.0, xp.zeros(10), y, 10))
    with pytest.raises(KernelArgumentError, match="not C-contiguous"):
        kernel((1,), (32,), (1.0, xp.zeros((4, 4), np.float32)[:, 0], y, 4))
    with pytest.raises(KernelArgumentError, match="takes 4 arguments"):
        kernel((1,), (32,), (1.0, x, y))
    kernel((1,), (32,), (np.float32(2.5), x, y, np.int64(10)))
    assert y.get().tolist() == [2.5] * 10


def test_launch_configuration_is_checked():
    from kernels.compile import LaunchConfigError

    kernel = RawKernel('extern "C" __global__ void __launch_bounds__(256) k(float* y) { y[threadIdx.x] = 1; }', "k")
    y = xp.zeros(1024, np.float32)
    with pytest.raises(LaunchConfigError, match="more than this kernel can run \\(256"):
        kernel((1,), (512,), (y,))
    with pytest.raises(LaunchConfigError, match="2048"):
        kernel((1,), (2048,), (y,))
    with pytest.raises(LaunchConfigError, match="max_dynamic_shared_memory"):
        kernel((1,), (32,), (y,), shared_mem=64 * 1024)
    kernel.max_dynamic_shared_size_bytes = 64 * 1024
    kernel((1,), (32,), (y,), shared_mem=64 * 1024)


def test_load_kernel_runs_on_the_cpu_backend(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    kernel = kernels.load_kernel("gpu_architecture/vector_add.cu", "vector_add")
    assert kernel.backend == "cpu" and kernel.attributes["max_threads_per_block"] == 1024
    x = xp.arange(300, dtype=np.float32)
    out = xp.zeros(300, np.float32)
    kernel(kernels.ceil_div(300, 128), 128, (x, x, out, 300))
    assert np.array_equal(out.get(), 2 * np.arange(300))
    with pytest.raises(KernelArgumentError, match="expected an array of float32"):
        kernel(3, 128, (x, xp.zeros(300), out, 300))
    template = kernels.load_kernel("coalescing/transpose.cu", "transpose_tiled<16, 4, 1>")
    assert template.raw.module.entries[:2] == ["transpose_tiled<32, 8, 0>", "transpose_tiled<32, 8, 1>"]
    with pytest.raises(kernels.CudaCompileError, match=r"kernel.cu:3:\d+: error"):
        kernels.load_kernel('extern "C" __global__ void bad(float* y)\n{\n    y[0] = nope;\n}\n', "bad")


# ------------------------------------------------------------------------- caching

def test_compiled_modules_are_cached_in_memory_and_on_disk(monkeypatch: pytest.MonkeyPatch):
    code = TRIVIAL.replace("1.0f", "3.0f")
    first = cpu_compile.compile_module(code, ["k"])
    assert cpu_compile.compile_module(code, ["k"]) is first                    # memory
    meta = json.loads(first.path.with_suffix(".json").read_text())
    assert meta["entries"] == ["k"] and first.path.is_file()
    monkeypatch.setattr(cpu_compile, "_modules", {})

    def no_compiler(*args, **kwargs):
        raise AssertionError("the compiler ran although the library is on disk")
    monkeypatch.setattr(cpu_compile.subprocess, "run", no_compiler)
    again = cpu_compile.compile_module(code, ["k"])                           # disk, no compiler
    assert again.path == first.path
    assert cpu_compile._cache_key(code, "kernel.cu", translate_options(["-DX"]), ["k"]) != first.key


def test_changing_an_included_header_recompiles(tmp_path: Path):
    header = tmp_path / "value.cuh"
    header.write_text("#define VALUE 1\n")
    code = '#include "value.cuh"\nextern "C" __global__ void k(int* y) { y[0] = VALUE; }\n'
    y = xp.zeros(1, np.int32)
    RawKernel(code, "k", options=(f"-I{tmp_path}",))((1,), (1,), (y,))
    assert int(y[0]) == 1
    header.write_text("#define VALUE 2\n")                                  # edited, then the cell runs again
    RawKernel(code, "k", options=(f"-I{tmp_path}",))((1,), (1,), (y,))
    assert int(y[0]) == 2


def test_the_cpu_path_never_imports_cupy(tmp_path: Path):
    script = textwrap.dedent('''
        import sys, numpy as np
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "cupy" or name.startswith("cupy."):
                    raise ImportError("cupy is blocked in this test")
        sys.meta_path.insert(0, Block())
        import kernels
        assert kernels.backend_name() == "cpu"
        xp = kernels.array_module()
        k = kernels.load_kernel("gpu_architecture/vector_add.cu", "vector_add")
        x = xp.arange(10, dtype=np.float32); out = xp.zeros(10, np.float32)
        k(1, 32, (x, x, out, 10))
        kernels.check(lambda x, out: k(1, 32, (x, x, out, 10)), lambda x: 2 * x,
                      inputs={"x": kernels.rand(10)}, outputs={"out": (10, np.float32)}).raise_if_failed()
        assert out.get().tolist() == [2.0 * i for i in range(10)]
        assert not any(m == "cupy" or m.startswith("cupy.") for m in sys.modules)
        print("ok")
    ''')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.stdout.strip() == "ok", done.stderr


def _course_sources():
    from kernels.sources import CUDA_DIR
    from tooling.cuda_snippets import cu_snippets

    return cu_snippets(CUDA_DIR)


@pytest.mark.parametrize("snippet", _course_sources(), ids=lambda s: s.filename)
def test_every_course_kernel_compiles_for_the_cpu_backend_or_is_refused_by_name(snippet):
    """Each .cu file of kernels/cuda (templates from its name_expressions line) either compiles, or
    uses a GPU-only feature and is refused with that feature's name: never a compiler error."""
    from kernels.sources import include_options

    try:
        module = RawModule(code=snippet.code, options=("-std=c++17", *include_options()),
                           name_expressions=list(snippet.name_expressions) or None, filename=snippet.filename)
    except UnsupportedFeatureError as exc:
        assert "cannot run on the CPU backend" in str(exc)
        return
    assert set(snippet.name_expressions) <= set(module.entries)


def test_old_libraries_are_pruned(tmp_path: Path):
    import os

    for i in range(5):
        d = tmp_path / f"{i:02d}"
        d.mkdir()
        (d / f"k{i}.so").write_bytes(b"x")
        (d / f"k{i}.json").write_text("{}")
        os.utime(d / f"k{i}.so", (1000 + i, 1000 + i))
    cpu_compile._prune(tmp_path, keep=3)
    assert sorted(p.name for p in tmp_path.glob("*/*")) == ["k2.json", "k2.so", "k3.json", "k3.so", "k4.json", "k4.so"]
