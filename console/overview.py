"""The overview page's figures, from what a client can see: AdminService calls and the
services' Prometheus endpoints. Most are exact; the two that are bounded samples say so
(``capped``):

* queues — every queue (``ListQueues``), a paused one flagged;
* unfinished jobs — exact, ``CountJobs``: every unfinished job now by status, and how many
  of them are delayed (status created, a run time still to come);
* unfinished jobs by queue and status — job_service's ``jobs_queue_depth`` gauge for the
  statuses it counts (exact as of its last database collect, a few seconds old; absent
  without a metrics URL), and the CREATED jobs read through ``AdminService.ListJobs`` (up
  to ``SAMPLE_LIMIT``), split into *delayed* and *not yet queued* (due: waiting for
  dependencies, or for dispatch);
* the last hour — exact, ``CountJobs`` over [now - 1 h, now) (the window it used is shown):
  jobs created in it by their status now, jobs finished in it by how they ended, the
  throughput (finished per minute) and the failure rate among the finished;
* outbox backlog — the ``jobs_outbox_rows`` and ``jobs_outbox_oldest_due_age_seconds``
  gauges;
* dead letters — ``ListDeadLetters`` counted up to ``SAMPLE_LIMIT`` of each kind;
* workers — ``AdminService.ListWorkers``: each connected worker by its id; and, when worker
  metrics endpoints are configured, the executor slots in use across those that answer.

Tables have fixed columns (every status, zeros included) and the queue table a row for
every queue, so the layout does not move with the data.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from durable_jobs_client import AsyncAdminClient, JobsError
from durable_jobs_client.protos import admin_service_pb2, job_pb2
from durable_jobs_client.statuses import STATUS_NAMES, TERMINAL, status_name, status_value
from prometheus_client.parser import text_string_to_metric_families

from console.backend import describe, signed_out

PAGE = 500
SAMPLE_LIMIT = 1000
METRICS_TIMEOUT_S = 1.0

# A CREATED job whose next_run_at is still to come: it waits for its time.
DELAYED = "delayed"
CREATED = status_name(job_pb2.JOB_STATUS_CREATED)
# Columns of the unfinished table (CREATED split in two) and of the last hour's.
UNFINISHED_COLUMNS: tuple[str, ...] = (
    DELAYED,
    *(s for s in STATUS_NAMES if status_value(s) not in TERMINAL),
)
ALL_COLUMNS: tuple[str, ...] = tuple(STATUS_NAMES)
# A column's heading: the status CREATED is not "created" here, beside "jobs created since".
HEADINGS = {CREATED: "not yet queued"}
EXPLAINED = {
    DELAYED: "status created, its run time still to come",
    CREATED: "status created and due: waiting for its dependencies or to be queued",
}
# The last hour's table: its CREATED column holds delayed jobs too (CountJobs does not
# split the jobs created in a window).
RECENT_HEADINGS = {CREATED: "not yet queued or delayed"}
RECENT_EXPLAINED = {CREATED: "status created: delayed, waiting for dependencies or to be queued"}
WINDOW = timedelta(hours=1)
_FINISHED = {status_name(v) for v in TERMINAL}
_FAILED = status_name(job_pb2.JOB_STATUS_FAILED)

Samples = dict[str, list[tuple[dict[str, str], float]]]
Counts = dict[tuple[str, str], int]


@dataclass
class Endpoint:
    """A worker metrics endpoint (``JOBS_CONSOLE_WORKER_METRICS_URLS``) as scraped now."""

    url: str
    up: bool
    slots: float = 0.0
    in_use: float = 0.0


@dataclass(frozen=True)
class Row:
    queue: str
    paused: bool
    # per column; None: not known (no metrics endpoint)
    cells: list[int | None]


@dataclass
class Overview:
    at: datetime
    since: datetime
    # The end of the last hour's window, as CountJobs resolved it (job_service's now).
    until: datetime | None = None
    queues: list[admin_service_pb2.QueueInfo] = field(default_factory=list)
    # (queue, status label) -> jobs, from the gauge; None without a metrics endpoint
    depth: Counts | None = None
    # (queue, DELAYED or CREATED) -> CREATED jobs, from the sample
    waiting: Counts = field(default_factory=dict)
    waiting_capped: bool = False
    # CountJobs: status label -> jobs created in the window / finished in it / unfinished now
    created: dict[str, int] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)
    unfinished: dict[str, int] = field(default_factory=dict)
    delayed: int = 0
    outbox: dict[str, int] | None = None
    outbox_oldest_s: float | None = None
    failed_jobs: int = 0
    dead_events: int = 0
    dead_capped: bool = False
    workers: list[admin_service_pb2.Worker] = field(default_factory=list)
    workers_error: str = ""
    endpoints: list[Endpoint] = field(default_factory=list)
    metrics_error: str = ""

    @property
    def paused(self) -> list[admin_service_pb2.QueueInfo]:
        return [q for q in self.queues if q.paused]

    @property
    def recent_total(self) -> int:
        return sum(self.created.values())

    @property
    def recent_finished(self) -> int:
        return sum(self.finished.values())

    @property
    def recent_failed(self) -> int:
        return self.finished.get(_FAILED, 0)

    @property
    def failure_rate(self) -> float | None:
        finished = self.recent_finished
        return self.recent_failed / finished if finished else None

    @property
    def per_minute(self) -> float:
        """Jobs finished per minute over the window."""
        end = self.until or self.at
        minutes = max((end - self.since).total_seconds() / 60, 1e-9)
        return self.recent_finished / minutes

    @property
    def unfinished_total(self) -> int:
        """Every unfinished job now, delayed ones included."""
        return sum(self.unfinished.values())

    def recent_rows(self) -> list[tuple[str, list[int | None]]]:
        """The last hour's table: created in the window by status now, finished in it by
        how it ended (None: a status no job finishes in)."""
        return [
            ("created", [self.created.get(c, 0) for c in ALL_COLUMNS]),
            (
                "finished",
                [self.finished.get(c, 0) if c in _FINISHED else None for c in ALL_COLUMNS],
            ),
        ]

    def _rows(self, columns: tuple[str, ...], count: dict[str, Counts | None]) -> list[Row]:
        paused = {q.name for q in self.paused}
        named = {q.name for q in self.queues}
        for counts in count.values():
            named |= {q for q, _ in counts or {}}
        rows = []
        for queue in sorted(named):
            cells: list[int | None] = []
            for column in columns:
                counts = count[column]
                cells.append(None if counts is None else counts.get((queue, column), 0))
            rows.append(Row(queue, queue in paused, cells))
        return rows

    def unfinished_rows(self) -> list[Row]:
        """One row per queue, a cell per ``UNFINISHED_COLUMNS`` (None: not known)."""
        sampled = (DELAYED, CREATED)
        return self._rows(
            UNFINISHED_COLUMNS,
            {c: self.waiting if c in sampled else self.depth for c in UNFINISHED_COLUMNS},
        )


def column_of(job: job_pb2.Job, now: datetime) -> str:
    """The job's status label, a CREATED job with its run time to come being DELAYED."""
    created = job.status == job_pb2.JOB_STATUS_CREATED
    if created and job.next_run_at.seconds and job.next_run_at.ToDatetime(tzinfo=UTC) > now:
        return DELAYED
    return status_name(job.status)


def parse_metrics(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


async def scrape(http: httpx.AsyncClient, url: str) -> Samples:
    response = await http.get(url, timeout=METRICS_TIMEOUT_S)
    response.raise_for_status()
    return parse_metrics(response.text)


Pages = Callable[[str], Awaitable[admin_service_pb2.AdminListJobsResponse]]


async def _sample(pages: Pages, now: datetime) -> tuple[Counts, int, bool]:
    """The jobs of ``pages`` (a page token -> that page of a listing) by (queue, column), up
    to ``SAMPLE_LIMIT``: the counts, how many were read, and whether there were more."""
    page_token = ""
    counts: Counter[tuple[str, str]] = Counter()
    seen = 0
    while True:
        page = await pages(page_token)
        for job in page.jobs:
            counts[(job.queue, column_of(job, now))] += 1
        seen += len(page.jobs)
        page_token = page.next_page_token
        if not page_token:
            return dict(counts), seen, False
        if seen >= SAMPLE_LIMIT:
            return dict(counts), seen, True


def by_status(counts: Iterable[admin_service_pb2.StatusCount]) -> dict[str, int]:
    return {status_name(c.status): c.count for c in counts}


async def _counts(admin: AsyncAdminClient, view: Overview) -> None:
    # ``until`` unset: job_service's own now ends the window (no clock skew between the
    # console and the database), and the answer says which window it counted.
    counted = await admin.count_jobs(view.since)
    view.since = counted.since.ToDatetime(tzinfo=UTC)
    view.until = counted.until.ToDatetime(tzinfo=UTC)
    view.created = by_status(counted.created)
    view.finished = by_status(counted.finished)
    view.unfinished = by_status(counted.unfinished)
    view.delayed = counted.delayed


async def _waiting(admin: AsyncAdminClient, view: Overview) -> None:
    def pages(token: str) -> Awaitable[admin_service_pb2.AdminListJobsResponse]:
        return admin.list_jobs(status=job_pb2.JOB_STATUS_CREATED, page_size=PAGE, page_token=token)

    view.waiting, _, view.waiting_capped = await _sample(pages, view.at)


async def _queues(admin: AsyncAdminClient, view: Overview) -> None:
    view.queues = await admin.list_queues()


async def _workers(admin: AsyncAdminClient, view: Overview) -> None:
    try:
        view.workers = sorted(await admin.list_workers(), key=lambda w: w.worker_id)
    except JobsError as error:
        if signed_out(error):
            raise
        view.workers_error = describe(error)


async def _dead(admin: AsyncAdminClient, view: Overview) -> None:
    page_token = ""
    while True:
        page = await admin.list_dead_letters(page_size=PAGE, page_token=page_token)
        view.failed_jobs += len(page.failed_jobs)
        view.dead_events += len(page.dead_events)
        page_token = page.next_page_token
        if not page_token:
            break
        if max(view.failed_jobs, view.dead_events) >= SAMPLE_LIMIT:
            view.dead_capped = True
            break


async def _service_metrics(http: httpx.AsyncClient, url: str, view: Overview) -> None:
    try:
        samples = await scrape(http, url)
    except (httpx.HTTPError, ValueError) as error:
        view.metrics_error = f"{url}: {error.__class__.__name__}"
        return
    view.depth = {
        (labels["queue"], labels["status"]): int(value)
        for labels, value in samples.get("jobs_queue_depth", [])
        # CREATED comes from the sample, split into delayed and not yet queued
        if labels["status"] != CREATED
    }
    view.outbox = {labels["status"]: int(v) for labels, v in samples.get("jobs_outbox_rows", [])}
    oldest = samples.get("jobs_outbox_oldest_due_age_seconds", [])
    view.outbox_oldest_s = oldest[0][1] if oldest else None


async def _endpoint(http: httpx.AsyncClient, url: str) -> Endpoint:
    try:
        samples = await scrape(http, url)
    except (httpx.HTTPError, ValueError):
        return Endpoint(url=url, up=False)
    return Endpoint(
        url=url,
        up=True,
        slots=sum(v for _, v in samples.get("jobs_worker_slots", [])),
        in_use=sum(v for _, v in samples.get("jobs_worker_slots_in_use", [])),
    )


async def build(
    admin: AsyncAdminClient,
    http: httpx.AsyncClient,
    metrics_url: str,
    worker_urls: list[str],
) -> Overview:
    """Every figure at once (the RPCs and scrapes run concurrently). Raises the
    ``JobsError`` of a refused call (a signed-out token) for the caller to handle."""
    now = datetime.now(UTC)
    view = Overview(at=now, since=now - WINDOW)
    tasks: list[asyncio.Future[None]] = [
        asyncio.ensure_future(step(admin, view))
        for step in (_queues, _waiting, _counts, _dead, _workers)
    ]
    if metrics_url:
        tasks.append(asyncio.ensure_future(_service_metrics(http, metrics_url, view)))
    endpoints = [asyncio.ensure_future(_endpoint(http, url)) for url in worker_urls]
    try:
        await asyncio.gather(*tasks)
        view.endpoints = list(await asyncio.gather(*endpoints))
    except JobsError:
        for task in tasks:
            task.cancel()
        for endpoint in endpoints:
            endpoint.cancel()
        raise
    return view


# What _overview.html reads besides the view.
NAMES: dict[str, Any] = {
    "UNFINISHED_COLUMNS": UNFINISHED_COLUMNS,
    "ALL_COLUMNS": ALL_COLUMNS,
    "HEADINGS": HEADINGS,
    "EXPLAINED": EXPLAINED,
    "RECENT_HEADINGS": RECENT_HEADINGS,
    "RECENT_EXPLAINED": RECENT_EXPLAINED,
    "SAMPLE_LIMIT": SAMPLE_LIMIT,
}
