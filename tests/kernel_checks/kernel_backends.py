"""Helpers for the backend-parametrised kernel tests (the fixture ``k`` is in conftest.py)."""
from __future__ import annotations

from typing import Any

import pytest

GPU_ONLY = "gpu_only_size"
CPU_SM_COUNT = 4  # what "a few blocks per SM" means on the CPU backend


def gpu_only(*values: Any) -> list[Any]:
    """Parameter values too large for the CPU backend in CI: they run on the GPU variant only."""
    return [pytest.param(v, marks=getattr(pytest.mark, GPU_ONLY)) for v in values]


def gpu_only_case(*args: Any) -> Any:
    """One case of a parametrisation with several names (values in order), on the GPU variant only."""
    return pytest.param(*args, marks=getattr(pytest.mark, GPU_ONLY))
