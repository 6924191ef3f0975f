"""ctypes mirrors of the structures in ``runtime/src/abi.h`` (the runtime library and Python share them).

Change both files together; ``load_runtime`` checks the sizes against the library so that a mismatch
fails loudly instead of corrupting memory.
"""
from __future__ import annotations

import ctypes

import numpy as np

MAX_RANGES = 16
MAX_FRAMES = 48
TRACE_MAX_RANGES = 64
TRACE_HEADER_BYTES = 4096
SPACE_GLOBAL, SPACE_SHARED, SPACE_CONSTANT, SPACE_PARAM = range(4)
ACCESS_WRITE, ACCESS_ATOMIC = 1, 2

OK, FAULT_SIGNAL, FAULT_TIMEOUT, FAULT_BARRIER, FAULT_WARP, FAULT_ASSERT, FAULT_TRAP, FAULT_STACK, \
    FAULT_UNSUPPORTED, FAULT_INTERNAL, FAULT_MISALIGNED = range(11)
RUNNING, DONE, FAULTED = range(3)


class Status(ctypes.Structure):
    """What the child reports about one launch (lives in shared memory)."""

    _fields_ = [
        ("state", ctypes.c_int32), ("kind", ctypes.c_int32),
        ("signo", ctypes.c_int32), ("si_code", ctypes.c_int32),
        ("has_thread", ctypes.c_int32), ("line", ctypes.c_int32),
        ("block", ctypes.c_uint32 * 3), ("thread", ctypes.c_uint32 * 3),
        ("addr", ctypes.c_uint64), ("pc", ctypes.c_uint64),
        ("is_write", ctypes.c_int32), ("nframes", ctypes.c_int32),
        ("frames", ctypes.c_uint64 * MAX_FRAMES),
        ("blocks_done", ctypes.c_uint64),
        ("globals_saved", ctypes.c_int32), ("pad", ctypes.c_int32),
        ("file", ctypes.c_char * 512),
        ("message", ctypes.c_char * 2048),
    ]


class Spec(ctypes.Structure):
    """Everything the child needs to run one grid."""

    _fields_ = [
        ("entry", ctypes.c_void_p),
        ("args", ctypes.c_void_p),
        ("builtins", ctypes.c_void_p),
        ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3),
        ("dynamic_smem", ctypes.c_uint64),
        ("static_smem_begin", ctypes.c_void_p), ("static_smem_end", ctypes.c_void_p),
        ("nranges", ctypes.c_int32), ("out_fd", ctypes.c_int32),
        ("range_addr", ctypes.c_void_p * MAX_RANGES),
        ("range_len", ctypes.c_uint64 * MAX_RANGES),
        ("save_buffer", ctypes.c_void_p),
        ("stack_bytes", ctypes.c_uint64),
        ("time_limit", ctypes.c_double),
        ("status", ctypes.c_void_p),
        ("trace", ctypes.c_void_p),
        ("sandbox", ctypes.c_void_p), ("sandbox_len", ctypes.c_uint64),
    ]


class TraceHeader(ctypes.Structure):
    """The head of a memory-access trace buffer (kernels/traffic); the records follow it."""

    _fields_ = [
        ("capacity", ctypes.c_uint64), ("count", ctypes.c_uint64),
        ("local", ctypes.c_uint64), ("unclassified", ctypes.c_uint64),
        ("pc_base", ctypes.c_uint64),
        ("nranges", ctypes.c_uint32), ("pad", ctypes.c_uint32),
        ("range_lo", ctypes.c_uint64 * TRACE_MAX_RANGES), ("range_hi", ctypes.c_uint64 * TRACE_MAX_RANGES),
        ("range_space", ctypes.c_uint8 * TRACE_MAX_RANGES),
    ]


#: One recorded access (cudacpu_trace_record), as a NumPy record.
TRACE_RECORD = [("addr", "<u8"), ("pc", "<u4"), ("block", "<u4"), ("barrier", "<u4"), ("syncwarp", "<u2"),
                ("collective", "<u2"), ("thread", "<u2"), ("size", "<u2"), ("flags", "u1"), ("space", "u1"),
                ("range", "u1"), ("pad", "u1")]


class ObjectInfo(ctypes.Structure):
    """Where a loaded library lives: load base, writable and executable address ranges, file."""

    _fields_ = [
        ("base", ctypes.c_uint64),
        ("nwritable", ctypes.c_int32), ("nexec", ctypes.c_int32),
        ("w_addr", ctypes.c_uint64 * MAX_RANGES), ("w_len", ctypes.c_uint64 * MAX_RANGES),
        ("x_addr", ctypes.c_uint64 * MAX_RANGES), ("x_len", ctypes.c_uint64 * MAX_RANGES),
        ("path", ctypes.c_char * 1024),
    ]


def declare(lib: ctypes.CDLL) -> None:
    """Argument and result types of the runtime library's functions."""
    vp, i32, u64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64
    lib.cudacpu_launch_start.argtypes = [ctypes.POINTER(Spec), ctypes.POINTER(ctypes.c_int)]
    lib.cudacpu_launch_start.restype = i32
    lib.cudacpu_launch_wait.argtypes = [i32, i32]
    lib.cudacpu_launch_wait.restype = i32
    lib.cudacpu_launch_finish.argtypes = [ctypes.POINTER(Spec), i32, i32, i32]
    lib.cudacpu_launch_finish.restype = i32
    lib.cudacpu_find_object.argtypes = [vp, ctypes.POINTER(ObjectInfo)]
    lib.cudacpu_find_object.restype = i32
    lib.cudacpu_symbol_size.argtypes = [vp]
    lib.cudacpu_symbol_size.restype = u64
    lib.cudacpu_status_size.restype = u64
    lib.cudacpu_spec_size.restype = u64
    lib.cudacpu_dynamic_smem_size.restype = u64
    lib.cudacpu_abi_version.restype = i32
    lib.cudacpu_trace_header_size.restype = u64
    lib.cudacpu_trace_record_size.restype = u64


def check_sizes(lib: ctypes.CDLL) -> None:
    """Fail loudly when this file and abi.h disagree."""
    record = np.dtype(TRACE_RECORD).itemsize
    if (lib.cudacpu_status_size() != ctypes.sizeof(Status) or lib.cudacpu_spec_size() != ctypes.sizeof(Spec)
            or lib.cudacpu_trace_header_size() != ctypes.sizeof(TraceHeader)
            or lib.cudacpu_trace_record_size() != record):
        raise RuntimeError("the CPU backend's runtime library does not match kernels/cpu/abi.py "
                           f"(status {lib.cudacpu_status_size()} vs {ctypes.sizeof(Status)} bytes, "
                           f"spec {lib.cudacpu_spec_size()} vs {ctypes.sizeof(Spec)} bytes, "
                           f"trace header {lib.cudacpu_trace_header_size()} vs {ctypes.sizeof(TraceHeader)} "
                           f"bytes, trace record {lib.cudacpu_trace_record_size()} vs {record} bytes)")
