"""Parsing ptxas -v logs (real ones from NVRTC, and edge cases) and resource_report's fallbacks."""
from __future__ import annotations

from pathlib import Path

import pytest

import kernels.backend
import kernels.compile
import kernels.nvrtc
from kernels import resources, sources
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.resources import ResourceReport, demangle, parse_ptxas_log, resource_report

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC (cuda-bindings) is not installed")

CODE = r'''
__device__ __noinline__ float helper(float x)
{
    float t[8];
    for (int i = 0; i < 8; ++i) t[i] = x * i;
    return t[((int)x) & 7];
}

extern "C" __global__ void with_helper(float* x) { x[threadIdx.x] = helper(x[threadIdx.x]); }

__global__ void cpp_kernel(float* x, int n)
{
    __shared__ float tile[256];
    tile[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x < n) x[threadIdx.x] = tile[255 - threadIdx.x];
}

template <int N>
__global__ void templ(float* x) { __shared__ float s[N]; s[threadIdx.x] = x[0]; __syncthreads(); x[1] = s[N - 1]; }
'''


@pytest.fixture(autouse=True)
def fresh_cache():
    resources._report.cache_clear()
    yield
    resources._report.cache_clear()


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_parses_a_real_nvrtc_log(arch):
    result = compile_cuda(CODE, arch, name_expressions=["templ<64>"]).raise_for_errors()
    parsed = parse_ptxas_log(result.log, {v: k for k, v in result.lowered_names.items()})
    assert set(parsed) == {"with_helper", "cpp_kernel", "templ<64>"}
    assert parsed["cpp_kernel"].mangled == "_Z10cpp_kernelPfi"
    assert parsed["cpp_kernel"].shared_bytes == 1024 and parsed["cpp_kernel"].barriers == 1
    assert parsed["templ<64>"].shared_bytes == 256
    for report in parsed.values():
        assert report.arch == arch and report.registers > 0
        assert report.spill_store_bytes == 0 and report.spill_load_bytes == 0
    # the entry's own properties are used, never those of the helper listed after it
    assert parsed["with_helper"].stack_frame_bytes == int(
        result.log.split("Function properties for with_helper")[1].split("bytes stack frame")[0].split()[-1])


SYNTHETIC = """\
ptxas info    : 0 bytes gmem, 24 bytes cmem[3]
ptxas info    : Function properties for _Z6helperf
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_80'
ptxas info    : Function properties for _Z3fooPf
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, 2048 bytes smem, 380 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compiling entry function '_Z3fooPd' for 'sm_80'
ptxas info    : Function properties for _Z3fooPd
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 380 bytes cmem[0]
ptxas info    : Compiling entry function '_ZN6course4axpyEPf' for 'sm_80'
ptxas info    : Used 6 registers, 360 bytes cmem[0]
"""


def test_parses_nvcc_style_log_with_spills_and_banks():
    parsed = parse_ptxas_log(SYNTHETIC)
    foo = parsed["foo"]
    assert (foo.registers, foo.shared_bytes, foo.constant_bytes) == (255, 2048, 388)
    assert (foo.stack_frame_bytes, foo.spill_store_bytes, foo.spill_load_bytes) == (48, 40, 36)
    assert foo.spills is True and foo.barriers == 0 and foo.arch == "sm_80"


def test_repeated_demangled_name_keeps_the_mangled_one():
    parsed = parse_ptxas_log(SYNTHETIC)
    assert parsed["_Z3fooPd"].registers == 10 and parsed["_Z3fooPd"].barriers == 1


def test_entry_without_properties_and_nested_names():
    axpy = parse_ptxas_log(SYNTHETIC)["course::axpy"]
    assert axpy.registers == 6 and axpy.stack_frame_bytes == 0 and axpy.spills is False


def test_names_mapping_wins_over_demangling():
    parsed = parse_ptxas_log(SYNTHETIC, {"_Z3fooPf": "foo<float>", "_Z3fooPd": "foo<double>"})
    assert set(parsed) == {"foo<float>", "foo<double>", "course::axpy"}
    assert parsed["foo<double>"].kernel == "foo<double>"


def test_empty_and_error_logs_give_nothing():
    assert parse_ptxas_log("") == {}
    assert parse_ptxas_log('k.cu(3): error: identifier "x" is undefined\n') == {}


def test_demangle():
    assert demangle("vector_add") == "vector_add"
    assert demangle("_Z3fooPf") == "foo"
    assert demangle("_Z10cpp_kernelPfi") == "cpp_kernel"
    assert demangle("_ZN2ns5inner4workEv") == "ns::inner::work"


def test_report_text_and_html():
    r = parse_ptxas_log(SYNTHETIC)["foo"]
    assert "255" in str(r) and "40 B stored, 36 B loaded" in str(r) and str(r).startswith("foo (sm_80")
    html = r._repr_html_()
    assert html.startswith("<table>") and "<code>foo</code>" in html and "2048 B" in html
    unknown = ResourceReport(kernel="k<1>", arch="sm_75", registers=8)
    assert unknown.spills is None and "unknown" in str(unknown)
    assert "k&lt;1&gt;" in unknown._repr_html_()


@needs_nvrtc
def test_resource_report_from_code_and_from_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    r = resource_report(CODE, "cpp_kernel", arch="sm_75")
    assert r.kernel == "cpp_kernel" and r.arch == "sm_75" and r.shared_bytes == 1024
    (tmp_path / "ch").mkdir()
    (tmp_path / "ch" / "k.cu").write_text(CODE)
    monkeypatch.setattr(sources, "CUDA_DIR", tmp_path)
    r = resource_report("ch/k.cu", "templ", arch="sm_90", name_expression="templ<32>")
    assert r.kernel == "templ<32>" and r.shared_bytes == 128
    assert resource_report("ch/k.cu", "templ<16>", arch="sm_90").shared_bytes == 64


@needs_nvrtc
def test_resource_report_options_change_the_result():
    code = 'extern "C" __global__ void k(float* x) { __shared__ float s[SIZE]; s[threadIdx.x] = x[0]; x[1] = s[3]; }'
    assert resource_report(code, "k", "sm_90", options=["-DSIZE=16"]).shared_bytes == 64
    assert resource_report(code, "k", "sm_90", options=["-DSIZE=64"]).shared_bytes == 256


@needs_nvrtc
def test_resource_report_errors():
    with pytest.raises(ValueError, match="templ is a template kernel"):
        resource_report(CODE, "templ", arch="sm_90")
    with pytest.raises(ValueError, match="kernels found: with_helper, cpp_kernel, templ"):
        resource_report(CODE, "nope", arch="sm_90")
    with pytest.raises(kernels.nvrtc.CudaCompileError, match=r"kernel.cu\(1\): error"):
        resource_report('extern "C" __global__ void bad(float* x) { x[0] = y; }', "bad", arch="sm_90")


class FakeRaw:
    attributes = {"num_regs": 18, "shared_size_bytes": 1024, "const_size_bytes": 0,
                  "local_size_bytes": 32, "max_threads_per_block": 1024}


class FakeKernel:
    attributes = FakeRaw.attributes


def test_falls_back_to_cupy_attributes_without_nvrtc(monkeypatch: pytest.MonkeyPatch):
    calls = []
    monkeypatch.setattr(kernels.nvrtc, "nvrtc_available", lambda: False)
    monkeypatch.setattr(kernels.backend, "gpu_available", lambda: True)
    monkeypatch.setattr(resources, "default_arch", lambda: "sm_75")
    monkeypatch.setattr(kernels.compile, "load_kernel",
                        lambda *a, **kw: calls.append((a, kw)) or FakeKernel())
    r = resource_report(CODE, "cpp_kernel", arch="sm_90")
    assert calls and calls[0][0] == (CODE, "cpp_kernel")
    assert (r.registers, r.shared_bytes, r.stack_frame_bytes) == (18, 1024, 32)
    assert r.spills is None and r.arch == "sm_75" and r.origin == "CuPy kernel attributes"
    assert "Spills are unknown" in r.note and "not sm_90" in r.note


def test_without_nvrtc_or_gpu_says_what_to_install_once_per_cell_and_reports_unknowns(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Colab's CPU runtime before the setup cell installs NVRTC, or a plain Jupyter without the [cpu]
    extra: one line saying what is missing, and a report the next cells can use."""
    from kernels import portable
    from kernels.occupancy import occupancy

    monkeypatch.setattr(kernels.nvrtc, "nvrtc_available", lambda: False)
    monkeypatch.setattr(kernels.backend, "_probe", lambda: (False, "CuPy could not be imported"))
    monkeypatch.delenv("COURSE_BACKEND", raising=False)
    monkeypatch.setattr(portable.say_once_per_cell, "said", set())
    reports = [resource_report(CODE, "cpp_kernel"), resource_report(CODE, "templ", name_expression="templ<64>"),
               resource_report(CODE, "cpp_kernel")]  # the last one from the cache
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("This cell needs NVRTC") and "unknown" in lines[0]
    assert all(f'"{r}"' in lines[0] for r in kernels.nvrtc.NVRTC_REQUIREMENTS)  # what to pip install
    first, templ, _ = reports
    assert (first.kernel, first.arch, templ.kernel) == ("cpp_kernel", "sm_90", "templ<64>")
    assert (first.registers, first.shared_bytes, first.spill_store_bytes, first.spills) == (None, None, None, None)
    assert first.origin == resources.NO_COMPILER
    assert "registers per thread: unknown" in str(first) and "unknown" in first._repr_html_()
    occ = occupancy(256, first.registers, first.shared_bytes, "9.0")  # the chapters' next cells
    assert occ.blocks_per_sm == 8 and "upper bound" in occ.limiter
    portable.say_once_per_cell._reset()  # the next cell says it again, also for a cached report
    resource_report(CODE, "cpp_kernel")
    assert capsys.readouterr().out.count("This cell needs NVRTC") == 1
    with pytest.raises(ValueError, match="template kernel"):  # wrong calls are still errors
        resource_report(CODE, "templ")
