"""The module map of docs/architecture.md ("## Module map") names every product module
(``product_modules()`` of test_architecture.py: the hand-written code, generated code and
migrations aside), so that a newcomer finds each module's concern there and the map cannot
drift from the tree unnoticed.

The rule, strict but practical. Each row of the map's table stands in a folder: the folder
of the first path in its first cell (``job_service/usecases/claims.py`` →
``job_service/usecases/``; ``jobctl/`` → ``jobctl/``). A module is named when the section
holds, between backticks:

1. its path, with or without ``.py`` (``job_service/app.py``, ``shared/registry``); or
2. in a row, its path relative to that row's folder, with or without ``.py``
   (``rate_limits.py`` in the row of ``job_service/usecases/``), or, for a path with a
   folder in it, relative to one of the folder's parents too
   (``adapters/postgres/sessions.py`` in any row of ``job_service/``,
   ``worker_service/session.py`` in any row); or
3. in a row that stands in the module's folder, or that names the module's folder (as in 2),
   its bare name or stem (``jobs`` in the jobctl row, which names ``commands/``;
   ``buckets.py`` in the PostgreSQL row, which names ``vocabulary/``).

A package's ``__init__.py``, and a module whose name starts with ``_`` (private to its
package: ``testing/_jobs.py``), is named with its folder (the folder named as in 2). A
folder alone never names the modules in it: a row saying "one module per concern" lists
them, so that the list is the one a reader trusts.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from tests.unit.test_architecture import ROOT, product_modules

MAP = ROOT / "docs" / "architecture.md"
TOKEN = re.compile(r"`([^`]+)`")


def module_map() -> str:
    text = MAP.read_text()
    _, found, after = text.partition("\n## Module map\n")
    assert found, f"{MAP.name} has no '## Module map' section"
    return after.split("\n## ", 1)[0]


def rows(section: str) -> list[tuple[str, list[str]]]:
    """Each table row of the section: the folder it stands in, and its backticked words."""
    found = []
    for line in section.splitlines():
        cells = line.split("|")
        first = TOKEN.search(cells[1]) if line.startswith("|") and len(cells) > 2 else None
        if first is None:
            continue
        path = first.group(1)
        folder = path if path.endswith("/") else _folder(path)
        found.append((folder, TOKEN.findall(line)))
    return found


def _folder(path: str) -> str:
    parent = str(PurePosixPath(path).parent)
    return "" if parent == "." else parent + "/"


def _bases(folder: str) -> list[str]:
    """The folder and each of its parents, up to the repository's root ("")."""
    parts = [p for p in folder.split("/") if p]
    return ["/".join(parts[:i]) + "/" if i else "" for i in range(len(parts), -1, -1)]


def named_modules(modules: set[str], section: str) -> set[str]:
    everywhere = set(TOKEN.findall(section))
    named = {m for m in modules if m in everywhere or m.removesuffix(".py") in everywhere}
    folders: set[str] = set()
    for folder, words in rows(section):
        paths = {base + w for w in words for base in (_bases(folder) if "/" in w else [folder])}
        folders |= {p for p in paths if p.endswith("/")} | {folder}
        names = {w.removesuffix(".py") for w in words if re.fullmatch(r"\w+(\.py)?", w)}
        in_row = {folder} | {p for p in paths if p.endswith("/")}
        named |= {
            m
            for m in modules
            if m in paths
            or m.removesuffix(".py") in paths
            or (PurePosixPath(m).stem in names and _folder(m) in in_row)
        }
    return named | {
        m
        for m in modules
        if PurePosixPath(m).name.startswith("_") and _folder(m) in folders | everywhere
    }


def test_the_module_map_names_every_product_module() -> None:
    modules = set(product_modules())
    unnamed = sorted(modules - named_modules(modules, module_map()))

    assert not unnamed, (
        "docs/architecture.md's module map does not name these modules (a path, a path "
        "relative to a row's folder, or a stem in the row of its folder: see this test's "
        "docstring): " + ", ".join(unnamed)
    )


def test_the_rule_is_strict() -> None:
    """The rule names by path, relative path and stem in the row of the folder; not by a
    folder alone, nor by a stem in a row of another folder."""
    section = (
        "| `job_service/usecases/claims.py`, `queues.py` | `adapters/postgres/jobs.py`, "
        "`metrics.py` |\n"
        "| `jobctl/` | `commands/` (one module per group: `jobs`), `cli.py` |\n"
        "| `console/` | `pages/` (one module per page), `jobs` |\n"
    )
    modules = {
        "job_service/usecases/claims.py",
        "job_service/usecases/queues.py",
        "job_service/adapters/postgres/jobs.py",
        "jobctl/cli.py",
        "jobctl/commands/jobs.py",
        "jobctl/commands/__init__.py",
        "jobctl/commands/_shared.py",
        "jobctl/render/jobs.py",
        "console/pages/jobs.py",
        "console/pages/queues.py",
        "job_service/usecases/leases.py",
        "job_service/metrics.py",
    }

    assert modules - named_modules(modules, section) == {
        "jobctl/render/jobs.py",  # a stem in the row of another folder
        "console/pages/queues.py",  # a folder alone, whatever the row says of it
        "job_service/usecases/leases.py",
        "job_service/metrics.py",  # a bare name is relative to its row's folder only
    }
