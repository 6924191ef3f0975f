"""Chapter notebooks: the .md/.ipynb pairs agree, every output on the website comes from a recorded GPU
run of exactly the code shown, and the setup cell is the same everywhere.

The first half checks the chapters in this checkout (parametrized, so it passes with none); the second
half tests tools/notebooks.py itself on small synthetic repositories.
"""
from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import notebooks as nbtools  # noqa: E402  (tools/ is not a package)

CONFIG = nbtools.read_config()
PAIRS = nbtools.find_pairs()
IDS = [pair.name for pair in PAIRS]
PLANNED_CHAPTERS = ("gpu_architecture", "measuring_kernels")


# --------------------------------------------------------------------------- the chapters in the repo


def _notebook(pair: nbtools.Pair) -> nbformat.NotebookNode:
    assert pair.ipynb.exists(), f"no {pair.ipynb.name}: run `python tools/notebooks.py sync`"
    return nbtools.read_notebook(pair.ipynb)


@pytest.mark.parametrize("pair", PAIRS, ids=IDS)
def test_pair_in_sync(pair: nbtools.Pair) -> None:
    differences = nbtools.pair_differences(nbtools.read_markdown(pair.md), _notebook(pair))
    assert differences == [], f"{pair.ipynb.name} out of sync with {pair.md.name}; run `python tools/notebooks.py sync`"


@pytest.mark.parametrize("pair", PAIRS, ids=IDS)
def test_gpu_notebook_has_current_provenance(pair: nbtools.Pair) -> None:
    nb = _notebook(pair)
    provenance = nbtools.get_provenance(nb)
    assert provenance, f"{pair.ipynb.name} was never executed on a GPU (python tools/notebooks.py execute)"
    assert set(nbtools.PROVENANCE_KEYS) <= set(provenance), provenance
    assert all(provenance[key] for key in nbtools.PROVENANCE_KEYS), provenance
    assert nb.metadata["course"]["code_sha256"] == nbtools.code_hash(nb), (
        f"{pair.ipynb.name}: code changed since the GPU run on {provenance['date']}; execute it again"
    )


@pytest.mark.parametrize("pair", PAIRS, ids=IDS)
def test_setup_cell_is_canonical(pair: nbtools.Pair) -> None:
    cell = nbtools.first_code_cell(_notebook(pair))
    assert cell is not None
    assert cell.source.rstrip("\n") == nbtools.SETUP_CELL
    assert nbtools.setup_cell_repo(cell.source) == CONFIG["repository"]["url"].rstrip("/")


@pytest.mark.parametrize("pair", PAIRS, ids=IDS)
def test_setup_output_names_the_recorded_gpu(pair: nbtools.Pair) -> None:
    nb = _notebook(pair)
    provenance = nbtools.get_provenance(nb) or {}
    printed = nbtools.stream_text(nbtools.first_code_cell(nb))
    assert provenance.get("gpu"), "no provenance"
    assert f"GPU: {provenance['gpu']}" in printed, printed


@pytest.mark.parametrize("pair", PAIRS, ids=IDS)
def test_config_builds_page_from_ipynb_and_never_executes_it(pair: nbtools.Pair) -> None:
    assert nbtools.config_problems(pair, CONFIG) == []


def test_every_notebook_in_book_is_paired() -> None:
    assert nbtools.orphan_notebooks() == []


def test_check_command_passes_on_this_checkout() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"), "check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_setup_cell_installs_from_the_configured_repository() -> None:
    assert nbtools.setup_cell_repo(nbtools.SETUP_CELL) == CONFIG["repository"]["url"].rstrip("/")
    assert "--no-deps" in nbtools.SETUP_CELL  # never upgrade Colab's CuPy, numba or CUDA packages
    assert nbtools.SETUP_CELL.rstrip().endswith("report()  # the GPU and CUDA versions, or what to do when there is no GPU")
    compile(nbtools.SETUP_CELL, "setup cell", "exec")  # plain Python: no magics, parsable by tools


def test_setup_cell_in_a_local_clone_uses_the_package_beside_it(tmp_path: Path) -> None:
    """Run from book/ as Jupyter does, with site-packages off (-S): only ../kernels can provide it."""
    (tmp_path / "book").mkdir()
    (tmp_path / "kernels").symlink_to(ROOT / "kernels")
    script = nbtools.SETUP_CELL + "\nimport kernels; print('from', kernels.__file__)"
    done = subprocess.run([sys.executable, "-S", "-c", script], cwd=tmp_path / "book",
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert f"from {tmp_path / 'kernels' / '__init__.py'}" in done.stdout
    assert "No CUDA GPU" in done.stdout or done.stdout.startswith("GPU: ")


def test_setup_cell_in_colab_installs_the_package_without_dependencies(tmp_path: Path) -> None:
    """Colab: no ../kernels, google.colab imported; pip is asked for the repository with --no-deps."""
    prelude = f"""
import subprocess, sys, types
sys.modules["google.colab"] = types.ModuleType("google.colab")
calls = []
def fake_run(cmd, check=False):  # stands in for pip: record the command, 'install' from this checkout
    calls.append(cmd)
    sys.path.insert(0, {str(ROOT)!r})
subprocess.run = fake_run
"""
    script = prelude + nbtools.SETUP_CELL + "\nprint('PIP', calls)"
    done = subprocess.run([sys.executable, "-S", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    url = CONFIG["repository"]["url"].rstrip("/")
    assert f"'--no-deps', 'git+{url}']]" in done.stdout
    assert "No CUDA GPU" in done.stdout or done.stdout.startswith("GPU: ")


def test_planned_chapters_exist() -> None:
    """Every page in _toc.yml exists, and the GPU chapters are paired notebooks."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    missing = [f for f in files if not any((ROOT / f).with_suffix(s).exists() for s in (".md", ".ipynb"))]
    assert missing == []
    assert set(PLANNED_CHAPTERS) <= set(IDS)


# --------------------------------------------------------------------------- the tooling, synthetic


CHAPTER = f"""---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A chapter

Some prose.

```{{code-cell}} ipython3
{nbtools.SETUP_CELL}
```

```{{code-cell}} ipython3
x = 21
print(x * 2)
```

More prose.

```{{code-cell}} ipython3
print("unchanged")
```
"""

PROVENANCE = {"gpu": "Test GPU 80GB", "compute_capability": "9.0", "cuda_runtime": "13.0",
              "cuda_driver": "13.0", "cupy": "14.0.0", "date": "2026-01-01"}


def _repo(tmp_path: Path, text: str = CHAPTER, url: str | None = None) -> Path:
    """A minimal checkout: _config.yml like the real one, book/ch.md."""
    config = copy.deepcopy(CONFIG)
    config["exclude_patterns"] = ["book/ch.md", "_build"]
    config["execute"]["exclude_patterns"] = ["book/*.ipynb"]
    if url:
        config["repository"]["url"] = url
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "ch.md").write_text(text)
    return tmp_path


def _pair(root: Path) -> nbtools.Pair:
    return nbtools.pair_for(root / "book" / "ch.md")


def _fake_gpu_run(root: Path) -> None:
    """What `execute` leaves behind on a GPU machine: outputs and provenance."""
    pair = _pair(root)
    nb = nbtools.read_notebook(pair.ipynb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            text = f"GPU: {PROVENANCE['gpu']} · compute capability 9.0\n" if "report()" in cell.source else "out\n"
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
            cell.execution_count = 1
    nbtools.set_provenance(nb, PROVENANCE, wall_seconds=3.2)
    nbtools.write_notebook(nb, pair.ipynb)


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"), "--root", str(root), *args],
                          capture_output=True, text=True)


def test_code_hash_ignores_markdown_and_trailing_blanks_but_not_code() -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("prose"), nbformat.v4.new_code_cell("x = 1")])
    before = nbtools.code_hash(nb)
    nb.cells[0].source = "other prose"
    nb.cells[1].source = "x = 1   \n\n"
    assert nbtools.code_hash(nb) == before
    nb.cells[1].source = "x = 2"
    assert nbtools.code_hash(nb) != before
    nb.cells[1].source = "x = 1"
    nb.cells.append(nbformat.v4.new_code_cell(""))
    assert nbtools.code_hash(nb) != before  # an added (even empty) code cell is a different program


def test_fresh_sync_and_gpu_run_pass_check(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    assert _cli(root, "sync").returncode == 0
    nb = nbtools.read_notebook(_pair(root).ipynb)
    assert nb.metadata["jupytext"]["formats"] == "ipynb,md:myst"
    done = _cli(root, "check")
    assert done.returncode == 1 and "no GPU provenance" in done.stdout
    _fake_gpu_run(root)
    done = _cli(root, "check")
    assert done.returncode == 0, done.stdout
    assert _cli(root, "sync").stdout.startswith("unchanged")  # syncing twice changes nothing


def test_changed_code_cell_makes_outputs_stale_and_check_fail(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _cli(root, "sync")
    _fake_gpu_run(root)
    md = root / "book" / "ch.md"
    md.write_text(md.read_text().replace("x = 21", "x = 22"))
    assert _cli(root, "sync").returncode == 0
    done = _cli(root, "check")
    assert done.returncode == 1
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and "stale outputs" in lines[0] and "book/ch.ipynb" in lines[0], lines


def test_sync_keeps_outputs_and_provenance_of_unchanged_cells_only(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _cli(root, "sync")
    _fake_gpu_run(root)
    md = root / "book" / "ch.md"
    md.write_text(md.read_text().replace("x = 21", "x = 22").replace("More prose.", "Better prose."))
    _cli(root, "sync")
    nb = nbtools.read_notebook(_pair(root).ipynb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code[0].outputs and "GPU: Test GPU" in nbtools.stream_text(code[0])
    assert code[1].outputs == [] and code[1].execution_count is None  # edited: its old output is gone
    assert nbtools.stream_text(code[2]) == "out\n"
    assert "Better prose." in [cell.source for cell in nb.cells if cell.cell_type == "markdown"]
    assert nbtools.get_provenance(nb) == PROVENANCE


def test_changed_markdown_cell_keeps_check_green(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _cli(root, "sync")
    _fake_gpu_run(root)
    md = root / "book" / "ch.md"
    md.write_text(md.read_text().replace("Some prose.", "Some clearer prose, with $x^2$."))
    _cli(root, "sync")
    done = _cli(root, "check")
    assert done.returncode == 0, done.stdout


def test_out_of_sync_pair_is_reported(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _cli(root, "sync")
    _fake_gpu_run(root)
    md = root / "book" / "ch.md"
    md.write_text(md.read_text().replace("Some prose.", "Edited without syncing."))
    done = _cli(root, "check")
    assert done.returncode == 1
    assert "out of sync with ch.md" in done.stdout and "cell 1" in done.stdout


def test_setup_cell_and_repository_url_mismatches_are_reported(tmp_path: Path) -> None:
    root = _repo(tmp_path, CHAPTER.replace("import os, subprocess, sys", "import os, sys, subprocess"),
                 url="https://github.com/someone-else/fork")
    _cli(root, "sync")
    _fake_gpu_run(root)
    done = _cli(root, "check")
    assert done.returncode == 1
    assert "not the setup cell" in done.stdout
    assert "_config.yml's repository.url is 'https://github.com/someone-else/fork'" in done.stdout


def test_setup_output_must_name_the_recorded_gpu(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _cli(root, "sync")
    _fake_gpu_run(root)
    pair = _pair(root)
    nb = nbtools.read_notebook(pair.ipynb)
    nb.metadata["course"]["provenance"]["gpu"] = "Another GPU"
    nbtools.write_notebook(nb, pair.ipynb)
    assert "does not name the recorded GPU 'Another GPU'" in _cli(root, "check").stdout


def test_config_must_exclude_paired_markdown_and_notebook_execution(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _cli(root, "sync")
    _fake_gpu_run(root)
    config = yaml.safe_load((root / "_config.yml").read_text())
    config["exclude_patterns"] = ["_build"]
    config["execute"]["exclude_patterns"] = []
    (root / "_config.yml").write_text(yaml.safe_dump(config))
    out = _cli(root, "check").stdout
    assert "book/ch.md is not in _config.yml exclude_patterns" in out
    assert "book/ch.ipynb is not matched by _config.yml execute.exclude_patterns" in out


def test_orphan_notebook_and_missing_ipynb_are_reported(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    nbformat.write(nbformat.v4.new_notebook(), str(root / "book" / "loose.ipynb"))
    out = _cli(root, "check").stdout
    assert "book/ch.ipynb: no ch.ipynb: run `python tools/notebooks.py sync`" in out
    assert "book/loose.ipynb: no paired .md" in out


def test_prose_pages_are_not_paired(tmp_path: Path) -> None:
    (tmp_path / "intro.md").write_text("# Welcome\n\nNo code here.\n")
    (tmp_path / "ch.md").write_text(CHAPTER)
    assert [pair.name for pair in nbtools.find_pairs(tmp_path)] == ["ch"]


def test_kernel_runs_in_book_dir_with_this_package_importable(tmp_path: Path) -> None:
    """The execute path minus the GPU: no `jupyter` executable or kernelspec file needed."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os, kernels\nprint(os.getcwd())\nprint(os.path.dirname(kernels.__file__))")])
    wall = nbtools.run_notebook(nb, timeout=60, cwd=tmp_path)
    lines = nbtools.stream_text(nb.cells[0]).splitlines()
    assert lines == [str(tmp_path), str(ROOT / "kernels")]
    assert wall > 0 and "widgets" not in nb.metadata


def test_execute_without_a_gpu_fails_clearly_and_leaves_notebooks_alone(tmp_path: Path) -> None:
    pytest.importorskip("jupytext")
    try:
        import cupy  # noqa: F401
        pytest.skip("this machine has CuPy; the no-GPU path is not reachable")
    except ImportError:
        pass
    root = _repo(tmp_path)
    _cli(root, "sync")
    before = _pair(root).ipynb.read_text()
    done = _cli(root, "execute", str(_pair(root).ipynb))
    assert done.returncode == 1
    assert "no GPU provenance" in done.stderr
    assert _pair(root).ipynb.read_text() == before


def test_execute_records_provenance_and_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Full execute with the GPU query faked: the setup cell runs, provenance and hash are written."""
    root = _repo(tmp_path)
    _cli(root, "sync")
    monkeypatch.setattr(nbtools, "gpu_provenance", lambda: dict(PROVENANCE))
    assert nbtools.execute([_pair(root).ipynb], timeout=120) == 0
    nb = nbtools.read_notebook(_pair(root).ipynb)
    course = nb.metadata["course"]
    assert course["provenance"] == PROVENANCE and course["code_sha256"] == nbtools.code_hash(nb)
    assert course["wall_seconds"] >= 0
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert nbtools.stream_text(code[1]) == "42\n"
    # no GPU here, so the setup cell printed what to do instead of naming the GPU: check says so
    assert "Runtime > Change runtime type" in nbtools.stream_text(code[0])
    assert any("does not name the recorded GPU" in line for line in nbtools.check(root / "book", root / "_config.yml", root))
    table = capsys.readouterr().out
    assert "ch.ipynb" in table and "ok" in table


def _second_run(root: Path, gpu: str, folder: str | None = None) -> Path:
    """A chapter's run on another GPU, kept in book/runs/<gpu>/ as `execute --second-run` keeps it."""
    nb = nbtools.read_notebook(_pair(root).ipynb)
    nbtools.set_provenance(nb, {**PROVENANCE, "gpu": gpu}, wall_seconds=2.0)
    path = root / "book" / nbtools.RUNS / (folder or nbtools.gpu_slug(gpu)) / "ch.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbtools.write_notebook(nb, path)
    return path


def test_gpu_slug_names_a_folder_per_gpu_and_a_results_file_per_model() -> None:
    assert nbtools.gpu_slug("NVIDIA H200") == "h200"
    assert nbtools.gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert nbtools.gpu_slug("Tesla T4") == "tesla-t4"
    assert nbtools.gpu_slug("NVIDIA H200", model_only=True) == "h200"
    assert nbtools.gpu_slug("NVIDIA H100 80GB HBM3", model_only=True) == "h100"
    assert nbtools.gpu_slug("Tesla T4", model_only=True) == "t4"
    for nameless in ("", " -- ", "NVIDIA ()"):
        with pytest.raises(ValueError, match="cannot name a file or folder after the GPU"):
            nbtools.gpu_slug(nameless)


def test_a_second_gpu_run_passes_check_until_the_code_changes(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _cli(root, "sync")
    _fake_gpu_run(root)
    run = _second_run(root, "NVIDIA H200")
    assert _cli(root, "check").returncode == 0
    md = root / "book" / "ch.md"
    md.write_text(md.read_text().replace("x = 21", "x = 22"))
    _cli(root, "sync")
    _fake_gpu_run(root)  # the main run is redone; the H200 run is not
    done = _cli(root, "check")
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, lines
    assert "book/runs/h200/ch.ipynb" in lines[0] and "--second-run" in lines[0] and "delete" in lines[0]
    run.unlink()
    assert _cli(root, "check").returncode == 0


def test_a_second_run_in_another_gpu_s_folder_or_of_no_chapter_is_reported(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    _cli(root, "sync")
    _fake_gpu_run(root)
    _second_run(root, "NVIDIA H200", folder="h100-80gb-hbm3")
    nameless = _second_run(root, "", folder="tesla-t4")
    assert nbtools.second_run_problems(nameless, root / "book", root) == ["its provenance names no GPU"]
    orphan = root / "book" / nbtools.RUNS / "h200" / "gone.ipynb"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    nbtools.write_notebook(nbformat.v4.new_notebook(), orphan)
    out = _cli(root, "check").stdout
    assert "kept in the folder of another GPU" in out and "no chapter book/gone.md" in out, out
