"""A new waiting job's place in line, two ways: the pure ``domain.claims.place_in_line``
and its SQL rendering (``adapters.postgres.vocabulary.line.place_in_line``, which every
statement that makes a job wait embeds), evaluated by real PostgreSQL over the same waiting
jobs.

The rendering reads ``jobs``: here a CTE of that name holding the waiting jobs of each case
(the columns it reads, nothing else), so no job row needs to be written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from job_service.adapters.postgres.vocabulary import line as sql
from job_service.domain import claims as policy
from job_service.domain.lifecycle import LOCKABLE, JobStatus

EVALUATE = f"""
WITH jobs (queue, fairness_key, priority, status, next_run_at, sched_key) AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::timestamptz[],
                         $6::float8[])
), new (queue, fairness_key, priority, next_run_at) AS (
    VALUES ($7::text, $8::text, $9::int, $10::timestamptz)
)
SELECT {sql.place_in_line("new")} AS sched_key, now() AS now FROM new
"""


@dataclass(frozen=True)
class Waiting:
    """A job already in ``jobs``: its place and what decides whether it counts."""

    sched_key: float
    fairness_key: str = "alice"
    priority: int = 0
    queue: str = "q"
    status: JobStatus = JobStatus.QUEUED
    due_in_s: float | None = None  # None: due now (next_run_at NULL)


HOUR = 3600.0
AHEAD = 1e12  # a backlog tail far behind now: it decides when it counts


@pytest.mark.parametrize(
    ("waiting", "priority", "due_in_s"),
    [
        pytest.param([], 0, None, id="nothing waits: its due time"),
        pytest.param([], 3, None, id="priority moves it ahead"),
        pytest.param([], -2, HOUR, id="a delayed job of low priority"),
        pytest.param([Waiting(AHEAD)], 0, None, id="behind its own backlog"),
        pytest.param([Waiting(AHEAD), Waiting(AHEAD + 7)], 1, None, id="behind the tail"),
        pytest.param([Waiting(AHEAD, status=JobStatus.RETRYING)], 0, None, id="a due retry"),
        pytest.param([Waiting(AHEAD, fairness_key="bob")], 0, None, id="another key's"),
        pytest.param([Waiting(AHEAD, priority=1)], 0, None, id="another priority's"),
        pytest.param([Waiting(AHEAD, queue="other")], 0, None, id="another queue's"),
        pytest.param([Waiting(AHEAD, due_in_s=HOUR)], 0, None, id="a backlog not due"),
        pytest.param([Waiting(AHEAD, status=JobStatus.RUNNING)], 0, None, id="not waiting"),
        pytest.param([Waiting(0.0)], 0, None, id="a backlog behind its due time"),
    ],
)
@pytest.mark.parametrize("settings", [{}, {"priority_step_s": 0.5, "fair_quantum_s": 2.0}])
async def test_the_sql_places_a_new_job_where_the_pure_function_does(
    db: asyncpg.Connection,
    waiting: list[Waiting],
    priority: int,
    due_in_s: float | None,
    settings: dict[str, float],
) -> None:
    for name, value in settings.items():
        await db.execute("SELECT set_config($1, $2, false)", f"jobs.{name}", str(value))
    now = await db.fetchval("SELECT now()")
    next_run_at = None if due_in_s is None else now + timedelta(seconds=due_in_s)

    row = await db.fetchrow(
        EVALUATE,
        [w.queue for w in waiting],
        [w.fairness_key for w in waiting],
        [w.priority for w in waiting],
        [w.status.value for w in waiting],
        [None if w.due_in_s is None else now + timedelta(seconds=w.due_in_s) for w in waiting],
        [w.sched_key for w in waiting],
        "q",
        "alice",
        priority,
        next_run_at,
    )

    assert row is not None
    expected = policy.place_in_line(
        (next_run_at or row["now"]).timestamp(),
        priority,
        backlog_last(waiting, priority, row["now"]),
        step=settings.get("priority_step_s", policy.DEFAULT_PRIORITY_STEP_S),
        quantum=settings.get("fair_quantum_s", policy.DEFAULT_FAIR_QUANTUM_S),
    )
    assert row["sched_key"] == pytest.approx(expected, abs=1e-6)


def backlog_last(waiting: list[Waiting], priority: int, now: datetime) -> float | None:
    """The last place of the due waiting jobs of queue "q", key "alice" and ``priority``."""
    places = [
        w.sched_key
        for w in waiting
        if (w.queue, w.fairness_key, w.priority) == ("q", "alice", priority)
        and w.status in LOCKABLE
        and (w.due_in_s is None or now + timedelta(seconds=w.due_in_s) <= now)
    ]
    return max(places, default=None)


@pytest.fixture
async def db(pg_admin_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A plain connection: the statement under test brings its own ``jobs``."""
    conn = await asyncpg.connect(pg_admin_url)
    try:
        yield conn
    finally:
        await conn.close()


def test_the_cases_exercise_both_sides_of_the_greatest() -> None:
    # the backlog decides in some cases, the due time in others: a rendering that dropped
    # either side would fail above
    now = datetime.now(UTC)
    behind = policy.place_in_line(now.timestamp(), 0, AHEAD)
    assert behind == AHEAD + policy.DEFAULT_FAIR_QUANTUM_S
    assert policy.place_in_line(now.timestamp(), 0, 0.0) == now.timestamp()
