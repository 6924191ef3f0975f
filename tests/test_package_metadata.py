"""The package's PyPI-style metadata: what ``pip install .`` brings, and the extras for each path.

A plain ``pip install .`` (a local Jupyter) must bring everything a notebook imports; ``[cpu]`` adds
NVRTC (the same packages Colab's setup cell installs in the CPU runtime), ``[gpu]`` CuPy, ``[grading]``
the grader's sandbox, ``[dev]`` what requirements.txt gives ``make``. The metadata is built from
pyproject.toml by setuptools, as pip builds it, and read back.
"""
from __future__ import annotations

import ast
import email.parser
import importlib.metadata as md
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from kernels.nvrtc import NVRTC_REQUIREMENTS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import notebooks as nbtools  # noqa: E402
import student_env  # noqa: E402

NAME = "gpu-kernels-course"
#: Modules a notebook may import only inside an ``if``/``try`` (a GPU cell, an optional comparison),
#: and the extra that provides each (None: installed by nobody, the cell says so when it is absent).
OPTIONAL_IN_NOTEBOOKS = {"cupy": "gpu", "cupyx": "gpu", "torch": None}


@pytest.fixture(scope="module")
def metadata(tmp_path_factory: pytest.TempPathFactory) -> email.message.Message:
    """METADATA as setuptools writes it for pip, from this checkout's pyproject.toml."""
    folder = tmp_path_factory.mktemp("metadata")
    (folder / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (folder / "kernels").mkdir()
    (folder / "kernels" / "__init__.py").write_text("")
    (folder / "out").mkdir()
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", code, str(folder / "out")], cwd=folder,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    dist_info = folder / "out" / done.stdout.strip().splitlines()[-1]
    return email.parser.Parser().parsestr((dist_info / "METADATA").read_text())


def _requirements(metadata: email.message.Message, extra: str | None = None) -> list[Requirement]:
    """The requirements of the base install (extra=None) or the ones an extra adds."""
    found = []
    for text in metadata.get_all("Requires-Dist") or []:
        req = Requirement(text)
        if extra is None and req.marker is None:
            found.append(req)
        elif extra is not None and req.marker is not None and req.marker.evaluate({"extra": extra}) \
                and not req.marker.evaluate({"extra": ""}):
            found.append(req)
    return found


def _expanded(metadata: email.message.Message, extra: str) -> dict[str, str]:
    """name -> specifier of an extra, with the package's own extras it names ([cpu,grading]) expanded."""
    out: dict[str, str] = {}
    for req in _requirements(metadata, extra):
        if canonicalize_name(req.name) == NAME:
            for inner in sorted(req.extras):
                out.update(_expanded(metadata, inner))
        else:
            out[canonicalize_name(req.name)] = str(req.specifier)
    return out


def _requirements_txt() -> dict[str, str]:
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            out[canonicalize_name(req.name)] = str(req.specifier)
    return out


def test_extras_for_each_path(metadata: email.message.Message) -> None:
    assert set(metadata.get_all("Provides-Extra")) >= {"cpu", "gpu", "grading", "dev"}
    assert _expanded(metadata, "grading") == {"pyseccomp": ">=0.1.2"}
    assert "cupy-cuda12x" in _expanded(metadata, "gpu")
    assert set(_expanded(metadata, "cpu")) <= set(_expanded(metadata, "gpu")) & set(_expanded(metadata, "dev"))
    assert "pyseccomp" in _expanded(metadata, "dev")


def test_the_cpu_extra_is_what_the_setup_cell_installs_in_colab(metadata: email.message.Message) -> None:
    assert sorted(f"{r.name}{r.specifier}" for r in _requirements(metadata, "cpu")) == sorted(NVRTC_REQUIREMENTS)


def test_requirements_txt_and_the_dev_install_agree(metadata: email.message.Message) -> None:
    """make installs requirements.txt; pip install ".[dev]" must give the same packages."""
    declared = {canonicalize_name(r.name): str(r.specifier) for r in _requirements(metadata)}
    declared.update(_expanded(metadata, "dev"))
    listed = _requirements_txt()
    assert set(listed) <= set(declared), f"in requirements.txt but not in pyproject.toml: {set(listed) - set(declared)}"
    mine = {name: spec for name, spec in declared.items() if name != "pyseccomp"}  # grading: listed by its owner
    different = {name: (spec, listed.get(name)) for name, spec in mine.items() if listed.get(name) != spec}
    assert different == {}, f"pyproject.toml, requirements.txt: {different}"


def test_colabs_versions_satisfy_what_pip_install_declares(metadata: email.message.Message) -> None:
    """The student environment (Colab's versions) is a valid `pip install .` of the package, so
    running the notebooks there also tests a plain Jupyter that has these versions."""
    pins = student_env.pins()
    for req in _requirements(metadata):
        version = pins.get(canonicalize_name(req.name))
        assert version, f"{req.name} is a dependency but {student_env.REQUIREMENTS.name} does not pin it"
        assert req.specifier.contains(version, prereleases=True), f"Colab's {req.name} {version} is not {req}"
    assert not set(_expanded(metadata, "cpu")) & set(pins), "the student environment must not have NVRTC"
    assert "cupy-cuda12x" not in pins and "torch" not in pins


def _closure(names: list[str]) -> set[str]:
    """The distributions ``names`` pull in (in this environment), themselves included."""
    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    env = dict(default_environment(), extra="")
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(canonicalize_name(req.name))
    return seen


def _imports(source: str, cell: bool = False) -> list[tuple[str, bool]]:
    """(top-level module, imported at the top level of the code rather than inside if/try/def).

    ``cell``: a notebook cell, whose IPython magics (``%...``, ``!...``) are left out.
    """
    if cell:
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    tree = ast.parse(source)
    found = []
    for stmt in tree.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Import):
                found += [(alias.name.split(".")[0], node is stmt) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.module.split(".")[0], node is stmt))
    return found


def test_pip_install_without_extras_brings_every_module_a_notebook_or_the_package_imports(
        metadata: email.message.Message) -> None:
    provided = {module for module, dists in md.packages_distributions().items()
                if {canonicalize_name(d) for d in dists} & _closure([r.name for r in _requirements(metadata)])}
    assert {"numpy", "matplotlib", "ipywidgets", "numba", "IPython"} <= provided
    known = set(sys.stdlib_module_names) | provided | {"kernels"}
    problems = []
    notebooks = [pair.ipynb for pair in nbtools.find_pairs()] + student_env.exercise_notebooks()
    for path in notebooks:
        for cell in nbtools.read_notebook(path).cells:
            if cell.cell_type != "code":
                continue
            for module, top_level in _imports(cell.source, cell=True):
                if module in known:
                    continue
                if top_level or module not in OPTIONAL_IN_NOTEBOOKS:
                    problems.append(f"{student_env.label(path)} imports {module}, which pip install . does not bring")
    for path in sorted((ROOT / "kernels").rglob("*.py")):  # what `import kernels.X` needs at import time
        for module, top_level in _imports(path.read_text()):
            if top_level and module not in known:
                problems.append(f"{path.relative_to(ROOT)} imports {module} at import time, undeclared")
    assert problems == []
    extras = set(metadata.get_all("Provides-Extra"))
    assert {extra for extra in OPTIONAL_IN_NOTEBOOKS.values() if extra} <= extras


def test_the_package_version_in_the_metadata(metadata: email.message.Message) -> None:
    assert metadata["Name"] == NAME and re.fullmatch(r"\d+\.\d+\.\d+", metadata["Version"])
