"""How the console names jobs (``console.ids``): the short form is the id's random tail, so
jobs created together (version-7 ids sharing their time prefix) stay distinguishable in the
jobs list, the dead letters and the job page, each short form with the whole id at hand; the
"go to job" box opens a whole id, finds a job by the end of its id (one: opened; none: a 404
that says so; two: both to choose from), and answers anything else with a 400 page that says
why, escaped. The pages run over HTTP (httpx's ASGI transport, no socket) against the fake
AdminService of ``durable_jobs_client.testing``. (Against a real job_service:
tests/integration/test_console_ids.py.)"""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from durable_jobs_client.protos import admin_service_pb2, job_pb2
from durable_jobs_client.testing import FakeJobService

from console.app import Console
from console.ids import SHORT_ID, parse_job_id, short_id
from console.sessions import SESSION_COOKIE
from console.settings import ConsoleSettings

HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>&amp;'
MS = 0x01A2_3460_5B7C  # one millisecond: every id below shares its time prefix
ROW = re.compile(
    r'<tr id="job-([0-9a-f-]{36})"><td><a href="/jobs/\1" title="\1"><code>([0-9a-f]+)</code>'
)

# The console session every test browser signs in with.
SESSION_ID = "console-session-1"


def v7_id(ms: int = MS) -> str:
    """A version-7 UUID made at ``ms``, as job_service makes them."""
    value = ms << 80 | 0x7 << 76 | secrets.randbits(12) << 64 | 0b10 << 62 | secrets.randbits(62)
    return str(uuid.UUID(int=value))


@pytest.fixture
def fake() -> FakeJobService:
    """The console's job service, where the tests' session is open (the real check:
    tests/integration/test_console_sessions.py)."""
    return FakeJobService(console_sessions={SESSION_ID: "test-admin"})


@pytest.fixture
async def admin(fake: FakeJobService) -> AsyncIterator[httpx.AsyncClient]:
    """A signed-in browser of a console whose job_service is ``fake``."""
    console = Console(ConsoleSettings())
    console.jobs = lambda token: fake.client()  # type: ignore[method-assign]
    _, cookie = console.sessions.new("admin-token", SESSION_ID)
    transport = httpx.ASGITransport(app=console.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
        client.cookies.set(SESSION_COOKIE, cookie, domain="console.test")
        yield client


def reads(fake: FakeJobService) -> list[str]:
    """The jobs the console read one by one (AdminService.GetJob)."""
    return [c["job_id"] for c in fake.asked("admin.get_job")]


def suffixes(fake: FakeJobService) -> list[str]:
    """The ends of ids the console looked jobs up by (AdminService.ListJobs)."""
    return [c["id_suffix"] for c in fake.asked("admin.list_jobs") if c["id_suffix"]]


def job(job_id: str, **fields: Any) -> job_pb2.Job:
    return job_pb2.Job(id=job_id, job_type="synthetic", user_id="alice", **fields)


def test_the_short_form_is_the_random_tail() -> None:
    ids = [v7_id() for _ in range(40)]
    assert len({i[:8] for i in ids}) == 1  # the time prefix: what the console used to show
    assert len({short_id(i) for i in ids}) == 40
    assert short_id("0190f3c2-7a1b-7000-8000-00005e1a9c3f") == "5e1a9c3f"
    assert SHORT_ID == 8  # jobctl's tree shows the same 8 (jobctl/render/tree.py)


@pytest.mark.parametrize(
    "given",
    [
        "0190F3C2-7A1B-7000-8000-00005E1A9C3F",
        "  0190f3c2-7a1b-7000-8000-00005e1a9c3f\n",
        "0190f3c27a1b7000800000005e1a9c3f",
        "{0190f3c2-7a1b-7000-8000-00005e1a9c3f}",
    ],
)
def test_a_whole_id_is_read_in_any_usual_spelling(given: str) -> None:
    assert parse_job_id(given) == "0190f3c2-7a1b-7000-8000-00005e1a9c3f"


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("", "Enter a job id."),
        ("5e1a9c3f", "looks like a short id"),
        ("01a23460", "looks like a short id"),
        ("not a job", "is not a job id"),
        ("0190f3c2-7a1b-7000-8000-00005e1a9c3", "is not a job id"),
        ("x" * 5000, "x" * 60 + "…"),
    ],
)
def test_anything_else_is_refused_with_a_message(given: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)) as refused:
        parse_job_id(given)
    assert len(str(refused.value)) < 400


async def test_forty_jobs_created_in_the_same_millisecond_read_as_forty_ids(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    fake.jobs = {i: job(i) for i in (v7_id() for _ in range(40))}

    page = await admin.get("/jobs")

    assert page.status_code == 200
    rows = ROW.findall(page.text)
    assert [full for full, _ in rows] == sorted(fake.jobs, reverse=True)  # newest first
    assert all(shown == full[-8:] for full, shown in rows)
    assert len({shown for _, shown in rows}) == 40
    assert f"<code>{MS:012x}"[:14] not in page.text  # no row shows the shared prefix


async def test_dead_letters_name_jobs_by_their_tail_with_the_whole_id_as_title(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    failed, dead = v7_id(), v7_id()
    fake.put(job(failed, status=job_pb2.JOB_STATUS_FAILED))
    fake.dead_events = [
        admin_service_pb2.DeadOutboxEvent(id=7, job_id=dead, subject="jobs.dispatch")
    ]

    page = await admin.get("/dead-letters")

    assert page.status_code == 200
    for full in (failed, dead):
        assert f'href="/jobs/{full}" title="{full}"><code>{full[-8:]}</code>' in page.text


async def test_the_job_page_shows_the_tail_in_its_title_and_the_whole_id_to_copy(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    job_id = v7_id()
    fake.jobs[job_id] = job(job_id, status=job_pb2.JOB_STATUS_SUCCEEDED)

    page = await admin.get(f"/jobs/{job_id}")

    assert page.status_code == 200
    assert f"<title>Job {job_id[-8:]} · synthetic · Jobs console</title>" in page.text
    assert f'<code id="job-short-id" title="{job_id}">{job_id[-8:]}</code>' in page.text
    assert re.search(rf'<input id="job-id"[^>]* value="{job_id}" readonly', page.text)
    # The copy button is script from /static (the CSP forbids inline script), hidden until
    # that script shows it.
    assert '<button type="button" id="copy-job-id" data-copy="job-id" hidden>' in page.text
    assert "<script>" not in page.text and " onclick=" not in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    script = await admin.get("/static/console.js")
    assert script.status_code == 200 and "data-copy" in script.text


async def test_the_go_to_box_opens_a_whole_id(admin: httpx.AsyncClient) -> None:
    job_id = v7_id()

    went = await admin.get("/jobs/go", params={"id": f" {job_id.upper()} "})

    assert went.status_code == 303
    assert went.headers["location"] == f"/jobs/{job_id}"


@pytest.mark.parametrize("given", ["", "01a2e", "not-a-job", "01a23460x", HOSTILE])
async def test_the_go_to_box_answers_a_malformed_id_with_a_400_page_that_says_why(
    admin: httpx.AsyncClient, fake: FakeJobService, given: str
) -> None:
    page = await admin.get("/jobs/go", params={"id": given})

    assert page.status_code == 400
    assert "<h1>Not a job id</h1>" in page.text
    message = re.search(r'<p class="error" id="error-message">(.*?)</p>', page.text)
    assert message is not None and ("job id" in message.group(1))
    assert "<script>" not in page.text and "<img" not in page.text
    if given == HOSTILE:
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in message.group(1)
        # what was typed stays in the box, escaped as an attribute value
        assert 'value="&#34;&gt;&lt;script&gt;' in page.text
    assert reads(fake) == [] and suffixes(fake) == []  # nothing was asked of job_service


async def test_the_go_to_box_opens_the_one_job_a_short_id_ends(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    wanted, other = v7_id(), v7_id()
    fake.jobs = {i: job(i) for i in (wanted, other)}

    for typed in (wanted[-8:], f" {wanted[-8:].upper()} ", wanted[-17:], wanted[-6:]):
        went = await admin.get("/jobs/go", params={"id": typed})
        assert went.status_code == 303, typed
        assert went.headers["location"] == f"/jobs/{wanted}"
    # dashes ignored: the last 17 characters hold one
    assert suffixes(fake)[2] == wanted[-17:].replace("-", "")


async def test_a_short_id_no_job_ends_with_is_a_404_that_says_so(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    fake.jobs = {i: job(i) for i in (v7_id(), v7_id())}

    page = await admin.get("/jobs/go", params={"id": "00c0ffee"})

    assert page.status_code == 404
    message = re.search(r'<p class="error" id="error-message">(.*?)</p>', page.text)
    assert message is not None and message.group(1) == "No job ends with “00c0ffee”."
    assert 'id="goto-id" value="00c0ffee"' in page.text  # the box keeps what was typed


async def test_a_short_id_two_jobs_end_with_lists_both_by_their_whole_ids(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    tail = "00005e1a9c3f"
    twins = [v7_id()[:-12] + tail for _ in range(3)]
    fake.jobs = {i: job(i) for i in [*twins, v7_id()]}

    page = await admin.get("/jobs/go", params={"id": tail[-8:]})

    assert page.status_code == 200
    chosen = re.findall(
        r'<tr id="choice-([0-9a-f-]{36})"><td><a href="/jobs/\1"><code>\1</code>', page.text
    )
    assert chosen == sorted(twins, reverse=True)[:2]  # what the one call of two answered
    assert "more end with it: type more of the id" in page.text  # a third exists


async def test_a_malformed_job_address_is_the_same_400_page(
    admin: httpx.AsyncClient, fake: FakeJobService
) -> None:
    page = await admin.get("/jobs/01a23460")

    assert page.status_code == 400
    assert "looks like a short id" in page.text
    assert reads(fake) == []
    missing = await admin.get(f"/jobs/{v7_id()}")
    assert missing.status_code == 404


async def test_the_go_to_box_is_in_every_signed_in_pages_header(admin: httpx.AsyncClient) -> None:
    for path in ("/jobs", "/dead-letters"):
        page = await admin.get(path)
        assert '<form method="get" action="/jobs/go"' in page.text
        assert 'id="goto-id"' in page.text


async def test_the_go_to_box_needs_a_session() -> None:
    console = Console(ConsoleSettings())
    transport = httpx.ASGITransport(app=console.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
        went = await client.get("/jobs/go", params={"id": v7_id()})
    assert went.status_code == 303
    assert went.headers["location"].startswith("/signin?next=")
