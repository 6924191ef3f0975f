"""The T4 profile (kernels.profile) without a GPU: what it reports, what it compiles for, what it leaves alone.

A fake H200 stands in for the device where a GPU would be read; tests/gpu/test_profile_gpu.py runs the
same switch on a real GPU.
"""
from __future__ import annotations

import json
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest

import kernels.backend
import kernels.compile
import kernels.device
import kernels.profile as profile
from kernels.device import cpu_backend_info, device_info, provenance
from kernels.nvrtc import compile_cuda, nvrtc_available

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC (cuda-bindings) is not installed")

H200_NAME = "NVIDIA H200"


def fake_h200() -> kernels.device.DeviceInfo:
    """An H200 as CUDA reports it (the numbers device_info() read on one)."""
    return replace(cpu_backend_info(), name=H200_NAME, backend="cupy", compute_capability="9.0", sm_count=132,
                   max_threads_per_sm=2048, max_blocks_per_sm=32, regs_per_sm=65536, regs_per_block=65536,
                   shared_per_sm=233472, shared_per_block=49152, shared_per_block_optin=232448,
                   l2_bytes=50 * 2**20, memory_bytes=150_020_292_608, memory_clock_khz=3_201_000,
                   memory_bus_bits=6144, sm_clock_khz=1_980_000, async_engine_count=5, cuda_runtime="12.9",
                   cuda_driver="13.0", cupy_version="13.6.0")


@pytest.fixture
def t4_env(monkeypatch):
    """COURSE_GPU_PROFILE=t4, with use_profile's choice reset to "follow the environment"."""
    monkeypatch.setattr(profile, "_chosen", profile._FOLLOW_ENV)
    monkeypatch.setenv(profile.ENV_VAR, "t4")
    yield
    monkeypatch.setattr(profile, "_chosen", profile._FOLLOW_ENV)


@pytest.fixture
def on_h200(monkeypatch):
    """device_info() as on a GPU backend whose device is an H200 (no CuPy needed)."""
    monkeypatch.setattr(kernels.device, "physical_device_info", fake_h200)
    monkeypatch.setattr(kernels.backend, "require_gpu", lambda what: None)


def test_no_profile_without_the_variable(monkeypatch):
    monkeypatch.setattr(profile, "_chosen", profile._FOLLOW_ENV)
    monkeypatch.delenv(profile.ENV_VAR, raising=False)
    assert profile.active_profile() is None
    info = fake_h200()
    assert profile.apply_to_device_info(info) is info


def test_the_variable_selects_the_t4(t4_env):
    assert profile.active_profile() is profile.T4


def test_an_unknown_profile_is_named_in_one_line(monkeypatch, t4_env):
    monkeypatch.setenv(profile.ENV_VAR, "a100")
    with pytest.raises(ValueError, match=r"COURSE_GPU_PROFILE='a100' is not a GPU profile; use one of t4"):
        profile.active_profile()
    with pytest.raises(ValueError, match="use_profile='v100'"):
        profile.use_profile("v100")


def test_use_profile_overrides_the_variable_and_the_context_manager_restores(t4_env):
    assert profile.use_profile(None) is None
    assert profile.active_profile() is None           # the function wins over COURSE_GPU_PROFILE
    with profile.gpu_profile("T4") as chosen:
        assert chosen is profile.T4 and profile.active_profile() is profile.T4
    assert profile.active_profile() is None
    profile.use_profile("t4")
    with profile.gpu_profile(None):
        assert profile.active_profile() is None
    assert profile.active_profile() is profile.T4


def test_device_info_reports_the_t4s_limits(t4_env, on_h200):
    info = device_info()
    # CUDA C++ Programming Guide, compute capability 7.5; T4 datasheet; Turing whitepaper (see kernels.profile)
    assert info.compute_capability == "7.5"
    assert info.sm_count == 40
    assert (info.max_threads_per_block, info.max_threads_per_sm, info.max_blocks_per_sm) == (1024, 1024, 16)
    assert (info.regs_per_sm, info.regs_per_block, info.warp_size) == (65536, 65536, 32)
    assert (info.shared_per_sm, info.shared_per_block, info.shared_per_block_optin) == (65536, 49152, 65536)
    assert info.l2_bytes == 4 * 2**20
    assert 14.5 * 2**30 < info.memory_bytes < 16e9
    assert info.theoretical_dram_gbps == pytest.approx(profile.T4.datasheet_gbps, abs=0.5) == 320
    assert profile.T4.max_warps_per_sm * profile.T4.warp_size == info.max_threads_per_sm
    # named so that nobody takes it for a T4, and the software stack is the real one
    assert info.name == "T4 profile on NVIDIA H200"
    assert info.on_profile and info.profile == "t4"
    assert (info.cuda_runtime, info.cupy_version, info.async_engine_count) == ("12.9", "13.6.0", 5)
    assert "not T4 measurements" in str(info.table())
    assert kernels.device.physical_device_info().sm_count == 132


def test_what_decides_takes_the_t4_branch(t4_env, on_h200):
    from kernels.chapters.gemm import has_cp_async
    from kernels.occupancy import GpuLimits
    from kernels.chapters.softmax import max_shared_per_block

    limits = GpuLimits.from_device()
    assert (limits.compute_capability, limits.max_threads_per_sm, limits.max_warps_per_sm) == ("7.5", 1024, 32)
    assert (limits.max_blocks_per_sm, limits.max_shared_per_block) == (16, 65536)
    assert not has_cp_async(device_info().compute_capability)          # the register-staged GEMM rungs
    assert max_shared_per_block() == 65536                              # the softmax plans for 64 KB


def test_provenance_says_the_profile_is_on(t4_env, on_h200):
    record = provenance()
    assert record["gpu"] == "T4 profile on NVIDIA H200"
    assert record["compute_capability"] == "7.5"
    assert record["profile"] == "t4"
    assert record["physical_gpu"] == H200_NAME and record["physical_compute_capability"] == "9.0"
    assert "an NVIDIA H200 running code compiled for compute_75" in record["profile_note"]
    assert "not Tesla T4 measurements" in record["profile_note"]


def test_the_cpu_backend_is_unaffected(t4_env, monkeypatch):
    monkeypatch.setenv(kernels.backend.ENV_VAR, "cpu")
    info = device_info()
    assert info == cpu_backend_info()
    assert info.on_cpu_backend and not info.on_profile
    assert info.name == kernels.device.CPU_BACKEND_NAME


def _fake_cupy(monkeypatch, compute_capability: str = "90") -> types.SimpleNamespace:
    """A stand-in for the parts of CuPy the profile touches; records the memory pool's limits."""
    calls = types.SimpleNamespace(limits=[], memo_cleared=0)
    compiler = types.ModuleType("cupy.cuda.compiler")
    compiler._get_arch = lambda: compute_capability
    compiler._get_arch_for_options_for_nvrtc = lambda arch=None: (f"-arch=sm_{arch or compute_capability}", "cubin")

    class Pool:
        def set_limit(self, size=None, fraction=None):
            calls.limits.append(size)

    pool = Pool()
    props = {"name": H200_NAME.encode(), "maxThreadsPerBlock": 1024, "maxThreadsDim": (1024, 1024, 64),
             "maxGridSize": (2**31 - 1, 65535, 65535), "sharedMemPerBlockOptin": 232448,
             "sharedMemPerBlock": 49152}
    cuda = types.ModuleType("cupy.cuda")
    cuda.compiler = compiler
    cuda.runtime = types.SimpleNamespace(getDeviceProperties=lambda device_id: props)
    cuda.Device = lambda: types.SimpleNamespace(id=0, compute_capability=compute_capability)
    cupy = types.ModuleType("cupy")
    cupy.__version__ = "13.6.0"
    cupy.cuda = cuda
    cupy.get_default_memory_pool = lambda: pool
    cupy.clear_memo = lambda: setattr(calls, "memo_cleared", calls.memo_cleared + 1)
    for name, module in (("cupy", cupy), ("cupy.cuda", cuda), ("cupy.cuda.compiler", compiler)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(profile, "_ORIGINALS", {})
    monkeypatch.setattr(kernels.backend, "gpu_available", lambda: True)
    calls.compiler = compiler
    return calls


def test_cupy_compiles_for_compute_75_and_its_pool_is_capped(monkeypatch, t4_env):
    fake = _fake_cupy(monkeypatch)
    profile.install_in_cupy()
    assert fake.compiler._get_arch() == "75"
    assert fake.compiler._get_arch_for_options_for_nvrtc("75") == ("-arch=compute_75", "ptx")
    assert fake.limits == [profile.T4.memory_bytes]
    profile.use_profile(None)                                       # back to the real GPU
    assert fake.memo_cleared == 1                                    # modules compiled for the T4 are forgotten
    assert fake.compiler._get_arch() == "90"
    assert fake.compiler._get_arch_for_options_for_nvrtc() == ("-arch=sm_90", "cubin")
    assert fake.limits[-1] == 0                                      # CuPy's "no limit"


def test_the_caches_a_switch_clears_exist():
    import importlib

    for module, names in profile.SWITCH_CLEARS:
        loaded = importlib.import_module(module)
        for name in names:
            assert hasattr(getattr(loaded, name), "cache_clear"), f"{module}.{name}"


def test_launch_limits_and_resource_reports_follow_the_profile(monkeypatch, t4_env):
    from kernels.resources import default_arch

    _fake_cupy(monkeypatch)
    kernels.compile.device_limits.cache_clear()
    limits = kernels.compile.device_limits(0)
    assert limits.max_shared_optin == 65536 and limits.name == "T4 profile on NVIDIA H200"
    assert default_arch() == "sm_75"
    with pytest.raises(kernels.compile.LaunchConfigError, match="65536 bytes one block can have on T4 profile"):
        kernels.compile.check_launch(1, 256, 100 * 1024, limits, kernel="k", max_dynamic_shared=100 * 1024)
    with profile.gpu_profile(None):                                  # the switch forgets the cached limits
        assert kernels.compile.device_limits(0).max_shared_optin == 232448
        assert default_arch() == "sm_90"
    kernels.compile.device_limits.cache_clear()


@needs_nvrtc
def test_cupys_own_compiler_targets_compute_75(t4_env, monkeypatch):
    """Where CuPy is installed (a GPU machine, or CuPy without a GPU): its real compile path under the profile."""
    pytest.importorskip("cupy")
    from cupy.cuda import compiler

    for name in ("_get_arch", "_get_arch_for_options_for_nvrtc"):
        monkeypatch.setattr(compiler, name, getattr(compiler, name))  # restored after the test
    monkeypatch.setattr(profile, "_ORIGINALS", {})
    profile.wrap_cupy_compiler()

    def ptx_of(code: str) -> str:
        out = compiler.compile_using_nvrtc(code)
        out = out[0] if isinstance(out, tuple) else out
        return out.decode(errors="replace") if isinstance(out, bytes) else str(out)

    assert ".target sm_75" in ptx_of('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }')
    with pytest.raises(compiler.CompileException, match="__reduce_add_sync"):
        ptx_of('extern "C" __global__ void w(const unsigned* x, unsigned* o) '
               '{ o[threadIdx.x] = __reduce_add_sync(0xffffffffu, x[threadIdx.x]); }')


@needs_nvrtc
def test_compute_75_lets_nothing_newer_slip_in():
    code = r'''
extern "C" __global__ void warp_sum(const unsigned* x, unsigned* out)
{
    out[threadIdx.x] = __reduce_add_sync(0xffffffffu, x[threadIdx.x]);   // sm_80 and later
}
'''
    plain = 'extern "C" __global__ void copy(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }'
    result = compile_cuda(plain, profile.T4.ptx_arch)
    assert result.ok and ".target sm_75" in result.ptx and result.cubin is None   # PTX for the driver to JIT
    assert not compile_cuda(code, profile.T4.ptx_arch).ok
    assert compile_cuda(code, "compute_80").ok


# --------------------------------------------------------------------------- tools/t4_profile.py

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import t4_profile  # noqa: E402

FAKE_PROVENANCE = {"gpu": "T4 profile on NVIDIA H200", "compute_capability": "7.5", "cuda_runtime": "12.9",
                   "cuda_driver": "13.0", "cupy": "14.0.1", "date": "2026-11-29", "profile": "t4",
                   "physical_gpu": H200_NAME, "physical_compute_capability": "9.0",
                   "profile_note": profile.provenance_note(profile.T4, H200_NAME)}


def example_rows() -> list:
    Row = t4_profile.Row
    return [Row("chapter", "book/gemm.ipynb", "ok", 812.4, 3 * 2**30, "61 code cells"),
            Row("exercise notebook", "exercises/reduce/sum_int64.ipynb", "failed", 2.0, None,
                "CellExecutionError: x  y"),
            Row("exercise check", "reduce/sum_int64", "ok", 1.5, 2**20, "reference solution: passed")]


def test_the_summary_files_are_what_the_docs_say(tmp_path):
    doc = t4_profile.__doc__
    data = t4_profile.summary(example_rows(), FAKE_PROVENANCE)
    json_path, text_path = t4_profile.write_summary(data, tmp_path)
    assert (json_path.name, text_path.name) == ("t4_profile_h200.json", "t4_profile_h200.txt")
    assert "t4_profile_<gpu>.json" in doc and "``h200``" in doc
    check_summary(json_path, text_path)
    read = json.loads(json_path.read_text())
    assert [row["peak_gpu_bytes"] for row in read["rows"]] == [3 * 2**30, None, 2**20]
    table = t4_profile.parse_summary_text(text_path.read_text())
    assert table[1]["detail"] == "CellExecutionError: x  y"        # two spaces inside the last column survive
    assert table[0]["peak MiB"] == "3072" and table[1]["peak MiB"] == "-"
    for key in (*t4_profile.ROW_KEYS, "profile", "note", "provenance", "rows", "ok", "failed", "skipped"):
        assert f"``{key}``" in doc, key                                # every key is documented


def check_summary(json_path, text_path) -> None:
    """A summary pair as the module's docstring describes it."""
    data = json.loads(json_path.read_text())
    assert data["profile"] == "t4" and "not Tesla T4 measurements" in data["note"]
    assert data["provenance"]["profile"] == "t4" and data["provenance"]["gpu"].startswith("T4 profile on ")
    assert json_path.stem == f"t4_profile_{t4_profile.results_slug(data['provenance'])}"
    for row in data["rows"]:
        assert tuple(row) == t4_profile.ROW_KEYS
        assert row["kind"] in t4_profile.KINDS and row["status"] in t4_profile.STATUSES
        assert isinstance(row["wall_s"], (int, float)) and row["wall_s"] >= 0
        assert row["peak_gpu_bytes"] is None or row["peak_gpu_bytes"] >= 0
    assert (data["ok"], data["failed"]) == (sum(r["status"] == "ok" for r in data["rows"]),
                                            sum(r["status"] == "failed" for r in data["rows"]))
    assert data.get("skipped", 0) == sum(r["status"] == "skipped" for r in data["rows"])
    text = text_path.read_text()
    assert text.startswith("# tools/t4_profile.py: T4 profile on ")
    table = t4_profile.parse_summary_text(text)
    assert [(r["name"], r["kind"], r["status"]) for r in table] == \
        [(r["name"], r["kind"], r["status"]) for r in data["rows"]]


RECORDED = sorted(Path(t4_profile.DEFAULT_RESULTS).glob("t4_profile_*.json"))


@pytest.mark.parametrize("json_path", RECORDED, ids=lambda p: p.name)
def test_recorded_summaries_follow_the_format(json_path):
    check_summary(json_path, json_path.with_suffix(".txt"))


def test_results_slug_and_bad_rows():
    """The summary is named after the real GPU's model (tools/notebooks.py's gpu_slug, model_only)."""
    assert t4_profile.results_slug({"gpu": "T4 profile on NVIDIA H200", "physical_gpu": "NVIDIA H200"}) == "h200"
    assert t4_profile.results_slug({"gpu": "x", "physical_gpu": "NVIDIA H100 80GB HBM3"}) == "h100"
    assert t4_profile.results_slug({"gpu": "Tesla T4"}) == "t4"
    with pytest.raises(ValueError, match="cannot name a file or folder after the GPU ' '"):
        t4_profile.results_slug({"gpu": "T4 profile", "physical_gpu": " "})
    with pytest.raises(ValueError, match="kind 'book'"):
        t4_profile.Row("book", "x", "ok", 1.0, None, "")
    with pytest.raises(ValueError, match="status 'passed'"):
        t4_profile.Row("chapter", "x", "passed", 1.0, None, "")


def test_the_recorded_notebooks_are_never_the_output(capsys):
    for folder in ("book", "exercises/reduce"):
        assert t4_profile.main(["--out-dir", str(t4_profile.ROOT / folder)]) == 2
        assert "would overwrite the recorded notebooks" in capsys.readouterr().err


def test_a_profiled_copy_runs_and_reports(tmp_path, monkeypatch):
    """The notebook machinery end to end, on the CPU backend: the copy runs, the original is untouched."""
    import nbformat

    monkeypatch.setenv(profile.ENV_VAR, "t4")
    monkeypatch.setenv(kernels.backend.ENV_VAR, "cpu")
    source = tmp_path / "tiny.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 6 * 7\nprint(x)")])
    nbformat.write(nb, source)
    before = source.read_bytes()
    row = t4_profile.run_notebook_copy(source, tmp_path / "out", timeout=120)
    assert source.read_bytes() == before
    assert (row.kind, row.name, row.status, row.detail) == ("chapter", "tiny.ipynb", "ok", "1 code cells")
    assert row.peak_gpu_bytes is None                                    # no GPU: no pool to measure
    ran = nbformat.read(tmp_path / "out" / "tiny.ipynb", as_version=4)
    assert t4_profile.run_report(ran) == {"peak_gpu_bytes": None, "gpu": kernels.device.CPU_BACKEND_NAME,
                                          "profile": "t4"}


def test_no_recorded_notebook_comes_from_a_profile():
    """The book records real GPUs only: a run under the profile is an H100 or H200 running T4 code."""
    import nbformat

    import notebooks

    book = notebooks.ROOT / "book"
    recorded = sorted(book.glob("*.ipynb")) + sorted(book.glob("runs/*/*.ipynb"))
    assert recorded
    for path in recorded:
        provenance = notebooks.get_provenance(nbformat.read(path, as_version=4)) or {}
        assert not provenance.get("profile") and "profile on" not in str(provenance.get("gpu", "")), path.name


def test_recording_refuses_a_profiled_gpu(monkeypatch):
    import notebooks

    record = dict(FAKE_PROVENANCE)
    done = types.SimpleNamespace(returncode=0, stdout=json.dumps(record) + "\n", stderr="")
    monkeypatch.setattr(notebooks.subprocess, "run", lambda *args, **kwargs: done)
    with pytest.raises(RuntimeError, match="T4 profile on NVIDIA H200 is a GPU profile, not a GPU to record"):
        notebooks.gpu_provenance()


def test_the_graders_judged_process_keeps_the_profile(monkeypatch):
    from kernels.grading.judge import judged_environment

    monkeypatch.setenv(profile.ENV_VAR, "t4")
    assert judged_environment(on_gpu=True)[profile.ENV_VAR] == "t4"


def test_an_exercise_check_runs_and_is_recorded(monkeypatch):
    """The exercise checks' code path on the CPU backend (no GPU: no peak); a GPU test runs it under the profile."""
    monkeypatch.setenv(kernels.backend.ENV_VAR, "cpu")
    (result,) = t4_profile.exercise_checks(["gpu_architecture/axpby_grid_stride"])
    assert result == {"name": "gpu_architecture/axpby_grid_stride", "status": "ok", "wall_s": result["wall_s"],
                      "peak_gpu_bytes": None, "detail": "reference solution: passed"}
    with pytest.raises(ValueError, match="no exercise reduce/nothing"):
        t4_profile.exercise_checks(["reduce/nothing"])
    (row,) = t4_profile.run_exercise_checks(timeout=600, ids=["gpu_architecture/axpby_grid_stride"])
    assert (row.kind, row.name, row.status, row.peak_gpu_bytes) == \
        ("exercise check", "gpu_architecture/axpby_grid_stride", "ok", None)


def test_an_exercise_for_a_newer_gpu_is_recorded_as_skipped_with_its_reason(monkeypatch, tmp_path):
    """A Hopper exercise cannot run under the T4 profile (nor on the CPU backend): its check says why,
    and the profile records that as skipped, not as a failure, and still counts it."""
    monkeypatch.setenv(kernels.backend.ENV_VAR, "cpu")
    (result,) = t4_profile.exercise_checks(["hopper/tma_parity_fix"])
    assert result["status"] == "skipped" and result["peak_gpu_bytes"] is None
    assert "compute capability 9.0" in result["detail"] and "sm_90a" in result["detail"]
    rows = [*example_rows(), t4_profile.Row("exercise check", result["name"], result["status"], result["wall_s"],
                                            None, result["detail"])]
    data = t4_profile.summary(rows, FAKE_PROVENANCE)
    assert (data["ok"], data["failed"], data["skipped"]) == (2, 1, 1)
    json_path, text_path = t4_profile.write_summary(data, tmp_path)
    check_summary(json_path, text_path)
    assert "2 ok, 1 failed, 1 skipped" in text_path.read_text()


def test_a_run_in_parts_merges_into_one_summary(tmp_path):
    first, second, check = example_rows()
    t4_profile.write_summary(t4_profile.summary([first, second], FAKE_PROVENANCE), tmp_path)
    again = t4_profile.Row("exercise notebook", second.name, "ok", 3.0, 5, "9 code cells")
    rows = t4_profile.merged(t4_profile.previous_rows(tmp_path, FAKE_PROVENANCE), [again, check])
    assert rows == [first, again, check]
    assert t4_profile.previous_rows(tmp_path / "none", FAKE_PROVENANCE) == []


def test_the_occupancy_answer_under_the_profile_is_the_t4_s() -> None:
    """Under the T4 profile CUDA's occupancy question is answered for a T4 (64 KB of shared memory and
    1024 threads per SM), not for the big GPU that runs the code."""
    from kernels.profile import T4, profile_blocks_per_sm

    assert profile_blocks_per_sm(T4, 256, 32, 0) == 4               # 1024 threads per SM
    assert profile_blocks_per_sm(T4, 128, 32, 20 * 1024) == 3       # shared memory: 3 x 20 KB of 64 KB
    assert profile_blocks_per_sm(T4, 128, 32, 40 * 1024) == 1
    assert profile_blocks_per_sm(T4, 128, 32, 65 * 1024) == 0       # more than a T4 block may have
    assert profile_blocks_per_sm(T4, 1024, 64, 0) == 1              # 64 x 1024 registers fill the SM
