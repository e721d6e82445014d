"""GetUsage against real PostgreSQL: with several users, days, models and job types, its
totals equal the sums of the usage rows — taken from the database before retention folded
part of them into the daily aggregates, so a call is neither lost nor counted twice when
its job is deleted — and a client sees only the user it names."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import asyncpg
import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from job_service.adapters.postgres.pool import create_pool
from job_service.adapters.postgres.retention import RetentionRepository
from job_service.usecases.retention import Retention
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import usage_service_pb2 as upb
from shared.pb.jobs.v1 import usage_service_pb2_grpc
from shared.registry import default_registry
from tests.support.ai import FEYNMAN_INPUT
from tests.support.stack import ADMIN_TOKEN, CLIENT_TOKEN, Client, open_channel

USERS = ("alice", "bob", "carol")
JOB_TYPES = ("synthetic", "feynman_evaluation")
MODELS = (("fake", "fake-primary"), ("deepseek", "deepseek-chat"))
DAYS_AGO = (1, 2, 3)
GROUPINGS = {
    upb.USAGE_GROUPING_DAY: ("day",),
    upb.USAGE_GROUPING_USER: ("user_id",),
    upb.USAGE_GROUPING_JOB_TYPE: ("job_type",),
    upb.USAGE_GROUPING_MODEL: ("provider", "model"),
}
TODAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
# what a day's totals are compared as: calls, failed calls, input and output tokens, cost
Totals = tuple[int, int, int, int, Decimal]


@dataclass(frozen=True)
class Fact:
    """Usage as the database holds it, one usage row or one aggregate row."""

    user_id: str
    job_type: str
    provider: str
    model: str
    day: date
    totals: Totals


def _ts(value: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def _add(a: Totals, b: Totals) -> Totals:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4])


ZERO: Totals = (0, 0, 0, 0, Decimal(0))


def expected(
    facts: Iterable[Fact],
    group_by: Iterable[int],
    user_id: str | None = None,
    start: datetime = TODAY - timedelta(days=10),
    end: datetime = TODAY + timedelta(days=1),
) -> dict[tuple[object, ...], Totals]:
    keys = [k for g, columns in GROUPINGS.items() if g in set(group_by) for k in columns]
    sums: dict[tuple[object, ...], Totals] = defaultdict(lambda: ZERO)
    for fact in facts:
        if user_id is not None and fact.user_id != user_id:
            continue
        if not start.date() <= fact.day < end.date():
            continue
        key = tuple(getattr(fact, k) for k in keys)
        sums[key] = _add(sums[key], fact.totals)
    return dict(sums)


def answered(
    response: upb.GetUsageResponse, group_by: Iterable[int]
) -> dict[tuple[object, ...], Totals]:
    keys = [k for g, columns in GROUPINGS.items() if g in set(group_by) for k in columns]
    if not keys:
        return {(): _totals(response.totals)} if response.totals.calls else {}
    got = {}
    for group in response.groups:
        values = {
            "day": group.day.ToDatetime(tzinfo=UTC).date() if group.HasField("day") else None,
            "user_id": group.user_id,
            "job_type": group.job_type,
            "provider": group.provider,
            "model": group.model,
        }
        got[tuple(values[k] for k in keys)] = _totals(group.totals)
    total = ZERO
    for totals in got.values():
        total = _add(total, totals)
    assert _totals(response.totals) == total, "the totals are the sum of the groups"
    return got


def _totals(t: upb.UsageTotals) -> Totals:
    return (t.calls, t.failed_calls, t.input_tokens, t.output_tokens, Decimal(t.cost_usd))


async def _usage(
    stub: usage_service_pb2_grpc.UsageServiceStub,
    group_by: Iterable[int] = (),
    user_id: str = "",
    start: datetime = TODAY - timedelta(days=10),
    end: datetime = TODAY + timedelta(days=1),
) -> upb.GetUsageResponse:
    return await stub.GetUsage(
        upb.GetUsageRequest(
            user_id=user_id, start_time=_ts(start), end_time=_ts(end), group_by=list(group_by)
        )
    )


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, 2)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
async def admin(target: str) -> AsyncIterator[usage_service_pb2_grpc.UsageServiceStub]:
    async with open_channel(target, ADMIN_TOKEN) as channel:
        yield usage_service_pb2_grpc.UsageServiceStub(channel)


@pytest.fixture
async def product(target: str) -> AsyncIterator[usage_service_pb2_grpc.UsageServiceStub]:
    """A product service: the client role, acting for the user it names."""
    async with open_channel(target, CLIENT_TOKEN) as channel:
        yield usage_service_pb2_grpc.UsageServiceStub(channel)


async def seed(client: Client, db: asyncpg.Connection) -> None:
    """A finished job per user and job type, each with a usage row per day and model (some
    failed, some reused steps, costs to the micro-dollar), and an aggregate folded before
    job types were kept (no per-type row)."""
    n = 0
    for user, job_type in itertools.product(USERS, JOB_TYPES):
        job_input = FEYNMAN_INPUT if job_type == "feynman_evaluation" else {}
        job = (await client.create(user_id=user, job_type=job_type, **job_input)).job
        await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id=user))
        for days_ago, (provider, model) in itertools.product(DAYS_AGO, MODELS):
            n += 1
            reused = n % 5 == 0  # a recorded step answered again: no call, costs nothing
            paid = 0 if reused else n
            await db.execute(
                "INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode,"
                " input_tokens, output_tokens, cost_usd, error_code, created_at, call_id,"
                " reused) VALUES ($1, 1, $2, $3, 'platform', $4, $5, $6, $7, $8, $9, $10)",
                job.id,
                provider,
                model,
                100 * paid,
                7 * paid,
                Decimal("0.010001") * paid,
                "PROVIDER_TIMEOUT" if n % 4 == 0 and not reused else None,
                TODAY - timedelta(days=days_ago) + timedelta(hours=n % 24, seconds=n),
                f"call-{n}",
                reused,
            )
    await db.execute(
        "INSERT INTO usage_daily (user_id, day, provider, model, calls, failed_calls,"
        " input_tokens, output_tokens, cost_usd) VALUES"
        " ('alice', $1, 'fake', 'fake-primary', 5, 1, 500, 200, 0.333333),"
        " ('carol', $2, 'fake', 'fake-primary', 2, 0, 20, 2, 0.000007)",
        (TODAY - timedelta(days=1)).date(),
        (TODAY - timedelta(days=5)).date(),
    )


async def facts_of(db: asyncpg.Connection) -> list[Fact]:
    """Every call's usage as the database holds it now: the usage rows of stored jobs and
    the aggregates (all of them without a job type: taken before retention ran)."""
    assert await db.fetchval("SELECT count(*) FROM usage_daily_job_types") == 0
    rows = await db.fetch(
        "SELECT j.user_id, j.job_type, u.provider, u.model,"
        " (u.created_at AT TIME ZONE 'UTC')::date AS day, (NOT u.reused)::int AS calls,"
        " (u.error_code IS NOT NULL)::int AS failed_calls, u.input_tokens, u.output_tokens,"
        " u.cost_usd FROM usage_logs u JOIN jobs j ON j.id = u.job_id"
        " UNION ALL SELECT user_id, '', provider, model, day, calls, failed_calls,"
        " input_tokens, output_tokens, cost_usd FROM usage_daily"
    )
    return [
        Fact(
            r["user_id"],
            r["job_type"],
            r["provider"],
            r["model"],
            r["day"],
            (
                r["calls"],
                r["failed_calls"],
                r["input_tokens"],
                r["output_tokens"],
                r["cost_usd"],
            ),
        )
        for r in rows
    ]


async def fold_synthetic_jobs(db: asyncpg.Connection, pool: asyncpg.Pool) -> None:
    """Retention deletes the synthetic jobs (aged past 30 days), folding their usage."""
    await db.execute(
        "UPDATE jobs SET finished_at = now() - interval '31 days' WHERE job_type = 'synthetic'"
    )
    before = await db.fetchval("SELECT count(*) FROM usage_logs")
    await Retention(
        default_registry(),
        RetentionRepository(pool),
        job_retention_s=30 * 86_400.0,
        usage_retention_s=0,
        batch=500,
    ).run_round()
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE job_type = 'synthetic'") == 0
    assert await db.fetchval("SELECT count(*) FROM usage_logs") == before / 2
    assert await db.fetchval("SELECT count(*) FROM usage_daily_job_types") > 0


ALL_GROUPINGS = list(GROUPINGS)
GROUPING_SETS = [
    [],
    *([g] for g in ALL_GROUPINGS),
    [upb.USAGE_GROUPING_DAY, upb.USAGE_GROUPING_MODEL],
    [upb.USAGE_GROUPING_USER, upb.USAGE_GROUPING_JOB_TYPE],
    ALL_GROUPINGS,
]


async def test_totals_equal_the_usage_rows_before_and_after_retention_folds_them(
    client: Client,
    db: asyncpg.Connection,
    pool: asyncpg.Pool,
    admin: usage_service_pb2_grpc.UsageServiceStub,
) -> None:
    await seed(client, db)
    facts = await facts_of(db)
    assert len({(f.user_id, f.day, f.model, f.job_type) for f in facts}) > 30

    for group_by in GROUPING_SETS:
        assert answered(await _usage(admin, group_by), group_by) == expected(facts, group_by)

    await fold_synthetic_jobs(db, pool)

    for group_by in GROUPING_SETS:
        assert answered(await _usage(admin, group_by), group_by) == expected(facts, group_by)
    # the folded calls keep their job type; only the aggregates from before are untyped
    by_type = answered(await _usage(admin, [upb.USAGE_GROUPING_JOB_TYPE]), [3])
    assert set(by_type) == {("synthetic",), ("feynman_evaluation",), ("",)}
    assert by_type[("",)] == (7, 1, 520, 202, Decimal("0.333340"))


async def test_a_range_counts_exactly_its_days(
    client: Client,
    db: asyncpg.Connection,
    pool: asyncpg.Pool,
    admin: usage_service_pb2_grpc.UsageServiceStub,
) -> None:
    await seed(client, db)
    facts = await facts_of(db)
    await fold_synthetic_jobs(db, pool)
    group_by = [upb.USAGE_GROUPING_DAY, upb.USAGE_GROUPING_MODEL]

    for start_ago, end_ago in ((2, 1), (3, 0), (1, 0), (9, 4), (30, 5)):
        start, end = TODAY - timedelta(days=start_ago), TODAY - timedelta(days=end_ago)
        got = answered(await _usage(admin, group_by, start=start, end=end), group_by)
        assert got == expected(facts, group_by, start=start, end=end)
    nothing = await _usage(admin, start=TODAY, end=TODAY + timedelta(days=1))
    assert (nothing.totals.calls, nothing.totals.cost_usd, list(nothing.groups)) == (
        0,
        "0.000000",
        [],
    )


async def test_a_client_sees_only_the_user_it_names(
    client: Client,
    db: asyncpg.Connection,
    pool: asyncpg.Pool,
    admin: usage_service_pb2_grpc.UsageServiceStub,
    product: usage_service_pb2_grpc.UsageServiceStub,
) -> None:
    await seed(client, db)
    facts = await facts_of(db)
    await fold_synthetic_jobs(db, pool)

    for group_by in GROUPING_SETS:
        got = answered(await _usage(product, group_by, user_id="alice"), group_by)
        assert got == expected(facts, group_by, user_id="alice")
    by_user = await _usage(product, [upb.USAGE_GROUPING_USER], user_id="alice")
    assert [g.user_id for g in by_user.groups] == ["alice"]
    # a user with no usage has none, whoever else does
    none = await _usage(product, ALL_GROUPINGS, user_id="mallory")
    assert (none.totals.calls, list(none.groups)) == (0, [])
    # the client role cannot ask across users
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _usage(product, [upb.USAGE_GROUPING_USER])
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    # an admin may name any user, or none for everyone
    bob = answered(await _usage(admin, [upb.USAGE_GROUPING_USER], user_id="bob"), [4])
    assert bob == expected(facts, [4], user_id="bob")
    everyone = answered(await _usage(admin, [upb.USAGE_GROUPING_USER]), [4])
    assert set(everyone) == {(u,) for u in USERS}


async def test_pruning_old_aggregates_takes_their_job_type_rows_along(
    client: Client,
    db: asyncpg.Connection,
    pool: asyncpg.Pool,
    admin: usage_service_pb2_grpc.UsageServiceStub,
) -> None:
    await seed(client, db)
    facts = await facts_of(db)
    await fold_synthetic_jobs(db, pool)
    # every aggregate ages by 100 days; usage is kept 50 days
    for table in ("usage_daily", "usage_daily_job_types"):
        await db.execute(f"UPDATE {table} SET day = day - 100")

    pruned = await RetentionRepository(pool).prune_usage_daily(50 * 86_400.0, 500)

    assert pruned > 0
    assert await db.fetchval("SELECT count(*) FROM usage_daily") == 0
    assert await db.fetchval("SELECT count(*) FROM usage_daily_job_types") == 0
    # an older replica's prune leaves the per-type rows of what it deleted: they count
    # only beside their usage_daily row
    await db.execute(
        "INSERT INTO usage_daily_job_types (user_id, day, provider, model, job_type, calls,"
        " cost_usd) VALUES ('alice', $1, 'fake', 'fake-primary', 'synthetic', 3, 1.5)",
        (TODAY - timedelta(days=1)).date(),
    )
    # what is left is exactly the usage rows of the jobs still stored
    kept = [f for f in facts if f.job_type == "feynman_evaluation"]
    for group_by in GROUPING_SETS:
        got = answered(await _usage(admin, group_by, start=TODAY - timedelta(days=200)), group_by)
        assert got == expected(kept, group_by)
