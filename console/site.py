"""``Site``: what every page of the console shares. Its settings and sessions, the Jinja
environment, the connection to job_service, and the guard in front of every page.

The guard: no session is a redirect to ``/signin``; so is a session job_service no longer
knows (``CheckConsoleSession`` refuses it: signed out on any replica, idle too long,
revoked), and the cookie is cleared; a POST without the session's CSRF token is 403 before
the page runs (nothing is called); a call job_service refuses for the token (revoked, or its
admin role taken away) ends the session; any other refused call is the error page, with the
HTTP status of its gRPC code. While job_service cannot be reached the session cannot be
checked: the page says only that the service is unavailable (the visitor may hold a copied
cookie: no details).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any
from urllib.parse import urlencode

import httpx
from durable_jobs_client import AsyncJobsClient, JobsError, PermissionDenied
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from console.backend import HTTP_STATUS, UNAVAILABLE, Backend, code_of, describe, signed_out
from console.forms import first, read_form
from console.live import STREAM_MAX_S
from console.render import environment
from console.sessions import SESSION_COOKIE, Session, SessionCodec, csrf_ok
from console.settings import ConsoleSettings

# An action refused to a token that may only look (the operator role).
READ_ONLY = "Your token may look but not change anything (the operator role). Nothing was changed."

Handler = Callable[[Request, Session], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]
# A page module's functions: behind the guard (with the session), or open (live streams
# and sign-in, which answer a missing session themselves).
GuardedPage = Callable[["Site", Request, Session], Awaitable[Response]]
OpenPage = Callable[["Site", Request], Awaitable[Response]]


class Site:
    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        secret = settings.console_secret_key
        self.sessions = SessionCodec(
            secret.get_secret_value() if secret else None, settings.console_session_ttl_s
        )
        self.env = environment()
        self.backend: Backend | None = None
        self.http: httpx.AsyncClient | None = None
        self.stream_max_s = STREAM_MAX_S

    @contextlib.asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        self.backend = Backend(self.settings.channel_config())
        self.http = httpx.AsyncClient()
        try:
            yield
        finally:
            await self.http.aclose()
            await self.backend.close()

    def jobs(self, token: str) -> AsyncJobsClient:
        """job_service, called with ``token`` (a session's)."""
        assert self.backend is not None, "used outside the application's lifespan"
        return self.backend.client(token)

    def render(self, name: str, **context: Any) -> str:
        return self.env.get_template(name).render(**context)

    def page(
        self, name: str, session: Session | None, status: int = 200, **context: Any
    ) -> HTMLResponse:
        csrf = session.csrf if session else ""
        return HTMLResponse(
            self.render(
                name,
                csrf=csrf,
                signed_in=session is not None,
                operator=session.principal if session else "",
                **context,
            ),
            status_code=status,
        )

    def error(self, session: Session, status: int, title: str, message: str) -> HTMLResponse:
        return self.page("error.html", session, status, title=title, message=message)

    def secure(self, request: Request) -> bool:
        return self.settings.secure_cookies or request.url.scheme == "https"

    def signed_out(self, request: Request) -> Response:
        wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        response = RedirectResponse(f"/signin?{urlencode({'next': wanted})}", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    def session_of(self, request: Request) -> Session | None:
        return self.sessions.read(request.cookies.get(SESSION_COOKIE))

    async def checked(self, session: Session) -> Session | None:
        """``session`` as job_service knows it now (its principal), or None when it has
        ended. Raises the ``JobsError`` of a call that did not answer."""
        if not session.session_id:
            return None
        try:
            live = await self.jobs(session.token).admin.check_console_session(session.session_id)
        except JobsError as error:
            if signed_out(error):
                return None
            raise
        return dataclasses.replace(session, principal=live.principal)

    async def live_session(self, request: Request) -> Session | None:
        """The session of a live stream's request, checked; None when there is none, it
        ended, or job_service does not answer (the stream then tells the browser to stop or
        try later). Checked when the stream opens, not on each refresh: an open live page
        reconnects every few minutes and so counts as activity, but no more often."""
        session = self.session_of(request)
        if session is None:
            return None
        try:
            return await self.checked(session)
        except JobsError:
            return None

    def signed_in(self, handler: Handler) -> Endpoint:
        """``handler`` behind the guard (the module docstring)."""

        async def endpoint(request: Request) -> Response:
            cookie = self.session_of(request)
            if cookie is None:
                return self.signed_out(request)
            try:
                session = await self.checked(cookie)
            except JobsError:
                return self.page("error.html", None, 503, title="Unavailable", message=UNAVAILABLE)
            if session is None:
                return self.signed_out(request)
            if request.method == "POST":
                form = await read_form(request)
                if not csrf_ok(session.csrf, first(form, "csrf")):
                    return self.error(
                        session,
                        403,
                        "Forbidden",
                        "The form was not sent from this console (missing or wrong "
                        "CSRF token). Nothing was changed.",
                    )
                request.state.form = form
            try:
                return await handler(request, session)
            except JobsError as error:
                if isinstance(error, PermissionDenied):
                    # the session was just checked, so the token is good: a read-only
                    # (operator) one, refused an action or its dry run, stays signed in
                    return self.error(session, 403, "Read-only", READ_ONLY)
                if signed_out(error):
                    return self.signed_out(request)
                code = code_of(error)
                title = code.name.replace("_", " ").capitalize()
                return self.error(session, HTTP_STATUS.get(code, 502), title, describe(error))

        return endpoint

    def guarded(self, page: GuardedPage) -> Endpoint:
        """The endpoint of a page function behind the guard."""
        return self.signed_in(partial(page, self))

    def open(self, page: OpenPage) -> Endpoint:
        """The endpoint of a page function that needs no session."""
        return partial(page, self)
