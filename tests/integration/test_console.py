"""The web console's handlers over HTTP, against a real job_service (and PostgreSQL and NATS):
sign-in and its refusals, CSRF on every action, what each page shows, and that actions change
the database. No browser here (``make test-browser`` drives Chromium).

The console runs in this test's event loop through httpx's ASGI transport, not Starlette's
``TestClient``: the job service of ``shared_stack`` runs in-process on this loop, and
``TestClient`` would block it while the console waits on that service.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from http.cookies import SimpleCookie

import asyncpg
import httpx
import pytest
import uvicorn
from google.protobuf.duration_pb2 import Duration

from console.app import Console
from console.overview import parse_metrics
from console.sessions import SESSION_COOKIE
from console.settings import ConsoleSettings
from devstack.embedded import free_port
from shared.constants import Queue
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import ADMIN_TOKEN, CLIENT_TOKEN, running_job_service
from tests.support.wait import eventually

__all__ = ["shared_stack"]

SECRET_DETAIL = "Traceback: db password hunter2 at /srv/app.py:42"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')
NONCE = re.compile(r'name="nonce" value="([^"]+)"')


def console_for(stack: SharedStack, **overrides: object) -> Console:
    return Console(ConsoleSettings(job_service_target=stack.target, **overrides))  # type: ignore[arg-type]


@pytest.fixture
async def console(shared_stack: SharedStack) -> AsyncIterator[Console]:
    console = console_for(shared_stack)
    console.stream_max_s = 1.0
    app = console.app()
    async with console.lifespan(app):
        console.asgi = app  # type: ignore[attr-defined]
        yield console


def http(console: Console, base_url: str = "http://console.test") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=console.asgi),  # type: ignore[attr-defined]
        base_url=base_url,
    )


async def sign_in(client: httpx.AsyncClient, token: str = ADMIN_TOKEN) -> httpx.Response:
    form = await client.get("/signin")
    nonce = NONCE.search(form.text)
    assert nonce is not None
    return await client.post("/signin", data={"token": token, "nonce": nonce.group(1)})


@pytest.fixture
async def admin(console: Console) -> AsyncIterator[httpx.AsyncClient]:
    async with http(console) as client:
        signed = await sign_in(client)
        assert signed.status_code == 303
        yield client


async def csrf_of(client: httpx.AsyncClient, path: str) -> str:
    page = await client.get(path)
    found = CSRF.search(page.text)
    assert found is not None, page.text
    return found.group(1)


async def status_in_db(database_url: str, job_id: str) -> str:
    db = await asyncpg.connect(database_url)
    try:
        return str(await db.fetchval("SELECT status FROM jobs WHERE id = $1", job_id))
    finally:
        await db.close()


async def failed_job(stack: SharedStack, user_id: str = "carol") -> str:
    job = (await stack.client.create(user_id=user_id, fail="fatal")).job
    lease = await stack.client.lock(job.id)
    await stack.client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job.id,
            lease_token=lease.job.lease_token,
            error_code="JOB_REJECTED",
            error_message=SECRET_DETAIL,
        )
    )
    return job.id


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/jobs",
        "/jobs?status=queued",
        "/definitions",
        "/dead-letters",
        "/jobs/x",
        "/queues",
        "/queues/ai-interactive/pause",
    ],
)
async def test_no_session_redirects_every_page_to_sign_in(console: Console, path: str) -> None:
    async with http(console) as client:
        response = await client.get(path)
    assert response.status_code == 303
    assert response.headers["location"].startswith("/signin?next=")
    assert "hunter2" not in response.text


async def test_live_streams_without_a_session_tell_the_browser_to_stop(
    console: Console, shared_stack: SharedStack
) -> None:
    async with http(console) as client:
        for path in ("/overview/live", "/jobs/live", f"/jobs/{shared_stack.queued}/live"):
            response = await client.get(path)
            assert (response.status_code, response.text) == (204, ""), path


@pytest.mark.parametrize(
    ("token", "status", "says"),
    [
        ("not-a-token-at-all-00000", 401, "not valid"),
        (CLIENT_TOKEN, 403, "does not have the admin role"),
    ],
)
async def test_a_wrong_token_is_refused_and_no_cookie_is_set(
    console: Console, token: str, status: int, says: str
) -> None:
    async with http(console) as client:
        response = await sign_in(client, token)
        assert response.status_code == status
        assert says in response.text
        assert "set-cookie" not in response.headers
        assert SESSION_COOKIE not in client.cookies
        assert (await client.get("/jobs")).status_code == 303


async def test_sign_in_without_the_form_nonce_is_refused(console: Console) -> None:
    async with http(console) as client:
        response = await client.post("/signin", data={"token": ADMIN_TOKEN})
    assert response.status_code == 403
    assert "set-cookie" not in response.headers


async def test_the_session_cookie_is_httponly_strict_and_secure_over_tls(
    console: Console,
) -> None:
    for base, secure in (("http://console.test", False), ("https://console.test", True)):
        async with http(console, base) as client:
            response = await sign_in(client)
        assert response.status_code == 303
        [set_cookie] = [
            h for h in response.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE)
        ]
        cookie = SimpleCookie(set_cookie)[SESSION_COOKIE]
        assert cookie["httponly"] is True
        assert cookie["samesite"] == "strict"
        assert bool(cookie["secure"]) is secure
        # the token itself never reaches the browser: the cookie is encrypted
        assert ADMIN_TOKEN not in set_cookie
        assert ADMIN_TOKEN not in response.headers["location"]


async def test_a_forged_cookie_is_no_session(console: Console) -> None:
    async with http(console) as client:
        client.cookies.set(SESSION_COOKIE, "gAAAAABforged", domain="console.test")
        assert (await client.get("/")).status_code == 303


async def test_jobs_page_lists_and_filters_every_users_jobs(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    listing = await admin.get("/jobs")
    assert listing.status_code == 200
    for job_id in (shared_stack.queued, shared_stack.running, shared_stack.succeeded):
        assert f'id="job-{job_id}"' in listing.text
    queued = await admin.get("/jobs", params={"status": "queued", "user_id": "alice"})
    rows = re.findall(r'id="job-([0-9a-f-]+)"', queued.text)
    assert shared_stack.queued in rows
    assert shared_stack.succeeded not in rows
    assert all("queued" in admin_row for admin_row in re.findall(r"<tr id=.*?</tr>", queued.text))
    nobody = await admin.get("/jobs", params={"user_id": "nobody-at-all"})
    assert "No jobs match." in nobody.text
    future = await admin.get("/jobs", params={"created_after": "2999-01-01T00:00"})
    assert "No jobs match." in future.text
    bad = await admin.get("/jobs", params={"created_after": "yesterday"})
    assert bad.status_code == 400


async def test_jobs_are_paged_with_the_filters_kept(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    for _ in range(3):
        await shared_stack.client.create(user_id="pager")
    seen: list[str] = []
    path, pages = "/jobs?user_id=pager&page_size=2", 0
    while path:
        page = await admin.get(path)
        pages += 1
        seen += re.findall(r'id="job-([0-9a-f-]+)"', page.text)
        found = re.search(r'href="([^"]+)" id="next-page"', page.text)
        path = found.group(1).replace("&amp;", "&") if found else ""
    assert len(seen) == len(set(seen)) == 3
    assert pages == 2


async def test_job_page_shows_the_internal_error_timeline_and_output_to_admins(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    failed = await failed_job(shared_stack)
    page = await admin.get(f"/jobs/{failed}")
    assert page.status_code == 200
    assert 'id="error-code">JOB_REJECTED' in page.text
    assert "hunter2" in page.text  # admins only: every page needs an admin session
    assert 'id="retry"' in page.text and 'id="cancel"' not in page.text
    timeline = re.search(r'<table id="timeline">.*?</table>', page.text, re.S)
    assert timeline is not None and "failed" in timeline.group(0)
    done = await admin.get(f"/jobs/{shared_stack.succeeded}")
    assert "synthetic_result" in done.text and "<details" in done.text
    assert 'data-live="' not in done.text  # a finished job has nothing to follow
    running = await admin.get(f"/jobs/{shared_stack.running}")
    assert f'data-live="/jobs/{shared_stack.running}/live"' in running.text
    missing = await admin.get("/jobs/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404


async def test_an_action_without_the_csrf_token_is_forbidden_and_changes_nothing(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    job = (await shared_stack.client.create(user_id="dave")).job
    for data in ({}, {"csrf": "not-the-token"}):
        refused = await admin.post(f"/jobs/{job.id}/cancel", data=data)
        assert refused.status_code == 403
        assert "Nothing was changed" in refused.text
    assert await status_in_db(shared_stack.database_url, job.id) == "queued"
    retried = await admin.post(f"/jobs/{shared_stack.cancelled}/retry", data={})
    assert retried.status_code == 403
    signout = await admin.post("/signout", data={})
    assert signout.status_code == 403
    assert (await admin.get("/jobs")).status_code == 200  # still signed in


async def test_cancel_after_confirmation_cancels_the_job(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    job = (await shared_stack.client.create(user_id="erin")).job
    confirm = await admin.get(f"/jobs/{job.id}/cancel")
    assert "Cancel job" in confirm.text
    assert await status_in_db(shared_stack.database_url, job.id) == "queued"  # not yet
    csrf = CSRF.search(confirm.text)
    assert csrf is not None
    done = await admin.post(f"/jobs/{job.id}/cancel", data={"csrf": csrf.group(1)})
    assert (done.status_code, done.headers["location"]) == (303, f"/jobs/{job.id}")
    assert await status_in_db(shared_stack.database_url, job.id) == "cancelled"
    page = await admin.get(f"/jobs/{job.id}")
    assert 'id="job-status" class="status s-cancelled">cancelled' in page.text
    again = await admin.post(f"/jobs/{job.id}/cancel", data={"csrf": csrf.group(1)})
    assert again.status_code == 409
    assert "Not cancelled: the job is cancelled." in again.text
    db = await asyncpg.connect(shared_stack.database_url)
    try:  # the timeline names who cancelled it
        reason = await db.fetchval(
            "SELECT reason FROM job_events WHERE job_id = $1 AND to_status = 'cancelled'", job.id
        )
    finally:
        await db.close()
    assert reason == "admin test-admin: console"


async def test_retry_creates_a_new_job_from_the_failed_one(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    failed = await failed_job(shared_stack, "frank")
    csrf = await csrf_of(admin, f"/jobs/{failed}/retry")
    response = await admin.post(f"/jobs/{failed}/retry", data={"csrf": csrf})
    assert response.status_code == 303
    new_id = response.headers["location"].removeprefix("/jobs/")
    assert new_id != failed
    page = await admin.get(f"/jobs/{new_id}")
    assert f'<a href="/jobs/{failed}" title="{failed}" id="retried-from"><code>{failed[-8:]}' in (
        page.text
    )
    # the original links its retry, and offers no second one
    original = await admin.get(f"/jobs/{failed}")
    assert 'id="retry"' not in original.text
    assert '<h2 id="error-title">Error of attempt 1 of ' in original.text
    note = re.search(r'<span class="notice" id="retried-note">.*?</span>', original.text, re.S)
    assert note is not None and f'<a href="/jobs/{new_id}" title="{new_id}"' in note.group(0)
    assert await status_in_db(shared_stack.database_url, new_id) == "queued"
    refused = await admin.post(f"/jobs/{shared_stack.queued}/retry", data={"csrf": csrf})
    assert refused.status_code == 409


async def test_redrive_makes_a_dead_outbox_event_pending_again(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    job = (await shared_stack.client.create(user_id="grace")).job
    db = await asyncpg.connect(shared_stack.database_url)
    try:
        [event_id] = [
            r["id"]
            for r in await db.fetch(
                "UPDATE outbox_events SET status = 'dead', attempt_count = 10,"
                " last_error = 'nats down' WHERE aggregate_id = $1"
                " AND event_type = 'job.dispatch' RETURNING id",
                job.id,
            )
        ]
        listing = await admin.get("/dead-letters")
        assert f'id="event-{event_id}"' in listing.text and "nats down" in listing.text
        confirm = await admin.get("/dead-letters/redrive", params={"event_id": str(event_id)})
        assert f"Redrive dead outbox event {event_id}?" in confirm.text
        csrf = CSRF.search(confirm.text)
        assert csrf is not None
        assert await db.fetchval("SELECT status FROM outbox_events WHERE id=$1", event_id) == "dead"
        no_token = await admin.post("/dead-letters/redrive", data={"event_id": str(event_id)})
        assert no_token.status_code == 403
        assert await db.fetchval("SELECT status FROM outbox_events WHERE id=$1", event_id) == "dead"
        done = await admin.post(
            "/dead-letters/redrive", data={"csrf": csrf.group(1), "event_id": str(event_id)}
        )
        assert done.headers["location"] == "/dead-letters?redriven=1"
        status = await db.fetchval("SELECT status FROM outbox_events WHERE id=$1", event_id)
        assert status in {"pending", "processing", "published"}
    finally:
        await db.close()
    after = await admin.get("/dead-letters?redriven=1")
    assert "1 event(s) redriven" in after.text and f'id="event-{event_id}"' not in after.text


async def test_definitions_show_types_limits_and_schemas(admin: httpx.AsyncClient) -> None:
    page = await admin.get("/definitions")
    assert 'id="def-synthetic"' in page.text
    assert "sleep_ms" in page.text  # from the input schema
    # where the spec came from: the stack's types are declared as "test-declarer"
    synthetic = re.search(r'<tr id="def-synthetic@1\.0\.0" class="current">(.*?)</tr>', page.text)
    assert synthetic is not None, "synthetic 1.0.0 is not shown as the current version"
    assert synthetic.group(1).count("by <code>test-declarer</code>") == 2


async def test_overview_counts_match_sql_over_the_window_it_shows(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    await failed_job(shared_stack, "olivia")  # a failure in the window
    page = await admin.get("/")
    assert page.status_code == 200
    window = re.search(
        r'<time id="window-since" datetime="([^"]+)">.*?<time id="window-until" datetime="([^"]+)"',
        page.text,
    )
    assert window is not None
    since, until = (datetime.fromisoformat(t) for t in window.groups())
    assert timedelta(minutes=59) < until - since <= timedelta(hours=1, seconds=1)
    db = await asyncpg.connect(shared_stack.database_url)
    try:
        created = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE created_at >= $1 AND created_at < $2", since, until
        )
        finished = dict(
            await db.fetch(
                "SELECT status, count(*) FROM jobs WHERE finished_at >= $1 AND finished_at < $2"
                " GROUP BY status",
                since,
                until,
            )
        )
        unfinished = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE status NOT IN ('succeeded', 'failed', 'cancelled')"
        )
        # dead letters: the failed jobs no retry was made from
        failed = await db.fetchval(
            "SELECT count(*) FROM jobs j WHERE status = 'failed' AND NOT EXISTS"
            " (SELECT 1 FROM jobs r WHERE r.retried_from_job_id = j.id)"
        )
    finally:
        await db.close()

    def shown(element_id: str) -> str:
        found = re.search(rf'id="{element_id}">([^<]*)<', page.text)
        assert found is not None, element_id
        return found.group(1)

    assert int(shown("recent-created")) == created > 0
    assert int(shown("recent-finished")) == sum(finished.values())
    assert int(shown("recent-failed")) == finished.get("failed", 0) >= 1
    rate = 100 * finished.get("failed", 0) / sum(finished.values())
    assert shown("failure-rate") == f"{rate:.1f} %"
    assert int(shown("unfinished-total")) == unfinished
    assert f">{failed} failed jobs," in page.text
    assert "JOBS_CONSOLE_METRICS_URL" in page.text  # no metrics endpoint configured here
    assert page.headers["server-timing"].startswith("app;dur=")
    assert "default-src 'self'" in page.headers["content-security-policy"]


QUEUE = Queue.INTERACTIVE.value  # synthetic's queue


async def queue_control(database_url: str, queue: str) -> asyncpg.Record | None:
    db = await asyncpg.connect(database_url)
    try:
        return await db.fetchrow("SELECT * FROM queue_controls WHERE queue = $1", queue)
    finally:
        await db.close()


def row_of(page: str, row_id: str) -> str:
    found = re.search(rf'<tr id="{row_id}">.*?</tr>', page, re.S)
    assert found is not None, f"no row {row_id}"
    return found.group(0)


async def test_queues_page_lists_every_queue_with_its_counts(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    page = await admin.get("/queues")
    assert page.status_code == 200
    assert '<a href="/queues" class="here">Queues</a>' in page.text
    interactive = row_of(page.text, f"queue-{QUEUE}")
    # alice's queued job waits; her running job runs
    waiting, eligible, running = re.findall(r'<td class="num">(\d+)</td>', interactive)[:3]
    assert int(waiting) >= 1 and int(running) >= 1 and int(eligible) <= int(waiting)
    assert f'id="pause-{QUEUE}" href="/queues/{QUEUE}/pause"' in interactive
    assert 'id="no-rate-limits"' in page.text  # this stack configures none


async def test_pausing_a_queue_without_the_csrf_token_is_forbidden_and_changes_nothing(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    for data in ({}, {"csrf": "not-the-token"}):
        refused = await admin.post(f"/queues/{QUEUE}/pause", data=data)
        assert refused.status_code == 403
        assert "Nothing was changed" in refused.text
    assert await queue_control(shared_stack.database_url, QUEUE) is None
    # nor through a GET: that only asks
    confirm = await admin.get(f"/queues/{QUEUE}/pause")
    assert f"Pause queue {QUEUE}?" in confirm.text
    assert await queue_control(shared_stack.database_url, QUEUE) is None
    missing = await admin.get("/queues/no-such-queue/pause")
    assert missing.status_code == 404


async def test_pause_and_resume_after_confirmation(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    job = (await shared_stack.client.create(user_id="judy")).job
    csrf = await csrf_of(admin, f"/queues/{QUEUE}/pause")
    try:
        paused = await admin.post(f"/queues/{QUEUE}/pause", data={"csrf": csrf})
        assert (paused.status_code, paused.headers["location"]) == (303, f"/queues?paused={QUEUE}")
        control = await queue_control(shared_stack.database_url, QUEUE)
        assert control is not None
        assert (control["paused"], control["paused_by"]) == (True, "test-admin")
        listing = await admin.get(paused.headers["location"])
        assert f"Queue {QUEUE} paused" in listing.text
        interactive = row_of(listing.text, f"queue-{QUEUE}")
        assert "paused</span> since" in interactive and "<code>test-admin</code>" in interactive
        assert f'id="resume-{QUEUE}"' in interactive
        held = await admin.get(f"/jobs/{job.id}")
        assert 'id="hold-reason">queue paused<' in held.text
        assert QUEUE in re.search(r'id="hold-detail">([^<]*)<', held.text).group(1)  # type: ignore[union-attr]
        refused = await admin.post("/queues/no-such-queue/pause", data={"csrf": csrf})
        assert refused.status_code == 400
        assert await queue_control(shared_stack.database_url, "no-such-queue") is None

        resume_csrf = await csrf_of(admin, f"/queues/{QUEUE}/resume")
        resumed = await admin.post(f"/queues/{QUEUE}/resume", data={"csrf": resume_csrf})
        assert resumed.headers["location"] == f"/queues?resumed={QUEUE}"
    finally:
        await shared_stack.client.admin.ResumeQueue(apb.ResumeQueueRequest(queue=QUEUE))
    control = await queue_control(shared_stack.database_url, QUEUE)
    assert control is not None and control["paused"] is False
    after = await admin.get(f"/jobs/{job.id}")
    assert 'id="hold-reason">queue paused<' not in after.text


async def test_a_delayed_job_shows_when_it_runs_and_why_it_waits(
    admin: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    created = await shared_stack.client.jobs.CreateJob(
        jpb.CreateJobRequest(
            user_id="kim",
            job_type="synthetic",
            input=struct_from_dict({}),
            delay=Duration(seconds=3600),
        )
    )
    job = created.job
    page = await admin.get(f"/jobs/{job.id}")
    assert page.status_code == 200
    assert 'class="status s-created">created' in page.text
    run_at = re.search(r'<dt>runs at</dt><dd><span id="next-run">([^<]+)</span>', page.text)
    assert run_at is not None
    assert run_at.group(1).startswith(job.next_run_at.ToDatetime().strftime("%Y-%m-%d %H:%M:%S"))
    assert 'id="hold-reason">not due<' in page.text
    assert re.search(r'id="hold-until">([^<]+)<', page.text).group(1) == run_at.group(1)  # type: ignore[union-attr]
    assert f'data-live="/jobs/{job.id}/live"' in page.text  # it can still change
    assert 'id="cancel"' in page.text  # cancellable while it waits


RATE_LIMITS = {"primary": {"requests_per_minute": 600, "tokens_per_minute": 200000}}


@pytest.fixture
async def limited(database_url: str, nats_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A signed-in console of a job service with a rate limit on the primary tier."""
    async with running_job_service(
        database_url, nats_url, rate_limits=json.dumps(RATE_LIMITS)
    ) as app:
        console = Console(ConsoleSettings(job_service_target=f"127.0.0.1:{app.port}"))  # type: ignore[call-arg]
        asgi = console.app()
        async with (
            console.lifespan(asgi),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=asgi), base_url="http://console.test"
            ) as client,
        ):
            assert (await sign_in(client)).status_code == 303
            yield client


async def test_the_queues_page_shows_each_rate_limit(limited: httpx.AsyncClient) -> None:
    page = await limited.get("/queues")
    assert page.status_code == 200
    primary = row_of(page.text, "limit-primary")
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", primary)
    assert cells[:4] == ["primary", "600", "200000", "100%"]
    assert cells[6:] == ["\u2013", "0", "0"]  # not blocked, nothing waiting, no 429 yet


@pytest.fixture
async def served(console: Console) -> AsyncIterator[str]:
    """The console behind a real HTTP server (uvicorn) on this loop: live streams arrive
    event by event, as a browser reads them."""
    console.stream_max_s = 60.0
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            console.asgi,  # type: ignore[attr-defined]
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
    )
    serving = asyncio.ensure_future(server.serve())
    await eventually(lambda: server.started, message="the console did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 10)


async def events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) per Server-Sent Event."""
    name, data = "", []
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: ") or line == "data:":
            data.append(line.removeprefix("data:").removeprefix(" "))
        elif not line:
            if name or data:
                yield name, "\n".join(data)
            name, data = "", []


@pytest.fixture
async def browser(served: str) -> AsyncIterator[httpx.AsyncClient]:
    """A signed-in HTTP client of the served console."""
    async with httpx.AsyncClient(base_url=served, timeout=30) as client:
        assert (await sign_in(client)).status_code == 303
        yield client


async def test_the_job_live_view_follows_watchjob_until_the_job_ends(
    browser: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    job = (await shared_stack.client.create(user_id="heidi")).job
    async with browser.stream("GET", f"/jobs/{job.id}/live") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = events(response)
        name, first = await anext(stream)
        assert name == ""
        assert 'id="job-status" class="status s-queued">queued' in first
        await shared_stack.client.jobs.CancelJob(
            jpb.CancelJobRequest(job_id=job.id, user_id="heidi")
        )
        seen = [item async for item in stream]
    assert any('id="job-status" class="status s-cancelled">cancelled' in d for _, d in seen)
    assert seen[-1][0] == "done"


async def test_a_job_that_ended_before_its_live_view_connected_reloads_the_page(
    browser: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    # The job page was rendered while the job ran; it was cancelled before the page's live
    # view connected. The view must say "done" (the page reloads and shows the end), not
    # close without a word and leave the page on the state it was rendered with.
    job = (await shared_stack.client.create(user_id="heidi")).job
    await shared_stack.client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="heidi"))
    async with browser.stream("GET", f"/jobs/{job.id}/live") as response:
        assert response.status_code == 200
        seen = [item async for item in events(response)]
    assert seen == [("done", "")]


async def test_a_new_job_appears_in_the_live_jobs_table(
    browser: httpx.AsyncClient, shared_stack: SharedStack
) -> None:
    async with browser.stream("GET", "/jobs/live", params={"user_id": "ivan"}) as response:
        stream = events(response)
        _, first = await anext(stream)
        assert "No jobs match." in first
        job = (await shared_stack.client.create(user_id="ivan")).job
        async for _, table in stream:
            if f'<tr id="job-{job.id}">' in table:
                break
        else:
            pytest.fail("the stream ended without the new job")


async def test_signing_out_ends_the_session(admin: httpx.AsyncClient) -> None:
    csrf = await csrf_of(admin, "/")
    response = await admin.post("/signout", data={"csrf": csrf})
    assert response.status_code == 303
    assert SESSION_COOKIE not in admin.cookies
    assert (await admin.get("/")).status_code == 303


def test_metrics_are_parsed_by_name_and_labels() -> None:
    text = (
        "# TYPE jobs_queue_depth gauge\n"
        'jobs_queue_depth{queue="ai-interactive",status="queued"} 3.0\n'
        "# TYPE jobs_outbox_rows gauge\n"
        'jobs_outbox_rows{status="pending"} 7.0\n'
    )
    samples = parse_metrics(text)
    assert samples["jobs_queue_depth"] == [({"queue": "ai-interactive", "status": "queued"}, 3.0)]
    assert samples["jobs_outbox_rows"] == [({"status": "pending"}, 7.0)]
    assert job_pb2.JOB_STATUS_QUEUED  # the status enum the pages label
