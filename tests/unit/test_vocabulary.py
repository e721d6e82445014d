"""The PostgreSQL adapter's vocabulary is SQL text and row mapping only: nothing in it runs a
statement, waits or retries. What runs statements for more than one concern is a unit of
work (``job_service/adapters/postgres/units.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import job_service.adapters.postgres.vocabulary as vocabulary

VOCABULARY = Path(vocabulary.__file__).parent


def runs(source: str) -> list[str]:
    """What in ``source`` runs or waits: each ``async def``, ``await``, ``async for`` and
    ``async with``, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AsyncFunctionDef):
            found.append(f"{node.lineno}: async def {node.name}")
        elif isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
            found.append(f"{node.lineno}: {type(node).__name__.lower()}")
    return found


def test_the_vocabulary_runs_nothing() -> None:
    modules = sorted(VOCABULARY.glob("*.py"))
    assert len(modules) > 5, "the vocabulary's modules were not found"
    running = {p.name: r for p in modules if (r := runs(p.read_text()))}
    assert not running, f"vocabulary modules that run statements (make them units): {running}"


def test_the_check_finds_what_runs() -> None:
    source = """
async def attach(conn):
    async with conn.transaction():
        return await conn.fetchrow("SELECT 1")
"""
    assert runs(source) == ["2: async def attach", "3: asyncwith", "4: await"]
    assert runs('def outcome(policy: str) -> str:\n    return f"CASE {policy} END"\n') == []
