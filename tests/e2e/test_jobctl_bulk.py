"""``jobctl cancel-many`` / ``retry-many`` against the real AdminService.CancelJobs /
RetryJobs: count, confirm, act page by page.

The first test runs against a fake AdminService on a real gRPC server: exactly what goes
over the wire. The others run against the real service. The command's own logic
(selection, confirmation, the continuation loop, formats) is covered without the service
by tests/unit/test_jobctl_bulk.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import admin_service_pb2_grpc, job_pb2
from tests.e2e.test_jobctl import answer_on_a_terminal, jobctl
from tests.support.stack import ALL_ROLES_TOKEN, CLIENT_TOKEN
from worker_service.app import WorkerApp


class FakeBulk(admin_service_pb2_grpc.AdminServiceServicer):
    """CancelJobs over ``jobs``, ``limit`` per call; records each request and its token."""

    def __init__(self, jobs: list[str]) -> None:
        self.jobs = jobs
        self.requests: list[tuple[apb.CancelJobsRequest, str]] = []

    async def CancelJobs(self, request: apb.CancelJobsRequest, context: Any) -> Any:
        metadata = dict(context.invocation_metadata())
        self.requests.append((request, metadata.get("authorization", "")))
        if request.dry_run:
            return apb.CancelJobsResponse(matched=len(self.jobs))
        start = int(request.page_token or 0)
        end = start + request.limit
        page = self.jobs[start:end]
        return apb.CancelJobsResponse(
            cancelled=len(page),
            job_ids=page,
            next_page_token=str(end) if end < len(self.jobs) else "",
        )


@pytest.fixture
async def fake_admin() -> AsyncIterator[tuple[str, FakeBulk]]:
    servicer = FakeBulk([f"job-{i}" for i in range(5)])
    server = grpc.aio.server()
    admin_service_pb2_grpc.add_AdminServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        await server.stop(None)


async def test_cancel_many_on_the_wire(fake_admin: tuple[str, FakeBulk]) -> None:
    target, servicer = fake_admin

    done = await jobctl(
        target,
        "cancel-many",
        "--type",
        "synthetic",
        "--status",
        "queued",
        "--created-before",
        "2030-01-31T09:00:00Z",
        "--limit",
        "2",
        "--reason",
        "provider outage",
        "--yes",
        "-o",
        "jsonl",
    )

    assert done.status == 0, done.err
    assert [json.loads(line)["job_ids"] for line in done.out.splitlines()] == [
        ["job-0", "job-1"],
        ["job-2", "job-3"],
        ["job-4"],
    ]
    [(count, token), *pages] = servicer.requests
    assert count.dry_run and token == f"Bearer {ALL_ROLES_TOKEN}"
    assert count.selection == apb.JobSelection(
        job_type="synthetic",
        status=job_pb2.JOB_STATUS_QUEUED,
        created_before=Timestamp(seconds=1896080400),
    )
    assert [(r.page_token, r.limit, r.reason, r.dry_run) for r, _ in pages] == [
        ("", 2, "provider outage", False),
        ("2", 2, "provider outage", False),
        ("4", 2, "provider outage", False),
    ]
    assert all(r.selection == count.selection for r, _ in pages)


async def create(target: str, n: int, *args: str) -> list[str]:
    return [
        (await jobctl(target, "create", "synthetic", "--delay", "1h", "--json", *args)).json()[
            "job"
        ]["id"]
        for _ in range(n)
    ]


async def statuses(db: asyncpg.Connection, ids: list[str]) -> list[str]:
    found = await db.fetch("SELECT id::text, status FROM jobs WHERE id = ANY($1::uuid[])", ids)
    by_id = {r["id"]: r["status"] for r in found}
    return [by_id[i] for i in ids]


async def test_cancel_many_counts_asks_and_cancels_page_by_page(
    target: str, db: asyncpg.Connection
) -> None:
    mine = await create(target, 5)
    theirs = await create(target, 1, "--user", "someone-else")
    selection = ["--user-filter", "cli-user", "--type", "synthetic"]

    declined = await answer_on_a_terminal(target, b"n\n", "cancel-many", *selection)
    assert declined.status == 9, declined.err
    assert "Cancel 5 jobs? [y/N]" in declined.err
    # the jobs it is about, named before the question
    assert set(declined.err.split("Cancel 5 jobs?")[0].split()) == {i[-8:] for i in mine}
    assert "nothing was cancelled" in declined.err
    counted = await jobctl(target, "cancel-many", *selection, "--dry-run")
    assert counted.status == 0, counted.err
    head, *named = counted.out.splitlines()
    assert head == "5 jobs match; cancelled none (dry run)"
    assert sorted(" ".join(named).split()) == sorted(i[-8:] for i in mine)
    scripted = await jobctl(target, "cancel-many", *selection)  # no terminal, no --yes
    assert scripted.status == 2 and "add --yes" in scripted.err
    assert set(await statuses(db, mine + theirs)) == {"created"}

    done = await jobctl(
        target, "cancel-many", *selection, "--limit", "2", "--yes", "--reason", "outage"
    )

    assert done.status == 0, done.err
    assert done.out.strip() == "cancelled 5 jobs (0 already finished, left)"
    assert done.err.splitlines() == [
        "jobctl: cancelled 2/5 (0 already finished)",
        "jobctl: cancelled 4/5 (0 already finished)",
        "jobctl: cancelled 5/5 (0 already finished)",
    ]
    assert await statuses(db, mine) == ["cancelled"] * 5
    assert await statuses(db, theirs) == ["created"]
    reasons = await db.fetch(
        "SELECT reason FROM job_events WHERE job_id = ANY($1::uuid[]) AND to_status = 'cancelled'",
        mine,
    )
    assert len(reasons) == 5 and all("outage" in (r["reason"] or "") for r in reasons)
    again = await jobctl(target, "cancel-many", *selection, "--yes")
    # whether finished jobs still "match" (and are skipped) is the service's to say
    assert again.status == 0, again.err
    assert again.out.strip() in {
        "no jobs match; nothing cancelled",
        "cancelled 0 jobs (5 already finished, left)",
    }


async def test_retry_many_retries_the_failed_jobs_as_new_ones(
    target: str, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    failed = []
    for _ in range(3):
        run = await jobctl(target, "create", "synthetic", "-i", '{"fail": "fatal"}', "--watch")
        assert run.status == 4
        failed.append(run.out.split()[1])

    done = await jobctl(
        target,
        "retry-many",
        "--status",
        "failed",
        "--user-filter",
        "cli-user",
        "--yes",
        "-o",
        "json",
    )

    assert done.status == 0, done.err
    answer = done.json()
    assert answer["retried"] == 3
    assert sorted(o["job_id"] for o in answer["outcomes"]) == sorted(failed)
    new_ids = [o["new_job_id"] for o in answer["outcomes"]]
    retried_from = await db.fetch(
        "SELECT retried_from_job_id::text FROM jobs WHERE id = ANY($1::uuid[])", new_ids
    )
    assert sorted(r["retried_from_job_id"] for r in retried_from) == sorted(failed)


async def test_bulk_operations_are_for_admins_only(target: str, db: asyncpg.Connection) -> None:
    mine = await create(target, 1)
    for command in ("cancel-many", "retry-many"):
        run = await jobctl(target, command, "--type", "synthetic", "--yes", "--token", CLIENT_TOKEN)
        assert run.status == 8, run.err
        assert "PERMISSION_DENIED" in run.err
    assert await statuses(db, mine) == ["created"]
