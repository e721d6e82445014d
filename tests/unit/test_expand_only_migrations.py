"""Expand-only migrations (seed 003 §7, §8): an upgrade() never drops or renames a table or
column, so an older release keeps working against a newer schema during a rolling deploy.
Checked on the source of every migration: its upgrade() may not call drop_table,
drop_column, rename_table, alter_column(new_column_name=...), nor execute DROP / RENAME
DDL. downgrade() may do anything."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

VERSIONS = (
    Path(__file__).parents[2] / "job_service" / "adapters" / "postgres" / "migrations" / "versions"
)
CONTRACTING_OPS = {"drop_table", "drop_column", "rename_table", "drop_constraint"}
CONTRACTING_SQL = re.compile(r"\b(DROP\s+(TABLE|COLUMN)|RENAME\s+(TO|COLUMN))\b", re.IGNORECASE)


def contracting_steps(source: str) -> list[str]:
    """What upgrade() in ``source`` does that is not expand-only."""
    tree = ast.parse(source)
    upgrades = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "upgrade"]
    found = []
    for upgrade in upgrades:
        for node in ast.walk(upgrade):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name = node.func.attr
            if name in CONTRACTING_OPS:
                found.append(name)
            elif name == "alter_column" and any(k.arg == "new_column_name" for k in node.keywords):
                found.append("alter_column(new_column_name=...)")
            elif name == "execute":
                texts = [
                    c.value
                    for arg in node.args
                    for c in ast.walk(arg)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                ]
                found += [f"execute({t[:40]!r})" for t in texts if CONTRACTING_SQL.search(t)]
    return found


@pytest.mark.parametrize("path", sorted(VERSIONS.glob("*.py")), ids=lambda p: p.name)
def test_every_migration_upgrade_is_expand_only(path: Path) -> None:
    assert contracting_steps(path.read_text()) == []


@pytest.mark.parametrize(
    "body",
    [
        'op.drop_column("jobs", "priority")',
        'op.drop_table("job_events")',
        'op.alter_column("jobs", "status", new_column_name="lifecycle_status")',
        'op.rename_table("jobs", "ai_jobs")',
        'op.execute("ALTER TABLE jobs DROP COLUMN progress")',
        'op.execute("ALTER TABLE jobs RENAME COLUMN status TO state")',
    ],
)
def test_a_migration_that_drops_or_renames_fails_the_check(body: str) -> None:
    source = f"def upgrade() -> None:\n    {body}\n\n\ndef downgrade() -> None:\n    pass\n"

    assert contracting_steps(source) != []


def test_downgrade_may_drop_what_upgrade_added() -> None:
    source = (
        "def upgrade() -> None:\n    op.add_column('jobs', sa.Column('x', sa.Integer()))\n\n\n"
        "def downgrade() -> None:\n    op.drop_column('jobs', 'x')\n"
    )

    assert contracting_steps(source) == []
