"""Compile CUDA C with NVRTC from Python, with no GPU and no driver.

This is how the course checks that every kernel compiles for the T4 (sm_75) and the H100 (sm_90) on a
machine without a GPU, and how it reads register and shared-memory use from ptxas. It uses the NVRTC
bindings of ``cuda-bindings`` (12.x or 13.x) and the NVRTC library from the ``nvidia-cuda-nvrtc``
wheels; CuPy is not involved.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .errors import CudaCompileError  # noqa: F401  (exported here too: kernels.CudaCompileError)
from .ptxas import ResourceReport, parse_ptxas_log
from .sources import include_options


#: What NVRTC takes from PyPI, as a cell that lacks it says (the package's ``[cpu]`` extra lists the
#: same; a test checks it): the bindings, the compiler library, and the runtime's headers (cuda_fp16.h ...).
NVRTC_REQUIREMENTS = ("cuda-bindings==12.9.*", "nvidia-cuda-nvrtc-cu12==12.9.*", "nvidia-cuda-runtime-cu12==12.9.*")
NVRTC_INSTALL = "pip install " + " ".join(f'"{r}"' for r in NVRTC_REQUIREMENTS)


@dataclass
class CompileResult:
    """What NVRTC made of one source for one architecture."""

    ok: bool
    log: str
    arch: str
    filename: str = "kernel.cu"
    cubin: bytes | None = None
    ptx: str | None = None
    lowered_names: dict[str, str] = field(default_factory=dict)  # name expression -> mangled name
    resources: dict[str, ResourceReport] = field(default_factory=dict)

    def errors(self) -> list[str]:
        """The ``file(line): error: ...`` lines of the log."""
        return [line for line in self.log.splitlines() if re.search(r"\berror\b", line)]

    def raise_for_errors(self) -> "CompileResult":
        """Raise CudaCompileError with the compiler log unless the compile succeeded."""
        if not self.ok:
            raise CudaCompileError(f"{self.filename} does not compile for {self.arch}:\n{self.log.strip()}")
        return self


def _binding() -> Any:
    from cuda.bindings import nvrtc  # cuda-bindings >= 12.6; import here so the package imports anywhere

    return nvrtc


@functools.lru_cache(maxsize=1)
def nvrtc_available() -> bool:
    """True when the NVRTC bindings import and the NVRTC library loads."""
    try:
        return _check(_binding().nvrtcVersion())[0] >= 11
    except Exception:
        return False


def _check(result: Any) -> Any:
    """Unpack a cuda-bindings ``(status, *values)`` tuple, raising on a status other than success."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        err, text = _binding().nvrtcGetErrorString(status)
        raise RuntimeError(f"NVRTC call failed: {text.decode() if isinstance(text, bytes) else text}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library in use."""
    return tuple(_check(_binding().nvrtcVersion()))  # type: ignore[return-value]


@functools.lru_cache(maxsize=1)
def supported_archs() -> tuple[str, ...]:
    """The ``sm_XX`` targets this NVRTC can compile for."""
    return tuple(f"sm_{a}" for a in _check(_binding().nvrtcGetSupportedArchs()))


def _nvidia_dirs() -> list[Path]:
    spec = importlib.util.find_spec("nvidia")
    return [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []


def nvrtc_library() -> Path | None:
    """The NVRTC library this process loaded (cuda-bindings loads it once, through cuda.pathfinder), or None.

    It is not always the one of the wheels on sys.path: a library already loaded (by CuPy, say) wins."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib  # the loader cuda-bindings uses; cached there

        nvrtc_version()  # load it the way the bindings do before asking where it is
        path = load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception:
        return None
    return Path(path) if path else None


_CUDART_VERSION = re.compile(r"^\s*#\s*define\s+CUDART_VERSION\s+(\d+)", re.MULTILINE)


def header_major(include_dir: Path) -> int | None:
    """The CUDA major version of the runtime headers in ``include_dir`` (its CUDART_VERSION), None if unknown."""
    try:
        text = (include_dir / "cuda_runtime_api.h").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _CUDART_VERSION.search(text)
    return int(found.group(1)) // 1000 if found else None


@functools.lru_cache(maxsize=1)
def cuda_include_dirs() -> tuple[str, ...]:
    """Directories with the CUDA headers (``cuda_fp16.h`` ...) that match this NVRTC's version.

    Looked up once per process, in a fixed order: the headers installed with the NVRTC library in use,
    then the ``nvidia`` wheels importable, then one CUDA toolkit (CUDA_PATH, CUDA_HOME,
    /usr/local/cuda); a directory whose headers are of another CUDA major version is never taken (a
    toolkit of another version often sits beside the wheels, and its headers change the compiled code).
    """
    try:
        major = nvrtc_version()[0]
    except Exception:
        major = 12
    wheel_subdirs = (["cu13/include", "cuda_runtime/include", "cuda_cccl/include"] if major >= 13 else
                     ["cuda_runtime/include", "cuda_cccl/include", "cu12/include"])
    roots, toolkits = [], []
    library = nvrtc_library()
    if library is not None and len(library.parents) > 2:
        if library.parents[2].name == "nvidia":  # a wheel's nvidia/cuda_nvrtc/lib/ or nvidia/cu13/lib/
            roots.append(library.parents[2])
        else:  # a toolkit's lib64/ (or targets/<platform>/lib/), beside its include/
            toolkits.append(library.parents[1] / "include")
    roots += _nvidia_dirs()
    found = [d / sub for d in roots for sub in wheel_subdirs if (d / sub).is_dir()]
    found = [d for d in found if header_major(d) in (None, major)]
    if not any((d / "cuda_fp16.h").is_file() for d in found):
        toolkits += [Path(os.environ[v]) / "include" for v in ("CUDA_PATH", "CUDA_HOME") if os.environ.get(v)]
        toolkits.append(Path("/usr/local/cuda/include"))
        found += [d for d in toolkits if (d / "cuda_fp16.h").is_file() and header_major(d) in (None, major)][:1]
    return tuple(dict.fromkeys(str(d) for d in found))


def _get_bytes(prog: Any, size_fn: str, get_fn: str) -> bytes | None:
    nv = _binding()
    try:
        size = _check(getattr(nv, size_fn)(prog))
    except Exception:
        return None
    if not size:
        return None
    # NVRTC writes into the buffer it is given, so it must be a fresh, mutable one. (b" " * size, the
    # pattern of NVIDIA's Python samples, is the interpreter's shared one-byte b" " when size is 1,
    # an empty log: NVRTC's terminating NUL then overwrote that shared object, and later code in the
    # same process lost the spaces of its f-strings and print() separators.)
    buf = bytearray(size)
    try:
        _check(getattr(nv, get_fn)(prog, buf))
    except Exception:
        return None
    return bytes(buf)


def _log(prog: Any) -> str:
    raw = _get_bytes(prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog") or b""
    return raw.rstrip(b"\x00 ").decode("utf-8", errors="replace")


def build_options(arch: str, options: Sequence[str] = ()) -> list[str]:
    """The full NVRTC option list: the target, C++17, line info, ptxas -v and the header paths."""
    opts = [f"-arch={arch}"]
    if not any(o.startswith(("-std", "--std")) for o in options):
        opts.append("-std=c++17")
    opts.append("-lineinfo")
    if arch.startswith("sm_"):
        opts.append("--ptxas-options=-v")
    opts += [f"--include-path={d}" for d in cuda_include_dirs()]
    opts += include_options()
    opts += list(options)
    return opts


def compile_cuda(code: str, arch: str = "sm_90", options: Sequence[str] = (),
                 name_expressions: Sequence[str] = (), filename: str = "kernel.cu") -> CompileResult:
    """Compile ``code`` for ``arch`` (``sm_XX`` for a cubin, ``compute_XX`` for PTX) with NVRTC.

    Never raises for a compile error: the result has ``ok=False`` and the log (call
    ``raise_for_errors()`` to turn it into CudaCompileError). ``resources`` holds the ptxas
    register/shared/spill report of every kernel, keyed by its name or name expression.

    Results are remembered per process (treat them as read-only): NVRTC 13 skips ptxas for a
    program whose cubin it finds in CUDA's compute cache (one it built before, in this process or,
    unless CUDA_CACHE_DISABLE=1, in an earlier one) and then returns an empty log, which would lose
    the resource report the first compile printed.
    """
    return _compile_cached(code, arch, tuple(options), tuple(name_expressions), filename)


@functools.lru_cache(maxsize=512)
def _compile_cached(code: str, arch: str, options: tuple[str, ...],
                    name_expressions: tuple[str, ...], filename: str) -> CompileResult:
    nv = _binding()
    if arch.startswith("sm_") and arch.rstrip("af") not in supported_archs():
        raise ValueError(f"NVRTC {'.'.join(map(str, nvrtc_version()))} cannot compile for {arch}; "
                         f"it supports {', '.join(supported_archs())}")
    prog = _check(nv.nvrtcCreateProgram(code.encode(), filename.encode(), 0, [], []))
    try:
        for expr in name_expressions:
            _check(nv.nvrtcAddNameExpression(prog, expr.encode()))
        opts = [o.encode() for o in build_options(arch, options)]
        status = nv.nvrtcCompileProgram(prog, len(opts), opts)[0]
        ok = int(status) == 0
        log = _log(prog)
        result = CompileResult(ok=ok, log=log, arch=arch, filename=filename)
        if not ok:
            return result
        for expr in name_expressions:
            lowered = _check(nv.nvrtcGetLoweredName(prog, expr.encode()))
            result.lowered_names[expr] = lowered.decode() if isinstance(lowered, bytes) else str(lowered)
        if arch.startswith("sm_"):
            result.cubin = _get_bytes(prog, "nvrtcGetCUBINSize", "nvrtcGetCUBIN")
        ptx = _get_bytes(prog, "nvrtcGetPTXSize", "nvrtcGetPTX")
        result.ptx = ptx.rstrip(b"\x00").decode() if ptx else None
        names = {mangled: expr for expr, mangled in result.lowered_names.items()}
        result.resources = parse_ptxas_log(log, names)
        return result
    finally:
        nv.nvrtcDestroyProgram(prog)


def reports_in_fresh_process(jobs: Sequence[tuple[str, str, Sequence[str], Sequence[str], str]],
                             timeout_s: float = 900, workers: int | None = None) -> list[dict[str, ResourceReport]]:
    """The ptxas reports (``CompileResult.resources``) of ``jobs``, each ``(code, arch, options,
    name_expressions, filename)``, as new Python processes compile them (``workers`` at once, by
    default one per CPU; each process fresh, the jobs dealt out in turn).

    NVRTC's output is not always a function of the source and the options alone: fresh processes agree
    with each other, but in a process whose heap is fragmented (late in a full test run, or after many
    allocations of mixed sizes) a kernel can get a register more or fewer, and one at its register cap
    then spills a few bytes. Numbers that a test compares exactly are compiled here.
    """
    jobs = list(jobs)
    count = max(1, min(len(jobs), workers or os.cpu_count() or 1))
    shares = [list(range(i, len(jobs), count)) for i in range(count)]
    with ThreadPoolExecutor(max_workers=count) as pool:
        parts = list(pool.map(lambda share: _reports_in_one_process([jobs[i] for i in share], timeout_s), shares))
    reports: list[dict[str, ResourceReport]] = [{} for _ in jobs]
    for share, part in zip(shares, parts):
        for i, report in zip(share, part):
            reports[i] = report
    return reports


def _reports_in_one_process(jobs: Sequence[tuple[str, str, Sequence[str], Sequence[str], str]],
                            timeout_s: float) -> list[dict[str, ResourceReport]]:
    payload = json.dumps([[code, arch, list(options), list(exprs), filename]
                          for code, arch, options, exprs, filename in jobs])
    script = ("import dataclasses, json, sys; from kernels.nvrtc import compile_cuda\n"
              "out = []\n"
              "for code, arch, options, exprs, filename in json.load(sys.stdin):\n"
              "    result = compile_cuda(code, arch, options, exprs, filename).raise_for_errors()\n"
              "    out.append({k: dataclasses.asdict(r) for k, r in result.resources.items()})\n"
              "json.dump(out, sys.stdout)\n")
    package_root = str(Path(__file__).resolve().parents[1])
    # CUDA_CACHE_DISABLE: NVRTC 13 takes a cubin it built before from CUDA's compute cache and then
    # skips ptxas, leaving no report in the log; these processes exist for the report.
    env = {**os.environ, "CUDA_CACHE_DISABLE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script], input=payload, capture_output=True, text=True,
                          env=env, timeout=timeout_s)
    if done.returncode != 0:
        raise CudaCompileError(f"compiling in a fresh process failed (exit status {done.returncode}):\n"
                               f"{done.stderr.strip()}")
    return [{k: ResourceReport(**r) for k, r in reports.items()} for reports in json.loads(done.stdout)]


__all__ = ["compile_cuda", "CompileResult", "CudaCompileError", "nvrtc_available", "supported_archs",
           "nvrtc_version", "nvrtc_library", "cuda_include_dirs", "header_major", "build_options",
           "reports_in_fresh_process", "NVRTC_REQUIREMENTS", "NVRTC_INSTALL"]
