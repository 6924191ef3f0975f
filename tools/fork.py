"""Point a copy of the course at its own GitHub repository: one command rewrites the URL everywhere.

    python tools/fork.py https://github.com/<you>/<repo>     # rewrite, then print what changed
    python tools/fork.py --list                               # the files that name the current URL

The repository URL is written in one place, ``repository.url`` in _config.yml; the website's launch
and repository buttons read it there. Generated from it: the setup cell of every chapter and exercise
notebook (``REPO = ...``, which Colab installs the package from), also in the runs kept for other GPUs
(``book/runs/<gpu>/``), and the "open in Colab" and "view on GitHub" links of the exercise lists and
pages. Written by hand: the clone commands of the docs (``git clone <url>`` and ``cd <name>``). This
command rewrites all of them, in the files of ``TARGETS`` only (the tests check that the URL appears
nowhere else), the generated ones exactly as ``tools/notebooks.py`` and ``tools/exercises.py`` would
generate them from the new URL.

A chapter's recorded GPU outputs stay valid: the setup cell's URL is the only code that changes, and
it changes no output, so a notebook whose outputs matched its code before gets the code hash of its
new code (``course.code_sha256``); a notebook that was stale stays stale.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

#: Where the URL may appear (globs relative to the repository root): the rewrite's whole reach.
TARGETS = (
    "_config.yml",
    "README.md",
    "book/*.md",
    "book/*.ipynb",
    "book/runs/*/*.ipynb",
    "book/exercises/*.md",
    "exercises/README.md",
    "exercises/*/*.ipynb",
)

_GITHUB = re.compile(r"^https://github\.com/([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]+?)(?:\.git)?/?$")


@dataclass(frozen=True)
class Repo:
    """A GitHub repository: what the course's URLs are made of."""

    owner: str
    name: str

    @property
    def url(self) -> str:
        return f"https://github.com/{self.owner}/{self.name}"

    def pattern(self) -> re.Pattern[str]:
        """``owner/name`` where a GitHub or Colab URL names it (not inside a longer name)."""
        slug = re.escape(f"{self.owner}/{self.name}")
        return re.compile(rf"(?<=github\.com/){slug}(?![A-Za-z0-9._-])|"
                          rf"(?<=colab\.research\.google\.com/github/){slug}(?![A-Za-z0-9._-])")

    def clone_dir(self) -> re.Pattern[str]:
        """``cd <name>`` on the line after a ``git clone`` of this repository."""
        return re.compile(rf"(git clone[^\n]*github\.com/{re.escape(self.owner)}/{re.escape(self.name)}\n)"
                          rf"cd {re.escape(self.name)}(?![A-Za-z0-9._-])")


def parse_repo(url: str) -> Repo:
    """``https://github.com/<owner>/<name>`` as a Repo; ValueError naming the problem otherwise."""
    match = _GITHUB.match(url.strip())
    if not match:
        raise ValueError(f"{url!r} is not a GitHub repository URL like https://github.com/<owner>/<name> "
                         "(Colab opens notebooks from GitHub)")
    return Repo(match.group(1), match.group(2))


def current_repo(root: Path = ROOT) -> Repo:
    """The repository _config.yml names now."""
    import notebooks

    return parse_repo(notebooks.repository_url(notebooks.read_config(root / "_config.yml")))


def target_files(root: Path = ROOT) -> list[Path]:
    """Every existing file the rewrite may change."""
    found = {path for pattern in TARGETS for path in root.glob(pattern) if path.is_file()}
    return sorted(found)


def repository_files(root: Path = ROOT) -> list[Path]:
    """The files of the working tree git would commit (tracked, or new and not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return sorted({root / name for name in listed if name and (root / name).is_file()})


def files_naming(repo: Repo, files: Iterable[Path]) -> list[Path]:
    """The files among ``files`` whose text names ``repo`` in a GitHub or Colab URL."""
    pattern = repo.pattern()
    named = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if pattern.search(text):
            named.append(path)
    return named


def rewrite_text(text: str, old: Repo, new: Repo) -> str:
    text = old.clone_dir().sub(lambda m: f"{m.group(1)}cd {new.name}", text)
    return old.pattern().sub(f"{new.owner}/{new.name}", text)


def _rehash_notebook(before: str, after: str) -> str:
    """``after`` with its recorded code hash renewed when ``before``'s outputs matched its code."""
    import nbformat

    import notebooks

    old_nb, new_nb = nbformat.reads(before, as_version=4), nbformat.reads(after, as_version=4)
    recorded = old_nb.metadata.get("course", {}).get("code_sha256")
    if not recorded or recorded != notebooks.code_hash(old_nb):
        return after
    return after.replace(recorded, notebooks.code_hash(new_nb))


def rewrite(new_url: str, root: Path = ROOT) -> list[Path]:
    """Rewrite the repository URL in every target file under ``root``; the files changed."""
    old, new = current_repo(root), parse_repo(new_url)
    changed = []
    for path in target_files(root):
        before = path.read_text(encoding="utf-8")
        after = rewrite_text(before, old, new)
        if after == before:
            continue
        if path.suffix == ".ipynb":
            after = _rehash_notebook(before, after)
        path.write_text(after, encoding="utf-8")
        changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="the new repository, https://github.com/<owner>/<name>")
    parser.add_argument("--list", action="store_true", help="list the files that name the current URL")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.list or not args.url:
        for path in files_naming(current_repo(root), target_files(root)):
            print(path.relative_to(root).as_posix())
        return 0
    try:
        changed = rewrite(args.url, root)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"rewrote {path.relative_to(root).as_posix()}")
    print(f"{len(changed)} files now name {parse_repo(args.url).url}; next: python tools/notebooks.py check "
          "and python tools/exercises.py check, then commit and push")
    return 0


if __name__ == "__main__":
    sys.exit(main())
