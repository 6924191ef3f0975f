"""The one place that decides where kernels run: a CUDA GPU through CuPy, or the CPU.

Every other module asks ``backend_name()`` instead of importing CuPy itself. On the CPU backend
(``kernels.cpu``) the same CUDA C is compiled with the system's C++ compiler and ``array_module()``
is ``kernels.cpu.xp``, a CuPy-like array module over NumPy. CuPy is imported lazily and never on
the CPU path: the package must import on machines (CI, the website build, Colab's CPU runtime)
that have no CuPy and no GPU.
"""
from __future__ import annotations

import functools
import os
from types import ModuleType

from .errors import NoGPUError  # noqa: F401  (exported here too: kernels.NoGPUError)
from .profile import active_profile, install_in_cupy

ENV_VAR = "COURSE_BACKEND"
BACKENDS = ("cupy", "cpu")

COLAB_HINT = "In Colab: Runtime > Change runtime type > T4 GPU, then run the notebook again from the top."
LOCAL_HINT = "On your own machine: install CuPy for your CUDA version (e.g. pip install cupy-cuda12x)."


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str]:
    """(GPU usable, reason if not); probed once because a CUDA context is expensive to make."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy built for another CUDA failing to load
        return False, f"CuPy could not be imported ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, no device
        return False, f"CuPy is installed but found no CUDA device ({exc})"
    if count < 1:
        return False, "CuPy is installed but found no CUDA device"
    if active_profile() is not None:
        install_in_cupy()  # COURSE_GPU_PROFILE: CuPy compiles for the profile's GPU from the first kernel on
    return True, ""


def _forced() -> str | None:
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if not value:
        return None
    if value not in BACKENDS:
        raise ValueError(f"{ENV_VAR}={value!r} is not a backend; use one of {', '.join(BACKENDS)}")
    return value


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device (whatever COURSE_BACKEND says)."""
    return _probe()[0]


def backend_name() -> str:
    """"cupy" when a GPU is usable, else "cpu"; the COURSE_BACKEND environment variable overrides."""
    forced = _forced()
    if forced is not None:
        return forced
    return "cupy" if gpu_available() else "cpu"


def array_module() -> ModuleType:
    """The array library of the current backend: cupy on the GPU, kernels.cpu.xp on the CPU.

    kernels.cpu.xp has CuPy's names (asarray, asnumpy, empty, zeros, full, arange, random,
    RawKernel, RawModule, ndarray with .get() ...) over NumPy arrays in shared memory.
    """
    if backend_name() == "cupy":
        require_gpu("array_module()")
        import cupy

        return cupy
    from .cpu import xp  # here, not at the top: the CPU backend is Linux-only (fcntl) and loads only when used

    return xp


def no_gpu_message(what: str) -> str:
    """One explanation of why ``what`` cannot run and what to do about it."""
    if _forced() == "cpu":
        reason = f"{ENV_VAR}=cpu is set"
        return f"{what} needs a CUDA GPU, but {reason}. Unset {ENV_VAR} to use the GPU."
    usable, reason = _probe()
    if usable:  # forced to cupy and a GPU is there: nothing is wrong
        return ""
    return f"{what} needs a CUDA GPU, but {reason}. {COLAB_HINT} {LOCAL_HINT}"


def require_gpu(what: str) -> None:
    """Raise NoGPUError saying what to do unless CuPy can run ``what`` on a GPU."""
    if backend_name() == "cupy" and gpu_available():
        return
    raise NoGPUError(no_gpu_message(what))
