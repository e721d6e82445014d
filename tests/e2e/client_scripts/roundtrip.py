"""Run by tests/e2e/test_client_package.py with only durable-jobs-client installed: creates,
lists, watches, signals and cancels jobs, sync and async, keeps a schedule and reads usage;
prints one JSON line of what it saw."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta

from durable_jobs_client import (
    AsyncJobsClient,
    InvalidInput,
    JobFinished,
    JobNotFound,
    JobsClient,
    JobStatus,
    Partial,
    ScheduleNotFound,
    create_request,
    schedule_spec,
)


def sync_part() -> dict[str, object]:
    # target and token from JOBS_JOB_SERVICE_TARGET / JOBS_AUTH_TOKEN
    with JobsClient(user_id="pkg-sync") as jobs:
        created = jobs.create("synthetic", {"sleep_ms": 1}, delay=timedelta(hours=1))
        again = jobs.create(
            "synthetic",
            {"sleep_ms": 1},
            delay=timedelta(hours=1),
            idempotency_key=created.job.idempotency_key,
        )
        listed = [j.id for j in jobs.list(page_size=1)]
        sent = jobs.signal(created.job.id, "approve", {"ok": True})
        resent = jobs.signal(created.job.id, "approve", {"ok": True}, idempotency_key="sig-1")
        again_sent = jobs.signal(created.job.id, "approve", {"ok": True}, idempotency_key="sig-1")
        jobs.cancel(created.job.id)
        watched = [JobStatus.Name(j.status) for j in jobs.watch(created.job.id)]
        with_partial = [
            "partial" if isinstance(seen, Partial) else JobStatus.Name(seen.status)
            for seen in jobs.watch(created.job.id, partial_output=True)
        ]
        try:
            jobs.signal(created.job.id, "approve")
            finished = "sent"
        except JobFinished as error:
            finished = type(error).__name__
        waited = JobStatus.Name(jobs.wait(created.job.id, timeout=10).status)
        batch = jobs.create_many(
            [
                create_request("pkg-sync", "synthetic", {"sleep_ms": 1}, delay=timedelta(hours=1)),
                create_request("pkg-sync", "synthetic", {"sleep_ms": -1}),
            ]
        )
        try:
            jobs.get("00000000-0000-0000-0000-000000000000")
            missing = "found"
        except JobNotFound as error:
            missing = type(error).__name__
        try:
            jobs.create("synthetic", {"sleep_ms": -1})
            invalid: list[str] = []
        except InvalidInput as error:
            invalid = [v.field for v in error.violations]
    return {
        "key": created.job.idempotency_key,
        "same_job": again.job.id == created.job.id and not again.created,
        "listed": listed,
        "id": created.job.id,
        "watched": watched,
        "watched_with_partial": with_partial,
        "signals": [sent.signal.seq, resent.signal.seq, again_sent.signal.seq],
        "signal_created": [sent.created, resent.created, again_sent.created],
        "finished": finished,
        "waited": waited,
        "batch": [type(r).__name__ for r in batch],
        "missing": missing,
        "invalid": invalid,
    }


async def async_part() -> dict[str, object]:
    async with AsyncJobsClient(user_id="pkg-async") as jobs:
        created = await jobs.create("synthetic", {"sleep_ms": 1}, delay=timedelta(hours=1))
        listed = [j.id async for j in jobs.list(page_size=1)]
        await jobs.cancel(created.job.id)
        watched = [JobStatus.Name(j.status) async for j in jobs.watch(created.job.id)]
        waited = JobStatus.Name((await jobs.wait(created.job.id, timeout=10)).status)
        # the operator's side, over the same channel (the token has the admin role)
        admin_view = await jobs.admin.get_job(created.job.id)
        queues = [q.name for q in await jobs.admin.list_queues()]
        stored = await jobs.credentials.put("deepseek", "sk-pkg-0123456789")
        keys = [c.id for c in await jobs.credentials.list()]
        await jobs.credentials.delete(stored.id)
        schedules = await schedule_part(jobs)
        today = datetime.now(UTC).date()
        usage = await jobs.get_usage(today, today + timedelta(days=1), group_by=["day"])
    return {
        "schedules": schedules,
        "usage": [usage.totals.calls, str(usage.totals.cost_usd)],
        "id": created.job.id,
        "listed": listed,
        "watched": watched,
        "waited": waited,
        "admin_user": admin_view.user_id,
        "queues": queues,
        "credentials": keys == [stored.id] and stored.fingerprint.startswith("sha256:"),
    }


async def schedule_part(jobs: AsyncJobsClient) -> dict[str, object]:
    spec = schedule_spec("0 9 * * *", "synthetic", {"sleep_ms": 1}, time_zone="Europe/Berlin")
    made = await jobs.schedules.create(spec, paused=True)
    listed = [s.id async for s in jobs.schedules.list(page_size=1)]
    resumed = await jobs.schedules.resume(made.schedule.id)
    spec.cron = "30 9 * * *"
    updated = await jobs.schedules.update(made.schedule.id, spec)
    triggered = await jobs.schedules.trigger(made.schedule.id)
    got = await jobs.schedules.get(made.schedule.id)
    await jobs.schedules.delete(made.schedule.id)
    try:
        await jobs.schedules.get(made.schedule.id)
        gone = "found"
    except ScheduleNotFound as error:
        gone = type(error).__name__
    return {
        "id": made.schedule.id,
        "key": made.schedule.idempotency_key,
        "paused": made.schedule.paused,
        "listed": listed,
        "resumed_next": resumed.HasField("next_fire_at"),
        "cron": updated.spec.cron,
        "triggered": triggered.schedule_id,
        "runs": [r.job_id for r in got.recent_runs],
        "next": len(got.next_fire_times),
        "gone": gone,
    }


def sync_schedule_part() -> dict[str, object]:
    """The blocking client's schedules: the same calls as the async ones."""
    with JobsClient(user_id="pkg-sync-schedules") as jobs:
        spec = schedule_spec("0 9 * * *", "synthetic", {"sleep_ms": 1}, time_zone="UTC")
        made = jobs.schedules.create(spec, paused=True)
        again = jobs.schedules.create(
            spec, paused=True, idempotency_key=made.schedule.idempotency_key
        )
        listed = [s.id for s in jobs.schedules.list(page_size=1)]
        paused = jobs.schedules.resume(made.schedule.id).paused
        triggered = jobs.schedules.trigger(made.schedule.id)
        jobs.schedules.delete(made.schedule.id)
        try:
            jobs.schedules.get(made.schedule.id)
            gone = "found"
        except ScheduleNotFound as error:
            gone = type(error).__name__
    return {
        "id": made.schedule.id,
        "key": made.schedule.idempotency_key,
        "same_schedule": again.schedule.id == made.schedule.id and not again.created,
        "listed": listed,
        "paused_after_resume": paused,
        "triggered": triggered.schedule_id,
        "gone": gone,
    }


if __name__ == "__main__":
    print(
        json.dumps(
            {
                "engine_importable": "shared" in sys.modules,
                "sync": sync_part(),
                "sync_schedules": sync_schedule_part(),
                "async": asyncio.run(async_part()),
            }
        )
    )
