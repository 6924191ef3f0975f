"""The kernels package itself: lazy exports that stay what they are."""
from __future__ import annotations

import subprocess
import sys


def test_importing_a_submodule_keeps_the_function_of_the_same_name():
    """``from kernels.check import ...`` must not turn ``kernels.check`` into the module."""
    code = ("import kernels\n"
            "from kernels.ceilings import Ceilings\n"
            "from kernels.check import poison_value\n"
            "from kernels.occupancy import GpuLimits\n"
            "assert callable(kernels.ceilings) and callable(kernels.check) and callable(kernels.occupancy)\n"
            "assert kernels.check.__module__ == 'kernels.check'\n"
            "import kernels.check as module\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
