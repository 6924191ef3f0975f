"""tools/fork.py: the repository URL lives in _config.yml, and one command rewrites every copy of it."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import exercises as extool  # noqa: E402
import fork  # noqa: E402
import notebooks  # noqa: E402

NEW = "https://github.com/someone-else/my-gpu-course"


def test_the_url_appears_only_where_the_command_rewrites_it():
    current = fork.current_repo()
    outside = set(fork.files_naming(current, fork.repository_files())) - set(fork.target_files())
    assert not outside, (f"{sorted(p.relative_to(ROOT).as_posix() for p in outside)} name {current.url}: generate "
                         "them from notebooks.repository_url(), or add them to fork.TARGETS")
    assert current.url == notebooks.repository_url()
    assert (ROOT / "_config.yml") in fork.files_naming(current, fork.target_files())


@pytest.fixture(scope="module")
def copy_of_the_course(tmp_path_factory) -> Path:
    """The files the command may change, copied into a folder of their own."""
    root = tmp_path_factory.mktemp("course")
    for path in fork.target_files():
        target = root / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return root


def _texts(root: Path) -> dict[Path, str]:
    return {p.relative_to(root): p.read_text(encoding="utf-8") for p in fork.target_files(root)}


def test_the_rewrite_reaches_every_copy_and_keeps_the_recorded_runs(copy_of_the_course, monkeypatch):
    root = copy_of_the_course
    old = fork.current_repo(root)
    before = _texts(root)
    changed = fork.rewrite(NEW, root)
    new = fork.parse_repo(NEW)
    assert fork.current_repo(root) == new
    assert {p.relative_to(root) for p in changed} == \
        {p for p, text in before.items() if old.pattern().search(text)}
    assert not fork.files_naming(old, fork.target_files(root))

    # the chapters' setup cells are what tools/notebooks.py makes from the new URL; fresh runs stay fresh
    for pair in notebooks.find_pairs(root / "book"):
        nb = notebooks.read_notebook(pair.ipynb)
        original = nbformat.reads(before[pair.ipynb.relative_to(root)], as_version=4)
        assert notebooks.first_code_cell(nb).source == notebooks._SETUP_TEMPLATE.format(repo_url=new.url)
        assert [c.get("outputs") for c in nb.cells] == [c.get("outputs") for c in original.cells]
        was_fresh = not any("stale" in p for p in notebooks.provenance_problems(original))
        is_fresh = not any("stale" in p for p in notebooks.provenance_problems(nb))
        assert is_fresh == was_fresh, pair.name

    # the exercise notebooks are what tools/exercises.py builds from the new URL (where they were built from the old)
    for src in extool.sources():
        path = extool.notebook_path(src).relative_to(ROOT)
        monkeypatch.setattr(extool, "repository_url", lambda: old.url)
        if before.get(path) != extool.notebook_text(src):
            continue  # stale already: `tools/exercises.py check` reports it
        monkeypatch.setattr(extool, "repository_url", lambda: new.url)
        assert (root / path).read_text(encoding="utf-8") == extool.notebook_text(src), path

    getting_started = (root / "book" / "getting_started.md").read_text(encoding="utf-8")
    assert f"git clone {new.url}\ncd {new.name}\n" in getting_started

    # and back again: byte for byte
    fork.rewrite(old.url, root)
    assert _texts(root) == before


def test_a_url_that_is_not_a_github_repository_is_refused(capsys):
    assert fork.parse_repo("https://github.com/me/course.git/") == fork.Repo("me", "course")
    for bad in ("https://gitlab.com/me/course", "github.com/me/course", "https://github.com/me"):
        with pytest.raises(ValueError, match="is not a GitHub repository URL"):
            fork.parse_repo(bad)
    assert fork.main(["https://gitlab.com/me/course", "--root", str(ROOT)]) == 2
    assert "is not a GitHub repository URL" in capsys.readouterr().err


def test_the_readme_says_how_to_publish_a_copy():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python tools/fork.py https://github.com/<you>/<repo>" in readme
