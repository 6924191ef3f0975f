"""The occupancy calculator against CUDA's own answer for real kernels on this GPU."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_calculator_agrees_with_cuda():
    from kernels.backend import gpu_available
    from kernels.occupancy import check_against_cuda

    if not gpu_available():
        pytest.skip("needs a CUDA GPU and CuPy")

    rows = check_against_cuda()
    assert len(rows) >= 12
    disagree = [r for r in rows if not r["agree"]]
    assert not disagree, disagree
    # the cases really exercise different limits
    assert {"warps", "registers", "shared memory"} <= {r["limiter"] for r in rows}
    assert len({r["registers"] for r in rows}) >= 5
