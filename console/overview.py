"""The overview page's figures, from what a client can see: AdminService listings and the
services' Prometheus endpoints. There is no counting RPC, so some figures are bounded
samples, and the page says which (``capped``):

* unfinished jobs by queue and status — job_service's ``jobs_queue_depth`` gauge (exact as
  of its last database collect, a few seconds old); absent without a metrics URL;
* the last hour — jobs created in the last hour, read through ``AdminService.ListJobs`` up
  to ``SAMPLE_LIMIT`` jobs: by queue and status, how many finished, the failure rate among
  the finished;
* outbox backlog — the ``jobs_outbox_rows`` and ``jobs_outbox_oldest_due_age_seconds``
  gauges;
* dead letters — ``ListDeadLetters`` counted up to ``SAMPLE_LIMIT`` of each kind;
* workers — each configured worker metrics endpoint that answers is a worker seen now, with
  its slots in use.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
from durable_jobs_client import AsyncAdminClient, JobsError
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.statuses import TERMINAL, status_name
from prometheus_client.parser import text_string_to_metric_families

PAGE = 500
SAMPLE_LIMIT = 1000
METRICS_TIMEOUT_S = 1.0

Samples = dict[str, list[tuple[dict[str, str], float]]]


@dataclass
class Worker:
    url: str
    up: bool
    slots: float = 0.0
    in_use: float = 0.0


@dataclass
class Overview:
    at: datetime
    since: datetime
    # (queue, status label) -> jobs
    unfinished: dict[tuple[str, str], int] | None = None
    recent: dict[tuple[str, str], int] = field(default_factory=dict)
    recent_total: int = 0
    recent_capped: bool = False
    outbox: dict[str, int] | None = None
    outbox_oldest_s: float | None = None
    failed_jobs: int = 0
    dead_events: int = 0
    dead_capped: bool = False
    workers: list[Worker] = field(default_factory=list)
    metrics_error: str = ""

    @property
    def recent_finished(self) -> int:
        return sum(n for (_, s), n in self.recent.items() if s in _FINISHED_LABELS)

    @property
    def recent_failed(self) -> int:
        return sum(n for (_, s), n in self.recent.items() if s == "failed")

    @property
    def failure_rate(self) -> float | None:
        finished = self.recent_finished
        return self.recent_failed / finished if finished else None

    @staticmethod
    def table(counts: dict[tuple[str, str], int]) -> tuple[list[str], list[tuple[str, list[int]]]]:
        """Statuses (columns) and one row per queue."""
        statuses = sorted({s for _, s in counts}, key=_STATUS_ORDER.index)
        queues = sorted({q for q, _ in counts})
        return statuses, [(q, [counts.get((q, s), 0) for s in statuses]) for q in queues]


_STATUS_ORDER = [status_name(v) for v in job_pb2.JobStatus.values()]
_FINISHED_LABELS = {status_name(v) for v in TERMINAL}


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


async def _recent(admin: AsyncAdminClient, view: Overview) -> None:
    page_token = ""
    counts: Counter[tuple[str, str]] = Counter()
    seen = 0
    while True:
        page = await admin.list_jobs(
            created_after=view.since, page_size=PAGE, page_token=page_token
        )
        for job in page.jobs:
            counts[(job.queue, status_name(job.status))] += 1
        seen += len(page.jobs)
        page_token = page.next_page_token
        if not page_token:
            break
        if seen >= SAMPLE_LIMIT:
            view.recent_capped = True
            break
    view.recent, view.recent_total = dict(counts), seen


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
    view.unfinished = {
        (labels["queue"], labels["status"]): int(value)
        for labels, value in samples.get("jobs_queue_depth", [])
        if value
    }
    view.outbox = {labels["status"]: int(v) for labels, v in samples.get("jobs_outbox_rows", [])}
    oldest = samples.get("jobs_outbox_oldest_due_age_seconds", [])
    view.outbox_oldest_s = oldest[0][1] if oldest else None


async def _worker(http: httpx.AsyncClient, url: str) -> Worker:
    try:
        samples = await scrape(http, url)
    except (httpx.HTTPError, ValueError):
        return Worker(url=url, up=False)
    return Worker(
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
    view = Overview(at=now, since=now - timedelta(hours=1))
    tasks: list[asyncio.Future[None]] = [
        asyncio.ensure_future(_recent(admin, view)),
        asyncio.ensure_future(_dead(admin, view)),
    ]
    if metrics_url:
        tasks.append(asyncio.ensure_future(_service_metrics(http, metrics_url, view)))
    workers = [asyncio.ensure_future(_worker(http, url)) for url in worker_urls]
    try:
        await asyncio.gather(*tasks)
        view.workers = list(await asyncio.gather(*workers))
    except JobsError:
        for task in tasks:
            task.cancel()
        for worker in workers:
            worker.cancel()
        raise
    return view
