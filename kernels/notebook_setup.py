"""What the setup cell of every chapter prints: the GPU the outputs below come from.

The line matters twice: in Colab it tells students which GPU they got, and in the executed notebook
that the website renders it names the GPU that produced every number on the page (the tests check it
against the provenance recorded in the notebook). ``report()`` never raises: on a machine without
CuPy or a GPU it says that the notebook runs on the CPU backend (results checked, times not GPU
measurements) and how to get a GPU.
"""
from __future__ import annotations

import os
from typing import Any

COLAB_STEPS = "Runtime > Change runtime type > T4 GPU, then Runtime > Restart and run all"
LOCAL_STEPS = "install CuPy for your CUDA version, e.g. `pip install cupy-cuda12x`"


def _version(value: Any) -> str:
    """CUDA reports versions as 12040 or (12, 4); show them the way nvidia-smi does: 12.4."""
    if isinstance(value, int) and value >= 1000:
        return f"{value // 1000}.{(value % 1000) // 10}"
    if isinstance(value, (tuple, list)):
        return ".".join(str(part) for part in value)
    return str(value)


def gpu_line(info: Any) -> str:
    """One line naming the GPU and the software stack, from a ``kernels.device.DeviceInfo``."""
    parts = [f"GPU: {info.name}"]
    for label, field in (
        ("compute capability", "compute_capability"),
        ("SMs", "sm_count"),
        ("CUDA runtime", "cuda_runtime"),
        ("driver", "cuda_driver"),
        ("CuPy", "cupy_version"),
    ):
        value = getattr(info, field, None)
        if value is None or value == "":
            continue
        text = _version(value)
        parts.append(f"{text} {label}" if label == "SMs" else f"{label} {text}")
    return " · ".join(parts)


CPU_BACKEND_LINES = (
    "This notebook runs on the CPU backend: every kernel is compiled for this computer's processor and "
    "every result is checked, at smaller sizes than on a GPU.",
    "The times it prints are CPU timings, not GPU measurements; cells that only a GPU can run say so "
    "and are skipped.",
)


def no_gpu_message(reason: str = "", cpu_backend: bool = True) -> str:
    """What runs without a GPU, how to get one, and why the website still shows GPU numbers.

    ``cpu_backend=False`` when the CPU backend is switched off too (COURSE_BACKEND=cupy).
    """
    why = f" ({reason})" if reason else ""
    return (
        f"No CUDA GPU is available here{why}.\n"
        + "".join(f"  {line}\n" for line in (CPU_BACKEND_LINES if cpu_backend else ()))
        + f"  For GPU measurements in Colab: {COLAB_STEPS}.\n"
        f"  On your own machine with an NVIDIA GPU: {LOCAL_STEPS}.\n"
        "  The course website shows the outputs recorded on a GPU."
    )


def forced_cpu_message(env_var: str) -> str:
    """The GPU is there, but the CPU backend was asked for."""
    return (
        f"{env_var}=cpu is set, so the GPU is not used.\n"
        + "".join(f"  {line}\n" for line in CPU_BACKEND_LINES)
        + f"  Unset {env_var} and restart the notebook to run on the GPU."
    )


def _gpu_problem() -> str | None:
    """None when CuPy sees a GPU, else why not (one short phrase)."""
    try:
        from kernels.backend import _probe  # the one place that decides whether a GPU is usable
    except Exception:  # backend module missing or broken: probe CuPy directly
        try:
            import cupy

            return None if cupy.cuda.runtime.getDeviceCount() > 0 else "CuPy found no CUDA device"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
    usable, reason = _probe()
    return None if usable else reason


def _forced_cpu() -> str | None:
    """The environment variable's name when it selects the CPU backend, else None."""
    try:
        from kernels.backend import ENV_VAR, backend_name
    except Exception:  # noqa: BLE001 -- no backend module: nothing can force the CPU
        return None
    return ENV_VAR if backend_name() == "cpu" else None


def _forced_gpu() -> bool:
    try:
        from kernels.backend import ENV_VAR
    except Exception:  # noqa: BLE001
        return False
    return os.environ.get(ENV_VAR, "").strip().lower() == "cupy"


def report() -> None:
    """Print the GPU line, or (no GPU) that the CPU backend runs the notebook and how to get a GPU.

    Never raises. Returns None so that ``report()`` as the last line of a cell prints once, with no
    Out[] echo.
    """
    try:
        problem = _gpu_problem()
        forced = _forced_cpu()
        if problem is not None:
            line = no_gpu_message(problem, cpu_backend=not _forced_gpu())
        elif forced is not None:
            line = forced_cpu_message(forced)
        else:
            from kernels.device import device_info

            line = gpu_line(device_info())
    except Exception as exc:  # a broken driver must not stop students from reading the notebook
        line = no_gpu_message(f"{type(exc).__name__}: {exc}")
    print(line)
