"""Chapter notebook tooling: pair book/<chapter>.md with book/<chapter>.ipynb, run them on a GPU and
record where their outputs came from.

    python tools/notebooks.py sync [book/<chapter>.md ...]      # md -> ipynb, keeps unchanged outputs
    python tools/notebooks.py check                              # exit 1 on any problem, one line each
    python tools/notebooks.py execute book/<chapter>.ipynb ...   # on a GPU machine
    python tools/notebooks.py execute --second-run book/<chapter>.ipynb ...   # another GPU's run, kept beside it

Why: the website and Colab show the .ipynb, whose outputs can only be made on a GPU, while authors
edit the .md. ``check`` (run by the tests) makes sure the two never drift apart and that every number
on the website comes from a recorded GPU run of exactly the code shown next to it.

A chapter's own .ipynb is its main run, the one its prose quotes. Runs of the same code on other GPUs
are kept in book/runs/<gpu>/<chapter>.ipynb (``--second-run``), each with its own provenance; the
website lets a reader switch an explorer between them, and ``check`` holds them to the same rule
(a run of code that has changed since is stale).

The pure functions here are imported by tests/test_notebooks.py. jupytext, nbclient and jupyter_client
are imported only where needed, so the GPU machine can run ``execute`` with just nbclient, nbformat,
ipykernel and jupytext on PYTHONPATH.
"""
from __future__ import annotations

import argparse
import copy
import fnmatch
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import nbformat

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CONFIG = ROOT / "_config.yml"
RUNS = "runs"  # book/runs/<gpu>/<chapter>.ipynb: the same chapters run on other GPUs

#: Keys that ``kernels.device.provenance()`` returns and every GPU notebook must record.
PROVENANCE_KEYS = ("gpu", "compute_capability", "cuda_runtime", "cuda_driver", "cupy", "date")
#: Separator between code cells in the code hash: cannot occur inside a cell's source.
HASH_SEPARATOR = "\n\x00\n"
JUPYTEXT_FORMATS = "ipynb,md:myst"
EXECUTE_USAGE = "python tools/notebooks.py execute {path}"


# --------------------------------------------------------------------------- configuration


def read_config(path: Path = CONFIG) -> dict[str, Any]:
    """_config.yml as a dict; PyYAML when present, else the few keys this tool needs.

    The fallback keeps ``execute`` usable on the GPU machine, where only the notebook packages are
    installed.
    """
    text = path.read_text(encoding="utf-8")
    try:
        import yaml
    except ImportError:
        return _read_config_without_yaml(text)
    return yaml.safe_load(text) or {}


def _read_config_without_yaml(text: str) -> dict[str, Any]:
    url = re.search(r"^repository:\s*\n(?:[ \t]+.*\n)*?[ \t]+url:\s*(\S+)", text, re.M)
    return {"repository": {"url": url.group(1).strip("\"'")}} if url else {}


def repository_url(config: dict[str, Any] | None = None) -> str:
    """The repository URL from _config.yml: the one place it is written."""
    config = read_config() if config is None else config
    return str(config["repository"]["url"]).rstrip("/")


# --------------------------------------------------------------------------- the setup cell

_SETUP_TEMPLATE = '''\
# Setup: run this cell first. It makes the course's Python package `kernels` importable and
# names the GPU that this notebook runs on.
import os, subprocess, sys
REPO = "{repo_url}"
if os.path.isdir("../kernels"):  # a clone of the course repository: use the package beside us
    sys.path.insert(0, os.path.abspath(".."))
elif "google.colab" in sys.modules:  # Colab: install it, leaving Colab's CuPy and numba alone
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", f"git+{{REPO}}"],
                   check=True)
from kernels.notebook_setup import report
report()  # the GPU and CUDA versions, or what to do when there is no GPU'''

#: The first code cell of every chapter notebook, byte for byte (``check`` enforces it).
SETUP_CELL = _SETUP_TEMPLATE.format(repo_url=repository_url())

_REPO_LINE = re.compile(r'^REPO\s*=\s*["\']([^"\']*)["\']', re.M)


def setup_cell_repo(source: str) -> str | None:
    """The URL assigned to REPO in a setup cell, or None when there is no such line."""
    match = _REPO_LINE.search(source)
    return match.group(1).rstrip("/") if match else None


# --------------------------------------------------------------------------- pairs


@dataclass(frozen=True)
class Pair:
    """A chapter: the jupytext markdown source and the notebook paired with it."""

    md: Path
    ipynb: Path

    @property
    def name(self) -> str:
        return self.md.stem


def _front_matter(text: str) -> str:
    if not text.startswith("---"):
        return ""
    end = text.find("\n---", 3)
    return text[3:end] if end > 0 else ""


def is_paired_markdown(path: Path) -> bool:
    """True for a MyST notebook: a jupytext header that names a kernel.

    Prose pages (no kernelspec) are plain Markdown and have no .ipynb twin.
    """
    header = _front_matter(path.read_text(encoding="utf-8"))
    return "jupytext:" in header and "kernelspec:" in header


def find_pairs(book: Path = BOOK) -> list[Pair]:
    """Every chapter in ``book``, whether or not its .ipynb exists yet."""
    return [
        Pair(md, md.with_suffix(".ipynb"))
        for md in sorted(book.glob("*.md"))
        if is_paired_markdown(md)
    ]


def pair_for(path: Path) -> Pair:
    """The pair that a .md or .ipynb path belongs to."""
    path = Path(path).resolve()
    return Pair(path.with_suffix(".md"), path.with_suffix(".ipynb"))


def orphan_notebooks(book: Path = BOOK) -> list[Path]:
    """Notebooks in ``book`` with no paired markdown: nobody can edit them through the .md."""
    paired = {pair.ipynb for pair in find_pairs(book)}
    return [nb for nb in sorted(book.glob("*.ipynb")) if nb not in paired]


# --------------------------------------------------------------------------- cell comparison


def normalize_source(source: str | Sequence[str]) -> str:
    """A cell's source with trailing whitespace removed from each line and at the end.

    jupytext and editors may change trailing blanks; they change neither the code nor its outputs.
    """
    if not isinstance(source, str):
        source = "".join(source)
    return "\n".join(line.rstrip() for line in source.splitlines()).rstrip()


def code_sources(nb: nbformat.NotebookNode) -> list[str]:
    return [normalize_source(cell.source) for cell in nb.cells if cell.cell_type == "code"]


def code_hash(nb: nbformat.NotebookNode) -> str:
    """sha256 of the normalized sources of the code cells, in order.

    Markdown edits leave it unchanged: they cannot change an output. Any code change, including
    adding, removing or reordering code cells, changes it.
    """
    joined = HASH_SEPARATOR.join(code_sources(nb))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


def cell_signature(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(cell.cell_type, normalize_source(cell.source)) for cell in nb.cells]


def pair_differences(md_nb: nbformat.NotebookNode, ipynb_nb: nbformat.NotebookNode) -> list[str]:
    """Where the .md and the .ipynb disagree (cell types and sources); empty when in sync."""
    left, right = cell_signature(md_nb), cell_signature(ipynb_nb)
    problems = []
    for index, (a, b) in enumerate(zip(left, right), start=1):
        if a[0] != b[0]:
            problems.append(f"cell {index} is {a[0]} in the .md but {b[0]} in the .ipynb")
        elif a[1] != b[1]:
            first = a[1].splitlines()[0] if a[1] else ""
            problems.append(f"cell {index} ({a[0]}, starting {first[:40]!r}) differs")
    if len(left) != len(right):
        problems.append(f"the .md has {len(left)} cells, the .ipynb {len(right)}")
    return problems


def first_code_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    return next((cell for cell in nb.cells if cell.cell_type == "code"), None)


def stream_text(cell: nbformat.NotebookNode) -> str:
    """Everything a code cell printed (stdout and stderr streams, and text/plain results)."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            text = output.get("text", "")
        else:
            text = output.get("data", {}).get("text/plain", "")
        parts.append(text if isinstance(text, str) else "".join(text))
    return "".join(parts)


# --------------------------------------------------------------------------- provenance


def get_course_metadata(nb: nbformat.NotebookNode) -> dict[str, Any]:
    return dict(nb.metadata.get("course", {}))


def get_provenance(nb: nbformat.NotebookNode) -> dict[str, Any] | None:
    """The GPU run recorded in the notebook, or None if it was never executed on a GPU."""
    return nb.metadata.get("course", {}).get("provenance")


def set_provenance(
    nb: nbformat.NotebookNode, provenance: dict[str, Any], wall_seconds: float
) -> None:
    """Record which GPU produced the outputs and which code they belong to."""
    course = nb.metadata.setdefault("course", {})
    course["provenance"] = dict(provenance)
    course["code_sha256"] = code_hash(nb)
    course["wall_seconds"] = round(float(wall_seconds), 1)


def provenance_problems(nb: nbformat.NotebookNode) -> list[str]:
    """Why the outputs of ``nb`` cannot be trusted as a record of a GPU run; empty when they can."""
    provenance = get_provenance(nb)
    if not provenance:
        return ["no GPU provenance (never executed on a GPU)"]
    problems = []
    missing = [key for key in PROVENANCE_KEYS if not provenance.get(key)]
    if missing:
        problems.append(f"provenance lacks {', '.join(missing)}")
    recorded = nb.metadata.get("course", {}).get("code_sha256")
    if recorded != code_hash(nb):
        when = f" on {provenance.get('gpu', '?')} ({provenance.get('date', '?')})"
        problems.append(f"stale outputs: the code cells changed since the GPU run{when}")
    return problems


def setup_cell_problems(nb: nbformat.NotebookNode, config_url: str) -> list[str]:
    """The first code cell must be SETUP_CELL, install from _config.yml's repository, and (once
    executed) name the GPU recorded in the provenance."""
    cell = first_code_cell(nb)
    if cell is None:
        return ["no code cell, so no setup cell"]
    problems = []
    source = "".join(cell.source) if not isinstance(cell.source, str) else cell.source
    if source.rstrip("\n") != SETUP_CELL:
        problems.append("the first code cell is not the setup cell (copy SETUP_CELL from tools/notebooks.py)")
    url = setup_cell_repo(source)
    if url != config_url.rstrip("/"):
        problems.append(f"the setup cell installs from {url!r} but _config.yml's repository.url is {config_url!r}")
    provenance = get_provenance(nb)
    if provenance and provenance.get("gpu") and provenance["gpu"] not in stream_text(cell):
        problems.append(f"the setup cell's output does not name the recorded GPU {provenance['gpu']!r}")
    return problems


# --------------------------------------------------------------------------- _config.yml rules


def _posix_relative(path: Path, root: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


def build_excludes(config: dict[str, Any]) -> list[str]:
    return [str(p) for p in config.get("exclude_patterns") or []]


def execution_excludes(config: dict[str, Any]) -> list[str]:
    return [str(p) for p in (config.get("execute") or {}).get("exclude_patterns") or []]


def excluded_from_build(path: Path, config: dict[str, Any], root: Path = ROOT) -> bool:
    """Whether Sphinx skips ``path`` (its exclude_patterns are globs on the root-relative path)."""
    relative = _posix_relative(path, root)
    return any(fnmatch.fnmatchcase(relative, pattern) for pattern in build_excludes(config))


def excluded_from_execution(path: Path, config: dict[str, Any]) -> bool:
    """Whether myst-nb renders ``path`` from its stored outputs instead of running it.

    myst-nb matches ``PurePosixPath(absolute path).match(pattern)``, i.e. from the right.
    """
    from pathlib import PurePosixPath

    posix = PurePosixPath(path.resolve().as_posix())
    return any(posix.match(pattern) for pattern in execution_excludes(config))


def config_problems(pair: Pair, config: dict[str, Any], root: Path = ROOT) -> list[str]:
    problems = []
    if not excluded_from_build(pair.md, config, root):
        problems.append(
            f"{_posix_relative(pair.md, root)} is not in _config.yml exclude_patterns, so the page "
            "would not be built from the .ipynb with its GPU outputs"
        )
    if not excluded_from_execution(pair.ipynb, config):
        problems.append(
            f"{_posix_relative(pair.ipynb, root)} is not matched by _config.yml execute.exclude_patterns, "
            "so the build would try to run it without a GPU"
        )
    return problems


# --------------------------------------------------------------------------- reading and syncing


def read_markdown(path: Path) -> nbformat.NotebookNode:
    import jupytext

    return jupytext.read(path, fmt="md:myst")


def read_notebook(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def combine(md_nb: nbformat.NotebookNode, old: nbformat.NotebookNode | None) -> nbformat.NotebookNode:
    """The notebook for ``md_nb``: its cells, with the outputs of ``old`` where the code is unchanged.

    jupytext's matching pairs each new cell with an old one (it may pair an edited cell with its old
    version); outputs are kept only when the normalized code is identical, so an edited cell never
    shows outputs of other code. Notebook metadata of ``old`` (provenance included) is kept.
    """
    new = copy.deepcopy(md_nb)
    if old is None:
        result = new
    else:
        from jupytext.combine import combine_inputs_with_outputs, map_outputs_to_inputs

        mapping = map_outputs_to_inputs(new.cells, old.cells)
        result = combine_inputs_with_outputs(new, copy.deepcopy(old), fmt="md:myst")
        for cell, j in zip(result.cells, mapping):
            if cell.cell_type != "code":
                continue
            same = j is not None and normalize_source(old.cells[j].source) == normalize_source(cell.source)
            if not same:
                cell.outputs = []
                cell.execution_count = None
        if "course" in old.metadata:
            result.metadata["course"] = copy.deepcopy(old.metadata["course"])
    jupytext_meta = result.metadata.setdefault("jupytext", {})
    jupytext_meta.pop("text_representation", None)
    jupytext_meta["formats"] = JUPYTEXT_FORMATS
    result.nbformat, result.nbformat_minor = 4, max(int(result.get("nbformat_minor", 0)), 5)
    for cell in result.cells:
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
        if not cell.get("id"):  # nbformat 4.5 wants ids; stable ones keep diffs small
            cell["id"] = hashlib.sha1(f"{len(result.cells)}:{cell.source}".encode()).hexdigest()[:8]
    _dedupe_ids(result)
    return result


def _dedupe_ids(nb: nbformat.NotebookNode) -> None:
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        while cell["id"] in seen:
            cell["id"] = hashlib.sha1(f"{cell['id']}:{index}".encode()).hexdigest()[:8]
        seen.add(cell["id"])


def write_notebook(nb: nbformat.NotebookNode, path: Path) -> None:
    nbformat.write(nb, str(path), version=4)


def sync_pair(pair: Pair) -> bool:
    """Write ``pair.ipynb`` from ``pair.md``; True when the file changed."""
    old = read_notebook(pair.ipynb) if pair.ipynb.exists() else None
    new = combine(read_markdown(pair.md), old)
    text = nbformat.writes(new, version=4) + "\n"
    if pair.ipynb.exists() and pair.ipynb.read_text(encoding="utf-8") == text:
        return False
    pair.ipynb.write_text(text, encoding="utf-8")
    return True


def pair_problems(pair: Pair, config: dict[str, Any], root: Path = ROOT) -> list[str]:
    """Everything ``check`` reports for one chapter."""
    if not pair.ipynb.exists():
        return [f"no {pair.ipynb.name}: run `python tools/notebooks.py sync`"]
    nb = read_notebook(pair.ipynb)
    problems = []
    differences = pair_differences(read_markdown(pair.md), nb)
    if differences:
        problems.append(
            f"out of sync with {pair.md.name} ({'; '.join(differences[:3])}): run `python tools/notebooks.py sync`"
        )
    rerun = f"; run `{EXECUTE_USAGE.format(path=_posix_relative(pair.ipynb, root))}` on a GPU machine"
    problems += [p + rerun for p in provenance_problems(nb)]
    problems += setup_cell_problems(nb, repository_url(config))
    problems += config_problems(pair, config, root)
    return problems


def check(book: Path = BOOK, config_path: Path = CONFIG, root: Path = ROOT) -> list[str]:
    """All problems of all chapters, one line each, prefixed with the file they concern."""
    config = read_config(config_path)
    lines = []
    for pair in find_pairs(book):
        prefix = _posix_relative(pair.ipynb, root)
        lines += [f"{prefix}: {problem}" for problem in pair_problems(pair, config, root)]
    for orphan in orphan_notebooks(book):
        lines.append(f"{_posix_relative(orphan, root)}: no paired .md with a jupytext header")
    for run in second_runs(book):
        lines += [f"{_posix_relative(run, root)}: {problem}" for problem in second_run_problems(run, book, root)]
    return lines


def gpu_slug(gpu: str, *, model_only: bool = False) -> str:
    """A GPU's name as a file or folder name; the names kept in the repository depend on both forms.
    In full, the folder of a chapter's run on that GPU (book/runs/<slug>/): 'NVIDIA H200' -> 'h200',
    'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3', 'Tesla T4' -> 'tesla-t4'. ``model_only``, the model
    alone, as in benchmarks/results/t4_profile_<slug>.json: 'h200', 'h100', 't4'."""
    name = re.sub(r"^(nvidia|tesla)\s+" if model_only else r"^nvidia\s+", "", gpu.strip(), flags=re.IGNORECASE)
    words = name.lower().split()[:1] if model_only else [name.lower()]
    slug = re.sub(r"[^a-z0-9]+", "-", " ".join(words)).strip("-")
    if not slug:
        raise ValueError(f"cannot name a file or folder after the GPU {gpu!r}")
    return slug


def second_runs(book: Path = BOOK) -> list[Path]:
    """Every kept run of a chapter on another GPU."""
    return sorted((book / RUNS).glob("*/*.ipynb"))


def second_run_problems(run: Path, book: Path = BOOK, root: Path = ROOT) -> list[str]:
    """A second run must belong to a chapter, name the GPU of its folder, and be a run of the
    chapter's current code (else it is stale: run it again on that GPU, or delete it)."""
    md = book / f"{run.stem}.md"
    if not md.exists() or not is_paired_markdown(md):
        return [f"no chapter book/{run.stem}.md for this run"]
    nb = read_notebook(run)
    provenance = get_provenance(nb)
    if not provenance:
        return ["no GPU provenance"]
    if not str(provenance.get("gpu") or "").strip():
        return ["its provenance names no GPU"]
    problems = []
    if gpu_slug(str(provenance["gpu"])) != run.parent.name:
        problems.append(f"recorded on {provenance.get('gpu')!r}, kept in the folder of another GPU ({run.parent.name})")
    if code_hash(read_markdown(md)) != code_hash(nb) or nb.metadata.get("course", {}).get("code_sha256") != code_hash(nb):
        problems.append(f"a run of code that has changed since ({provenance.get('gpu')}, {provenance.get('date')}): run "
                        f"`python tools/notebooks.py execute --second-run book/{run.stem}.ipynb` on that GPU, or "
                        f"delete this file")
    return problems


# --------------------------------------------------------------------------- execution (GPU)


def _kernel_pythonpath() -> str:
    """PYTHONPATH for the kernel: the repo root (for `kernels`), then wherever this process found
    ipykernel and nbclient (a --target dir on the GPU machine), then the inherited PYTHONPATH."""
    entries = [str(ROOT)]
    for module in ("ipykernel", "nbclient", "jupyter_client"):
        try:
            found = __import__(module).__file__
        except ImportError:
            continue
        if found:
            entries.append(str(Path(found).resolve().parents[1]))
    entries += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(entries))


def gpu_provenance() -> dict[str, Any]:
    """kernels.device.provenance() from a fresh interpreter.

    A subprocess keeps this process free of a CUDA context while the notebooks run their timings.
    """
    code = "import json, kernels.device as d; print(json.dumps(d.provenance(), default=str))"
    env = dict(os.environ, PYTHONPATH=_kernel_pythonpath())
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"no GPU provenance (does this machine have a GPU and CuPy?):\n{done.stderr.strip()}")
    provenance = json.loads(done.stdout.strip().splitlines()[-1])
    missing = [key for key in PROVENANCE_KEYS if key not in provenance]
    if missing:
        raise RuntimeError(f"kernels.device.provenance() lacks {missing}")
    if provenance.get("profile"):  # a big GPU running T4 code: never the book's record of a GPU
        raise RuntimeError(f"{provenance['gpu']} is a GPU profile, not a GPU to record: unset COURSE_GPU_PROFILE "
                           "(tools/t4_profile.py runs the chapters under the profile without recording them)")
    return provenance


def run_notebook(nb: nbformat.NotebookNode, timeout: int, cwd: Path = BOOK) -> float:
    """Execute ``nb`` in place with a python3 kernel started from this interpreter; wall seconds.

    The kernel spec is built here (``sys.executable -m ipykernel_launcher``) instead of looked up,
    so no `jupyter` executable or installed kernelspec is needed. Widget state is not kept in the
    saved notebook: the website shows each widget's text/html fallback, and Colab redraws live
    widgets anyway.
    """
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    pythonpath = _kernel_pythonpath()

    class NativeKernelSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(
                argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                display_name="Python 3 (ipykernel)",
                language="python",
                env={"PYTHONPATH": pythonpath},
            )

    km = KernelManager(kernel_name="python3", kernel_spec_manager=NativeKernelSpecs())
    client = NotebookClient(
        nb,
        km=km,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=False,
        # True although the state is dropped below: nbclient's Output-widget handler writes into
        # the widget state and fails with a KeyError when it is not kept.
        store_widget_state=True,
        record_timing=False,
        resources={"metadata": {"path": str(cwd)}},
    )
    start = time.perf_counter()
    client.execute()
    nb.metadata.pop("widgets", None)
    return time.perf_counter() - start


def execute(paths: Iterable[Path], timeout: int, failed_dir: Path | None = None, second_run: bool = False) -> int:
    """Sync, run and stamp each chapter; print a summary table; 0 when every notebook ran.

    With ``second_run`` the chapter's own .ipynb (its main run) is left as it is and the run is saved
    to book/runs/<gpu>/<chapter>.ipynb."""
    try:
        provenance = gpu_provenance()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows = []
    for path in paths:
        pair = pair_for(Path(path))
        if pair.md.exists():
            try:
                sync_pair(pair)
            except ImportError as exc:  # jupytext missing on this machine: run the .ipynb as it is
                print(f"warning: not synced from {pair.md.name} ({exc})", file=sys.stderr)
        nb = read_notebook(pair.ipynb)
        try:
            wall = run_notebook(nb, timeout, cwd=pair.ipynb.parent)
        except Exception as exc:  # CellExecutionError, timeout, dead kernel: keep the old file
            print(f"{pair.ipynb.name} failed, not saved:\n{exc}", file=sys.stderr)
            if failed_dir is not None:  # the outputs it reached, for reading the failure
                failed_dir.mkdir(parents=True, exist_ok=True)
                write_notebook(nb, failed_dir / pair.ipynb.name)
            last = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip().splitlines() or [type(exc).__name__]
            rows.append((pair.ipynb.name, "FAILED", "-", last[-1][:80]))
            continue
        set_provenance(nb, provenance, wall)
        target = pair.ipynb
        if second_run:
            target = pair.ipynb.parent / RUNS / gpu_slug(provenance["gpu"]) / pair.ipynb.name
            target.parent.mkdir(parents=True, exist_ok=True)
        write_notebook(nb, target)
        cells = sum(cell.cell_type == "code" for cell in nb.cells)
        rows.append((pair.ipynb.name, "ok", f"{wall:.1f}", f"{cells} code cells"))
    print(f"\nGPU: {provenance['gpu']} · CUDA runtime {provenance['cuda_runtime']} · "
          f"driver {provenance['cuda_driver']} · CuPy {provenance['cupy']} · {provenance['date']}")
    header = ("notebook", "status", "wall s", "detail")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(4)]
    for row in [header, *rows]:
        print("  ".join(str(value).ljust(width) for value, width in zip(row, widths)).rstrip())
    return 0 if all(row[1] == "ok" for row in rows) else 1


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    commands = parser.add_subparsers(dest="command", required=True)
    sync_cmd = commands.add_parser("sync", help="write book/<chapter>.ipynb from book/<chapter>.md")
    sync_cmd.add_argument("paths", nargs="*", type=Path, help="chapters (.md or .ipynb); default: all")
    commands.add_parser("check", help="fail when a chapter is out of sync, stale or misconfigured")
    execute_cmd = commands.add_parser("execute", help="run chapters on this machine's GPU, record provenance")
    execute_cmd.add_argument("paths", nargs="+", type=Path)
    execute_cmd.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    execute_cmd.add_argument("--failed-dir", type=Path, default=None,
                             help="save a failed notebook, with the outputs it reached, into this folder")
    execute_cmd.add_argument("--second-run", action="store_true",
                             help="keep the chapters' own runs; save this GPU's run to book/runs/<gpu>/")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    book, config_path = root / "book", root / "_config.yml"

    if args.command == "sync":
        pairs = [pair_for(p) for p in args.paths] if args.paths else find_pairs(book)
        for pair in pairs:
            changed = sync_pair(pair)
            print(f"{'wrote' if changed else 'unchanged'} {_posix_relative(pair.ipynb, root)}")
        config = read_config(config_path)
        for pair in pairs:
            for problem in config_problems(pair, config, root):
                print(f"note: {problem}")
        return 0
    if args.command == "check":
        problems = check(book, config_path, root)
        for line in problems:
            print(line)
        if not problems:
            print(f"ok: {len(find_pairs(book))} chapter notebooks in sync, executed on a GPU, setup cells identical")
        return 1 if problems else 0
    return execute(args.paths, args.timeout, args.failed_dir, args.second_run)


if __name__ == "__main__":
    sys.exit(main())
