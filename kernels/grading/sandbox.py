"""The walls around a student's code when the grader runs it.

The grader (the judge) never runs a submission in its own process. A separate process, the judged
process (``kernels.grading.judged``), compiles the kernel and runs the cases the judge sends it; it
holds no seed, no reference and no verdict. Around it, in depth:

1. **What it may call** (CPU backend, where a kernel is native code): the compiled library may use
   only the CPU backend's runtime, math functions and a few memory functions (``symbol_findings``);
   it may not run code when it is loaded (``initializer_findings``).
2. **What it may ask the kernel for** (seccomp, built with libseccomp through ``pyseccomp``): the
   process that runs a kernel's grid on the CPU backend is killed by the first system call that
   opens a file, starts a program or a process, signals another process, touches the network or
   changes the system (``launch_filter_bpf``). The judged process itself runs under a wider filter
   (``install_process_filter``): no network, no new programs, no debugging of others, no writes to
   files.
3. **What it can see** (namespaces, with ``bwrap`` from bubblewrap): no network interface, its own
   process ids (it cannot signal the judge), a read-only file system with the home folders, the
   submissions and the results hidden, a private ``/tmp`` (``namespace_command``).
4. **How much it may use** (``isolate.py``): wall-clock time, memory, file size, no core dumps,
   and an empty environment.

Layers 1, 2 and 4 are required: when seccomp cannot be used, the grader refuses to run submissions
(fail closed). Layer 3 is used where the system allows it; ``--sandbox strict`` makes it required.
"""
from __future__ import annotations

import errno
import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# System calls that would reach outside a kernel: killed in the process that runs a CPU kernel.
LAUNCH_FORBIDDEN = (
    # files: a kernel reads and writes only its arrays
    "open", "openat", "openat2", "creat", "open_by_handle_at", "name_to_handle_at", "truncate", "ftruncate",
    "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat",
    "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "utime",
    "utimes", "utimensat", "futimesat", "mknod", "mknodat", "chdir", "fchdir", "getdents", "getdents64",
    "readlink", "readlinkat", "memfd_create", "sendfile", "copy_file_range", "splice", "tee", "dup", "dup2",
    "dup3", "fcntl", "ioctl", "flock", "fsync", "fdatasync", "sync", "syncfs", "fallocate", "inotify_init",
    "inotify_init1", "fanotify_init",
    # processes and programs
    "fork", "vfork", "clone", "clone3", "execve", "execveat", "kill", "tkill", "tgkill", "rt_sigqueueinfo",
    "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "ptrace", "process_vm_readv",
    "process_vm_writev", "wait4", "waitid", "setsid", "setpgid", "prctl", "seccomp",
    # the network and other machines
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "sendmsg",
    "sendmmsg", "recvfrom", "recvmsg", "recvmmsg", "shutdown",
)

# System calls no part of the judged process needs after its setup: killed there too.
PROCESS_FORBIDDEN = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "ptrace", "process_vm_readv",
    "process_vm_writev", "mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "bpf",
    "perf_event_open", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
    "keyctl", "add_key", "request_key", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
    "setgroups", "acct", "quotactl", "settimeofday", "clock_settime", "adjtimex", "sethostname", "setdomainname",
    "open_by_handle_at", "name_to_handle_at", "pidfd_getfd",
)

# System calls that change files: refused (EPERM) in the judged process, whose own code may try one
# harmlessly (a cache touching a file's time) and must carry on.
PROCESS_NO_WRITES = (
    "creat", "truncate", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
    "rmdir", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
    "fchownat", "utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat",
)

# Undefined symbols a CPU-backend kernel library may use besides the runtime's own (cudacpu_*, the
# alignment checks' handlers): the C math library, memory functions the compiler emits for copies
# and initialisers, and the stack protector's report.
_MATH = re.compile(r"^(?:__)?(?:a?sinh?|a?cosh?|a?tanh?|atan2|exp(?:2|10|m1)?|log(?:2|10|1p|b)?|pow|sqrt|cbrt|"
                   r"hypot|erfc?|erfcinv|erfinv|lgamma|tgamma|ceil|floor|trunc|round|lround|llround|rint|lrint|"
                   r"llrint|nearbyint|fabs|fmod|remainder|remquo|copysign|nan|fdim|fmax|fmin|fma|frexp|ldexp|"
                   r"scalbl?n|ilogb|modf|nextafter|nexttoward|sincos|sincospi|sinpi|cospi|j[01n]|y[01n]|"
                   r"exp10|isnan|isinf|finite|signbit|fpclassify)[fl]?(?:_finite)?$")
_ALLOWED_SYMBOLS = frozenset({
    "memcpy", "memmove", "memset", "memcmp", "__stack_chk_fail", "__tls_get_addr", "__cxa_finalize",
    "__cxa_atexit", "__dso_handle", "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable",
    "__gmon_start__", "__cxa_guard_acquire", "__cxa_guard_release", "__cxa_guard_abort", "__cxa_pure_virtual",
    "__memcpy_chk", "__memset_chk", "__memmove_chk",
})
_RUNTIME_PREFIXES = ("cudacpu_", "__ubsan_handle_", "__tsan_")
# The compiler's own arithmetic helpers (libgcc): __popcountdi2 for __popcll on a processor without
# POPCNT, __udivti3 for 128-bit division, __floattidf, ...
_COMPILER_HELPER = re.compile(r"^__[a-z]+(?:qi|hi|si|di|ti|sf|df|xf|tf|hf|bf)\d$")

# Functions whose use says more than "not allowed": what the student should do instead.
SYMBOL_ADVICE = {
    "exit": "exit() ends the whole program, not the kernel; a kernel ends by returning",
    "_exit": "_exit() ends the whole program, not the kernel; a kernel ends by returning",
    "_Exit": "_Exit() ends the whole program, not the kernel; a kernel ends by returning",
    "quick_exit": "quick_exit() ends the whole program, not the kernel; a kernel ends by returning",
    "abort": "abort() ends the whole program; to stop a kernel on a failed condition use assert() or __trap()",
    "printf": "printf from a graded kernel is not allowed (it would flood the grader's log); remove it",
}


@dataclass(frozen=True)
class SandboxProblem:
    """Why the sandbox cannot be set up on this machine, and what to do about it."""

    layer: str
    reason: str

    def __str__(self) -> str:
        return f"{self.layer}: {self.reason}"


# --------------------------------------------------------------------------------------------------
# seccomp
# --------------------------------------------------------------------------------------------------

def _pyseccomp():
    try:
        import pyseccomp
    except ImportError:
        raise RuntimeError("the grader's sandbox needs the Python package pyseccomp (pip install "
                           "'gpu-kernels-course[grading]' or pip install pyseccomp) and the system's "
                           "libseccomp (Debian/Ubuntu: libseccomp2)") from None
    except OSError as exc:  # the binding found no libseccomp.so
        raise RuntimeError(f"the grader's sandbox needs the system's libseccomp (Debian/Ubuntu: libseccomp2): "
                           f"{exc}") from None
    return pyseccomp


def _add(flt, action: int, names: tuple[str, ...], *args) -> None:
    for name in names:
        try:
            flt.add_rule(action, name, *args)
        except (ValueError, OSError, RuntimeError):
            pass  # a system call this processor does not have


def _launch_filter():
    sc = _pyseccomp()
    flt = sc.SyscallFilter(sc.ALLOW)
    _add(flt, sc.KILL_PROCESS, LAUNCH_FORBIDDEN + PROCESS_FORBIDDEN)
    return flt


def launch_filter_bpf() -> bytes:
    """The seccomp program (BPF) that the CPU backend installs in the process running a kernel."""
    flt = _launch_filter()
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "wb", closefd=True) as out:
            flt.export_bpf(out)
        chunks = []
        while True:
            data = os.read(read_end, 65536)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(read_end)
    program = b"".join(chunks)
    if not program or len(program) % 8:
        raise RuntimeError("libseccomp produced no usable seccomp program")
    return program


def _process_filter():
    sc = _pyseccomp()
    flt = sc.SyscallFilter(sc.ALLOW)
    _add(flt, sc.KILL_PROCESS, PROCESS_FORBIDDEN)
    _add(flt, sc.ERRNO(errno.EPERM), PROCESS_NO_WRITES)
    # open() and openat() for writing, creating, truncating or appending: EPERM
    for name, flags_arg in (("open", 1), ("openat", 2)):
        for mask, value in ((os.O_ACCMODE, os.O_WRONLY), (os.O_ACCMODE, os.O_RDWR), (os.O_CREAT, os.O_CREAT),
                            (os.O_TRUNC, os.O_TRUNC), (os.O_APPEND, os.O_APPEND)):
            _add(flt, sc.ERRNO(errno.EPERM), (name,), sc.Arg(flags_arg, sc.MASKED_EQ, mask, value))
    # openat2 hides its flags in a structure the filter cannot read: "not implemented" makes the C
    # library fall back to openat, which the rules above see
    _add(flt, sc.ERRNO(errno.ENOSYS), ("openat2",))
    return flt


def install_process_filter() -> None:
    """Install the judged process's filter (irreversible; inherited by every child it forks).

    Opening for writing is refused on a GPU too: the CUDA driver's device files were opened during
    the setup, before this call.
    """
    _process_filter().load()


@functools.lru_cache(maxsize=1)
def seccomp_problem() -> SandboxProblem | None:
    """None when seccomp filters can be built and installed here; else why not (checked in a child)."""
    try:
        _launch_filter()
        _process_filter()
    except RuntimeError as exc:
        return SandboxProblem("seccomp", str(exc))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from kernels.grading import sandbox; "
            "sandbox.install_process_filter(); print('ok')")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parents[2])],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxProblem("seccomp", f"could not test the filter: {exc}")
    if done.returncode != 0 or "ok" not in done.stdout:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return SandboxProblem("seccomp", f"the system refused a seccomp filter ({tail}); in a container, "
                                         f"allow seccomp (Docker does by default)")
    return None


# --------------------------------------------------------------------------------------------------
# Namespaces (bubblewrap)
# --------------------------------------------------------------------------------------------------

def _bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def namespace_problem() -> SandboxProblem | None:
    """None when bwrap can create the namespaces the grader uses; else why not."""
    tool = _bwrap()
    if tool is None:
        return SandboxProblem("namespaces", "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
    try:
        done = subprocess.run([tool, *_base_arguments(gpu=False), "--", "/bin/true"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SandboxProblem("namespaces", f"bwrap did not start: {exc}")
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return SandboxProblem("namespaces", f"bwrap cannot create namespaces here ({tail}); a container needs "
                                            f"user namespaces (or CAP_SYS_ADMIN) for this layer")
    return None


def _base_arguments(gpu: bool) -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--tmpfs", "/tmp"]
    args += ["--dev-bind", "/dev", "/dev"] if gpu else ["--dev", "/dev"]
    return args


def namespace_command(argv: list[str], *, gpu: bool, hide: list[Path], keep: list[Path],
                      writable: list[Path] = ()) -> list[str]:
    """``argv`` run by bwrap: new namespaces, the file system read-only, ``hide`` covered by empty
    folders (home folders, submissions, results), ``keep`` (the package, the interpreter) visible
    again underneath them and ``writable`` (the CPU backend's cache of compiled libraries, which only
    the compiler writes, before any of the submission runs) writable."""
    tool = _bwrap()
    if tool is None:
        raise RuntimeError("bwrap is not installed")
    args = [tool, *_base_arguments(gpu)]
    for folder in hide:
        if folder.is_dir() and folder != Path("/"):
            args += ["--tmpfs", str(folder)]
    for folder in keep:
        if folder.exists():
            args += ["--ro-bind", str(folder), str(folder)]
    for folder in writable:
        if folder.exists():
            args += ["--bind", str(folder), str(folder)]
    args += ["--chdir", "/tmp", "--"]
    return args + argv


# --------------------------------------------------------------------------------------------------
# What a compiled CPU-backend library may contain
# --------------------------------------------------------------------------------------------------

def _tool(name: str) -> str | None:
    return shutil.which(name)


def undefined_symbols(library: Path) -> list[str]:
    """The dynamic symbols ``library`` needs from elsewhere (``nm -D --undefined-only``)."""
    nm = _tool("nm")
    if nm is None:
        raise RuntimeError("the grader needs nm (binutils) to inspect compiled kernels")
    done = subprocess.run([nm, "-D", "--undefined-only", str(library)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"nm could not read {library.name}: {done.stderr.strip()}")
    names = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if parts:
            names.append(parts[-1].split("@")[0])
    return sorted(set(names))


def symbol_allowed(name: str) -> bool:
    if name.startswith(_RUNTIME_PREFIXES) or name in _ALLOWED_SYMBOLS or _COMPILER_HELPER.match(name):
        return True
    return bool(_MATH.match(name))


def symbol_findings(library: Path) -> list[str]:
    """One sentence per function the kernel library calls that a graded kernel may not."""
    findings = []
    for name in undefined_symbols(library):
        if symbol_allowed(name):
            continue
        advice = SYMBOL_ADVICE.get(name)
        if advice:
            findings.append(f"calls {name}(): {advice}")
        else:
            findings.append(f"calls {name}(), a function of the C library or the system that graded kernels may "
                            f"not use (only CUDA built-ins and math functions)")
    return findings


def _section_sizes(library: Path) -> dict[str, int]:
    readelf = _tool("readelf")
    if readelf is None:
        raise RuntimeError("the grader needs readelf (binutils) to inspect compiled kernels")
    done = subprocess.run([readelf, "-SW", str(library)], capture_output=True, text=True, timeout=60)
    sizes: dict[str, int] = {}
    for m in re.finditer(r"\]\s+(\.\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", done.stdout):
        sizes[m.group(1)] = int(m.group(2), 16)
    return sizes


def _relocation_kinds(library: Path) -> set[str]:
    readelf = _tool("readelf")
    done = subprocess.run([readelf, "-rW", str(library)], capture_output=True, text=True, timeout=60)
    return set(re.findall(r"\bR_\w+", done.stdout))


def _initializer_bytes(library: Path) -> int:
    """The size of the translation unit's dynamic-initialisation functions (``_GLOBAL__sub_I_*``):
    the compiler gathers every global object's constructor call of a source file into them."""
    nm = _tool("nm")
    done = subprocess.run([nm, "-S", "--defined-only", str(library)], capture_output=True, text=True, timeout=60)
    total = 0
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].startswith(("_GLOBAL__sub_I_", "_GLOBAL__sub_D_")):
            total += int(parts[1], 16)
    return total


def initializer_findings(library: Path, baseline: Path) -> list[str]:
    """Code that would run when the library is loaded (constructors, ifunc resolvers): refused.

    ``baseline`` is the library of an empty kernel built the same way; its initialisers are the
    compiler's and the runtime prelude's own. A submission may add none: no entry in the tables of
    initialisers, and no byte in the function that runs the source file's constructors.
    """
    found = []
    mine, base = _section_sizes(library), _section_sizes(baseline)
    grown = _initializer_bytes(library) > _initializer_bytes(baseline)
    for section in (".init_array", ".ctors", ".preinit_array", ".fini_array", ".dtors"):
        if mine.get(section, 0) > base.get(section, 0) or (grown and section == ".init_array"):
            found.append(f"code that runs when the kernel is loaded or unloaded ({section}: a global object with "
                         f"a constructor or destructor, or a function marked constructor/destructor); graded "
                         f"kernels may only define kernels, device functions and constant data")
            break
    if any("IRELATIVE" in kind for kind in _relocation_kinds(library)):
        found.append("an ifunc resolver, which runs when the kernel is loaded; graded kernels may not have one")
    return found
