"""Run by tests/e2e/test_client_package.py with only durable-jobs-client installed: creates,
lists, watches and cancels jobs, sync and async; prints one JSON line of what it saw."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta

from durable_jobs_client import (
    AsyncJobsClient,
    InvalidInput,
    JobNotFound,
    JobsClient,
    JobStatus,
    create_request,
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
        jobs.cancel(created.job.id)
        watched = [JobStatus.Name(j.status) for j in jobs.watch(created.job.id)]
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
    return {
        "id": created.job.id,
        "listed": listed,
        "watched": watched,
        "waited": waited,
        "admin_user": admin_view.user_id,
        "queues": queues,
        "credentials": keys == [stored.id] and stored.fingerprint.startswith("sha256:"),
    }


if __name__ == "__main__":
    print(
        json.dumps(
            {
                "engine_importable": "shared" in sys.modules,
                "sync": sync_part(),
                "async": asyncio.run(async_part()),
            }
        )
    )
