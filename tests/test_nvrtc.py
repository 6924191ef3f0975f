"""Compiling with the real NVRTC (no GPU needed): results, errors, headers and ptxas reports."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernels.nvrtc import (CudaCompileError, build_options, compile_cuda, cuda_include_dirs,
                           nvrtc_available, supported_archs)

pytestmark = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC (cuda-bindings) is not installed")

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''

BROKEN = 'extern "C" __global__ void broken(float* y)\n{\n    y[0] = undefined_name;\n}\n'

# 64 floats indexed with run-time indices cannot live in registers, and __launch_bounds__(1024)
# caps a thread at 64 registers: the array goes to local memory (stack frame) and spills appear.
SPILLY = r'''
extern "C" __global__ void __launch_bounds__(1024) spilly(float* out, const int* idx, int n)
{
    float a[64];
    for (int k = 0; k < 64; ++k) a[k] = out[k * n + threadIdx.x];
    for (int k = 0; k < 64; ++k) a[idx[k]] += a[idx[k + 64]];
    float s = 0.0f;
    for (int k = 0; k < 64; ++k) s += a[k] * a[63 - k];
    out[threadIdx.x] = s;
}
'''

TEMPLATE = r'''
template <typename T, int BLOCK>
__global__ void block_sum(const T* in, T* out)
{
    __shared__ T tile[BLOCK];
    tile[threadIdx.x] = in[blockIdx.x * BLOCK + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
        T s = 0;
        for (int i = 0; i < BLOCK; ++i) s += tile[i];
        out[blockIdx.x] = s;
    }
}
'''


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_compiles_and_reports_registers(arch):
    result = compile_cuda(SAXPY, arch)
    assert result.ok, result.log
    assert result.arch == arch
    assert result.cubin is not None and result.cubin[:4] == b"\x7fELF"
    report = result.resources["saxpy"]
    assert report.arch == arch
    assert 0 < report.registers <= 255
    assert report.spills is False and report.shared_bytes == 0 and report.barriers == 0


def test_syntax_error_is_reported_with_file_and_line():
    result = compile_cuda(BROKEN, "sm_90", filename="broken.cu")
    assert not result.ok and result.cubin is None
    assert 'broken.cu(3): error: identifier "undefined_name" is undefined' in result.log
    assert any("broken.cu(3)" in line for line in result.errors())
    with pytest.raises(CudaCompileError, match=r"broken.cu does not compile for sm_90:\n.*broken.cu\(3\): error"):
        result.raise_for_errors()


def test_ok_result_raise_for_errors_returns_itself():
    result = compile_cuda(SAXPY, "sm_75")
    assert result.raise_for_errors() is result


def test_launch_bounds_with_dynamically_indexed_array_uses_local_memory():
    report = compile_cuda(SPILLY, "sm_90").raise_for_errors().resources["spilly"]
    assert report.registers <= 64
    assert report.stack_frame_bytes > 0 or report.spills


def test_cuda_fp16_header_resolves():
    code = ('#include <cuda_fp16.h>\n'
            'extern "C" __global__ void halve(const __half* x, float* y)\n'
            '{ y[threadIdx.x] = __half2float(x[threadIdx.x]) * 0.5f; }\n')
    assert cuda_include_dirs(), "no CUDA header directory found"
    result = compile_cuda(code, "sm_75")
    assert result.ok, result.log


@pytest.fixture
def fresh_include_dirs():
    """kernels.nvrtc with its header choice forgotten before and after the test (it is made once per process)."""
    import kernels.nvrtc as nv

    nv.cuda_include_dirs.cache_clear()
    yield nv
    nv.cuda_include_dirs.cache_clear()


def _toolkit_headers(root: Path, cuda_version: int) -> Path:
    """A CUDA toolkit's include/ of ``cuda_version`` (e.g. 13000) whose cuda_fp16.h cannot be compiled."""
    include = root / "include"
    include.mkdir(parents=True)
    (include / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION {cuda_version}\n")
    (include / "cuda_fp16.h").write_text("#error the headers of another CUDA version\n")
    return include


def test_header_major_reads_the_runtime_version(tmp_path):
    import kernels.nvrtc as nv

    assert nv.header_major(_toolkit_headers(tmp_path / "a", 12090)) == 12
    assert nv.header_major(_toolkit_headers(tmp_path / "b", 13000)) == 13
    assert nv.header_major(tmp_path) is None


def test_headers_match_the_nvrtc_in_use_whatever_the_environment_names(tmp_path, monkeypatch, fresh_include_dirs):
    """Without the nvidia wheels on sys.path and with CUDA_PATH naming a toolkit of another CUDA version
    (as /usr/local/cuda often is), the headers are still those of the NVRTC library the process loaded."""
    nv = fresh_include_dirs
    major = nv.nvrtc_version()[0]
    other = _toolkit_headers(tmp_path / "cuda", (major + 1) * 1000)
    monkeypatch.setattr(nv, "_nvidia_dirs", lambda: [])
    monkeypatch.setenv("CUDA_PATH", str(other.parent))
    monkeypatch.setenv("CUDA_HOME", str(other.parent))
    chosen = nv.cuda_include_dirs()
    assert str(other) not in chosen
    assert chosen and all(nv.header_major(Path(d)) in (None, major) for d in chosen), chosen
    code = ('#include <cuda_fp16.h>\n'
            'extern "C" __global__ void headers_of_this_nvrtc(const __half* x, float* y)\n'
            '{ y[threadIdx.x] = __half2float(x[threadIdx.x]); }\n')
    result = compile_cuda(code, "sm_75")
    assert result.ok, result.log


def test_name_expressions_give_lowered_names_and_per_instance_reports():
    exprs = ["block_sum<float, 256>", "block_sum<double, 128>"]
    result = compile_cuda(TEMPLATE, "sm_90", name_expressions=exprs).raise_for_errors()
    assert set(result.lowered_names) == set(exprs)
    assert all(name.startswith("_Z9block_sum") for name in result.lowered_names.values())
    assert result.resources["block_sum<float, 256>"].shared_bytes == 256 * 4
    assert result.resources["block_sum<double, 128>"].shared_bytes == 128 * 8
    assert result.resources["block_sum<float, 256>"].barriers == 1


def test_uninstantiated_template_compiles_to_nothing():
    result = compile_cuda(TEMPLATE, "sm_90").raise_for_errors()
    assert result.resources == {}


def test_compute_arch_gives_ptx_without_cubin():
    result = compile_cuda(SAXPY, "compute_90").raise_for_errors()
    assert result.cubin is None
    assert ".entry saxpy" in result.ptx and ".target sm_90" in result.ptx
    assert result.resources == {}


def test_user_options_are_passed_through(tmp_path: Path):
    code = '#include "tile.cuh"\n#ifndef BLOCK\n#error BLOCK must be defined\n#endif\n' \
           'extern "C" __global__ void k(float* x) { __shared__ float s[BLOCK * TILE]; ' \
           's[threadIdx.x] = x[0]; x[1] = s[0]; }\n'
    (tmp_path / "tile.cuh").write_text("#define TILE 2\n")
    include = f"--include-path={tmp_path}"
    missing = compile_cuda(code, "sm_90", options=[include])
    assert not missing.ok and "BLOCK must be defined" in missing.log
    result = compile_cuda(code, "sm_90", options=[include, "-DBLOCK=32"]).raise_for_errors()
    assert result.resources["k"].shared_bytes == 32 * 2 * 4


def test_build_options_always_ask_ptxas_for_a_report():
    opts = build_options("sm_75", ["-DX=1"])
    assert "-arch=sm_75" in opts and "-std=c++17" in opts and "-lineinfo" in opts
    assert "--ptxas-options=-v" in opts and opts[-1] == "-DX=1"
    assert "-std=c++17" not in build_options("sm_75", ["-std=c++14"])
    assert "--ptxas-options=-v" not in build_options("compute_75")


def test_supported_archs_include_the_course_targets_and_refuse_others():
    archs = supported_archs()
    assert "sm_75" in archs and "sm_90" in archs
    with pytest.raises(ValueError, match="cannot compile for sm_11"):
        compile_cuda(SAXPY, "sm_11")


def test_second_compile_of_a_program_keeps_its_resource_report():
    """NVRTC 13 prints no ptxas report when a process compiles the same program twice."""
    code = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }'
    first = compile_cuda(code, "sm_75")
    second = compile_cuda(code, "sm_75")
    assert first.resources["twice"].registers is not None
    assert second.resources == first.resources


def test_a_fresh_process_reports_what_this_one_compiles():
    """The same reports as an in-process compile, per job; a job that does not compile names its file."""
    from kernels.nvrtc import reports_in_fresh_process

    jobs = [(SPILLY, "sm_90", (), (), "spilly.cu"),
            (TEMPLATE, "sm_75", ("-DUNUSED=1",), ["block_sum<float, 256>"], "t.cu")]
    fresh = reports_in_fresh_process(jobs)
    assert fresh == [compile_cuda(*job).resources for job in jobs]
    assert reports_in_fresh_process(jobs * 2, workers=3) == fresh * 2  # dealt to three processes, in order
    assert fresh[0]["spilly"].stack_frame_bytes > 0 and fresh[1]["block_sum<float, 256>"].shared_bytes == 1024
    with pytest.raises(CudaCompileError, match=r"(?s)fresh process failed.*broken.cu\(3\): error"):
        reports_in_fresh_process([(BROKEN, "sm_90", (), (), "broken.cu")])


class _FakeLogBinding:
    """NVRTC's C calls write into the buffer they are given; this fake does the same from Python."""

    def __init__(self, text: bytes):
        self.text, self.buffers = text, []

    def nvrtcGetProgramLogSize(self, prog):
        return (0, len(self.text))

    def nvrtcGetProgramLog(self, prog, buf):
        self.buffers.append(buf)
        buf[: len(self.text)] = self.text      # a bytes object would refuse; C code would not
        return (0,)


@pytest.mark.parametrize("text", [b"\x00", b"warning: x\x00"])
def test_log_buffer_is_fresh_and_mutable(monkeypatch, text):
    """An empty log is one byte (the NUL). The buffer handed to NVRTC must never be a shared, immutable
    bytes object: b" " * 1 is the interpreter's own b" ", and NVRTC's NUL written into it corrupted
    every later b" " (and with it the spaces of f-strings) in the process."""
    import kernels.nvrtc as nv

    fake = _FakeLogBinding(text)
    monkeypatch.setattr(nv, "_binding", lambda: fake)
    assert nv._get_bytes(object(), "nvrtcGetProgramLogSize", "nvrtcGetProgramLog") == text
    (buf,) = fake.buffers
    assert isinstance(buf, bytearray) and len(buf) == len(text)


def test_compiling_to_ptx_leaves_spaces_alone():
    """A PTX-only compile has an empty log (size 1). After it, spaces are still spaces."""
    compile_cuda(SAXPY + "\n// empty-log probe\n", "compute_75").raise_for_errors()
    assert b" "[0] == 32 and " ".join("ab") == "a\x20b" and f"{1:>2} {2}" == "\x201\x202"
