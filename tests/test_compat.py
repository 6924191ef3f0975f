import numpy as np

from kernels.compat import import_numba_cuda


def test_numba_cuda_import_restores_row_stack_and_reports_why_without_a_gpu():
    module, why = import_numba_cuda()
    assert np.row_stack is np.vstack or np.row_stack(([1], [2])).shape == (2, 1)
    if module is None:  # this machine has no GPU: the reason must say so, not be empty
        assert why
    else:
        assert why == "" and hasattr(module, "jit")
