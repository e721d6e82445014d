"""``jobctl usage`` against the real UsageService: its table (a row per group and a TOTAL
row) and its JSON equal the sums of the usage rows the database holds, per user as asked;
bad ranges are refused before anything is sent."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import asyncpg

from tests.e2e.test_jobctl import jobctl
from tests.support.ai import FEYNMAN_INPUT
from worker_service.app import WorkerApp

TODAY = datetime.now(UTC).date()
YESTERDAY = TODAY - timedelta(days=1)
HEADER = ["DAY", "USER", "JOB_TYPE", "PROVIDER", "MODEL", "CALLS", "FAILED", "IN", "OUT", "COST"]


async def _add_usage(
    db: asyncpg.Connection, job_id: str, day: date, cost: str, error: str | None = None
) -> None:
    """One provider call of the job, recorded at noon UTC of ``day``."""
    await db.execute(
        "INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode,"
        " input_tokens, output_tokens, cost_usd, error_code, created_at)"
        " VALUES ($1, 1, 'deepseek', 'deepseek-chat', 'platform', 1000, 500, $2::numeric, $3, $4)",
        job_id,
        cost,
        error,
        datetime(day.year, day.month, day.day, 12, tzinfo=UTC),
    )


async def _expected(db: asyncpg.Connection, user_id: str) -> set[tuple[str, ...]]:
    """The table's rows as the usage rows sum up: day, user (not grouped: *), job type,
    provider, model, calls, failed, tokens in and out, cost."""
    rows = await db.fetch(
        "SELECT (u.created_at AT TIME ZONE 'UTC')::date AS day, j.job_type, u.provider,"
        " u.model, count(*) AS calls, count(u.error_code) AS failed,"
        " sum(u.input_tokens) AS tin, sum(u.output_tokens) AS tout, sum(u.cost_usd) AS cost"
        " FROM usage_logs u JOIN jobs j ON j.id = u.job_id WHERE j.user_id = $1"
        " GROUP BY 1, 2, 3, 4",
        user_id,
    )
    return {
        (
            r["day"].isoformat(),
            "*",
            r["job_type"],
            r["provider"],
            r["model"],
            str(r["calls"]),
            str(r["failed"]),
            str(r["tin"]),
            str(r["tout"]),
            f"{r['cost']:.6f}",
        )
        for r in rows
    }


async def test_usage_table_and_json_equal_the_usage_rows(
    target: str, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    ran = await jobctl(
        target, "create", "feynman_evaluation", "-i", json.dumps(FEYNMAN_INPUT), "--watch"
    )
    assert ran.status == 0, ran.err
    job_id = ran.out.split()[1]
    assert await db.fetchval("SELECT count(*) FROM usage_logs WHERE job_id = $1", job_id) > 0
    await _add_usage(db, job_id, YESTERDAY, "0.012345")
    await _add_usage(db, job_id, YESTERDAY, "0.000001", error="PROVIDER_UNAVAILABLE")
    other = (await jobctl(target, "--user", "other", "create", "synthetic", "--json")).json()
    await _add_usage(db, other["job"]["id"], TODAY, "1.500000")

    since = YESTERDAY.isoformat()
    shown = await jobctl(target, "usage", "--since", since, "--by", "day,model,job-type")
    assert shown.status == 0, shown.err
    header, *rows, total = [line.split() for line in shown.out.splitlines()]
    assert header == HEADER
    expected = await _expected(db, "cli-user")
    assert {tuple(r) for r in rows} == expected
    assert total[0] == "TOTAL"
    sums = [sum(int(r[i]) for r in expected) for i in range(5, 9)]
    assert total[1:5] == [str(n) for n in sums]
    cost = sum(Decimal(r[9]) for r in expected)
    assert Decimal(total[5]) == cost
    assert ("1.500000" not in shown.out) and cost > Decimal("0.012345")

    as_json = await jobctl(target, "usage", "--since", since, "--by", "none", "-o", "json")
    assert as_json.json()["totals"]["cost_usd"] == f"{cost:.6f}"
    assert "groups" not in as_json.json()
    by_day = await jobctl(target, "usage", "--since", since, "--by", "day", "-o", "jsonl")
    days = [json.loads(line) for line in by_day.out.splitlines()]
    assert [d["day"][:10] for d in days] == [since, TODAY.isoformat()]
    assert days[0]["totals"]["failed_calls"] == "1"

    # another user: named with --user, or every user with --all-users (the admin role)
    theirs = await jobctl(target, "--user", "other", "usage", "--by", "none")
    assert theirs.out.splitlines()[-1].split()[-1] == "1.500000"
    everyone = await jobctl(target, "usage", "--since", since, "--by", "user", "--all-users")
    per_user = {r.split()[1]: r.split()[-1] for r in everyone.out.splitlines()[1:-1]}
    assert per_user == {"cli-user": f"{cost:.6f}", "other": "1.500000"}
    # a user with no calls: the table says 0, and stderr what would show more
    nobody = await jobctl(target, "--user", "nobody", "usage", "--by", "none")
    assert nobody.status == 0, nobody.err
    assert nobody.out.splitlines()[-1].split()[1:] == ["0", "0", "0", "0", "0.000000"]
    assert "no provider calls for user 'nobody'" in nobody.err
    assert "--all-users counts every user's" in nobody.err


async def test_bad_ranges_and_groupings_are_refused(target: str) -> None:
    backwards = await jobctl(target, "usage", "--since", "2030-01-02", "--until", "2030-01-01")
    assert backwards.status == 2
    assert "must be before --until" in backwards.err
    not_a_day = await jobctl(target, "usage", "--since", "yesterday")
    assert not_a_day.status == 2
    assert "argument --since: 'yesterday' is not a day" in not_a_day.err
    unknown = await jobctl(target, "usage", "--by", "day,planet")
    assert unknown.status == 2
    assert "argument --by" in unknown.err
    too_long = await jobctl(target, "usage", "--since", "2020-01-01", "--until", "2030-01-01")
    assert too_long.status == 6, too_long.err
    assert "INVALID_ARGUMENT" in too_long.err
