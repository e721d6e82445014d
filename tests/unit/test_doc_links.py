"""Every relative link in README.md and docs/**/*.md leads somewhere: the file exists and,
for a ``#anchor``, the page has a heading with that anchor (GitHub's slug rules), so that
moving a section between pages cannot leave a link behind pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.docs import ROOT, anchors, headings, name, pages, prose

# [text](target) and [text](target "title"), images included; autolinks and reference
# definitions are not used in these pages.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every markdown link outside fenced code and code spans."""
    return [
        (number + 1, target)
        for number, line in prose(text)
        for target in LINK.findall(re.sub(r"(`+).*?\1", "", line))
    ]


def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)) or target.startswith("//")


def where_is(anchor: str) -> list[str]:
    """The pages that offer this anchor now, for the failure message."""
    return [f"{name(p)}#{anchor}" for p in pages() if anchor in anchors(p.read_text())]


def broken_links() -> list[tuple[str, int, str, str]]:
    """(page, line, target, why) for every relative link that leads nowhere."""
    broken = []
    for page in pages():
        for line, target in links(page.read_text()):
            if is_external(target):
                continue
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if not destination.exists():
                broken.append((name(page), line, target, "no such file"))
                continue
            if not anchor or destination.is_dir() or destination.suffix != ".md":
                continue
            if anchor not in anchors(destination.read_text()):
                now = where_is(anchor)
                why = f"no heading #{anchor}" + (f"; it is at {', '.join(now)}" if now else "")
                broken.append((name(page), line, target, why))
    return broken


def test_the_link_finder() -> None:
    text = (
        'See [a](docs/a.md#x), [`b` c](#b-c) and ![i](img.png "t").\n'
        "```sh\n[not](a-link.md)\n```\n"
        "`[code](span.md)` and [[nested] text](c.md)\n"
    )
    assert links(text) == [(1, "docs/a.md#x"), (1, "#b-c"), (1, "img.png"), (5, "c.md")]


@pytest.mark.parametrize(
    ("title", "anchor"),
    [
        ("Quick start (five minutes)", "quick-start-five-minutes"),
        ("The API (`proto/jobs/v1`, package `jobs.v1`)", "the-api-protojobsv1-package-jobsv1"),
        ("Fault injection: `make chaos`", "fault-injection-make-chaos"),
        ("What `make run` starts", "what-make-run-starts"),
        ("NATS cluster (`make chaos PROFILE=cluster`)", "nats-cluster-make-chaos-profilecluster"),
        (
            "Step checkpoints: a paid provider call is never paid twice",
            "step-checkpoints-a-paid-provider-call-is-never-paid-twice",
        ),
        ("Where the engine differs — and why", "where-the-engine-differs--and-why"),
    ],
)
def test_anchors_follow_githubs_slugs(title: str, anchor: str) -> None:
    assert anchor in anchors(f"# {title}\n")


def test_repeated_headings_are_numbered_and_code_is_not_a_heading() -> None:
    text = "# A\n## Notes\n```sh\n# Notes\n```\n## Notes\n"
    assert [h.title for h in headings(text)] == ["A", "Notes", "Notes"]
    assert anchors(text) == {"a", "notes", "notes-1"}


def test_every_relative_link_leads_to_a_file_and_a_heading() -> None:
    broken = broken_links()
    assert not broken, "broken links:\n" + "\n".join(
        f"  {page}:{line}: ({target}) {why}" for page, line, target, why in broken
    )


def test_the_pages_exist() -> None:
    assert Path(ROOT / "README.md") in pages()
    assert len(pages()) > 1
