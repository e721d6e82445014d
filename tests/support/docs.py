"""The project's documentation as tests read it: README.md and every page under docs/.

A section is found by its heading's text wherever it lives — README.md or any docs page —
so that moving a section from the README into docs/ (or between pages, or one heading
level up or down) keeps the tests that read it working. Headings inside fenced code blocks
(a ``# comment`` in a shell example) are not headings.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```+|~~~+)")


def pages() -> list[Path]:
    """README.md, then every docs/**/*.md page in path order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def name(page: Path) -> str:
    """A page's path from the repository root, as messages show it."""
    return page.relative_to(ROOT).as_posix()


def all_text() -> str:
    """Every page's text, one after another."""
    return "\n".join(page.read_text() for page in pages())


@dataclass(frozen=True)
class Heading:
    level: int
    title: str  # the markdown source of the heading's text
    line: int  # 0-based


def prose(text: str) -> Iterator[tuple[int, str]]:
    """(0-based line number, line) of the page's lines outside fenced code blocks, fences
    excluded."""
    fence = ""
    for number, line in enumerate(text.splitlines()):
        if match := FENCE.match(line):
            marker = match.group(1)
            if not fence:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = ""
            continue
        if not fence:
            yield number, line


def headings(text: str) -> list[Heading]:
    """The page's headings in order, skipping fenced code blocks."""
    return [
        Heading(len(match.group(1)), match.group(2), number)
        for number, line in prose(text)
        if (match := HEADING.match(line))
    ]


def plain(title: str) -> str:
    """A heading's text as rendered: code marks, emphasis and link targets gone."""
    title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)
    title = re.sub(r"<[^>]+>", "", title)
    return title.replace("`", "").replace("*", "")


def slug(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits,
    ``-`` and ``_`` kept), each space a hyphen. Repeats get ``-1``, ``-2`` (see anchors)."""
    text = plain(title).strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in ("L", "N", "M"))
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page offers: its headings' slugs (repeats numbered as GitHub does)
    and explicit ``<a id=...>`` / ``<a name=...>`` targets."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in headings(text):
        base = slug(heading.title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return found


def section(title: str) -> str:
    """The text of the one section whose heading reads ``title`` (as rendered), in the
    README or any docs page: from its heading line up to the next heading of the same or
    a higher level, the heading line included."""
    matches = []
    for page in pages():
        text = page.read_text()
        lines = text.splitlines()
        found = headings(text)
        for index, heading in enumerate(found):
            if plain(heading.title).strip() != title:
                continue
            end = next((h.line for h in found[index + 1 :] if h.level <= heading.level), len(lines))
            matches.append((name(page), "\n".join(lines[heading.line : end]) + "\n"))
    assert len(matches) == 1, (
        f"want one section headed {title!r} in README.md or docs/*.md, found "
        f"{[where for where, _ in matches] or 'none'}"
    )
    return matches[0][1]
