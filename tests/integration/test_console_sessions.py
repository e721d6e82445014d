"""Console sessions that end (issue 27), against a real job_service: sign-in opens a session
in job_service, every page checks it, sign-out closes it. A cookie copied before sign-out is
refused afterwards by every console replica (two consoles over one job_service here); an
idle session and a revoked principal's sessions end the same way; a job_service that cannot
be reached is "unavailable" to a visitor, with no address or gRPC text.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from console.app import Console
from console.sessions import SESSION_COOKIE
from console.settings import ConsoleSettings
from devstack.embedded import free_port
from tests.integration.test_console import csrf_of, http, sign_in
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import ADMIN_TOKEN

__all__ = ["shared_stack"]

SECRET = "one-key-for-every-replica-of-this-test"


@pytest.fixture
async def replicas(shared_stack: SharedStack) -> AsyncIterator[tuple[Console, Console]]:
    """Two console replicas with the same cookie key over one job_service."""
    made = []
    for _ in range(2):
        console = Console(
            ConsoleSettings(
                job_service_target=shared_stack.target,
                console_secret_key=SECRET,  # type: ignore[arg-type]
            )
        )
        console.asgi = console.app()  # type: ignore[attr-defined]
        made.append(console)
    one, two = made
    async with one.lifespan(one.asgi), two.lifespan(two.asgi):  # type: ignore[attr-defined]
        yield one, two


async def page_with(console: Console, cookie: str, path: str = "/jobs") -> httpx.Response:
    """``path`` requested with a copy of a session cookie, as another browser would."""
    async with http(console) as thief:
        thief.cookies.set(SESSION_COOKIE, cookie, domain="console.test")
        return await thief.get(path)


async def sessions_in_db(database_url: str) -> list[asyncpg.Record]:
    db = await asyncpg.connect(database_url)
    try:
        return await db.fetch("SELECT * FROM console_sessions ORDER BY id")
    finally:
        await db.close()


async def test_a_copied_cookie_is_refused_by_every_replica_after_sign_out(
    replicas: tuple[Console, Console], shared_stack: SharedStack
) -> None:
    one, two = replicas
    async with http(one) as browser:
        assert (await sign_in(browser)).status_code == 303
        cookie = browser.cookies[SESSION_COOKIE]
        # the copy works on either replica while the session lives
        assert (await page_with(one, cookie)).status_code == 200
        assert (await page_with(two, cookie)).status_code == 200

        csrf = await csrf_of(browser, "/")
        assert (await browser.post("/signout", data={"csrf": csrf})).status_code == 303

    for replica in (one, two):
        refused = await page_with(replica, cookie)
        assert refused.status_code == 303
        assert refused.headers["location"].startswith("/signin?next=")
        # and the console tells the browser to forget it
        assert any(
            h.startswith(f'{SESSION_COOKIE}=""') or h.startswith(f"{SESSION_COOKIE}=;")
            for h in refused.headers.get_list("set-cookie")
        ), refused.headers
        # the sign-in form is shown again, not a redirect loop
        assert (await page_with(replica, cookie, "/signin")).status_code == 200
    [row] = [r for r in await sessions_in_db(shared_stack.database_url) if r["closed_at"]]
    assert row["principal"] == "test-admin"
    assert cookie not in str(dict(row)) and ADMIN_TOKEN not in str(dict(row))


async def test_an_idle_session_ends_and_the_idle_timeout_is_the_consoles(
    replicas: tuple[Console, Console], shared_stack: SharedStack
) -> None:
    one, _ = replicas
    before = {r["id"] for r in await sessions_in_db(shared_stack.database_url)}
    async with http(one) as browser:
        assert (await sign_in(browser)).status_code == 303
        [mine] = [
            r for r in await sessions_in_db(shared_stack.database_url) if r["id"] not in before
        ]
        assert mine["idle_timeout_s"] == 30 * 60  # JOBS_CONSOLE_IDLE_TIMEOUT_S' default
        db = await asyncpg.connect(shared_stack.database_url)
        try:  # 31 minutes without a request
            await db.execute(
                "UPDATE console_sessions SET last_seen_at = now() - interval '31 minutes'"
                " WHERE id = $1",
                mine["id"],
            )
        finally:
            await db.close()
        response = await browser.get("/jobs")
        assert response.status_code == 303
        assert response.headers["location"].startswith("/signin")
        assert SESSION_COOKIE not in browser.cookies


async def test_revoking_a_principal_ends_its_sessions_everywhere(
    replicas: tuple[Console, Console],
) -> None:
    one, two = replicas
    async with http(one) as first, http(two) as second:
        assert (await sign_in(first)).status_code == 303
        assert (await sign_in(second)).status_code == 303
        page = await second.get("/sessions")
        assert 'id="principal">test-admin<' in page.text
        confirm = await second.get("/sessions/revoke", params={"principal": "test-admin"})
        assert "Yours included: you will be signed out." in confirm.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', confirm.text)
        assert csrf is not None
        done = await second.post(
            "/sessions/revoke", data={"csrf": csrf.group(1), "principal": "test-admin"}
        )
        assert done.status_code == 303
        assert "count=2" in done.headers["location"]
        for browser in (first, second):
            assert (await browser.get("/")).status_code == 303


async def test_revoking_needs_the_csrf_token(replicas: tuple[Console, Console]) -> None:
    one, _ = replicas
    async with http(one) as browser:
        assert (await sign_in(browser)).status_code == 303
        refused = await browser.post("/sessions/revoke", data={"principal": "test-admin"})
        assert refused.status_code == 403
        assert (await browser.get("/")).status_code == 200


async def test_job_service_unreachable_says_only_that_it_is_unavailable() -> None:
    port = free_port()  # nothing listens there
    console = Console(ConsoleSettings(job_service_target=f"127.0.0.1:{port}"))
    app = console.app()
    async with console.lifespan(app):
        console.asgi = app  # type: ignore[attr-defined]
        async with http(console) as visitor:
            response = await sign_in(visitor)
            assert response.status_code == 503
            said = re.search(r'id="signin-error">([^<]*)<', response.text)
            assert said is not None
            assert said.group(1) == "The job service is unavailable. Try again in a moment."
            # an old cookie of that console (its key outlives the service) gets no more
            _, cookie = console.sessions.new(ADMIN_TOKEN, "some-session")
            visitor.cookies.set(SESSION_COOKIE, cookie, domain="console.test")
            page = await visitor.get("/jobs")
            assert page.status_code == 503
            assert "unavailable" in page.text
    for shown in (response.text, page.text):
        lowered = shown.lower()
        for detail in (str(port), "127.0.0.1", "ipv4", "grpc", "statuscode", "connect", "tcp"):
            assert detail not in lowered, detail
