"""An operator's day in the console against a real job_service (issue 31): a job's input
with its numbers as given, its output's 29 as 29, the error labelled with the attempt it
belongs to, each attempt's worker and run time, a retried job's page updating live as the
job moves (timeline, error, attempts: the page's own parts), and an overview that flags a
paused queue and counts delayed jobs. Rendering details against constructed protos:
tests/unit/test_console_job_page.py and tests/unit/test_console_overview.py.
"""

from __future__ import annotations

import html
import re

import asyncpg
import httpx
from google.protobuf.duration_pb2 import Duration

from shared.constants import Queue
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.integration.test_console import admin, browser, console, events, served
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import result_request

__all__ = ["admin", "browser", "console", "served", "shared_stack"]

QUEUE = Queue.INTERACTIVE.value  # synthetic's queue


def part(page: str, element_id: str) -> str:
    found = re.search(rf'<(\w+)[^>]*\bid="{element_id}"[^>]*>.*?</\1>', page, re.S)
    assert found is not None, f"no #{element_id}"
    return found.group(0)


def text(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def timeline(page: str) -> list[list[str]]:
    """The timeline's rows: at, from, to, attempt, ran, worker, reason."""
    rows = re.findall(r"<tr><td>.*?</tr>", part(page, "timeline"), re.S)
    return [[text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)] for row in rows]


async def execute(database_url: str, query: str, *args: object) -> None:
    db = await asyncpg.connect(database_url)
    try:
        await db.execute(query, *args)
    finally:
        await db.close()


async def test_the_job_page_shows_the_input_and_output_numbers_as_given(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    client = shared_stack.client
    job = (await client.create(user_id="olga", sleep_ms=800, fail_times=3)).job
    lease = await client.lock(job.id, "worker-olga")
    await client.executor.SubmitResult(
        result_request(job.id, lease.job.lease_token, {"attempt": 29, "data": "x"}, {"n": 7})
    )

    page = (await admin.get(f"/jobs/{job.id}")).text

    shown = html.unescape(part(page, "input"))
    assert '"sleep_ms": 800,' in shown and '"fail_times": 3,' in shown
    assert "800.0" not in shown
    output = html.unescape(part(page, "output-json"))
    assert '"attempt": 29,' in output and "29.0" not in output
    artifact = re.search(r'<details class="artifact" id="artifact-0">.*?</details>', page, re.S)
    assert artifact is not None
    assert '"n": 7\n' in html.unescape(artifact.group(0)) and "7.0" not in artifact.group(0)
    label = part(page, "output-hash-label")
    assert re.fullmatch(r"jcs:sha256:[0-9a-f]{12}…", text(label))
    assert text(part(page, "cost")) == "$0"
    assert "after running" in text(part(page, "finished"))
    assert [r[5] for r in timeline(page) if r[2] == "running"] == ["worker-olga"]


async def test_a_retrying_job_labels_its_error_with_the_attempt_and_says_when_it_runs_again(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    client = shared_stack.client
    job = (await client.create(user_id="pavel", fail="retryable", fail_times=1)).job
    lease = await client.lock(job.id, "worker-a")
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id,
            lease_token=lease.job.lease_token,
            error_code="PROVIDER_TIMEOUT",
            retry_after_ms=600_000,
        )
    )

    retrying = (await admin.get(f"/jobs/{job.id}")).text
    assert text(part(retrying, "error-title")).startswith("Error of attempt 1 of ")
    assert "<dt>next attempt</dt>" in retrying
    assert re.fullmatch(r"\(in (9 min \d+ s|10 min 0 s)\)", text(part(retrying, "next-run-in")))

    await execute(
        shared_stack.database_url, "UPDATE jobs SET next_run_at = now() WHERE id = $1", job.id
    )
    await client.lock(job.id, "worker-b")
    running = (await admin.get(f"/jobs/{job.id}")).text

    assert text(part(running, "error-earlier")) == "From an earlier attempt: attempt 2 is running."
    starts = [(r[3], r[4], r[5]) for r in timeline(running) if r[2] == "running"]
    assert [(a, w) for a, _, w in starts] == [("1", "worker-a"), ("2", "worker-b")]
    assert re.fullmatch(r"\d+ ms|[\d.]+ s", starts[0][1])  # attempt 1 ran until it failed
    assert starts[1][1] == "running"
    assert text(part(running, "worker")).startswith("worker-b")
    # a listing leaves error_attempt out (a per-row read): the row still says the error is
    # not the running attempt's
    listing = (await admin.get("/jobs", params={"user_id": "pavel"})).text
    assert "PROVIDER_TIMEOUT of attempt 1" in text(part(listing, f"job-{job.id}"))


async def test_the_live_view_sends_the_timeline_error_and_attempts_of_each_state(
    browser: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    client = shared_stack.client
    job = (await client.create(user_id="quinn", fail="retryable", fail_times=1)).job
    async with browser.stream("GET", f"/jobs/{job.id}/live") as response:
        stream = events(response)
        _, first = await anext(stream)
        assert 'id="job-status" class="status s-queued">queued' in first
        assert [r[2] for r in timeline(first)][-1] == "queued"
        lease = await client.lock(job.id, "worker-live")
        async for _, update in stream:
            if "s-running" in part(update, "job-status"):
                break
        assert 'id="job-attempts">1 of ' in update
        assert [(r[2], r[5]) for r in timeline(update)][-1] == ("running", "worker-live")
        await client.executor.SubmitFailure(
            epb.SubmitFailureRequest(
                job_id=job.id, lease_token=lease.job.lease_token, error_code="PROVIDER_TIMEOUT"
            )
        )
        async for _, update in stream:
            if "s-retrying" in part(update, "job-status"):
                break
        assert text(part(update, "error-title")).startswith("Error of attempt 1 of ")
        assert [r[2] for r in timeline(update)][-1] == "retrying"
        assert "after waiting" in text(part(update, "started"))
        await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="quinn"))
        rest = [item async for item in stream]
    assert rest[-1][0] == "done"


async def test_the_overview_flags_a_paused_queue_and_counts_delayed_jobs(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    delayed = await shared_stack.client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id="rosa",
            job_type="synthetic",
            input=struct_from_dict({}),
            delay=Duration(seconds=3600),
        )
    )
    assert delayed.job.next_run_at.seconds
    await shared_stack.client.admin.PauseQueue(apb.PauseQueueRequest(queue=QUEUE))
    try:
        page = (await admin.get("/")).text
    finally:
        await shared_stack.client.admin.ResumeQueue(apb.ResumeQueueRequest(queue=QUEUE))

    assert QUEUE in text(part(page, "paused-queues"))
    assert 'class="status s-paused"' in part(page, f"unfinished-{QUEUE}")
    db = await asyncpg.connect(shared_stack.database_url)
    try:
        expected = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE status = 'created' AND next_run_at > now()"
        )
    finally:
        await db.close()
    assert expected >= 1
    assert text(part(page, "delayed-total")) == str(expected)
    assert "No worker connected." in page or 'id="worker-' in page
    resumed = (await admin.get("/")).text
    assert 'id="paused-queues"' not in resumed
