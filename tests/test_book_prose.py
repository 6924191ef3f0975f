"""The book's paragraphs teach: each leads with its idea and quotes the few numbers that carry it.

A paragraph that quotes a dozen measurements reads as a lab log: the reader cannot find the point.
Comparisons across configurations belong in a table (or a figure), and the complete measured detail
may sit in a collapsed dropdown (``:::{dropdown}``, or an admonition with ``:class: dropdown``).
This check counts the numbers of every prose paragraph of every book/*.md page, reading only what a
reader reads as running text: not code cells or fenced blocks, not tables, not math, not inline
code, not the bodies of dropdowns, not headings, link targets or HTML comments.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "book").glob("*.md"))

MOST_NUMBERS = 8
# Paragraphs that must stay dense, by page and the paragraph's first words, each with its reason.
DENSE: dict[tuple[str, str], str] = {}

FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
FENCE = re.compile(r"^\s*(`{3,}|:{3,})\s*(\{[\w-]+\})?(.*)$")
DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
INLINE_MATH = re.compile(r"(?<!\\)\$[^$\n]+?(?<!\\)\$")
INLINE_CODE = re.compile(r"(`+)[^`].*?\1", re.S)
LINK_TARGET = re.compile(r"\]\([^)]*\)|<https?://[^>]*>|https?://\S+")
HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
# A number a reader reads as one: 2692, 2,692, 3.35, 1e-5, 10^8; not part of a name (H200, sm_90,
# float4, LDS.128, 2D).
NUMBER = re.compile(r"(?<![\w.^,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+-]?\d+)?(?:\^\d+)?(?![\w])")


def _hidden_blocks_removed(text: str) -> list[str]:
    """The lines a reader reads as running text: fenced code, math blocks and dropdown bodies out.

    Directives that are read inline (a note, a plain admonition) keep their body; the option lines
    (``:class: ...``) of any directive go."""
    kept: list[str] = []
    stack: list[tuple[str, bool]] = []      # (closing fence, body hidden)
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        match = FENCE.match(line)
        hidden_here = any(hidden for _, hidden in stack)
        if match and stack and line.strip() == stack[-1][0] and not match.group(2) and not match.group(3).strip():
            stack.pop()
        elif match and (match.group(2) or line.lstrip().startswith("```")) and not (stack and stack[-1][0].startswith("`")):
            fence, name = match.group(1), (match.group(2) or "")
            options: list[str] = []
            j = i + 1
            while j < len(lines) and re.match(r"^\s*:[\w-]+:", lines[j]):
                options.append(lines[j])
                j += 1
            dropdown = name == "{dropdown}" or any(re.search(r":class:.*\bdropdown\b", o) for o in options)
            reads_inline = fence.startswith(":") or name in {"{note}", "{tip}", "{important}", "{warning}",
                                                              "{caution}", "{attention}", "{hint}", "{admonition}",
                                                              "{seealso}", "{epigraph}"}
            stack.append((fence, hidden_here or dropdown or not reads_inline))
            i = j
            continue
        elif not hidden_here:
            kept.append(line)
        i += 1
    return kept


def _starts_item(line: str, in_list: bool) -> bool:
    """Whether a line opens a list item. A wrapped line that happens to start with "128. " does not:
    in CommonMark only an ordered list starting at 1 interrupts a paragraph; later numbers open an
    item only inside a list."""
    number = re.match(r"^\s*(\d+)[.)]\s", line)
    return bool(LIST_ITEM.match(line)) and (not number or number.group(1) == "1" or in_list)


def paragraphs(page: Path) -> list[str]:
    """The page's prose paragraphs (a list item counts as one), as the reader reads them."""
    text = FRONT_MATTER.sub("", page.read_text(encoding="utf-8"))
    text = COMMENT.sub("", DISPLAY_MATH.sub("", text))
    found: list[str] = []
    current: list[str] = []
    in_list = False

    def close() -> None:
        if current:
            found.append(" ".join(current))
            current.clear()

    for line in _hidden_blocks_removed(text):
        stripped = line.strip()
        if (not stripped or stripped.startswith(("|", "#", "+++", "```{code-cell}")) or
                re.match(r"^:[\w-]+:", stripped)):
            close()
            in_list = in_list and stripped[:1] not in ("#",)
            continue
        if _starts_item(line, in_list):
            close()
            in_list = True
        elif not current and not line[:1].isspace():
            in_list = False                     # an unindented paragraph ends the list
        current.append(stripped)
    close()
    return found


def numbers(paragraph: str) -> list[str]:
    """The numbers a reader meets in a paragraph of running text."""
    text = INLINE_CODE.sub(" ", LIST_ITEM.sub("", paragraph, count=1))     # "1. " is a marker
    text = INLINE_MATH.sub(" ", text)
    text = HTML_TAG.sub(" ", LINK_TARGET.sub("]", text))
    text = re.sub(r"\{\w+\}`[^`]*`", " ", text)            # MyST roles: {doc}`gemm`, {ref}`...`
    return NUMBER.findall(text)


def _key(page: Path, paragraph: str) -> tuple[str, str]:
    return page.stem, " ".join(paragraph.split()[:6])


def dense_paragraphs(page: Path) -> list[tuple[tuple[str, str], int]]:
    return [(_key(page, p), len(numbers(p))) for p in paragraphs(page) if len(numbers(p)) > MOST_NUMBERS]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_no_paragraph_is_a_wall_of_numbers(page: Path):
    dense = [f"{key[1]!r}... ({count} numbers)" for key, count in dense_paragraphs(page) if key not in DENSE]
    assert not dense, (f"{page.name}: paragraphs quote more than {MOST_NUMBERS} numbers; lead with the idea, "
                       f"put comparisons in a table and the full detail in a dropdown: {dense}")


def test_allowlist_is_a_handful_of_paragraphs_that_exist():
    assert len(DENSE) <= 5, "the allowlist is for a handful of paragraphs that must stay dense"
    assert all(reason.strip() for reason in DENSE.values())
    present = {key for page in PAGES for key, _ in dense_paragraphs(page)}
    stale = sorted(set(DENSE) - present)
    assert not stale, f"allowlisted paragraphs that are gone or no longer dense: {stale}"


# --------------------------------------------------------------------------- the checker itself

SAMPLE = """---
jupytext: {}
---

# Title with 1 2 3 4 5 6 7 8 9 10

The idea first: the copy reaches 2692 GB/s on the H100, 80 % of 3.35 TB/s, on blocks of
128. This line continues the paragraph.

1. a numbered item
2. another numbered item

A wall: 1, 2, 3, 4, 5, 6, 7, 8 and 9 GB/s, in `sizes = [10, 11, 12]` and $2^{20} = 1048576$.

| n | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 |

- one item with 1 2 3
- another with 4 5 6 7 8 9 10 11 12

```{code-cell} ipython3
print(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
```

$$
1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9
$$

:::{dropdown} Every measurement
1 2 3 4 5 6 7 8 9 10
:::

:::{admonition} Shown inline
:class: note
a note with 1 2 3 4 5 6 7 8 9 10
:::

```{admonition} Collapsed
:class: dropdown
1 2 3 4 5 6 7 8 9 10
```

Names are not numbers: H200, sm_90, float4, LDS.128, a 2D grid, see [rung 7](https://x.org/a1/2/3#L45).
"""


def test_the_checker_counts_only_running_text(tmp_path):
    page = tmp_path / "sample.md"
    page.write_text(SAMPLE, encoding="utf-8")
    counts = {" ".join(p.split()[:2]): len(numbers(p)) for p in paragraphs(page)}
    assert counts == {"The idea": 4, "1. a": 0, "2. another": 0, "A wall:": 9, "- one": 3, "- another": 9, "a note": 10, "Names are": 1}
    assert [key[1][:6] for key, _ in dense_paragraphs(page)] == ["A wall", "- anot", "a note"]


def test_numbers_reads_thousands_decimals_and_powers():
    assert numbers("2,692 GB/s, 3.35 TB/s, 1e-5 and 10^8 + 7 elements") == ["2,692", "3.35", "1e-5", "10^8", "7"]
