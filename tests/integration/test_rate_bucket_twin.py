"""A tier's rate bucket, two ways: the pure ``domain.rate_limits`` functions (``elapsed_since``,
``recovered``, ``backed_off``, ``refilled``) and their SQL rendering
(``adapters.postgres.vocabulary.buckets``, which RESERVE, TAKE, THROTTLE and STATES embed),
evaluated by real PostgreSQL over the same bucket rows.

The rendering reads expressions: here the columns of a one-row CTE standing for the tier's
``rate_limits`` row, and a clock given as a parameter (the statements read ``now()`` or
``clock_timestamp()``), so no table is needed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from job_service.adapters.postgres import call_permits, claims, rate_limits
from job_service.adapters.postgres.vocabulary import buckets as sql
from job_service.domain import rate_limits as bucket
from job_service.domain.rate_limits import MIN_RATE_FACTOR

_RECOVERED = sql.recovered("r.factor", "r.elapsed", "$7::float8")
EVALUATE = f"""
WITH b (level, capacity, per_minute, factor, refilled_at) AS (
    VALUES ($1::float8, $2::float8, $3::float8, $4::float8, $5::timestamptz)
), r AS (
    SELECT b.*, {sql.elapsed("b.refilled_at", "$6::timestamptz")} AS elapsed FROM b
)
SELECT r.elapsed,
       {_RECOVERED} AS recovered,
       {sql.backed_off(_RECOVERED, "$8::float8")} AS backed_off,
       {
    sql.refilled(
        "r.level", "r.elapsed", per_minute="r.per_minute", capacity="r.capacity", factor="r.factor"
    )
} AS refilled
FROM r
"""

CLOCK = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
DAY = 86400.0


@dataclass(frozen=True)
class Bucket:
    """One meter of a tier's row and what it is evaluated at."""

    level: float
    capacity: float
    per_minute: float
    factor: float
    elapsed_s: float  # clock - refilled_at; negative while a 429's block lasts
    recovery_s: float = 30.0


CASES = [
    pytest.param(Bucket(0, 5, 120, 1.0, 0.0), id="empty, no time passed"),
    pytest.param(Bucket(0, 5, 120, 1.0, 1.25), id="empty, part refilled"),
    pytest.param(Bucket(5, 5, 120, 1.0, 10.0), id="full stays full"),
    pytest.param(Bucket(4.5, 5, 120, 1.0, 0.4), id="refilled past its capacity"),
    pytest.param(Bucket(0, 5, 120, 0.5, 3 * DAY), id="long idle: full and recovered"),
    pytest.param(Bucket(2, 5, 120, 1.0, 0.0), id="factor 1, elapsed 0"),
    pytest.param(Bucket(0, 2, 120, MIN_RATE_FACTOR, 3.0), id="factor at its floor"),
    pytest.param(Bucket(0, 2, 120, 0.5, 15.0), id="recovered exactly to 1"),
    pytest.param(Bucket(1, 2, 120, 0.3, 7.5), id="factor 0.3, part recovered"),
    pytest.param(Bucket(0.2, 2, 120, 0.25, 4.0, 0.5), id="a short recovery"),
    pytest.param(Bucket(0.2, 2, 120, 0.25, 4.0, 3600.0), id="a long recovery"),
    pytest.param(Bucket(1, 5, 120, 0.5, -4.5), id="blocked: no refill, no recovery"),
    pytest.param(Bucket(-300, 500, 6000, 1.0, 2.0), id="tokens owed after a settle"),
    pytest.param(Bucket(120.5, 7500, 90000, 0.7, 0.123457), id="tokens, fractions"),
    pytest.param(Bucket(0, 1, 1, 1.0, 59.999999), id="one a minute, a microsecond short"),
    pytest.param(Bucket(0, 1, 600, 0.9, 0.000001), id="a microsecond"),
]


@pytest.mark.parametrize("case", CASES)
async def test_the_sql_refills_and_recovers_a_bucket_as_the_pure_functions_do(
    db: asyncpg.Connection, case: Bucket
) -> None:
    refilled_at = CLOCK - timedelta(seconds=case.elapsed_s)

    row = await db.fetchrow(
        EVALUATE,
        case.level,
        case.capacity,
        case.per_minute,
        case.factor,
        refilled_at,
        CLOCK,
        case.recovery_s,
        MIN_RATE_FACTOR,
    )

    assert row is not None
    elapsed = bucket.elapsed_since(refilled_at, CLOCK)
    recovered = bucket.recovered(case.factor, elapsed, case.recovery_s)
    expected = {
        "elapsed": elapsed,
        "recovered": recovered,
        "backed_off": bucket.backed_off(recovered, MIN_RATE_FACTOR),
        "refilled": bucket.refilled(
            case.level,
            elapsed,
            per_minute=case.per_minute,
            capacity=case.capacity,
            factor=case.factor,
        ),
    }
    assert dict(row) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.fixture
async def db(pg_admin_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection: the expressions under test read only their own CTE."""
    conn = await asyncpg.connect(pg_admin_url)
    try:
        yield conn
    finally:
        await conn.close()


def test_every_bucket_statement_embeds_the_rendering_each_with_its_clock() -> None:
    # What the test above checks is what the statements run. The clocks are today's: the
    # claim's spend reads the clock once the row is locked (2dbd413); the others read the
    # statement's start, and changing that is a change of behaviour, not of spelling.
    spend = sql.elapsed("refilled_at", "clock_timestamp()")
    assert spend in claims.RESERVE
    assert sql.recovered("factor", "elapsed", "$2") in claims.RESERVE
    for meter, per_minute, capacity in (("requests", "$3", "$5"), ("tokens", "$4", "$6")):
        refill = sql.refilled(
            f"{meter}_available",
            "elapsed",
            per_minute=per_minute,
            capacity=capacity,
            factor="factor",
        )
        assert refill in claims.RESERVE
    take = sql.recovered("r.factor", sql.elapsed("r.refilled_at", "now()"), "$4")
    assert take in call_permits.TAKE
    throttle = sql.recovered("factor", sql.elapsed("refilled_at", "now()"), "$4")
    assert sql.backed_off(throttle, "$3::float8") in call_permits.THROTTLE
    assert sql.elapsed("r.refilled_at", "now()") in rate_limits.STATES


def test_the_cases_reach_both_sides_of_each_cap() -> None:
    # capped and uncapped refills and recoveries, and the back-off's floor: a rendering that
    # dropped either side of a least() or greatest() would fail above
    assert bucket.refilled(4.5, 0.4, per_minute=120, capacity=5, factor=1.0) == 5
    assert bucket.refilled(0, 1.25, per_minute=120, capacity=5, factor=1.0) == 2.5
    assert bucket.recovered(0.5, 15.0, 30.0) == 1.0
    assert bucket.recovered(0.3, 7.5, 30.0) == pytest.approx(0.55)
    assert bucket.backed_off(bucket.recovered(MIN_RATE_FACTOR, 0.0, 30.0)) == MIN_RATE_FACTOR
    assert bucket.elapsed_since(CLOCK + timedelta(seconds=4.5), CLOCK) == 0.0
