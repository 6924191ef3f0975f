"""The listing of kernels/ reads as library + chapters + backends, and the chapters' old names still work.

A module that only one chapter uses lives in ``kernels/chapters/<chapter>/``; the top of the package
holds the library that several chapters, the grader or a backend use. The executed notebooks import
the chapter modules under their old flat names (``from kernels import scan``), which
``kernels.LEGACY_NAMES`` maps to the new modules: the same module objects, loaded only when asked for.
"""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import kernels

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kernels"
sys.path.insert(0, str(ROOT / "tools"))

import notebooks as nbtools  # noqa: E402  (tools/ is not a package)

CHAPTERS = sorted(pair.name for pair in nbtools.find_pairs())

#: Every module allowed at the top of kernels/, with why it is library and not one chapter's.
LIBRARY = {
    "__init__": "the package: lazy exports and the chapters' old names",
    "backend": "the CuPy/CPU switch every layer asks",
    "ceilings": "the measured ceilings every chapter prints beside a speed",
    "check": "the float64 check of every chapter and exercise",
    "compat": "numba's CUDA target, for several chapters",
    "compile": "load_kernel/load_module on both backends",
    "declarations": "kernel and __device__ global declarations, for both backends",
    "device": "device_info and provenance, for notebooks and tools",
    "errors": "the exceptions every layer raises",
    "explorer": "the recorded HTML explorers of every interactive figure",
    "launch": "launch limits shared by both backends",
    "notebook_setup": "every notebook's setup cell",
    "numerics": "float rounding for the error bounds of several chapters",
    "nvrtc": "NVRTC compiles, with or without a GPU",
    "occupancy": "occupancy panel and arithmetic of several chapters and the widget API",
    "occupancy_rules": "the one occupancy model (profile, occupancy)",
    "portable": "one chapter cell for both backends",
    "profile": "the T4 profile of a big GPU",
    "ptxas": "ptxas report parsing (nvrtc, resources)",
    "resources": "resource_report, for several chapters and the grader",
    "roofline": "the roofline of several chapters and the grader",
    "signature": "kernel signatures and argument conversion",
    "sources": "the .cu sources under kernels/cuda/",
    "sweep": "Sweep and display_live for every interactive figure",
    "timing": "kernels.benchmark",
}
SUBPACKAGES = {"chapters", "cpu", "cuda", "grading", "traffic"}


def test_the_top_of_kernels_holds_only_library_and_subpackages():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert modules == set(LIBRARY), (sorted(modules - set(LIBRARY)), sorted(set(LIBRARY) - modules))
    assert folders == SUBPACKAGES
    chapterish = [m for m in modules | folders
                  if m.startswith("diagrams") or any(m == c or m.startswith(f"{c}_") for c in CHAPTERS)]
    assert chapterish == []


def test_every_chapter_folder_is_a_chapter_and_a_package():
    folders = [p for p in (PACKAGE / "chapters").iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert folders and {p.name for p in folders} <= set(CHAPTERS)
    assert all((p / "__init__.py").is_file() for p in folders)


@pytest.mark.parametrize("old, new", sorted(kernels.LEGACY_NAMES.items()))
def test_the_old_name_is_the_new_module(old: str, new: str):
    """Each old name gives the new module object itself, by every import form, old name first."""
    attr = "__doc__"
    code = (f"import sys, importlib\n"
            f"import kernels.{old}\n"
            f"from kernels import {old} as b\n"
            f"from kernels.{old} import {attr} as doc\n"
            f"import kernels.{new} as new\n"
            f"a = sys.modules['kernels.{old}']\n"
            f"assert a is b is new is kernels.{old} is sys.modules['kernels.{new}'], (a, new)\n"
            f"assert new.__name__ == new.__spec__.name == 'kernels.{new}' and doc == new.{attr}\n"
            f"assert importlib.reload(a) is new\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert (PACKAGE / new.replace(".", "/")).with_suffix(".py").is_file() or \
        (PACKAGE / new.replace(".", "/") / "__init__.py").is_file()


def test_the_attribute_form_loads_the_module_lazily(monkeypatch: pytest.MonkeyPatch):
    """``kernels.scan.x`` with no import first (PEP 562), and a monkeypatch through the old name."""
    scan = kernels.scan
    assert scan is importlib.import_module("kernels.chapters.scan") is sys.modules["kernels.scan"]
    monkeypatch.setattr(kernels.scan, "gamma", "patched")
    from kernels.chapters.scan import gamma
    assert gamma == "patched"
    with pytest.raises(AttributeError):
        kernels.no_such_chapter_module  # noqa: B018


def test_importing_kernels_imports_no_chapter_module():
    code = ("import sys, kernels\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('kernels.') or m == 'matplotlib')\n"
            "print(loaded)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_hopper_bench_runs_as_a_module_under_its_new_name():
    done = subprocess.run([sys.executable, "-m", "kernels.chapters.hopper.bench"], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 2 and "usage: python -m kernels.chapters.hopper.bench" in done.stderr
