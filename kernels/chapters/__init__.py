"""One subpackage per chapter: what only that chapter (with its tests, exercises and benchmark) uses.

``kernels/chapters/<chapter>/__init__.py`` holds the chapter's launch helpers, formulas and
references, ``diagrams.py`` its figures; the Hopper chapter adds ``bench.py`` (its measuring, shared
with ``benchmarks/bench_hopper.py``) and ``recorded.py`` (its recorded H200 run). The library that
several chapters use stays at the top of ``kernels``.

The notebooks import these modules under their old flat names (``from kernels import scan``,
``kernels.hopper_bench``): ``kernels.LEGACY_NAMES`` (in ``kernels/__init__.py``) maps each old name
to its module here. ``import kernels`` imports nothing of this package.
"""
