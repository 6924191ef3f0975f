"""The package's error classes, in one module that imports nothing.

Each names a mistake a student can make or a thing a machine can lack, and its message says in one
sentence what is wrong. They live here so that every module (the compile path, both backends, the
grader) can raise and catch them without importing one another; the modules that raise them first
(``backend``, ``nvrtc``, ``compile``, ``signature``) still export them under their old names.
"""
from __future__ import annotations


class NoGPUError(RuntimeError):
    """Raised when something needs a CUDA GPU and CuPy cannot reach one."""


class CudaCompileError(RuntimeError):
    """The CUDA C did not compile; the message is the compiler's log with ``file(line): error``."""


class LaunchConfigError(ValueError):
    """The grid, block or shared memory size cannot be launched; the message says why."""


class KernelArgumentError(TypeError):
    """An argument does not match the kernel's C parameter; the message says which and why."""


class KernelNotFoundError(ValueError):
    """The source (or compiled module) has no ``__global__`` function of the requested name."""


class GlobalNotFoundError(KernelNotFoundError):
    """The module has no ``__device__`` or ``__constant__`` variable of the requested name.

    A KernelNotFoundError too, so that code catching "a name this module lacks" catches both.
    """


__all__ = ["NoGPUError", "CudaCompileError", "LaunchConfigError", "KernelArgumentError", "KernelNotFoundError",
           "GlobalNotFoundError"]
