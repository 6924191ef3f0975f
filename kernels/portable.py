"""One chapter cell for both backends: sizes that suit each, and cells that only a GPU can run.

On a GPU a chapter measures at the sizes its prose discusses. On the CPU backend (no GPU) the same
cell runs unchanged at a size a processor handles in a moment, with every result still checked;
a cell that measures something only a GPU has (overlap of copies and kernels in streams, CUDA
graphs, the occupancy API, the GPU's own clocks) says in one line why it is skipped instead of
failing.
"""
from __future__ import annotations

import sys
from typing import Any, TypeVar

from .backend import backend_name

T = TypeVar("T")

SKIPPED = "This cell measures the GPU; on the CPU backend it is skipped: {what}."
#: What a cell prints when it needs a package this Python lacks (a compiler, a library) and goes on
#: without it: what it needs, how to get it, and what the reader sees instead.
NEEDS = "This cell needs {what}, which is not installed here ({how}); {instead}."


def on_gpu() -> bool:
    """True when kernels run on a CUDA GPU, False on the CPU backend."""
    return backend_name() == "cupy"


def problem_size(*, gpu: T, cpu: T) -> T:
    """``gpu`` on a GPU, ``cpu`` on the CPU backend: e.g. ``problem_size(gpu=2**26, cpu=2**16)``.

    Any value works (a size, a list of sizes, a repetition count); the GPU value is the one the
    chapter's prose talks about.
    """
    return gpu if on_gpu() else cpu


def gpu_only(what: str) -> bool:
    """True on a GPU; on the CPU backend print why the cell is skipped and return False.

    (How to get a GPU is said once, by the setup cell.)

    Use it as ``if kernels.gpu_only("CUDA graphs replay launches on the GPU"):`` around a cell
    whose measurement or feature exists only on a GPU.
    """
    if on_gpu():
        return True
    print(SKIPPED.format(what=what.rstrip(".")))
    return False


class _OncePerCell:
    """Prints each distinct line once per notebook cell (once per process outside IPython).

    A cell that calls a helper in a loop (four resource reports, say) says what it lacks once, next
    to its output, and says it again when it runs again.
    """

    def __init__(self) -> None:
        self.said: set[str] = set()
        self.hooked_shell: Any = None

    def _reset(self, *_: Any) -> None:
        self.said.clear()

    def __call__(self, line: str) -> None:
        from .timing import _ipython

        shell = _ipython()
        if shell is not None and shell is not self.hooked_shell:
            shell.events.register("pre_run_cell", self._reset)
            self.hooked_shell = shell
        if line in self.said:
            return
        self.said.add(line)
        print(line, file=sys.stdout, flush=True)


say_once_per_cell = _OncePerCell()


def missing(what: str, how: str, instead: str) -> None:
    """Say in one line (once per cell) that the cell goes on without ``what``: how to install it and
    what the reader sees instead. The caller then returns something the next cells can use."""
    say_once_per_cell(NEEDS.format(what=what, how=how, instead=instead.rstrip(".")))
