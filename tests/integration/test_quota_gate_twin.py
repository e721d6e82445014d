"""The quota gate, two ways: the pure ``domain.quotas.admits`` and its SQL rendering
(``adapters.postgres.vocabulary.quotas.within_quotas``, which CreateJob and CreateJobs
embed), evaluated by real PostgreSQL over the same usage, limits and rank.

The rendering reads a user's usage row (``active``, ``today``, ``spent``) and the limits as
bound parameters, as the statements bind them; here a row per case of a grid, so no job
row needs to be written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from itertools import product

import asyncpg
import pytest

from job_service.adapters.postgres.vocabulary import quotas as sql
from job_service.domain.quotas import Quotas, admits

EVALUATE = f"""
SELECT u.i, {sql.within_quotas("u", "u.nth", "$5::int", "$6::int", "$7::numeric")} AS admitted
FROM unnest($1::bigint[], $2::int[], $3::numeric[], $4::int[])
     WITH ORDINALITY AS u(active, today, spent, nth, i)
ORDER BY u.i
"""

# (active, today, spent, nth): at, below and past each limit below, with the 1st to 3rd
# job of a request
USAGE = list(
    product([0, 1, 2, 3], [0, 2, 3, 4], [Decimal(0), Decimal("1.49"), Decimal("1.50")], [1, 2, 3])
)


@pytest.mark.parametrize(
    "quotas",
    [
        pytest.param(Quotas(), id="no limits"),
        pytest.param(Quotas(max_active=2), id="unfinished jobs"),
        pytest.param(Quotas(daily=3), id="jobs a day"),
        pytest.param(Quotas(daily_cost_usd=Decimal("1.50")), id="a day's cost"),
        pytest.param(Quotas(max_active=3, daily=4), id="both counts"),
        pytest.param(Quotas(2, 3, Decimal("1.50")), id="all three"),
        pytest.param(Quotas(1, 1, Decimal("0.01")), id="all three, tight"),
    ],
)
async def test_the_sql_admits_a_new_job_where_the_pure_function_does(
    db: asyncpg.Connection, quotas: Quotas
) -> None:
    rows = await db.fetch(
        EVALUATE,
        [u[0] for u in USAGE],
        [u[1] for u in USAGE],
        [u[2] for u in USAGE],
        [u[3] for u in USAGE],
        quotas.max_active,
        quotas.daily,
        quotas.daily_cost_usd,
    )

    got = {USAGE[r["i"] - 1]: r["admitted"] for r in rows}
    expected = {u: admits(quotas, *u) for u in USAGE}
    disagree = {u: (got[u], expected[u]) for u in USAGE if got[u] != expected[u]}
    assert not disagree, f"(active, today, spent, nth): (sql, pure) {disagree}"


def test_the_grid_admits_and_refuses_under_each_limit() -> None:
    # every limit both admits and refuses some usage of the grid: a rendering that dropped
    # or turned one comparison would fail above
    for quotas in (Quotas(max_active=2), Quotas(daily=3), Quotas(daily_cost_usd=Decimal("1.50"))):
        outcomes = {admits(quotas, *u) for u in USAGE}
        assert outcomes == {True, False}, quotas


@pytest.fixture
async def db(pg_admin_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection: the statement under test reads no table."""
    conn = await asyncpg.connect(pg_admin_url)
    try:
        yield conn
    finally:
        await conn.close()
