"""The CPU backend's array module: the part of CuPy's API the chapters use, over NumPy.

``kernels.array_module()`` returns this module when there is no GPU, so a notebook written as
``xp = kernels.array_module(); x = xp.asarray(h); kernel(grid, block, (x, n)); x.get()`` runs
unchanged on either backend. Arrays are ``xp.ndarray``, a NumPy array subclass with CuPy's
``.get()``/``.set()``; the ones made here live in guarded shared memory (see kernels.cpu.memory), so
a kernel reads and writes them in place and an access past either end is caught. Everything not
defined here (dtypes such as ``xp.float32``, ``xp.cumsum``, ``xp.array_equal`` ...) is NumPy's.
"""
from __future__ import annotations

import ctypes as _ctypes
import sys as _sys
import types as _types
from typing import Any as _Any

import numpy as _np

from ..errors import NoGPUError as _NoGPUError
from . import memory as _memory
from .raw import MemoryPointer, RawKernel, RawModule  # noqa: F401  (cupy.RawKernel, cupy.RawModule)


def _shape(shape: _Any) -> tuple[int, ...]:
    if isinstance(shape, (int, _np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


class ndarray(_np.ndarray):
    """A NumPy array with CuPy's host-transfer methods; ``ndarray(shape, dtype, memptr=...)`` views a
    ``__device__``/``__constant__`` global from ``RawModule.get_global``, as in CuPy."""

    def __new__(cls, shape: _Any, dtype: _Any = float, memptr: MemoryPointer | None = None,
                strides: _Any = None, order: str = "C") -> "ndarray":
        shape, dtype = _shape(shape), _np.dtype(dtype)
        if memptr is None:
            return _memory.allocate_array(shape, dtype, cls)
        nbytes = int(_np.prod(shape, dtype=_np.int64)) * dtype.itemsize
        if nbytes > memptr.size:
            raise ValueError(f"an array of {shape} {dtype} needs {nbytes} bytes, but the memory at "
                             f"{memptr.ptr:#x} has {memptr.size}")
        raw = (_ctypes.c_char * max(nbytes, 1)).from_address(memptr.ptr)
        return _np.ndarray.__new__(cls, shape, dtype, buffer=raw, strides=strides, order=order)

    def get(self, stream: _Any = None, order: str = "C", out: _np.ndarray | None = None) -> _np.ndarray:
        """A NumPy copy (cupy.ndarray.get)."""
        if out is not None:
            out[...] = self
            return out
        return _np.array(self, copy=True, order=order, subok=False)

    def set(self, arr: _Any, stream: _Any = None) -> None:
        """Copy from a NumPy array of the same shape (cupy.ndarray.set)."""
        arr = _np.asarray(arr)
        if arr.shape != self.shape:
            raise ValueError(f"shape mismatch: {arr.shape} into {self.shape}")
        self[...] = arr

    def __repr__(self) -> str:
        return repr(_np.asarray(self))

    @property
    def data(self) -> MemoryPointer:  # type: ignore[override]
        """Where the array starts, as CuPy gives it: ``x.data.ptr`` (e.g. to check an alignment)."""
        return MemoryPointer(_memory.data_address(self), self.nbytes, self)

    @property
    def device(self) -> "_CudaNamespace.Device":
        return cuda.Device(0)

    # CuPy gives 0-d arrays, not NumPy scalars, for an element (x[0]) or a reduction (x.sum()):
    # keep that, so that x[0].get() and x.sum().get() work here too.
    def __getitem__(self, key: _Any) -> _Any:
        result = super().__getitem__(key)
        return _zero_d(result) if isinstance(result, _np.generic) else result

    def __array_wrap__(self, array: _Any, *args: _Any, **kwargs: _Any) -> _Any:
        result = super().__array_wrap__(array, *args, **kwargs)
        return _zero_d(result) if isinstance(result, _np.generic) else result


def _zero_d(value: _np.generic) -> "ndarray":
    return _np.asarray(value).view(ndarray)


def _wrap(a: _np.ndarray) -> ndarray:
    return a if isinstance(a, ndarray) else a.view(ndarray)


def empty(shape: _Any, dtype: _Any = float, order: str = "C") -> ndarray:
    return _memory.allocate_array(_shape(shape), _np.dtype(dtype), ndarray)


def zeros(shape: _Any, dtype: _Any = float, order: str = "C") -> ndarray:
    return empty(shape, dtype)  # fresh shared memory is zero


def ones(shape: _Any, dtype: _Any = float, order: str = "C") -> ndarray:
    return full(shape, 1, dtype)


def full(shape: _Any, fill_value: _Any, dtype: _Any = None, order: str = "C") -> ndarray:
    if dtype is None:
        dtype = _np.asarray(fill_value).dtype
    a = empty(shape, dtype)
    a.fill(fill_value)
    return a


def empty_like(a: _Any, dtype: _Any = None, order: str = "C", subok: _Any = None, shape: _Any = None) -> ndarray:
    a = _np.asarray(a)
    return empty(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def zeros_like(a: _Any, dtype: _Any = None, order: str = "C", subok: _Any = None, shape: _Any = None) -> ndarray:
    return empty_like(a, dtype, shape=shape)


def ones_like(a: _Any, dtype: _Any = None, order: str = "C", subok: _Any = None, shape: _Any = None) -> ndarray:
    a = _np.asarray(a)
    return full(a.shape if shape is None else shape, 1, a.dtype if dtype is None else dtype)


def full_like(a: _Any, fill_value: _Any, dtype: _Any = None, order: str = "C", subok: _Any = None,
              shape: _Any = None) -> ndarray:
    a = _np.asarray(a)
    return full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None else dtype)


def array(obj: _Any, dtype: _Any = None, copy: bool = True, order: str = "K", subok: bool = False,
          ndmin: int = 0) -> ndarray:
    """A copy of ``obj`` in the backend's memory (cupy.array copies host data to the device)."""
    if not copy and isinstance(obj, ndarray) and (dtype is None or _np.dtype(dtype) == obj.dtype) \
            and _memory.owner(obj).__class__ is _memory.GuardedBuffer:
        return obj
    host = _np.array(obj, dtype=dtype, ndmin=ndmin, copy=True, subok=False)
    out = empty(host.shape, host.dtype)
    out[...] = host
    return out


def asarray(a: _Any, dtype: _Any = None, order: _Any = None) -> ndarray:
    """``a`` itself if it is already in the backend's memory with that dtype, else a copy there."""
    return array(a, dtype=dtype, copy=False)


def ascontiguousarray(a: _Any, dtype: _Any = None) -> ndarray:
    if isinstance(a, ndarray) and a.flags.c_contiguous and (dtype is None or _np.dtype(dtype) == a.dtype):
        return a
    return array(_np.ascontiguousarray(a, dtype=dtype))


def asnumpy(a: _Any, stream: _Any = None, order: str = "C", out: _np.ndarray | None = None) -> _np.ndarray:
    """A NumPy copy (cupy.asnumpy)."""
    if out is not None:
        out[...] = a
        return out
    return _np.array(a, copy=True, order=order, subok=False)


def arange(start: _Any, stop: _Any = None, step: _Any = 1, dtype: _Any = None) -> ndarray:
    return array(_np.arange(start, stop, step, dtype=dtype) if stop is not None else _np.arange(start, dtype=dtype))


def linspace(*args: _Any, **kwargs: _Any) -> ndarray:
    return array(_np.linspace(*args, **kwargs))


def copy(a: _Any, order: str = "K") -> ndarray:
    return array(a)


def get_array_module(*args: _Any) -> _types.ModuleType:
    return _sys.modules[__name__]


class _RandomModule:
    """cupy.random: random numbers drawn on the host, delivered in the backend's memory."""

    def __init__(self) -> None:
        self._rng = _np.random.default_rng()

    def seed(self, seed: int | None = None) -> None:
        self._rng = _np.random.default_rng(seed)

    def random(self, size: _Any = None, dtype: _Any = float) -> _Any:
        dtype = _np.dtype(dtype)
        if dtype not in (_np.dtype(_np.float32), _np.dtype(_np.float64)):
            raise TypeError(f"random() supports float32 and float64, not {dtype}")
        return self._out(self._rng.random(size, dtype=dtype))

    random_sample = random

    def rand(self, *shape: int, dtype: _Any = float) -> _Any:
        return self.random(shape or None, dtype)

    def randn(self, *shape: int, dtype: _Any = float) -> _Any:
        return self.standard_normal(shape or None, dtype)

    def standard_normal(self, size: _Any = None, dtype: _Any = float) -> _Any:
        return self._out(self._rng.standard_normal(size).astype(dtype))

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: _Any = None, dtype: _Any = float) -> _Any:
        return self._out(self._rng.normal(loc, scale, size).astype(dtype))

    def uniform(self, low: float = 0.0, high: float = 1.0, size: _Any = None, dtype: _Any = float) -> _Any:
        return self._out(self._rng.uniform(low, high, size).astype(dtype))

    def randint(self, low: int, high: int | None = None, size: _Any = None, dtype: _Any = int) -> _Any:
        if high is None:
            low, high = 0, low
        return self._out(self._rng.integers(low, high, size=size, dtype=_np.dtype(dtype)))

    def permutation(self, n: _Any) -> _Any:
        return self._out(self._rng.permutation(n))

    @staticmethod
    def _out(a: _Any) -> _Any:
        return array(a) if isinstance(a, _np.ndarray) else a


random = _RandomModule()


class _Runtime:
    """cupy.cuda.runtime, as far as chapters touch it: the copy kinds and a copy between addresses.

    On the CPU backend host and device memory are the same memory, so every kind of copy is one
    memmove, finished when the call returns (asynchronous copies included).
    """

    memcpyHostToHost, memcpyHostToDevice, memcpyDeviceToHost, memcpyDeviceToDevice, memcpyDefault = range(5)

    @staticmethod
    def memcpy(dst: int, src: int, size: int, kind: int) -> None:
        _ctypes.memmove(int(dst), int(src), int(size))

    @classmethod
    def memcpyAsync(cls, dst: int, src: int, size: int, kind: int, stream: int = 0) -> None:
        cls.memcpy(dst, src, size, kind)


class _CudaNamespace:
    """cupy.cuda, as far as chapters touch it: a device and streams that are always synchronous."""

    runtime = _Runtime()
    _current: list["_CudaNamespace.Stream"] = []  # streams entered with `with stream:`, innermost last

    class Device:
        def __init__(self, device: int = 0):
            self.id = int(device)
            self.compute_capability = "cpu"

        def synchronize(self) -> None:
            """Kernels on the CPU backend have finished when their call returns."""

        def use(self) -> None:
            pass

        def __enter__(self) -> "_CudaNamespace.Device":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    class Stream:
        null: "_CudaNamespace.Stream"

        def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False):
            self.ptr = 0

        def synchronize(self) -> None:
            pass

        def use(self) -> "_CudaNamespace.Stream":
            return self

        def __enter__(self) -> "_CudaNamespace.Stream":
            _CudaNamespace._current.append(self)
            return self

        def __exit__(self, *exc: object) -> None:
            if _CudaNamespace._current and _CudaNamespace._current[-1] is self:
                _CudaNamespace._current.pop()

        def record(self, event: "_CudaNamespace.Event | None" = None) -> "_CudaNamespace.Event":
            event = event or _CudaNamespace.Event()
            event.record()
            return event

        def wait_event(self, event: "_CudaNamespace.Event") -> None:
            pass

    class Event:
        """An event to wait for (a no-op: launches have finished when they return). It measures no
        time: a CPU-backend timing would say nothing about a GPU."""

        def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False):
            pass

        def record(self, stream: _Any = None) -> None:
            pass

        def synchronize(self) -> None:
            pass

    @staticmethod
    def get_current_stream() -> "_CudaNamespace.Stream":
        """The innermost stream entered with ``with``, else the null stream (as in CuPy)."""
        return _CudaNamespace._current[-1] if _CudaNamespace._current else _CudaNamespace.Stream.null

    @staticmethod
    def get_elapsed_time(start: "_CudaNamespace.Event", end: "_CudaNamespace.Event") -> float:
        raise _NoGPUError("get_elapsed_time() times GPU work with CUDA events, and the CPU backend has no GPU: "
                         "a kernel's time on the CPU says nothing about its time on a GPU. Run the timing "
                         "cells on a GPU (in Colab: Runtime > Change runtime type > T4 GPU).")


_CudaNamespace.Stream.null = _CudaNamespace.Stream(null=True)
cuda = _CudaNamespace()


class _MemoryPool:
    def free_all_blocks(self) -> None:
        pass

    def used_bytes(self) -> int:
        return 0

    def total_bytes(self) -> int:
        return 0


def get_default_memory_pool() -> _MemoryPool:
    return _MemoryPool()


def get_default_pinned_memory_pool() -> _MemoryPool:
    return _MemoryPool()


def __getattr__(name: str) -> _Any:
    """Everything else is NumPy's; functions that return arrays return xp.ndarray views."""
    try:
        value = getattr(_np, name)
    except AttributeError:
        raise AttributeError(f"the CPU backend's array module has no attribute {name!r} "
                             f"(and neither has NumPy)") from None
    if callable(value) and not isinstance(value, (type, _np.ufunc)):
        def wrapped(*args: _Any, **kwargs: _Any) -> _Any:
            result = value(*args, **kwargs)
            return _wrap(result) if type(result) is _np.ndarray else result
        wrapped.__name__ = name
        wrapped.__doc__ = getattr(value, "__doc__", None)
        return wrapped
    return value
