"""The console's session guard against a fake AdminService: every page checks the session
with job_service first; an ended one (UNAUTHENTICATED) signs the browser out and clears the
cookie; a job_service that does not answer is "unavailable" and nothing else, the page
never running; a cookie that names no job_service session (one made before sessions lived
there) is no session. The real check, over two replicas: tests/integration/
test_console_sessions.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
from durable_jobs_client import JobsError, Unauthenticated
from durable_jobs_client.testing import FakeJobService

from console.app import Console
from console.sessions import SESSION_COOKIE, SessionCodec
from console.settings import ConsoleSettings


@pytest.fixture
def fake() -> FakeJobService:
    """A job service where the tests' session "session-7" is open, for "ops-ada"."""
    return FakeJobService(console_sessions={"session-7": "ops-ada"})


def checked(fake: FakeJobService) -> list[str]:
    return [c["session_id"] for c in fake.asked("admin.check_console_session")]


def listed(fake: FakeJobService) -> int:
    return len(fake.asked("admin.list_job_definitions"))


@pytest.fixture
async def console(fake: FakeJobService) -> AsyncIterator[tuple[Console, httpx.AsyncClient]]:
    console = Console(ConsoleSettings())
    console.jobs = lambda token: fake.client()  # type: ignore[method-assign]
    transport = httpx.ASGITransport(app=console.app())
    async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
        yield console, client


def test_the_cookie_carries_the_session_id_and_principal_encrypted() -> None:
    codec = SessionCodec("key", 3600)
    session, cookie = codec.new("admin-token", "secret-session-id", "ops-ada")
    assert "secret-session-id" not in cookie and "admin-token" not in cookie
    assert codec.read(cookie) == session
    assert session.session_id == "secret-session-id" and session.principal == "ops-ada"
    assert SessionCodec("another key", 3600).read(cookie) is None


async def test_every_page_checks_the_session_and_learns_the_principal(
    console: tuple[Console, httpx.AsyncClient], fake: FakeJobService
) -> None:
    app, client = console
    _, cookie = app.sessions.new("admin-token", "session-7")
    client.cookies.set(SESSION_COOKIE, cookie, domain="console.test")

    page = await client.get("/sessions")

    assert page.status_code == 200
    assert checked(fake) == ["session-7"]
    assert 'id="principal">ops-ada<' in page.text


async def test_an_ended_session_signs_out_and_clears_the_cookie(
    console: tuple[Console, httpx.AsyncClient], fake: FakeJobService
) -> None:
    app, client = console
    _, cookie = app.sessions.new("admin-token", "session-7")
    client.cookies.set(SESSION_COOKIE, cookie, domain="console.test")
    fake.refuse(
        "admin.check_console_session",
        Unauthenticated("console session ended", code=grpc.StatusCode.UNAUTHENTICATED),
    )

    page = await client.get("/definitions")

    assert page.status_code == 303
    assert page.headers["location"] == "/signin?next=%2Fdefinitions"
    assert SESSION_COOKIE not in client.cookies
    assert listed(fake) == 0


async def test_an_unreachable_service_says_only_unavailable(
    console: tuple[Console, httpx.AsyncClient], fake: FakeJobService
) -> None:
    app, client = console
    _, cookie = app.sessions.new("admin-token", "session-7")
    client.cookies.set(SESSION_COOKIE, cookie, domain="console.test")
    fake.refuse(
        "admin.check_console_session",
        JobsError(
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.7:50051",
            code=grpc.StatusCode.UNAVAILABLE,
        ),
    )

    page = await client.get("/definitions")

    assert page.status_code == 503
    assert "The job service is unavailable." in page.text
    assert "10.0.0.7" not in page.text and "ipv4" not in page.text
    assert 'id="signout"' not in page.text  # not shown as signed in
    assert listed(fake) == 0


async def test_a_cookie_naming_no_service_session_is_no_session(
    console: tuple[Console, httpx.AsyncClient], fake: FakeJobService
) -> None:
    app, client = console
    # a cookie as the console wrote them before sessions lived in job_service
    old = app.sessions._fernet.encrypt(json.dumps({"t": "admin-token", "c": "x"}).encode())
    client.cookies.set(SESSION_COOKIE, old.decode(), domain="console.test")

    page = await client.get("/definitions")

    assert page.status_code == 303
    assert checked(fake) == [] and listed(fake) == 0
