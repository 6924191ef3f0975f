"""Kernel-correctness tests that run on every available backend.

Each test takes the fixture ``k``: the ``kernels`` package pinned to one backend. The CPU backend
(``kernels.cpu``, no GPU needed) always runs, in CI; the CuPy variant carries the ``gpu`` marker and
runs with ``pytest -m gpu`` on a machine with a CUDA GPU. Sizes that only make sense on a GPU are
wrapped in ``gpu_only(...)`` and left out of the CPU variant, so CI stays fast.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest

from kernel_backends import CPU_SM_COUNT, GPU_ONLY

BACKENDS = [pytest.param("cpu", id="cpu"), pytest.param("cupy", id="cupy", marks=pytest.mark.gpu)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_cpu = callspec is not None and callspec.params.get("k") == "cpu"
        (drop if on_cpu and item.get_closest_marker(GPU_ONLY) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class Backend:
    """The kernels package with the backend fixed (COURSE_BACKEND is set while the test runs)."""

    def __init__(self, name: str):
        import kernels

        self.name = name
        self.kernels = kernels
        self.on_cpu = name == "cpu"

    def __getattr__(self, attr: str) -> Any:
        # The package's public names, from the module that defines them (``kernels.check`` is also a
        # submodule: once it is imported, the package attribute is the module, not the function).
        module = getattr(self.kernels, "_EXPORTS", {}).get(attr)
        if module is not None:
            return getattr(importlib.import_module(f"kernels.{module}"), attr)
        return getattr(self.kernels, attr)

    @property
    def xp(self) -> ModuleType:
        """cupy, or kernels.cpu.xp."""
        return self.kernels.array_module()

    def pick(self, *, gpu: Any, cpu: Any) -> Any:
        """``gpu`` on the GPU, ``cpu`` on the CPU backend (e.g. fewer launch configurations)."""
        return cpu if self.on_cpu else gpu

    @property
    def sm_count(self) -> int:
        return CPU_SM_COUNT if self.on_cpu else self.kernels.device_info().sm_count


@pytest.fixture(params=BACKENDS)
def k(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """The kernels package on the CPU backend, or on CuPy (gpu marker; skipped without a GPU)."""
    if request.param == "cupy":
        pytest.importorskip("cupy")
        import kernels

        if not kernels.gpu_available():
            pytest.skip("no CUDA GPU")
    monkeypatch.setenv("COURSE_BACKEND", request.param)
    return Backend(request.param)
