"""What the setup cell of every chapter prints: the GPU the outputs below come from.

The line matters twice: in Colab it tells students which GPU they got, and in the executed notebook
that the website renders it names the GPU that produced every number on the page (the tests check it
against the provenance recorded in the notebook). ``report()`` never raises: on a machine without
CuPy or a GPU it explains what to do instead.
"""
from __future__ import annotations

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


def no_gpu_message(reason: str = "") -> str:
    """What a student without a GPU should do, and why the website still shows numbers."""
    why = f" ({reason})" if reason else ""
    return (
        f"No CUDA GPU is available here{why}.\n"
        f"  In Colab: {COLAB_STEPS}.\n"
        f"  On your own machine with an NVIDIA GPU: {LOCAL_STEPS}.\n"
        "  Without a GPU you can still read along: the course website shows the outputs recorded on a GPU."
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


def report() -> None:
    """Print the GPU line, or what to do when there is no GPU; never raises.

    Returns None so that ``report()`` as the last line of a cell prints once, with no Out[] echo.
    """
    try:
        problem = _gpu_problem()
        if problem is None:
            from kernels.device import device_info

            line = gpu_line(device_info())
        else:
            line = no_gpu_message(problem)
    except Exception as exc:  # a broken driver must not stop students from reading the notebook
        line = no_gpu_message(f"{type(exc).__name__}: {exc}")
    print(line)
