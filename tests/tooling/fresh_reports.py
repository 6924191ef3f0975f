"""ptxas reports of the course's .cu files compiled in fresh processes, for tests that compare them exactly.

NVRTC gave a kernel sitting at its register cap a 4-byte spill once in a long test run, never in a fresh
process (see kernels.nvrtc.reports_in_fresh_process). Every "no spills, no stack frame" test asks here,
so that such a test fails only when the source changed, never by chance.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from kernels.nvrtc import reports_in_fresh_process
from kernels.resources import ResourceReport
from kernels.sources import name_expressions_in, source

Reports = dict[tuple[str, str], dict[str, ResourceReport]]


def fresh_reports(paths: Sequence[str], archs: Sequence[str], name_expressions: Sequence[str] | None = None,
                  builds: Callable[[str, str], bool] = lambda path, arch: True) -> Reports:
    """{(path, arch): {kernel: report}} for every path (under kernels/cuda/) and arch that ``builds``
    accepts, compiled in fresh processes (one per CPU, all jobs at once). ``name_expressions`` replaces
    the files' own ``// name_expressions:`` lines when given."""
    keys = [(path, arch) for path in paths for arch in archs if builds(path, arch)]
    jobs = [(source(path), arch, (),
             tuple(name_expressions) if name_expressions is not None else name_expressions_in(source(path)), path)
            for path, arch in keys]
    return dict(zip(keys, reports_in_fresh_process(jobs)))


def fresh_reports_by_file(folder: str, filenames: Sequence[str], archs: Sequence[str],
                          name_expressions: Sequence[str] | None = None) -> Reports:
    """fresh_reports of one chapter's files (``folder``/``filename`` under kernels/cuda/), keyed by
    (filename, arch) as the chapters' resource tests look them up."""
    found = fresh_reports([f"{folder}/{name}" for name in filenames], archs, name_expressions)
    return {(path.split("/", 1)[1], arch): resources for (path, arch), resources in found.items()}
