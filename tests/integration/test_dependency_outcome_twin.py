"""A waiting job's dependency outcome, two ways: the pure ``domain.dependencies.outcome``
and its SQL rendering (``adapters.postgres.vocabulary.dependencies.outcome``, which the
resolver's ``COUNT`` embeds), evaluated by real PostgreSQL over the same policy, broken
dependency, edges left to count and status.

Each case is a row of a grid (what ``COUNT`` reads from the job and its counted edges), so
no job row needs to be written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import product

import asyncpg
import pytest

from job_service.adapters.postgres.vocabulary import dependencies as sql
from job_service.domain.dependencies import Outcome, outcome
from shared.registry import DependencyPolicy

EVALUATE = f"""
SELECT c.i, {sql.outcome("c.policy", "c.failed", "c.left_", "c.waiting")} AS outcome
FROM unnest($1::text[], $2::bool[], $3::int[], $4::bool[])
     WITH ORDINALITY AS c(policy, failed, left_, waiting, i)
ORDER BY c.i
"""

# (failed, left, waiting): a broken dependency or not, nothing or some edges left, and a
# job still waiting (CREATED) or one that no longer does
CASES = list(product([False, True], [0, 1, 3], [True, False]))


@pytest.mark.parametrize("policy", list(DependencyPolicy), ids=lambda p: p.value)
async def test_the_sql_decides_what_the_pure_function_does(
    db: asyncpg.Connection, policy: DependencyPolicy
) -> None:
    rows = await db.fetch(
        EVALUATE,
        [policy.value] * len(CASES),
        [c[0] for c in CASES],
        [c[1] for c in CASES],
        [c[2] for c in CASES],
    )

    got = {CASES[r["i"] - 1]: r["outcome"] for r in rows}
    expected = {
        (failed, left, waiting): outcome(policy, failed, left, waiting=waiting)
        for failed, left, waiting in CASES
    }
    values = {c: None if o is None else o.value for c, o in expected.items()}
    disagree = {c: (got[c], values[c]) for c in CASES if got[c] != values[c]}
    assert not disagree, f"(failed, left, waiting): (sql, pure) {disagree}"


def test_the_cases_reach_every_outcome() -> None:
    reached = {
        outcome(policy, *case[:2], waiting=case[2]) for policy in DependencyPolicy for case in CASES
    }
    assert reached == {*Outcome, None}


@pytest.fixture
async def db(pg_admin_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection: the statement under test reads no table."""
    conn = await asyncpg.connect(pg_admin_url)
    try:
        yield conn
    finally:
        await conn.close()
