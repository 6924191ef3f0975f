"""Small bridges between library versions that readers meet in Colab and on GPU machines."""
from __future__ import annotations

from types import ModuleType


def import_numba_cuda() -> tuple[ModuleType | None, str]:
    """numba's CUDA target and an empty reason, or None and why it cannot be used here.

    NumPy 2.5 removed ``numpy.row_stack`` (an alias of ``numpy.vstack``), but numba-cuda releases
    built before that still register an overload for it when they compile their first kernel, which
    then fails with an AttributeError. Restoring the alias is harmless: it is the same function.
    """
    import numpy

    if not hasattr(numpy, "row_stack"):
        numpy.row_stack = numpy.vstack
    try:
        from numba import cuda
    except Exception as exc:  # numba without its CUDA target
        return None, f"numba.cuda cannot be imported ({type(exc).__name__}: {exc})"
    try:
        available = cuda.is_available()
    except Exception as exc:  # a driver or toolkit library that numba cannot load
        return None, f"numba.cuda cannot reach the GPU ({type(exc).__name__}: {exc})"
    if not available:
        return None, "numba.cuda found no usable GPU or driver"
    return cuda, ""
