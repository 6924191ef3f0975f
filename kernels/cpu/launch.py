"""Run one grid on the CPU backend: in a forked child, with guarded arguments and a time limit.

The child runs the grid (runtime/src/runtime.cpp) and reports through a status block in shared
memory; this module packs the arguments, starts and waits for the child, prints what the kernel
printed, copies results back where needed, checks the canaries, and turns a fault into a
``KernelFault`` that names the kernel, block, thread and source line. After a fault the next
launch starts a fresh child, so nothing of the failed one remains.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..signature import KernelArgumentError, Param
from . import abi, faults, memory
from .trace import TraceBuffer, TracedRange
from .source import display_paths
from .compile import CompiledModule, loaded_modules, runtime

DEFAULT_TIME_LIMIT_S = 60.0
TIME_LIMIT_ENV = "COURSE_CPU_TIME_LIMIT"
STACK_BYTES = 256 * 1024
KILL_GRACE_S = 5.0  # the child stops itself at the limit; the parent kills it this much later
POLL_SLICE_S = 0.25  # the parent wakes up this often, so Ctrl-C (KeyboardInterrupt) is prompt

_time_limit_override: float | None = None


_sandbox_program: Any = None  # a ctypes buffer holding the seccomp program, once set


def set_sandbox(program: bytes) -> None:
    """From now on, every launch's process installs this seccomp program (BPF, from libseccomp)
    before the grid runs, after closing every descriptor it does not need. For the grader; there
    is no way back in this process."""
    global _sandbox_program
    if not program or len(program) % 8:
        raise ValueError("a seccomp program is a non-empty array of 8-byte instructions")
    _sandbox_program = ctypes.create_string_buffer(bytes(program), len(program))


def set_time_limit(seconds: float | None) -> None:
    """Time limit of every later launch in seconds (None: back to $COURSE_CPU_TIME_LIMIT or 60 s)."""
    global _time_limit_override
    if seconds is not None and not (isinstance(seconds, (int, float)) and seconds > 0):
        raise ValueError(f"the time limit must be a positive number of seconds, got {seconds!r}")
    _time_limit_override = None if seconds is None else float(seconds)


def time_limit() -> float:
    """The time limit a launch gets unless it passes its own."""
    if _time_limit_override is not None:
        return _time_limit_override
    text = os.environ.get(TIME_LIMIT_ENV, "").strip()
    if text:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{TIME_LIMIT_ENV}={text!r} is not a number of seconds") from None
        if value > 0:
            return value
    return DEFAULT_TIME_LIMIT_S


class _Launcher:
    """Per-process launch resources: the status block, the printf file, a lock."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.runtime = runtime()
        self.status_map = mmap.mmap(-1, memory._round_up(ctypes.sizeof(abi.Status), mmap.PAGESIZE),
                                    flags=mmap.MAP_SHARED)
        self.status = abi.Status.from_buffer(self.status_map)
        self.status_address = ctypes.addressof(self.status)
        self.output = tempfile.TemporaryFile(mode="a+b", prefix="cpu-kernel-output-")
        self.lock = threading.Lock()
        lib = self.runtime.lib
        self.dynamic_base = ctypes.c_void_p.in_dll(lib, "cudacpu_dynamic_smem").value or 0
        self.dynamic_len = int(lib.cudacpu_dynamic_smem_size())


_launcher_lock = threading.Lock()
_launcher_obj: _Launcher | None = None


def launcher() -> _Launcher:
    global _launcher_obj
    with _launcher_lock:
        if _launcher_obj is None or _launcher_obj.pid != os.getpid():
            _launcher_obj = _Launcher()
        return _launcher_obj


@dataclass
class _Arg:
    name: str
    ctype: str
    value: Any
    memory: memory.ArgumentMemory | None = None


def _global_owner(address: int, nbytes: int) -> CompiledModule | None:
    for module in loaded_modules():
        for lo, n in module.layout.writable:
            if lo <= address and address + nbytes <= lo + n:
                return module
    return None


def _place_pointers(args: list[_Arg]) -> list[tuple[memory.GuardedBuffer, int, int, bool]]:
    """Give every array argument the address the kernel sees; copy foreign arrays into guarded memory.

    Returns (buffer, host address, nbytes, writable) for each copy, to be copied back afterwards.
    """
    foreign: list[_Arg] = []
    for a in args:
        if not isinstance(a.value, np.ndarray):
            continue
        arr = a.value
        owner = memory.owner(arr)
        address = memory.data_address(arr)
        if isinstance(owner, memory.GuardedBuffer):
            a.memory = memory.ArgumentMemory(address=address, buffer=owner, allocation=owner.data_address)
        elif _global_owner(address, arr.nbytes) is not None:
            a.memory = memory.ArgumentMemory(address=address, buffer=None, allocation=address)
        else:
            foreign.append(a)
    copies = []
    # Arrays that overlap share one copy, so that aliasing stays what it is on the host.
    spans = sorted(((memory.data_address(a.value), memory.data_address(a.value) + a.value.nbytes, a)
                    for a in foreign), key=lambda s: s[0])
    group: list[tuple[int, int, _Arg]] = []

    def flush() -> None:
        if not group:
            return
        lo = min(s[0] for s in group)
        hi = max(s[1] for s in group)
        buf = memory.GuardedBuffer.allocate(hi - lo)
        if hi > lo:
            ctypes.memmove(buf.data_address, lo, hi - lo)
        writable = all(s[2].value.flags.writeable for s in group)
        for start, _end, a in group:
            root = memory.owner(a.value)
            root_start = memory.data_address(root) if isinstance(root, np.ndarray) else start
            address = buf.data_address + (start - lo)
            # a view keeps its offset from the start of the array it views (the traffic analysis needs it)
            a.memory = memory.ArgumentMemory(address=address, buffer=buf, allocation=address - (start - root_start))
        copies.append((buf, lo, hi - lo, writable))
        group.clear()

    for span in spans:
        if group and span[0] >= max(s[1] for s in group):
            flush()
        group.append(span)
    flush()
    return copies


def _scalar_bytes(kernel: str, a: _Arg, size: int) -> bytes:
    value = a.value
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        raw = np.bool_(value).tobytes()
    elif isinstance(value, np.generic):
        raw = value.tobytes()
    elif isinstance(value, int):
        kinds = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
        if size not in kinds:
            raise KernelArgumentError(f"{kernel}: argument '{a.name}' is a Python int, but the parameter is "
                                      f"{size} bytes; pass a NumPy value of the parameter's type")
        try:
            raw = kinds[size](value).tobytes()
        except OverflowError:
            raise KernelArgumentError(f"{kernel}: argument '{a.name}': {value} does not fit in {size} bytes") from None
    elif isinstance(value, float):
        if size == 4:
            raw = np.float32(value).tobytes()
        elif size == 8:
            raw = np.float64(value).tobytes()
        else:
            raise KernelArgumentError(f"{kernel}: argument '{a.name}' is a float, but the parameter is {size} bytes")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    elif isinstance(value, np.ndarray):
        raw = np.ascontiguousarray(value).tobytes()
    else:
        raise KernelArgumentError(f"{kernel}: argument '{a.name}' ({a.ctype}): cannot pass a "
                                  f"{type(value).__name__} to the kernel")
    if len(raw) != size:
        raise KernelArgumentError(
            f"{kernel}: argument '{a.name}' ({a.ctype}) is {len(raw)} bytes as given, but the kernel's "
            f"parameter is {size} bytes; pass a value of exactly the parameter's type")
    return raw


def run(module: CompiledModule, entry: str, kernel: str, grid: tuple[int, int, int],
        block: tuple[int, int, int], shared_mem: int, args: Sequence[Any],
        params: Sequence[Param] | None = None, time_limit_s: float | None = None,
        trace: TraceBuffer | None = None) -> None:
    """Launch ``entry`` of ``module`` on ``grid`` x ``block`` with already converted ``args``.

    ``trace``: record the memory accesses into this buffer (``module`` must be a traced build).
    """
    sizes = module.param_sizes[entry]
    if len(args) != len(sizes):
        raise KernelArgumentError(f"{kernel} takes {len(sizes)} argument{'s' if len(sizes) != 1 else ''} "
                                  f"but got {len(args)}")
    if time_limit_s is not None and not (isinstance(time_limit_s, (int, float)) and time_limit_s > 0):
        raise ValueError(f"{kernel}: time_limit must be a positive number of seconds, got {time_limit_s!r}")
    limit = float(time_limit_s) if time_limit_s is not None else time_limit()
    described = []
    for i, value in enumerate(args):
        p = params[i] if params is not None and i < len(params) else None
        described.append(_Arg(name=p.name if p else f"arg{i}", ctype=p.short if p else "?", value=value))
    s = launcher()
    with s.lock:
        copies = _place_pointers(described)
        storage, pointers = _pack_arguments(kernel, described, sizes)
        spec = _spec(module, entry, grid, block, shared_mem, pointers, limit, s)
        if trace is not None:
            parameters = [TracedRange("parameters", abi.SPACE_PARAM, a, a + ctypes.sizeof(o))
                          for o in (storage, pointers) for a in [ctypes.addressof(o)]]
            trace.prepare(module.layout.base, _argument_ranges(described) + trace.library_ranges + parameters)
            spec.trace = trace.address
        finished, wstatus = _run_child(kernel, spec, limit, s)
        del storage  # the argument values had to live until the child was gone
        for buf, host, nbytes, writable in copies:
            if writable and nbytes:
                ctypes.memmove(host, buf.data_address, nbytes)
        status = s.status
        if status.state == abi.DONE:
            _check_canaries(kernel, described)
            return
        fault = _fault(kernel, module, status, described, shared_mem, limit, finished, wstatus, s)
        shorten = module.include_dirs
        fault.args = (display_paths(str(fault), shorten),)
        fault.file = display_paths(fault.file, shorten)
        raise fault


def _argument_ranges(args: list[_Arg]) -> list[TracedRange]:
    """The memory of every array argument, as the kernel sees it (global memory)."""
    ranges = []
    for i, a in enumerate(args):
        if a.memory is not None and isinstance(a.value, np.ndarray) and a.value.nbytes:
            ranges.append(TracedRange(a.name, abi.SPACE_GLOBAL, a.memory.address, a.memory.address + a.value.nbytes,
                                      a.value.dtype.itemsize or 1, i, a.memory.allocation or a.memory.address))
    return ranges


def _pack_arguments(kernel: str, args: list[_Arg], sizes: list[int]) -> tuple[Any, Any]:
    """The argument values in the kernel's own layout, and the array of pointers to them."""
    storage = ctypes.create_string_buffer(max(16, sum(memory._round_up(max(n, 1), 16) for n in sizes)))
    base = ctypes.addressof(storage)
    pointers = (ctypes.c_void_p * max(1, len(sizes)))()
    offset = 0
    for i, (a, size) in enumerate(zip(args, sizes)):
        if a.memory is not None:
            if size != 8:
                raise KernelArgumentError(f"{kernel}: argument '{a.name}' is an array, but the kernel's "
                                          f"parameter is not a pointer ({size} bytes)")
            raw = a.memory.address.to_bytes(8, sys.byteorder)
        else:
            raw = _scalar_bytes(kernel, a, size)
        ctypes.memmove(base + offset, raw, len(raw))
        pointers[i] = base + offset
        offset += memory._round_up(max(len(raw), 1), 16)
    return storage, pointers


def _spec(module: CompiledModule, entry: str, grid: tuple[int, int, int], block: tuple[int, int, int],
          shared_mem: int, pointers: Any, limit: float, s: _Launcher) -> abi.Spec:
    layout = module.layout
    if module.save_buffer is None:
        total = sum(n for _lo, n in layout.writable)
        module.save_buffer = mmap.mmap(-1, max(total, 1), flags=mmap.MAP_SHARED)
    spec = abi.Spec()
    spec.entry = module.entry_address(entry)
    spec.args = ctypes.addressof(pointers)
    spec.builtins = layout.builtins
    for d in range(3):
        spec.grid[d] = grid[d]
        spec.block[d] = block[d]
    spec.dynamic_smem = int(shared_mem)
    spec.static_smem_begin = layout.shared_begin or None
    spec.static_smem_end = layout.shared_end or None
    spec.nranges = min(len(layout.writable), abi.MAX_RANGES)
    for i, (lo, n) in enumerate(layout.writable[:abi.MAX_RANGES]):
        spec.range_addr[i] = lo
        spec.range_len[i] = n
    spec.save_buffer = memory.address_of(module.save_buffer)
    spec.stack_bytes = STACK_BYTES
    spec.time_limit = limit
    spec.status = s.status_address
    spec.out_fd = s.output.fileno()
    if _sandbox_program is not None:
        spec.sandbox = ctypes.addressof(_sandbox_program)
        spec.sandbox_len = len(_sandbox_program.raw)
    return spec


def _run_child(kernel: str, spec: abi.Spec, limit: float, s: _Launcher) -> tuple[bool, int]:
    """Fork the child, wait for it (Ctrl-C stays prompt), reap it, print its output.

    Returns (it ended by itself, its wait status).
    """
    rt = s.runtime.lib
    os.ftruncate(spec.out_fd, 0)
    fd = ctypes.c_int(-1)
    pid = rt.cudacpu_launch_start(ctypes.byref(spec), ctypes.byref(fd))
    if pid < 0:
        raise OSError(f"{kernel}: could not start the process that runs the kernel (fork failed: "
                      f"out of memory or too many processes?)")
    finished = False
    try:
        deadline = time.monotonic() + limit + KILL_GRACE_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if rt.cudacpu_launch_wait(fd.value, max(1, int(min(remaining, POLL_SLICE_S) * 1000))):
                finished = True
                break
    finally:
        wstatus = rt.cudacpu_launch_finish(ctypes.byref(spec), pid, fd.value, 0 if finished else 1)
        _forward_output(spec.out_fd)
    return finished, wstatus


def _forward_output(fd: int) -> None:
    size = os.fstat(fd).st_size
    if size <= 0:
        return
    data = os.pread(fd, size, 0)
    os.ftruncate(fd, 0)
    sys.stdout.write(data.decode("utf-8", errors="replace"))
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError):
        pass


def _check_canaries(kernel: str, args: list[_Arg]) -> None:
    seen: set[int] = set()
    for a in args:
        buf = a.memory.buffer if a.memory else None
        if buf is None or id(buf) in seen:
            continue
        seen.add(id(buf))
        broken = buf.broken_canaries()
        if not broken:
            continue
        buf.fill_canaries()
        first, last = broken[0]
        arr = a.value
        itemsize = arr.dtype.itemsize or 1
        allocation = buf.nbytes // itemsize
        if first >= 0:
            elements = f"{a.name}[{allocation + first // itemsize}]"
            if last // itemsize != first // itemsize:
                elements += f" to {a.name}[{allocation + last // itemsize}]"
            where_text = (f"byte(s) {first}..{last} after the last byte of the memory that holds '{a.name}' "
                          f"({allocation} elements of {arr.dtype}), i.e. {elements}")
            what = "past the end of"
        else:
            elements = f"{a.name}[{-((-last - 1) // itemsize) - 1}]"
            where_text = f"byte(s) {-last}..{-first} before the first byte of '{a.name}', i.e. {elements}"
            what = "before the start of"
        raise faults.OutOfBoundsAccess(
            f"{kernel}: out-of-bounds write {what} argument '{a.name}' ({a.ctype}): the kernel changed the "
            f"{where_text}. This was found after the launch (in the padding next to the array, which the "
            f"CPU backend fills with a known pattern), so the block and thread are unknown; look for an "
            f"index that can reach n or more (<= n instead of < n) or below 0. On a GPU such a write "
            f"silently corrupts whatever lies next to the array.", kernel=kernel)


def _unreported_end(wstatus: int) -> str:
    """Why a launch's process ended without its report, in words a student can act on."""
    if wstatus >= 0 and os.WIFEXITED(wstatus):
        return (f"exited with status {os.WEXITSTATUS(wstatus)} before the kernel finished: device code called "
                f"exit() or a function that ends the program; a kernel ends by returning")
    if wstatus >= 0 and os.WIFSIGNALED(wstatus):
        signo = os.WTERMSIG(wstatus)
        if signo == signal.SIGSYS:
            return ("was stopped by the grader's sandbox: device code made a system call that graded kernels may "
                    "not make (opening files, starting programs, the network, signals)")
        if signo == signal.SIGABRT:
            return "was ended by SIGABRT: device code called abort() (use assert() or __trap() to stop a kernel)"
        if signo == signal.SIGKILL:
            return "was killed by SIGKILL, most likely because the system ran out of memory"
        return f"was killed by {_signal_name(signo)}"
    return "ended without a report"


def _signal_name(signo: int) -> str:
    try:
        return signal.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


def _fault(kernel: str, module: CompiledModule, status: abi.Status, args: list[_Arg], shared_mem: int,
           limit: float, finished: bool, wstatus: int, s: _Launcher) -> faults.KernelFault:
    block = tuple(int(v) for v in status.block) if status.state != abi.RUNNING or status.blocks_done else None
    thread = tuple(int(v) for v in status.thread) if status.has_thread else None
    if status.state == abi.RUNNING:           # the child never reported: killed from outside
        grid_pos = f"after {int(status.blocks_done)} complete block(s)"
        if not finished:
            return faults.KernelTimeout(
                f"{kernel}: time limit of {limit:g} s exceeded ({grid_pos}); the process running it did not "
                f"stop by itself and was killed. {_TIMEOUT_ADVICE}", kernel=kernel)
        return faults.KernelCrash(f"{kernel}: the process running the kernel {_unreported_end(wstatus)} "
                                  f"({grid_pos}).", kernel=kernel)

    line: faults.SourceLine | None = None
    file = status.file.decode("utf-8", errors="replace")
    if status.line > 0 and file and faults.is_reader_file(file):
        line = faults.SourceLine(file, int(status.line))
    kind = status.kind
    if line is None and status.nframes > 0:
        frames = [int(status.frames[i]) for i in range(min(status.nframes, abi.MAX_FRAMES))]
        candidates = [(f, i > 0) for i, f in enumerate(frames)]
        line = faults.source_line(module.path, module.layout.base, candidates, module.layout.executable)
    at = faults.where(block, thread, line)
    detail = status.message.decode("utf-8", errors="replace")
    info = dict(kernel=kernel, block=block, thread=thread, file=line.file if line else "",
                line=line.line if line else 0)

    if kind == abi.FAULT_BARRIER:
        return faults.BarrierDeadlock(f"{kernel}: barrier deadlock in {at}: {detail}", **info)
    if kind == abi.FAULT_WARP:
        return faults.WarpCollectiveError(f"{kernel}: invalid warp collective in {at}: {detail}", **info)
    if kind == abi.FAULT_ASSERT:
        return faults.DeviceAssertion(f"{kernel}: device-side assertion failed in {at}: {detail}", **info)
    if kind == abi.FAULT_TRAP:
        return faults.KernelTrap(f"{kernel}: kernel aborted by __trap() in {at}: {detail}", **info)
    if kind == abi.FAULT_MISALIGNED:
        return faults.MisalignedAccess(f"{kernel}: misaligned address in {at}: {detail}", **info)
    if kind == abi.FAULT_TIMEOUT:
        return faults.KernelTimeout(
            f"{kernel}: time limit of {limit:g} s exceeded in {at} (where the kernel was when it was "
            f"stopped). {_TIMEOUT_ADVICE}", **info)
    if kind == abi.FAULT_STACK:
        return faults.StackOverflow(
            f"{kernel}: stack overflow in {at}: the thread needed more than the {STACK_BYTES // 1024} KiB "
            f"of stack the CPU backend gives each thread (a large local array, or deep recursion). On a "
            f"GPU such a thread spills to local memory, which is limited per thread as well.", **info)
    if kind in (abi.FAULT_UNSUPPORTED, abi.FAULT_INTERNAL):
        return faults.KernelCrash(f"{kernel}: {detail} ({at})", **info)
    return _signal_fault(kernel, status, args, shared_mem, at, info, s)


_TIMEOUT_ADVICE = (
    "Look for an endless loop (a loop condition that never becomes false, an index that is never "
    "updated), or for a thread that waits for another thread or block without a barrier: the CPU "
    "backend runs one thread of a block at a time until it reaches a barrier or a warp collective, "
    "and one block after another, so a spin-wait on a thread or block that has not run yet never "
    "ends. If the kernel is just slow, pass time_limit=<seconds> to the launch or call "
    "kernels.cpu.set_time_limit(<seconds>).")


def _signal_fault(kernel: str, status: abi.Status, args: list[_Arg], shared_mem: int, at: str,
                  info: dict, s: _Launcher) -> faults.KernelFault:
    signo, code, address = int(status.signo), int(status.si_code), int(status.addr)
    access = {1: "write", 0: "read"}.get(int(status.is_write), "access")
    if signo in (signal.SIGSEGV, signal.SIGBUS):
        for a in args:
            buf = a.memory.buffer if a.memory else None
            if buf is None:
                continue
            side = buf.guard_hit(address)
            if side is None:
                continue
            arr = a.value
            itemsize = arr.dtype.itemsize or 1
            index = (address - a.memory.address) // itemsize
            allocation = (buf.nbytes // itemsize) if itemsize else buf.nbytes
            extra = ""
            if allocation != arr.size:
                extra = f", inside an allocation of {allocation} elements"
            edge = "past the end" if side == "after" else "before the start"
            return faults.OutOfBoundsAccess(
                f"{kernel}: out-of-bounds {access} {edge} of argument '{a.name}' ({a.ctype}) in {at}: "
                f"element {a.name}[{index}] of an array of {arr.size} {arr.dtype}{extra}. The CPU backend "
                f"puts inaccessible memory around every array, so the first access outside stops the "
                f"kernel; on a GPU it may silently read garbage or corrupt other data. Check the bounds "
                f"test (i < n) and the index arithmetic.", **info)
        if s.dynamic_base and s.dynamic_base <= address < s.dynamic_base + s.dynamic_len:
            offset = address - s.dynamic_base
            if shared_mem == 0:
                why = ("but the launch passed no dynamic shared memory (shared_mem=0); pass "
                       "shared_mem=<bytes> to the launch")
            else:
                why = f"but the launch asked for shared_mem={shared_mem} bytes"
            return faults.OutOfBoundsAccess(
                f"{kernel}: out-of-bounds {access} of dynamic shared memory (extern __shared__) in {at}: "
                f"byte offset {offset}, {why}.", **info)
        if address < 65536 and code != 128:
            return faults.InvalidAddress(
                f"{kernel}: {access} through a null pointer in {at} (address {address:#x}): a pointer "
                f"argument that is 0, or an uninitialised pointer.", **info)
        if code == 128:  # SI_KERNEL: a general-protection fault, no address
            return faults.InvalidAddress(
                f"{kernel}: misaligned or invalid memory access in {at}: either a 16-byte vector "
                f"access (float4, int4) at an address that is not a multiple of 16, which is an error "
                f"on a GPU too (misaligned address), or an address outside the machine's address space "
                f"(a wild pointer, or an index far outside its array); the processor does not say "
                f"which address.", **info)
        return faults.InvalidAddress(
            f"{kernel}: invalid memory {access} in {at}: address {address:#x} belongs to no argument "
            f"array (a wild pointer, an index far outside its array, or an array that no longer "
            f"exists).", **info)
    if signo == signal.SIGFPE:
        what = {1: "integer division by zero", 2: "integer overflow in a division (INT_MIN / -1)"}.get(
            code, "arithmetic exception")
        return faults.KernelCrash(
            f"{kernel}: {what} in {at}. On a GPU integer division by zero does not stop the kernel but "
            f"gives an unspecified result: a bug either way.", **info)
    if signo == signal.SIGILL:
        return faults.KernelCrash(
            f"{kernel}: illegal instruction in {at}: the compiler placed a trap where it found undefined "
            f"behaviour (for example a function that does not return its value).", **info)
    if signo == signal.SIGABRT:
        return faults.KernelCrash(f"{kernel}: abort() was called in {at}.", **info)
    return faults.KernelCrash(f"{kernel}: the kernel stopped with {_signal_name(signo)} in {at}.", **info)
