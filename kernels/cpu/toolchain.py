"""The system's C++ compiler (g++ or clang++), its identity, and where compiled kernels are cached.

The CPU backend compiles CUDA C with the real compiler of the machine; this module finds it once and
describes it (path and version go into every cache key, so a compiler upgrade recompiles).
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
RUNTIME_DIR = PACKAGE_DIR / "runtime"
INCLUDE_DIR = RUNTIME_DIR / "include"
RUNTIME_SOURCES = (RUNTIME_DIR / "src" / "runtime.cpp", RUNTIME_DIR / "src" / "trace.cpp",
                   RUNTIME_DIR / "src" / "fiber_switch.S", RUNTIME_DIR / "src" / "abi.h")
CACHE_ENV = "COURSE_CPU_CACHE"
COMPILER_ENV = "CXX"


class CompilerNotFoundError(RuntimeError):
    """No C++ compiler on this machine; the message says how to get one."""


@dataclass(frozen=True)
class Compiler:
    """A C++ compiler: its path, its ``--version`` line and whether it is GCC or Clang."""

    path: str
    version: str
    kind: str  # "gcc" or "clang"

    @property
    def identity(self) -> str:
        return f"{self.path}|{self.version}|{platform.machine()}|{platform.system()}"


@functools.lru_cache(maxsize=1)
def compiler() -> Compiler:
    """The compiler to use: $CXX if set, else g++, clang++ or c++ from PATH."""
    candidates = [os.environ[COMPILER_ENV]] if os.environ.get(COMPILER_ENV) else ["g++", "clang++", "c++"]
    for name in candidates:
        path = shutil.which(name)
        if not path:
            continue
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        first = (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else name
        kind = "clang" if "clang" in first.lower() else "gcc"
        return Compiler(path=path, version=first, kind=kind)
    raise CompilerNotFoundError(
        "The CPU backend compiles CUDA C with the system's C++ compiler, but none was found "
        f"(tried {', '.join(candidates)}). Install one (e.g. `sudo apt-get install g++` on Debian or "
        "Ubuntu), or set CXX to the compiler's path.")


def supported_platform() -> str | None:
    """None when this machine can run the CPU backend, else the reason it cannot."""
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64", "aarch64", "arm64"):
        return f"the CPU backend runs on x86-64 and 64-bit ARM, not on {platform.machine()}"
    if platform.system() not in ("Linux",):
        return f"the CPU backend runs on Linux, not on {platform.system()}"
    return None


def cache_root() -> Path:
    """Where compiled kernels live: $COURSE_CPU_CACHE, else $XDG_CACHE_HOME or ~/.cache, course-named."""
    if os.environ.get(CACHE_ENV):
        root = Path(os.environ[CACHE_ENV]).expanduser()
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        root = base / "gpu-kernels-course" / "cpu-kernels"
    root.mkdir(parents=True, exist_ok=True)
    return root


@functools.lru_cache(maxsize=1)
def runtime_fingerprint() -> str:
    """A hash of every runtime source and header: part of every cache key."""
    h = hashlib.sha256()
    files = sorted(p for p in RUNTIME_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in files:
        h.update(p.relative_to(RUNTIME_DIR).as_posix().encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def addr2line() -> str | None:
    """Path of addr2line (binutils), used to turn a faulting address into a source line."""
    return shutil.which("addr2line") or shutil.which("llvm-addr2line")
