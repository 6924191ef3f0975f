"""Compile CUDA C for the CPU backend with the system's C++ compiler, and cache the result.

A kernel source becomes a shared library: the runtime's prelude (``runtime/include/cuda_cpu.h``), then
``#line 1 "<the reader's file>"`` and the reader's source (so every message and every fault names
the reader's lines), then generated entry points, one per kernel or name expression. Libraries are
cached by a hash of everything that affects them (source, options, name expressions, the runtime's
files, the compiler's version, the reader's headers), in memory and on disk, so running a cell
again costs nothing. The runtime library itself (scheduler, fibers, launcher) is built the same way,
once per runtime version.
"""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import fcntl
import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from ..errors import CudaCompileError
from . import abi, source, toolchain

CACHE_VERSION = "1"
MIN_STD = 17
# -gdwarf-4: binutils' addr2line maps some of GCC 12's DWARF 5 line tables (a reader's source after
# #line) to the build's own file, so a fault would name kernel_unit.cpp instead of the reader's line.
COMMON_FLAGS = ("-O2", "-g", "-gdwarf-4", "-fPIC", "-fno-strict-aliasing", "-fwrapv", "-fno-math-errno",
                "-fno-omit-frame-pointer", "-fdiagnostics-color=never", "-fmessage-length=0")
KERNEL_COMPILE_FLAGS = ("-fno-weak", "-fno-exceptions", "-fno-rtti", "-fno-semantic-interposition",
                        "-fstack-clash-protection", "-fsanitize=alignment", "-fno-sanitize-recover=alignment")
KERNEL_LINK_FLAGS = ("-shared", "-Wl,-Bsymbolic", "-Wl,--no-undefined")
# Clang has no -fno-weak, and without -fno-delete-null-pointer-checks it treats a load through a null
# pointer as unreachable code instead of a load that faults.
CLANG_KERNEL_COMPILE_FLAGS = tuple(f for f in KERNEL_COMPILE_FLAGS if f != "-fno-weak") + (
    "-fno-delete-null-pointer-checks",)
# The traced variant (kernels.traffic): every load and store calls a hook of the runtime (trace.cpp).
# -fsanitize=thread inserts the calls (linked without the sanitizer's library, whose hooks the
# runtime replaces); the other flags keep each access the width the source gives it, as nvcc does:
# no vectorised loops, no splitting of float4 values into four floats (SRA), no loops turned into
# memset/memcpy calls, which the hooks would not see.
TRACE_COMPILE_FLAGS = ("-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0", "-fno-tree-vectorize",
                       "-fno-tree-slp-vectorize", "-fno-tree-sra", "-fno-tree-loop-distribute-patterns",
                       "-DCUDACPU_TRACE=1")
COMPILE_TIMEOUT_S = 300
CACHE_KEEP = 2000  # compiled kernel libraries kept on disk (the least recently used go first)

# Options of NVRTC/nvcc that only concern GPU code generation: accepted and ignored.
_IGNORED_EXACT = {"-lineinfo", "--generate-line-info", "-use_fast_math", "--use_fast_math", "-G",
                  "--device-debug", "--extra-device-vectorization", "-extra-device-vectorization",
                  "-restrict", "--restrict", "-default-device", "--device-as-default-execution-space",
                  "-dlto", "--dlink-time-opt", "-ewp", "--extensible-whole-program", "-w",
                  "--disable-warnings", "-src-in-ptx", "--source-in-ptx", "--expt-relaxed-constexpr",
                  "--expt-extended-lambda", "-expt-relaxed-constexpr", "-expt-extended-lambda",
                  "-no-source-include", "--no-source-include", "-lto", "-dc", "-dw", "--fdevice-syntax-only",
                  "-minimal", "--minimal"}
_IGNORED_PREFIXES = ("-rdc=", "--relocatable-device-code=", "-dopt=", "--dopt=", "-ftz=", "--ftz=",
                     "-prec-div=", "--prec-div=", "-prec-sqrt=", "--prec-sqrt=", "-fmad=", "--fmad=",
                     "-maxrregcount=", "--maxrregcount=", "-Xptxas", "--ptxas-options", "-time", "--time",
                     "-split-compile", "--split-compile", "-jump-table-density", "-builtin-move-forward",
                     "-builtin-initializer-list", "--fdevice-time-trace", "-fdevice-time-trace",
                     "-arch", "--gpu-architecture", "-code", "--gpu-code", "-gencode", "--generate-code",
                     "-m64", "--machine", "-ofast-compile", "--Ofast-compile", "-Werror", "--Werror",
                     "-diag-suppress", "--diag-suppress", "-diag-error", "--diag-error", "-diag-warn",
                     "--diag-warn", "--threads", "-std=c++03")
_ARCH = re.compile(r"^(?:-arch|--gpu-architecture)[= ]?(?:sm|compute|lto)_(\d+)[a-z]?$")


class CompileError(CudaCompileError):
    """The source does not compile for the CPU backend (also a kernels.CudaCompileError)."""

    failing_entries: tuple[str, ...] = ()  # entry points (kernels, name expressions) the compiler rejected


class UnsupportedPlatformError(RuntimeError):
    """The CPU backend does not run on this machine (operating system or processor)."""


class UnsupportedFeatureError(CompileError):
    """The source uses a GPU feature the CPU backend cannot run; the message names it and its line."""


@dataclass(frozen=True)
class BuildOptions:
    """The compiler flags that CuPy-style options turn into."""

    std: int = MIN_STD
    defines: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    cuda_arch: int | None = None


def translate_options(options: Sequence[str]) -> BuildOptions:
    """Keep -std, -D, -U and -I; ignore GPU code-generation options; refuse anything unknown."""
    std, defines, includes, arch = MIN_STD, [], [], None
    opts = list(options)
    i = 0
    while i < len(opts):
        opt = str(opts[i]).strip()
        i += 1
        if not opt:
            continue
        if opt in ("-Xptxas", "--ptxas-options", "-Xnvlink", "--nvlink-options"):
            i += 1  # the next option is for the GPU assembler or linker
            continue
        m = re.match(r"^--?std[= ]?c\+\+(\d+)$", opt)
        if m:
            std = max(MIN_STD, int(m.group(1)) if int(m.group(1)) >= 11 else 20)
            continue
        m = _ARCH.match(opt)
        if m:
            arch = int(m.group(1)) * 10
            continue
        for flag, prefixes in (("-D", ("-D", "--define-macro=", "--define-macro")),
                               ("-U", ("-U", "--undefine-macro=", "--undefine-macro")),
                               ("-I", ("-I", "--include-path=", "--include-path"))):
            prefix = next((p for p in prefixes if opt.startswith(p)), None)
            if prefix is None:
                continue
            value = opt[len(prefix):].strip()
            if not value and i < len(opts):  # "-I", "dir" given as two options
                value = str(opts[i]).strip()
                i += 1
            if not value:
                raise CompileError(f"compiler option {opt!r} needs a value")
            if flag == "-I":
                includes.append(value)
            else:
                defines.append(f"{flag}{value}")
            break
        else:
            if opt in _IGNORED_EXACT or opt.startswith(_IGNORED_PREFIXES):
                continue
            raise CompileError(
                f"unknown compiler option {opt!r}: the CPU backend accepts the NVRTC options -std=, -D, -U, "
                f"-I/--include-path= and ignores GPU code-generation options such as -arch, -lineinfo and "
                f"--use_fast_math")
    return BuildOptions(std=std, defines=tuple(defines), include_dirs=tuple(includes), cuda_arch=arch)


# --------------------------------------------------------------------------------------------------
# The runtime library
# --------------------------------------------------------------------------------------------------

_lock = threading.RLock()


@dataclass
class Runtime:
    """The loaded runtime library (scheduler, fibers, launcher) and where it is on disk."""

    lib: ctypes.CDLL
    path: Path


@functools.lru_cache(maxsize=1)
def runtime() -> Runtime:
    """Build (once per runtime version and compiler) and load the runtime library."""
    problem = toolchain.supported_platform()
    if problem:
        raise UnsupportedPlatformError(problem)
    cxx = toolchain.compiler()
    key = hashlib.sha256(f"{CACHE_VERSION}|{toolchain.runtime_fingerprint()}|{cxx.identity}".encode()).hexdigest()[:16]
    directory = toolchain.cache_root() / f"runtime-{key}"
    name = f"libcudacpu-{key}.so"
    path = directory / name
    if not path.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        with _file_lock(directory / ".lock"):
            if not path.is_file():
                src = toolchain.RUNTIME_DIR / "src"
                tmp = directory / f".{name}.{os.getpid()}.tmp"
                cmd = [cxx.path, "-std=c++17", *COMMON_FLAGS, "-shared", "-frounding-math", "-fvisibility=hidden",
                       f"-I{toolchain.INCLUDE_DIR}", f"-I{src}", str(src / "runtime.cpp"),
                       str(src / "fiber_switch.S"), f"-Wl,-soname,{name}", "-o", str(tmp), "-ldl", "-lm"]
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
                if done.returncode != 0:
                    raise RuntimeError(f"the CPU backend's runtime library does not build with {cxx.version}:\n"
                                       f"{done.stderr.strip()}")
                os.replace(tmp, path)
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    abi.declare(lib)
    abi.check_sizes(lib)
    return Runtime(lib=lib, path=path)


class _file_lock:
    """An exclusive lock on a file (two processes building the same library wait for each other)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> "_file_lock":
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


# --------------------------------------------------------------------------------------------------
# Kernel libraries
# --------------------------------------------------------------------------------------------------

@dataclass
class ModuleLayout:
    """Addresses inside a loaded kernel library that launches need."""

    builtins: int
    shared_begin: int
    shared_end: int
    base: int
    writable: list[tuple[int, int]]
    executable: list[tuple[int, int]]


@dataclass
class CompiledModule:
    """A compiled, loaded kernel library: one entry point per kernel or name expression."""

    key: str
    path: Path
    lib: ctypes.CDLL
    entries: dict[str, int]
    filename: str
    layout: ModuleLayout
    param_sizes: dict[str, list[int]] = field(default_factory=dict)
    include_dirs: list[Path] = field(default_factory=list)  # to shorten header paths in messages
    save_buffer: object = None  # shared memory the child copies the globals into (kernels.cpu.memory)

    def entry_address(self, name: str) -> int:
        return ctypes.cast(getattr(self.lib, f"cudacpu_entry_{self.entries[name]}"), ctypes.c_void_p).value or 0

    @property
    def static_shared_bytes(self) -> int:
        return max(0, self.layout.shared_end - self.layout.shared_begin)


@dataclass
class _Cached:
    module: CompiledModule
    deps: dict[str, str]  # the reader's headers it was built from: path -> sha256


_modules: dict[str, _Cached] = {}


def _cache_key(code: str, filename: str, build: BuildOptions, entries: Sequence[str], traced: bool = False) -> str:
    payload = json.dumps({"v": CACHE_VERSION, "code": code, "file": filename, "std": build.std,
                          "defines": build.defines, "includes": build.include_dirs, "arch": build.cuda_arch,
                          "entries": list(entries), "runtime": toolchain.runtime_fingerprint(),
                          "compiler": toolchain.compiler().identity,
                          "flags": COMMON_FLAGS + KERNEL_COMPILE_FLAGS + KERNEL_LINK_FLAGS,
                          **({"traced": TRACE_COMPILE_FLAGS} if traced else {})}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def _deps_unchanged(deps: dict[str, str]) -> bool:
    for path, digest in deps.items():
        try:
            if _digest(Path(path).read_bytes()) != digest:
                return False
        except OSError:
            return False
    return True


def loaded_modules() -> list[CompiledModule]:
    """Every kernel library loaded in this process (their globals may be kernel arguments)."""
    return [c.module for c in list(_modules.values())]


class LibraryBuilt(Exception):
    """Raised by ``compile_module`` under ``build_only()``: the library is on disk, not loaded."""

    def __init__(self, path: Path, code: str, entries: list[str], options: tuple[str, ...], filename: str):
        super().__init__(str(path))
        self.path, self.code, self.entries, self.options, self.filename = path, code, entries, options, filename


_build_only: contextvars.ContextVar[bool] = contextvars.ContextVar("cudacpu_build_only", default=False)


@contextlib.contextmanager
def build_only() -> Iterator[None]:
    """Within this block ``compile_module`` builds (or finds) a library and raises ``LibraryBuilt``
    instead of loading it: nothing of the source runs in this process, not even its initialisers.
    The grader builds a submission this way, inspects the library, and loads it later from the
    cache, after the sandbox is in place."""
    token = _build_only.set(True)
    try:
        yield
    finally:
        _build_only.reset(token)


def compile_module(code: str, entries: Sequence[str], options: Sequence[str] = (),
                   filename: str = "kernel.cu", *, traced: bool = False) -> CompiledModule:
    """Compile ``code`` with an entry point per name in ``entries`` (kernel names or expressions).

    The library's cache key covers the source, the options, the entries, the runtime, the compiler
    and the contents of the reader's headers it includes. Raises CompileError with the compiler's
    messages in the reader's lines, or UnsupportedFeatureError for a GPU feature the CPU backend
    cannot run. ``traced=True`` builds the variant that records every memory access
    (kernels.traffic), cached apart from the normal one; normal launches never use it.
    """
    build = translate_options(options)
    entries = list(dict.fromkeys(entries))
    source_key = _cache_key(code, filename, build, entries, traced)
    with _lock:
        cached = _modules.get(source_key)
        if cached is not None and _deps_unchanged(cached.deps):
            return cached.module
        try:
            prepared = source.prepare(code, filename, _include_dirs(build))
        except source.CpuCompileError as exc:
            raise UnsupportedFeatureError(str(exc)) from None
        deps = {path: _digest(text) for path, text in sorted(prepared.dependencies.items())}
        key = _digest(source_key + json.dumps(deps, sort_keys=True))
        rt = runtime()
        directory = toolchain.cache_root() / "kernels" / key[:2]
        so_path, meta_path = directory / f"{key}.so", directory / f"{key}.json"
        if so_path.is_file() and meta_path.is_file():
            _touch(so_path)
        else:
            _build(prepared, filename, build, entries, rt, directory, so_path, meta_path, traced)
            _prune(toolchain.cache_root() / "kernels", CACHE_KEEP)
        if _build_only.get():
            raise LibraryBuilt(so_path, code, entries, tuple(options), filename)
        module = _load(key, so_path, entries, filename, rt)
        module.include_dirs = _include_dirs(build)
        _modules[source_key] = _Cached(module, deps)
        return module


def _touch(path: Path) -> None:
    try:
        os.utime(path)  # the modification time records the last use, for _prune
    except OSError:
        pass


def _prune(root: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently used libraries (and their descriptions)."""
    try:
        libraries = sorted(root.glob("*/*.so"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in libraries[keep:]:
        for path in (old, old.with_suffix(".json")):
            try:
                path.unlink()
            except OSError:
                pass


def _include_dirs(build: BuildOptions) -> list[Path]:
    return [Path(d) for d in build.include_dirs]


def kernel_compile_flags(cxx: toolchain.Compiler, traced: bool) -> tuple[str, ...]:
    """The flags that compile a kernel unit with this compiler.

    The traced variant relies on GCC's ThreadSanitizer parameters and its -fno-tree-* switches, which
    keep every access as wide as the source writes it; with Clang it is refused, not approximated.
    """
    if cxx.kind == "gcc":
        return KERNEL_COMPILE_FLAGS + (TRACE_COMPILE_FLAGS if traced else ())
    if traced:
        raise CompileError(f"The memory-traffic analysis (kernels.analyze) needs g++, but the CPU backend "
                           f"uses {cxx.version} ({cxx.path}). Install g++, or unset CXX if it names clang++.")
    return CLANG_KERNEL_COMPILE_FLAGS


def _build(prepared: source.PreparedSource, filename: str, build: BuildOptions, entries: list[str], rt: Runtime,
           directory: Path, so_path: Path, meta_path: Path, traced: bool = False) -> None:
    cxx = toolchain.compiler()
    flags = kernel_compile_flags(cxx, traced)
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cudacpu-") as tmp_name:
        tmp = Path(tmp_name)
        for virtual, (_real, text) in prepared.headers.items():
            target = tmp / virtual
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        shown = Path(filename)
        if not shown.is_absolute() and ".." not in shown.parts and str(shown) not in prepared.headers:
            (tmp / shown).parent.mkdir(parents=True, exist_ok=True)
            (tmp / shown).write_text(prepared.original)       # lets the compiler quote the reader's lines
        unit = tmp / "kernel_unit.cpp"
        unit.write_text('#include "cuda_cpu.h"\n'
                        f'#line 1 "{filename}"\n{prepared.code}\n' + source.wrappers(entries))
        obj, out = tmp / "kernel.o", tmp / "kernel.so"
        arch = [f"-D__CUDA_ARCH__={build.cuda_arch}"] if build.cuda_arch else []
        # Compile and link separately: the alignment checks call the runtime's handler, and linking
        # with -fsanitize would pull the compiler's sanitizer library into the Python process.
        compile_cmd = [cxx.path, f"-std=c++{build.std}", *COMMON_FLAGS, *flags, *arch,
                       *build.defines, f"-I{tmp / '_include'}", *[f"-I{d}" for d in build.include_dirs],
                       "-isystem", str(toolchain.INCLUDE_DIR), "-c", str(unit), "-o", str(obj)]
        link_cmd = [cxx.path, *COMMON_FLAGS, *KERNEL_LINK_FLAGS, str(obj), "-o", str(out), str(rt.path),
                    f"-Wl,-rpath,{rt.path.parent}", "-lm"]
        done = subprocess.run(compile_cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, cwd=tmp)
        if done.returncode == 0:
            done = subprocess.run(link_cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, cwd=tmp)
        if done.returncode != 0:
            error = CompileError(f"{filename} does not compile for the CPU backend:\n"
                                 f"{clean_log(done.stderr, tmp, filename, entries, _include_dirs(build))}")
            error.failing_entries = tuple(_failing_entries(done.stderr, entries))
            raise error
        meta = {"entries": entries, "file": filename, "headers": sorted(prepared.dependencies),
                "compiler": cxx.version, "traced": traced}
        tmp_so = directory / f".{so_path.name}.{os.getpid()}.tmp"
        tmp_meta = directory / f".{meta_path.name}.{os.getpid()}.tmp"
        tmp_so.write_bytes(out.read_bytes())
        os.replace(tmp_so, so_path)
        tmp_meta.write_text(json.dumps(meta))
        os.replace(tmp_meta, meta_path)


def _failing_entries(log: str, entries: list[str]) -> list[str]:
    """Entries whose generated wrapper (two lines each, from line 6 of the entry-point section) failed."""
    bad = []
    for m in re.finditer(r"<cpu-backend-entry-points>:(\d+)", log):
        index = (int(m.group(1)) - source.FIRST_ENTRY_LINE) // 2
        if 0 <= index < len(entries) and entries[index] not in bad:
            bad.append(entries[index])
    return bad


def _load(key: str, path: Path, entries: list[str], filename: str, rt: Runtime) -> CompiledModule:
    lib = ctypes.CDLL(str(path))
    for name in ("cudacpu_module_builtins", "cudacpu_module_shared_begin", "cudacpu_module_shared_end"):
        getattr(lib, name).restype = ctypes.c_void_p
    builtins = lib.cudacpu_module_builtins()
    info = abi.ObjectInfo()
    if rt.lib.cudacpu_find_object(ctypes.c_void_p(builtins), ctypes.byref(info)) != 0:
        raise RuntimeError(f"the CPU backend could not find the loaded library {path}")
    writable = [(int(info.w_addr[i]), int(info.w_len[i])) for i in range(info.nwritable)]
    executable = [(int(info.x_addr[i]), int(info.x_len[i])) for i in range(info.nexec)]
    layout = ModuleLayout(builtins=builtins, shared_begin=lib.cudacpu_module_shared_begin() or 0,
                          shared_end=lib.cudacpu_module_shared_end() or 0, base=int(info.base),
                          writable=writable, executable=executable)
    module = CompiledModule(key=key, path=path, lib=lib, entries={e: i for i, e in enumerate(entries)},
                            filename=filename, layout=layout)
    for name, index in module.entries.items():
        fn = getattr(lib, f"cudacpu_params_{index}")
        fn.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int]
        fn.restype = ctypes.c_int
        sizes = (ctypes.c_ulonglong * 64)()
        n = fn(sizes, 64)
        module.param_sizes[name] = [int(sizes[i]) for i in range(min(n, 64))]
    return module


# --------------------------------------------------------------------------------------------------
# Compiler messages in the reader's terms
# --------------------------------------------------------------------------------------------------

_NOISE = (re.compile(r"^In file included from "), re.compile(r"^\s+from "),
          re.compile(r"^compilation terminated\.$"), re.compile(r"^collect2: error: ld returned"))


def clean_log(log: str, build_dir: Path, filename: str, entries: Sequence[str] = (),
              include_dirs: Sequence[Path] = ()) -> str:
    """The compiler's messages with build-directory paths removed and the runtime's notes dropped.

    Lines about the reader's files are kept (``file:line:col: error: ...`` and the source line with
    its caret); notes inside the CPU backend's own headers are dropped, and an error in a generated
    entry point is said in terms of the kernel or name expression it was made for.
    """
    include = str(toolchain.INCLUDE_DIR)
    kept: list[str] = []
    reported: set[str] = set()
    skipping = False
    for line in log.splitlines():
        text = line.replace(str(build_dir) + "/", "")
        if any(p.search(text) for p in _NOISE):
            continue
        entry = re.search(r"<cpu-backend-entry-points>:(\d+)(?::\d+)?: (?:fatal )?error: (.*)", text)
        if entry:
            index = (int(entry.group(1)) - source.FIRST_ENTRY_LINE) // 2
            expression = entries[index] if 0 <= index < len(entries) else "?"
            if expression not in reported:
                reported.add(expression)
                kept.append(f"{filename}: error: cannot launch '{expression}': {entry.group(2)} (a kernel name "
                            f"or name expression must name a __global__ function of this source, with its "
                            f"template arguments)")
            skipping = True
            continue
        if text.startswith(include) or text.startswith("kernel_unit.cpp") or "<cpu-backend-entry-points>" in text:
            skipping = True  # a location inside the CPU backend's headers or generated code
            continue
        if re.match(r"^\S+:(\d+:)?(\d+:)? ", text) or text.startswith(("/", "ld:", "/usr/bin/ld")):
            skipping = False
        if skipping and (text.startswith(" ") or text.startswith("\t")):
            continue
        skipping = False
        kept.append(text.replace(include + "/", ""))
    unique = list(dict.fromkeys(k.replace("\u2018", "'").replace("\u2019", "'") for k in kept if k.strip()))
    return source.display_paths("\n".join(unique), list(include_dirs)) or log.strip()
