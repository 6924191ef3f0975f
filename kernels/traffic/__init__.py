"""See the memory traffic of a kernel without a profiler, on the CPU backend.

``kernels.analyze(kernel, grid, block, args)`` runs one launch of the kernel's traced build (every
load and store of every thread recorded), rebuilds the warp-level requests a GPU would issue and
reports, per kernel and per source line, what Nsight Compute reports for the same launch: global
requests, 32-byte sectors and 128-byte lines, bytes requested against bytes moved, shared-memory
wavefronts and bank conflicts; plus the data races between threads of a block and pictures for
the book. Modules: ``record`` (the traced launch), ``requests`` (warp requests, sectors), ``banks``
(the shared-memory model), ``races``, ``report``, ``plots``, ``probe`` (a launch's races, for the grader),
``feedback`` (exercise hints). The kernels that validate it against Nsight Compute, and the record
of that run, are test tooling: tests/tooling/traffic_testset.py and tests/tooling/ncu_h100.json.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "analyze": "analysis", "TrafficReport": "report", "LineTraffic": "report", "NCU_METRICS": "report",
    "Race": "races", "find_races": "races", "TraceTooLarge": "record", "Recording": "record",
    "record_launch": "record", "capture": "record", "warp_banks": "banks",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernels.traffic' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
