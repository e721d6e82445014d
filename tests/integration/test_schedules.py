"""ScheduleService against real PostgreSQL and NATS: CRUD with validation and ownership,
and firing — each slot one job (trigger "schedule", its schedule and slot), across two
replicas, and catch-up after every replica was down."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.timestamp_pb2 import Timestamp

from job_service.app import JobServiceApp
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pb.jobs.v1 import schedule_service_pb2_grpc
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc
from tests.support.stack import ADMIN_TOKEN, open_channel, running_job_service
from tests.support.wait import eventually

Stub = schedule_service_pb2_grpc.ScheduleServiceStub


@pytest.fixture
async def schedules(job_service: JobServiceApp) -> AsyncIterator[Stub]:
    async with open_channel(f"127.0.0.1:{job_service.port}") as channel:
        yield Stub(channel)


def spec(cron: str = "0 2 * * *", **fields: Any) -> spb.ScheduleSpec:
    job_input = fields.pop("input", {"sleep_ms": 1})
    return spb.ScheduleSpec(
        cron=cron,
        job_template=spb.JobTemplate(job_type="synthetic", input=struct_from_dict(job_input)),
        **fields,
    )


async def create(stub: Stub, user: str = "alice", **fields: Any) -> spb.Schedule:
    key = fields.pop("key", "")
    response = await stub.CreateSchedule(
        spb.CreateScheduleRequest(user_id=user, spec=spec(**fields), idempotency_key=key)
    )
    return response.schedule


async def test_create_get_list_update_pause_resume_delete(schedules: Stub) -> None:
    made = await create(schedules, cron="30 2 * * *", time_zone="Europe/Berlin")
    assert made.id and made.user_id == "alice" and not made.paused
    assert made.spec.time_zone == "Europe/Berlin"
    assert made.spec.catch_up_window.ToTimedelta() == timedelta(seconds=60)  # the default

    got = await schedules.GetSchedule(spb.GetScheduleRequest(schedule_id=made.id, user_id="alice"))
    times = [t.ToDatetime(tzinfo=UTC) for t in got.next_fire_times]
    assert len(times) == 5 and times == sorted(times)
    assert times[0] == made.next_fire_at.ToDatetime(tzinfo=UTC)
    assert got.recent_runs == []

    for _ in range(2):
        await create(schedules)
    first = await schedules.ListSchedules(spb.ListSchedulesRequest(user_id="alice", page_size=2))
    assert len(first.schedules) == 2 and first.next_page_token
    rest = await schedules.ListSchedules(
        spb.ListSchedulesRequest(user_id="alice", page_size=2, page_token=first.next_page_token)
    )
    listed = [s.id for s in [*first.schedules, *rest.schedules]]
    assert len(set(listed)) == 3 and made.id in listed and not rest.next_page_token

    updated = await schedules.UpdateSchedule(
        spb.UpdateScheduleRequest(schedule_id=made.id, user_id="alice", spec=spec("*/5 * * * * *"))
    )
    assert updated.schedule.spec.cron == "*/5 * * * * *"
    assert updated.schedule.spec.time_zone == "UTC"

    paused = await schedules.PauseSchedule(
        spb.PauseScheduleRequest(schedule_id=made.id, user_id="alice")
    )
    assert paused.schedule.paused and not paused.schedule.HasField("next_fire_at")
    resumed = await schedules.ResumeSchedule(
        spb.ResumeScheduleRequest(schedule_id=made.id, user_id="alice")
    )
    assert not resumed.schedule.paused and resumed.schedule.HasField("next_fire_at")

    await schedules.DeleteSchedule(spb.DeleteScheduleRequest(schedule_id=made.id, user_id="alice"))
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await schedules.GetSchedule(spb.GetScheduleRequest(schedule_id=made.id, user_id="alice"))
    assert gone.value.code() is grpc.StatusCode.NOT_FOUND


async def test_an_update_mask_changes_only_the_fields_it_names(
    schedules: Stub, db: asyncpg.Connection
) -> None:
    made = await create(
        schedules, cron="30 2 * * *", time_zone="Europe/Berlin", input={"sleep_ms": 7}
    )
    ids = {"schedule_id": made.id, "user_id": "alice"}

    # only the cron: the zone and the template stay as they were
    updated = await schedules.UpdateSchedule(
        spb.UpdateScheduleRequest(
            **ids, spec=spb.ScheduleSpec(cron="0 4 * * *"), update_mask=FieldMask(paths=["cron"])
        )
    )
    kept = updated.schedule.spec
    assert (kept.cron, kept.time_zone) == ("0 4 * * *", "Europe/Berlin")
    assert dict(kept.job_template.input) == {"sleep_ms": 7}

    # a nested path: the template's input alone
    nested = await schedules.UpdateSchedule(
        spb.UpdateScheduleRequest(
            **ids,
            spec=spec("ignored", input={"sleep_ms": 9}),
            update_mask=FieldMask(paths=["job_template.input"]),
        )
    )
    assert nested.schedule.spec.cron == "0 4 * * *"
    assert dict(nested.schedule.spec.job_template.input) == {"sleep_ms": 9}

    before = await db.fetchrow("SELECT * FROM schedules WHERE id = $1", made.id)
    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await schedules.UpdateSchedule(
            spb.UpdateScheduleRequest(
                **ids, spec=spec("0 5 * * *"), update_mask=FieldMask(paths=["cron", "colour"])
            )
        )
    assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "update_mask" in str(error_from_rpc(bad.value).violations)
    assert await db.fetchrow("SELECT * FROM schedules WHERE id = $1", made.id) == before


async def test_create_is_idempotent_by_key(schedules: Stub, db: asyncpg.Connection) -> None:
    first = await schedules.CreateSchedule(
        spb.CreateScheduleRequest(user_id="alice", spec=spec(), idempotency_key="nightly")
    )
    again = await schedules.CreateSchedule(
        spb.CreateScheduleRequest(user_id="alice", spec=spec(), idempotency_key="nightly")
    )
    assert first.created and not again.created and again.schedule.id == first.schedule.id
    with pytest.raises(grpc.aio.AioRpcError) as reused:
        await schedules.CreateSchedule(
            spb.CreateScheduleRequest(
                user_id="alice", spec=spec("0 3 * * *"), idempotency_key="nightly"
            )
        )
    assert reused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert await db.fetchval("SELECT count(*) FROM schedules") == 1


async def test_another_users_schedule_is_not_found(schedules: Stub) -> None:
    made = await create(schedules, user="alice")
    ids = {"schedule_id": made.id, "user_id": "mallory"}
    calls = [
        schedules.GetSchedule(spb.GetScheduleRequest(**ids)),
        schedules.UpdateSchedule(spb.UpdateScheduleRequest(**ids, spec=spec())),
        schedules.PauseSchedule(spb.PauseScheduleRequest(**ids)),
        schedules.ResumeSchedule(spb.ResumeScheduleRequest(**ids)),
        schedules.DeleteSchedule(spb.DeleteScheduleRequest(**ids)),
        schedules.TriggerSchedule(spb.TriggerScheduleRequest(**ids)),
    ]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call
        assert refused.value.code() is grpc.StatusCode.NOT_FOUND
    listed = await schedules.ListSchedules(spb.ListSchedulesRequest(user_id="mallory"))
    assert list(listed.schedules) == []


async def test_trigger_creates_the_job_now(schedules: Stub, db: asyncpg.Connection) -> None:
    made = await create(schedules)
    job = (
        await schedules.TriggerSchedule(
            spb.TriggerScheduleRequest(schedule_id=made.id, user_id="alice")
        )
    ).job
    assert job.trigger == "schedule" and job.schedule_id == made.id
    assert job.HasField("scheduled_for") and job.user_id == "alice"
    got = await schedules.GetSchedule(spb.GetScheduleRequest(schedule_id=made.id, user_id="alice"))
    assert [(r.outcome, r.job_id) for r in got.recent_runs] == [
        (spb.ScheduleRun.OUTCOME_TRIGGERED, job.id)
    ]


async def _slots_of(db: asyncpg.Connection, schedule_id: str) -> list[tuple[datetime, int]]:
    """Each slot a job was created for, with how many jobs it has."""
    rows = await db.fetch(
        "SELECT scheduled_for, count(*) AS n FROM jobs WHERE schedule_id = $1"
        " GROUP BY scheduled_for ORDER BY scheduled_for",
        schedule_id,
    )
    return [(r["scheduled_for"], r["n"]) for r in rows]


def _assert_one_job_per_slot_without_gaps(slots: list[tuple[datetime, int]]) -> None:
    assert all(n == 1 for _, n in slots), f"a slot fired twice: {slots}"
    times = [t for t, _ in slots]
    gaps = [(a, b) for a, b in itertools.pairwise(times) if b - a != timedelta(seconds=1)]
    assert gaps == [], f"slots missing between {gaps}"


@pytest.mark.slow
async def test_every_second_slot_fires_once_with_the_schedule_on_its_job(
    schedules: Stub, db: asyncpg.Connection
) -> None:
    made = await create(schedules, cron="* * * * * *", overlap_policy=spb.OVERLAP_POLICY_ALLOW)
    await eventually(
        lambda: db.fetchval("SELECT count(*) >= 4 FROM jobs WHERE schedule_id = $1", made.id),
        timeout=20,
    )
    job = await db.fetchrow(
        "SELECT trigger_type, idempotency_key, scheduled_for, created_at, status FROM jobs"
        " WHERE schedule_id = $1 ORDER BY scheduled_for LIMIT 1",
        made.id,
    )
    assert job["trigger_type"] == "schedule" and job["status"] == "queued"
    assert job["idempotency_key"] == f"schedule:{made.id}:{job['scheduled_for'].isoformat()}"
    assert job["created_at"] >= job["scheduled_for"]
    _assert_one_job_per_slot_without_gaps(await _slots_of(db, made.id))
    runs = await db.fetchval(
        "SELECT count(*) FROM schedule_runs WHERE schedule_id = $1 AND outcome = 'fired'", made.id
    )
    assert runs == len(await _slots_of(db, made.id))


async def test_overlap_skip_creates_no_job_while_the_previous_one_is_unfinished(
    schedules: Stub, db: asyncpg.Connection
) -> None:
    # no worker runs: the first job stays queued, so every later slot overlaps it
    made = await create(schedules, cron="* * * * * *")
    await eventually(
        lambda: db.fetchval(
            "SELECT count(*) >= 2 FROM schedule_runs WHERE schedule_id = $1"
            " AND outcome = 'skipped_overlap'",
            made.id,
        ),
        timeout=20,
    )
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE schedule_id = $1", made.id) == 1


@pytest.mark.slow
async def test_two_replicas_fire_each_slot_exactly_once_while_one_stops_and_returns(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    async with (
        running_job_service(database_url, nats_url) as a,
        open_channel(f"127.0.0.1:{a.port}") as channel,
    ):
        stub = Stub(channel)
        b = JobServiceApp(a.settings)
        await b.start()
        try:
            made = await create(stub, cron="* * * * * *", overlap_policy=spb.OVERLAP_POLICY_ALLOW)
            fired = lambda n: db.fetchval(  # noqa: E731
                "SELECT count(*) >= $2 FROM jobs WHERE schedule_id = $1", made.id, n
            )
            await eventually(lambda: fired(3), timeout=20)
            await b.stop()  # one replica away mid-run (the process test kills it)
            await eventually(lambda: fired(6), timeout=20)
            b = JobServiceApp(a.settings)
            await b.start()
            await eventually(lambda: fired(9), timeout=20)
        finally:
            await b.stop()
    _assert_one_job_per_slot_without_gaps(await _slots_of(db, made.id))


async def test_after_every_replica_was_down_missed_slots_inside_the_window_fire_once_each(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    # scaled down from the 30 s outage / 60 s window: a 6 s window, a 12 s outage
    async with (
        running_job_service(database_url, nats_url) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        window = Duration(seconds=6)
        made = await create(
            Stub(channel),
            cron="* * * * * *",
            overlap_policy=spb.OVERLAP_POLICY_ALLOW,
            catch_up_window=window,
        )
        await eventually(
            lambda: db.fetchval("SELECT count(*) > 0 FROM jobs WHERE schedule_id = $1", made.id),
            timeout=20,
        )
    # every replica down: the schedule's next slot lies 12 s in the past when one returns
    # (moved by hand rather than waited for: the same state, 12 s sooner)
    await db.execute(
        "UPDATE schedules SET next_fire_at = date_trunc('second', now()) - interval '12 s'"
        " WHERE id = $1",
        made.id,
    )
    outage_start = await db.fetchval("SELECT next_fire_at FROM schedules WHERE id = $1", made.id)
    async with running_job_service(database_url, nats_url):
        await eventually(
            lambda: db.fetchval(
                "SELECT next_fire_at > now() FROM schedules WHERE id = $1", made.id
            ),
            timeout=20,
        )
        missed = await db.fetch(
            "SELECT slot FROM schedule_runs WHERE schedule_id = $1 AND outcome = 'skipped_missed'"
            " ORDER BY slot",
            made.id,
        )
    slots = await _slots_of(db, made.id)
    _assert_one_job_per_slot_without_gaps([s for s in slots if s[0] >= outage_start])
    caught_up = [t for t, _ in slots if t >= outage_start]
    assert missed, "the slots older than the window are recorded as missed"
    assert missed[0]["slot"] == outage_start
    # missed and fired slots together cover the outage, each once
    covered = sorted([r["slot"] for r in missed] + caught_up)
    assert len(covered) == len(set(covered))
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(covered))
    assert len(caught_up) >= 6


async def test_schedule_validation_writes_nothing(schedules: Stub, db: asyncpg.Connection) -> None:
    past = Timestamp()
    past.FromDatetime(datetime.now(UTC) - timedelta(days=1))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await create(schedules, end_at=past)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert await db.fetchval("SELECT count(*) FROM schedules") == 0


async def test_cancel_previous_cancels_the_unfinished_job_before_the_next_slot_fires(
    schedules: Stub, db: asyncpg.Connection
) -> None:
    # no worker runs: each slot's job waits until the next slot cancels it
    made = await create(
        schedules, cron="* * * * * *", overlap_policy=spb.OVERLAP_POLICY_CANCEL_PREVIOUS
    )
    await eventually(
        lambda: db.fetchval("SELECT count(*) >= 3 FROM jobs WHERE schedule_id = $1", made.id),
        timeout=20,
    )
    await schedules.PauseSchedule(spb.PauseScheduleRequest(schedule_id=made.id, user_id="alice"))
    rows = await db.fetch(
        "SELECT status FROM jobs WHERE schedule_id = $1 ORDER BY scheduled_for", made.id
    )
    statuses = [r["status"] for r in rows]
    assert set(statuses[:-1]) == {"cancelled"} and statuses[-1] == "queued", statuses


async def test_a_slot_the_quota_refuses_is_recorded_and_the_schedule_goes_on(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    async with (
        running_job_service(database_url, nats_url, max_active_jobs_per_user=1) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        made = await create(
            Stub(channel), cron="* * * * * *", overlap_policy=spb.OVERLAP_POLICY_ALLOW
        )
        await eventually(
            lambda: db.fetchval(
                "SELECT count(*) >= 2 FROM schedule_runs WHERE schedule_id = $1"
                " AND outcome = 'refused'",
                made.id,
            ),
            timeout=20,
        )
        got = await Stub(channel).GetSchedule(
            spb.GetScheduleRequest(schedule_id=made.id, user_id="alice")
        )
    refused = [r for r in got.recent_runs if r.outcome == spb.ScheduleRun.OUTCOME_REFUSED]
    assert refused and {r.detail for r in refused} == {"TOO_MANY_JOBS"}
    assert all(not r.job_id for r in refused)
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE schedule_id = $1", made.id) == 1


async def test_who_changed_or_triggered_a_schedule_is_recorded(
    schedules: Stub, db: asyncpg.Connection, job_service: JobServiceApp
) -> None:
    """Issue 27, "who did it": the principal of the token that paused, resumed or updated a
    schedule is its updated_by; a trigger names it on the run and on the job it made."""
    made = await create(schedules)
    ids = {"schedule_id": made.id, "user_id": "alice"}
    port = job_service.port
    assert made.updated_by == "test-all"  # its creator until someone changes it

    async with open_channel(f"127.0.0.1:{port}", ADMIN_TOKEN) as channel:
        paused = await Stub(channel).PauseSchedule(spb.PauseScheduleRequest(**ids))
        assert paused.schedule.updated_by == "test-admin"  # an operator paused it
        triggered = await Stub(channel).TriggerSchedule(spb.TriggerScheduleRequest(**ids))

    run = await db.fetchrow(
        "SELECT outcome, detail FROM schedule_runs WHERE schedule_id = $1", made.id
    )
    assert (run["outcome"], run["detail"]) == ("triggered", "triggered by test-admin")
    assert (
        await db.fetchval("SELECT created_by FROM jobs WHERE id = $1", triggered.job.id)
        == "test-admin"
    )
    assert (
        await db.fetchval("SELECT updated_by FROM schedules WHERE id = $1", made.id) == "test-admin"
    )
