"""Where graded kernels run: the course's backend (CuPy on a GPU, or the CPU backend), or a fake.

The harness talks only to a ``Runtime``: compile a kernel, give me the array module, wait for the
device, copy to the host. ``CourseRuntime`` does that through the public ``kernels`` API
(``load_kernel``, ``array_module``, ``backend_name``), so the same code runs on a GPU and on the CPU
backend. Tests use ``PythonRuntime``, whose "kernels" are Python functions, to exercise the harness
with no backend at all.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Protocol

import numpy as np

# Errors after which a CUDA context is unusable (sticky errors): no later launch in the process works.
_CUDA_FATAL = re.compile(r"IllegalAddress|MisalignedAddress|LaunchFailure|IllegalInstruction|HardwareStackError|"
                         r"InvalidAddressSpace|InvalidPc|cudaErrorAssert|LaunchTimeout|illegal memory access|"
                         r"misaligned address|unspecified launch failure|illegal instruction|device-side assert|"
                         r"CUDA_ERROR_(ILLEGAL|MISALIGNED|LAUNCH_FAILED|HARDWARE|ASSERT)|"
                         r"KernelTimeout", re.I)  # a kernel given up on keeps running: the GPU stays busy


# What a failed launch means, by the exception's class (the CPU backend raises one class per fault).
_FAULT_VERDICTS = {
    "BarrierDeadlock": "timeout", "KernelTimeout": "timeout",
    "InvalidAddress": "crash", "StackOverflow": "crash", "KernelCrash": "crash", "KernelTrap": "crash",
    "DeviceAssertion": "crash", "WarpCollectiveError": "crash",
    "LaunchConfigError": "launch_error", "KernelArgumentError": "launch_error",
}


def classify_error(exc: BaseException) -> str:
    """The verdict for an exception raised by a launch (see verdicts.py for the words)."""
    for cls in type(exc).__mro__:
        if cls.__name__ == "OutOfBoundsAccess":
            text = str(exc).lower()
            return "oob_read" if "read" in text and "writ" not in text else "oob_write"
        if cls.__name__ in _FAULT_VERDICTS:
            return _FAULT_VERDICTS[cls.__name__]
    return "crash"


class Runtime(Protocol):
    name: str
    is_gpu: bool
    xp: Any

    def load(self, code: str, name: str) -> Callable[..., Any]: ...

    def synchronize(self) -> None: ...

    def to_host(self, a: Any) -> np.ndarray: ...

    def is_fatal(self, exc: BaseException) -> bool: ...

    def sm_count(self) -> int: ...

    def device_name(self) -> str: ...

    def compute_capability(self) -> str: ...


class CourseRuntime:
    """The course's own backend, chosen by ``kernels.backend_name()``."""

    def __init__(self) -> None:
        import kernels

        self.name = kernels.backend_name()
        self.is_gpu = self.name == "cupy"
        self.xp = kernels.array_module()
        self._kernels = kernels

    def load(self, code: str, name: str, options: tuple[str, ...] = ()) -> Callable[..., Any]:
        return self._kernels.load_kernel(code, name, options=options)

    def synchronize(self) -> None:
        if self.is_gpu:
            self.xp.cuda.get_current_stream().synchronize()

    def to_host(self, a: Any) -> np.ndarray:
        return np.array(self.xp.asnumpy(a), copy=True)

    def is_fatal(self, exc: BaseException) -> bool:
        """After a device fault a CUDA context is unusable: no later case can run in this process."""
        return self.is_gpu and bool(_CUDA_FATAL.search(f"{type(exc).__name__}: {exc}"))

    def sm_count(self) -> int:
        if not self.is_gpu:
            return 0
        return int(self._kernels.device_info().sm_count)

    def device_name(self) -> str:
        if not self.is_gpu:
            return "CPU backend"
        return str(self._kernels.device_info().name)

    def compute_capability(self) -> str:
        """The GPU's "major.minor" ("9.0" on an H100); "" on the CPU backend."""
        return str(self._kernels.device_info().compute_capability) if self.is_gpu else ""


class PythonRuntime:
    """A runtime whose kernels are Python functions on NumPy arrays (for testing the harness).

    ``kernels`` maps a kernel name to ``fn(code, grid, block, args, shared_mem)``; the code is
    passed along so one fake can behave differently per submitted source.
    """

    name = "python"
    is_gpu = False

    def __init__(self, kernels: dict[str, Callable[..., Any]]):
        self.xp = np
        self._kernels = kernels

    def load(self, code: str, name: str, options: tuple[str, ...] = ()) -> Callable[..., Any]:
        if name not in self._kernels:
            from kernels.signature import KernelNotFoundError

            raise KernelNotFoundError(f"no __global__ function named {name!r}")
        fn = self._kernels[name]

        def launch(grid: Any, block: Any, args: Any, *, shared_mem: int = 0, stream: Any = None) -> None:
            fn(code, grid, block, args, shared_mem)

        return launch

    def synchronize(self) -> None:
        pass

    def to_host(self, a: Any) -> np.ndarray:
        return np.array(a, copy=True)

    def is_fatal(self, exc: BaseException) -> bool:
        return False

    def sm_count(self) -> int:
        return 0

    def device_name(self) -> str:
        return "Python test runtime"

    def compute_capability(self) -> str:
        return ""
