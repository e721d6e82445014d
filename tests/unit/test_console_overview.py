"""The overview as an operator reads it (issue 31): a paused queue is flagged; delayed jobs
(status created, their run time to come) count as unfinished, as their own figure; the
tables keep every status column, zeros included, whatever the data; the status CREATED is
not headed "created" beside "Jobs created since…"; workers are named by their ids
(AdminService.ListWorkers). Over HTTP (httpx's ASGI transport) against the fake AdminService
of ``durable_jobs_client.testing`` and a fake metrics endpoint; against a real job_service:
tests/integration/test_console_operator.py.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import httpx
import pytest
from durable_jobs_client import JobsError
from durable_jobs_client.protos import admin_service_pb2, job_pb2
from durable_jobs_client.testing import FakeJobService
from google.protobuf.timestamp_pb2 import Timestamp

from console.app import Console
from console.overview import ALL_COLUMNS, UNFINISHED_COLUMNS
from console.sessions import SESSION_COOKIE
from console.settings import ConsoleSettings
from tests.unit.test_console_ids import SESSION_ID, v7_id

DASH = "\u2013"  # what a table shows for a figure not known
METRICS = "http://job-service.test/metrics"
WORKER_METRICS = "http://worker.test/metrics"
CREATED = job_pb2.JOB_STATUS_CREATED


def stamp(delta_s: float) -> Timestamp:
    at = Timestamp()
    at.FromDatetime(datetime.now(UTC) + timedelta(seconds=delta_s))
    return at


def made(queue: str, status: job_pb2.JobStatus, run_in_s: float | None = None) -> job_pb2.Job:
    job = job_pb2.Job(id=v7_id(), queue=queue, status=status, created_at=stamp(-60))
    if run_in_s is not None:
        job.next_run_at.CopyFrom(stamp(run_in_s))
    return job


GAUGES = """# TYPE jobs_queue_depth gauge
jobs_queue_depth{queue="ai-batch",status="queued"} 4.0
jobs_queue_depth{queue="ai-batch",status="running"} 0.0
jobs_queue_depth{queue="ai-interactive",status="queued"} 0.0
jobs_queue_depth{queue="ai-interactive",status="running"} 2.0
jobs_queue_depth{queue="ai-interactive",status="retrying"} 1.0
"""
WORKER_GAUGES = """# TYPE jobs_worker_slots gauge
jobs_worker_slots{queue="ai-interactive"} 8.0
# TYPE jobs_worker_slots_in_use gauge
jobs_worker_slots_in_use{queue="ai-interactive"} 3.0
"""


def endpoints(request: httpx.Request) -> httpx.Response:
    body = {METRICS: GAUGES, WORKER_METRICS: WORKER_GAUGES}.get(str(request.url))
    return httpx.Response(200, text=body) if body else httpx.Response(503)


@pytest.fixture
def fake() -> FakeJobService:
    """A job service with a paused queue and the tests' console session open."""
    return FakeJobService(
        console_sessions={SESSION_ID: "test-admin"},
        queues=[
            admin_service_pb2.QueueInfo(name="ai-batch", paused=True, paused_by="ops-alice"),
            admin_service_pb2.QueueInfo(name="ai-interactive"),
        ],
    )


async def signed_in(fake: FakeJobService, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    console = Console(ConsoleSettings(**settings))
    console.jobs = lambda token: fake.client()  # type: ignore[method-assign]
    app = console.app()
    async with console.lifespan(app):
        assert console.http is not None
        await console.http.aclose()
        console.http = httpx.AsyncClient(transport=httpx.MockTransport(endpoints))
        _, cookie = console.sessions.new("admin-token", SESSION_ID)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
            client.cookies.set(SESSION_COOKIE, cookie, domain="console.test")
            yield client


@pytest.fixture
async def admin(fake: FakeJobService) -> AsyncIterator[httpx.AsyncClient]:
    async for client in signed_in(fake):
        yield client


@pytest.fixture
async def with_metrics(fake: FakeJobService) -> AsyncIterator[httpx.AsyncClient]:
    urls = {"console_metrics_url": METRICS, "console_worker_metrics_urls": WORKER_METRICS}
    async for client in signed_in(fake, **urls):
        yield client


def table(page: str, table_id: str) -> list[list[str]]:
    """The cells of a table, row by row, as a reader sees them."""
    found = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S)
    assert found is not None, f"no table {table_id}"
    return [
        [
            " ".join(re.sub(r"<[^>]+>", " ", c).split())
            for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.S)
    ]


def figure(page: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}">([^<]*)<', page)
    assert found is not None, f"no #{element_id}"
    return found.group(1)


async def test_a_paused_queue_is_flagged(admin: httpx.AsyncClient) -> None:
    page = (await admin.get("/")).text

    flagged = re.search(r'<p class="error" id="paused-queues">(.*?)</p>', page, re.S)
    assert flagged is not None
    assert "ai-batch" in flagged.group(1) and "ops-alice" in flagged.group(1)
    assert "ai-interactive" not in flagged.group(1)
    rows = table(page, "unfinished")
    assert [r[0] for r in rows[1:]] == ["ai-batch paused", "ai-interactive"]
    assert page.count('id="paused-ai-batch"') == 1


async def test_nothing_is_flagged_when_no_queue_is_paused(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    fake.queues = [admin_service_pb2.QueueInfo(name="ai-batch")]

    page = (await admin.get("/")).text

    assert 'id="paused-queues"' not in page and "paused</span>" not in page


async def test_delayed_jobs_are_counted_as_unfinished_on_their_own(
    with_metrics: httpx.AsyncClient, fake: FakeJobService
) -> None:
    fake.put(
        made("ai-interactive", CREATED, run_in_s=3600),
        made("ai-interactive", CREATED, run_in_s=600),
        made("ai-batch", CREATED, run_in_s=60),
        made("ai-batch", CREATED, run_in_s=-5),  # due: not delayed, not yet queued
        made("ai-batch", CREATED),
    )

    page = (await with_metrics.get("/")).text

    assert figure(page, "delayed-total") == "3"
    # CountJobs' exact figure (this fake service holds only the 5 created jobs; the gauge's
    # 4 + 2 + 1 are in the per-queue table)
    assert figure(page, "unfinished-total") == "5"
    rows = {r[0]: r[1:] for r in table(page, "unfinished")}
    headings = rows.pop("queue")
    assert headings[:3] == ["delayed", "not yet queued", "queued"]
    by_queue = {q.split()[0]: dict(zip(headings, cells, strict=True)) for q, cells in rows.items()}
    assert by_queue["ai-batch"] == {
        "delayed": "1",
        "not yet queued": "2",
        "queued": "4",
        "running": "0",
        "retrying": "0",
        "cancel_requested": "0",
    }
    assert by_queue["ai-interactive"]["delayed"] == "2"
    assert by_queue["ai-interactive"]["retrying"] == "1"


async def test_the_tables_keep_every_status_column_with_no_jobs_at_all(
    admin: httpx.AsyncClient,
) -> None:
    page = (await admin.get("/")).text

    unfinished, recent = table(page, "unfinished"), table(page, "recent")
    assert len(unfinished[0]) == 1 + len(UNFINISHED_COLUMNS)
    assert len(recent[0]) == 1 + len(ALL_COLUMNS)
    assert recent[0] == [
        "jobs",
        "not yet queued or delayed",
        "queued",
        "running",
        "retrying",
        "cancel_requested",
        "succeeded",
        "failed",
        "cancelled",
    ]
    assert [r[0] for r in recent[1:]] == ["created in the window", "finished in the window"]
    assert all(cell == "0" for cell in recent[1][1:])
    # a job finishes only as succeeded, failed or cancelled: the other cells are empty
    assert recent[2][1:] == ["", "", "", "", "", "0", "0", "0"]
    # without job_service's metrics endpoint the gauge's statuses are not known: a dash
    assert unfinished[1][1:] == ["0", "0", DASH, DASH, DASH, DASH]
    assert "JOBS_CONSOLE_METRICS_URL" in page


async def test_the_status_created_is_not_headed_like_jobs_created_since(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    fake.put(made("ai-interactive", CREATED), made("ai-interactive", job_pb2.JOB_STATUS_FAILED))

    page = (await admin.get("/")).text

    assert "Jobs created since" in page
    assert "<th>created</th>" not in page
    assert re.search(r'<th title="status created and due[^"]*">not yet queued</th>', page)
    cells = dict(zip(table(page, "recent")[0], table(page, "recent")[1], strict=True))
    assert cells["not yet queued or delayed"] == "1" and cells["failed"] == "1"


async def test_workers_are_listed_by_their_ids(
    with_metrics: httpx.AsyncClient, fake: FakeJobService
) -> None:
    fake.workers = [
        admin_service_pb2.Worker(
            worker_id="worker-b",
            connected_at=stamp(-30),
            definitions=["synthetic@1.0.0", "summarize@2"],
            running_jobs=2,
        ),
        admin_service_pb2.Worker(worker_id="worker-a", running_jobs=0),
    ]

    page = (await with_metrics.get("/")).text

    rows = table(page, "workers")
    assert [r[0] for r in rows] == ["worker", "worker-a", "worker-b"]
    assert rows[2][2:] == ["2", "synthetic@1.0.0, summarize@2"]
    assert rows[2][1].endswith(" UTC")
    assert WORKER_METRICS not in page  # endpoints are not workers
    slots = re.search(r'id="slots">(.*?)</p>', page, re.S)
    assert slots is not None and "3 of 8" in slots.group(1)


async def test_no_worker_connected_says_so(admin: httpx.AsyncClient) -> None:
    page = (await admin.get("/")).text

    assert "No worker connected." in page
    assert 'id="slots"' not in page  # no worker metrics endpoints configured


async def test_a_service_without_list_workers_still_shows_the_overview(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    fake.refuse(
        "admin.list_workers", JobsError("unimplemented", code=grpc.StatusCode.UNIMPLEMENTED)
    )

    page = await admin.get("/")

    assert page.status_code == 200
    assert "Workers unavailable: unimplemented" in page.text
    assert 'id="paused-queues"' in page.text


async def test_the_last_hour_is_counted_exactly_over_the_window_shown(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    finished = stamp(-30)
    jobs = [
        made("ai-interactive", job_pb2.JOB_STATUS_SUCCEEDED),
        made("ai-interactive", job_pb2.JOB_STATUS_SUCCEEDED),
        made("ai-interactive", job_pb2.JOB_STATUS_FAILED),
        made("ai-batch", job_pb2.JOB_STATUS_RUNNING),
    ]
    for job in jobs[:3]:
        job.finished_at.CopyFrom(finished)
    old = made("ai-batch", job_pb2.JOB_STATUS_FAILED)  # created two hours ago, failed now
    old.created_at.CopyFrom(stamp(-7200))
    old.finished_at.CopyFrom(finished)
    fake.put(*jobs, old)

    page = (await admin.get("/")).text

    [since] = [c["since"] for c in fake.asked("admin.count_jobs")]
    assert timedelta(minutes=59) < datetime.now(UTC) - since < timedelta(minutes=61)
    found = re.search(r'id="recent-window">(.*?)</p>', page)
    assert found is not None
    window = re.sub(r"<[^>]+>", "", found.group(1))
    assert re.fullmatch(r"last hour: \d\d:\d\d\u2013\d\d:\d\d UTC", window)
    assert window.split(": ")[1].startswith(since.strftime("%H:%M"))
    assert figure(page, "recent-created") == "4"
    assert figure(page, "recent-finished") == "4"  # the old job finished in the window
    assert figure(page, "recent-failed") == "2"
    assert figure(page, "failure-rate") == "50.0 %"
    assert figure(page, "throughput") == "0.0667"  # 4 in 60 minutes
