"""The console's HTTP application: routes, sign-in, CSRF, live updates.

Every page but the sign-in form needs a session (else a redirect to ``/signin``); every POST
needs the session's CSRF token (else 403, and nothing is called). A call job_service refuses
for the token (revoked, or its admin role taken away) ends the session. Live parts are
Server-Sent Events that ``static/console.js`` swaps into the page: the jobs table and the
overview are re-rendered every ``JOBS_CONSOLE_LIVE_INTERVAL_S``, a running job follows its
``WatchJob`` stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlencode

import grpc
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from console import overview
from console.backend import SIGNED_OUT_CODES, Backend, describe
from console.render import RETRYABLE, STATIC, environment, is_terminal, status_value
from console.sessions import SESSION_COOKIE, SIGNIN_COOKIE, Session, SessionCodec, csrf_ok
from console.settings import ConsoleSettings
from shared.pb.jobs.v1 import job_pb2

# A live stream ends after this long; the browser's EventSource reconnects by itself.
STREAM_MAX_S = 300.0
MAX_FORM_BYTES = 64 * 1024
MAX_PAGE_SIZE = 500
Handler = Callable[[Request, Session], Awaitable[Response]]
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


class ServerTiming:
    """Adds ``Server-Timing: app;dur=<ms>`` (request in to response start) and the security
    headers to every response; pages are also marked ``no-store`` (they hold job data)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                ms = (time.perf_counter() - started) * 1000
                headers = list(message.get("headers", []))
                headers.append((b"server-timing", f"app;dur={ms:.1f}".encode()))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                if not scope["path"].startswith("/static/"):
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, timed)


def safe_next(target: str | None) -> str:
    """Only a path on this site (no scheme, no ``//host``): no open redirect."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def sse(data: str, event: str = "") -> str:
    lines = [f"event: {event}"] if event else []
    lines += [f"data: {line}" for line in (data.splitlines() or [""])]
    return "\n".join(lines) + "\n\n"


def parse_time(value: str) -> datetime | None:
    """A ``datetime-local`` field (or ISO 8601), read as UTC when it names no zone."""
    if not value:
        return None
    at = datetime.fromisoformat(value)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


class Console:
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

    # --- plumbing -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        self.backend = Backend(self.settings.channel_config())
        self.http = httpx.AsyncClient()
        try:
            yield
        finally:
            await self.http.aclose()
            await self.backend.close()

    @property
    def api(self) -> Backend:
        assert self.backend is not None, "used outside the application's lifespan"
        return self.backend

    def render(self, name: str, **context: Any) -> str:
        return self.env.get_template(name).render(**context)

    def page(
        self, name: str, session: Session | None, status: int = 200, **context: Any
    ) -> HTMLResponse:
        csrf = session.csrf if session else ""
        return HTMLResponse(
            self.render(name, csrf=csrf, signed_in=session is not None, **context),
            status_code=status,
        )

    def secure(self, request: Request) -> bool:
        return self.settings.secure_cookies or request.url.scheme == "https"

    def signed_out(self, request: Request) -> Response:
        wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        response = RedirectResponse(f"/signin?{urlencode({'next': wanted})}", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    def session_of(self, request: Request) -> Session | None:
        return self.sessions.read(request.cookies.get(SESSION_COOKIE))

    def signed_in(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """No session: to sign-in. A POST without the session's CSRF token: 403 before the
        handler runs. A token job_service refuses: the session ends."""

        async def endpoint(request: Request) -> Response:
            session = self.session_of(request)
            if session is None:
                return self.signed_out(request)
            if request.method == "POST":
                form = await read_form(request)
                if not csrf_ok(session.csrf, first(form, "csrf")):
                    return self.page(
                        "error.html",
                        session,
                        403,
                        title="Forbidden",
                        message="The form was not sent from this console (missing or wrong "
                        "CSRF token). Nothing was changed.",
                    )
                request.state.form = form
            try:
                return await handler(request, session)
            except grpc.aio.AioRpcError as error:
                if error.code() in SIGNED_OUT_CODES:
                    return self.signed_out(request)
                status = {
                    grpc.StatusCode.NOT_FOUND: 404,
                    grpc.StatusCode.INVALID_ARGUMENT: 400,
                    grpc.StatusCode.UNAVAILABLE: 503,
                    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
                }.get(error.code(), 502)
                return self.page(
                    "error.html",
                    session,
                    status,
                    title=error.code().name.replace("_", " ").capitalize(),
                    message=describe(error),
                )

        return endpoint

    # --- sign-in --------------------------------------------------------------------------

    async def signin_form(self, request: Request) -> Response:
        if self.session_of(request) is not None:
            return RedirectResponse(safe_next(request.query_params.get("next")), 303)
        nonce = secrets.token_urlsafe(24)
        response = self.page(
            "signin.html", None, nonce=nonce, next=safe_next(request.query_params.get("next"))
        )
        response.set_cookie(
            SIGNIN_COOKIE,
            nonce,
            httponly=True,
            samesite="strict",
            secure=self.secure(request),
            path="/signin",
        )
        return response

    async def signin(self, request: Request) -> Response:
        form = await read_form(request)
        nonce = request.cookies.get(SIGNIN_COOKIE, "")
        target = safe_next(first(form, "next"))

        def refused(status: int, message: str) -> Response:
            # No Set-Cookie at all: the same sign-in nonce is rendered again.
            return self.page("signin.html", None, status, nonce=nonce, next=target, error=message)

        if not csrf_ok(nonce, first(form, "nonce")):
            return refused(403, "The sign-in form expired; reload the page and try again.")
        token = (first(form, "token") or "").strip()
        if not token:
            return refused(400, "Paste an admin token.")
        try:
            await self.api.definitions(token)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.UNAUTHENTICATED:
                return refused(401, "That token is not valid.")
            if error.code() == grpc.StatusCode.PERMISSION_DENIED:
                return refused(403, "That token does not have the admin role.")
            return refused(503, f"job_service did not answer: {describe(error)}")
        _, cookie = self.sessions.new(token)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            cookie,
            max_age=int(self.sessions.ttl_s),
            httponly=True,
            samesite="strict",
            secure=self.secure(request),
            path="/",
        )
        response.delete_cookie(SIGNIN_COOKIE, path="/signin")
        return response

    async def signout(self, request: Request, session: Session) -> Response:
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    # --- overview -------------------------------------------------------------------------

    async def _overview(self, session: Session) -> overview.Overview:
        assert self.http is not None
        return await overview.build(
            self.api,
            self.http,
            session.token,
            self.settings.console_metrics_url,
            self.settings.worker_metrics_urls(),
        )

    async def overview_page(self, request: Request, session: Session) -> Response:
        view = await self._overview(session)
        return self.page("overview.html", session, view=view, nav="overview")

    async def overview_live(self, request: Request) -> Response:
        session = self.session_of(request)
        if session is None:
            return Response(status_code=204)  # 204 tells EventSource to stop reconnecting

        async def render() -> str | None:
            return self.render("_overview.html", view=await self._overview(session))

        return self.stream(render, self.settings.console_live_interval_s * 2)

    def stream(
        self, render: Callable[[], Awaitable[str | None]], interval: float
    ) -> StreamingResponse:
        """Re-render every ``interval``; send what changed. A refused call ends it."""

        async def events() -> AsyncIterator[str]:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.stream_max_s
            last = None
            yield "retry: 2000\n\n"
            while loop.time() < deadline:
                try:
                    html = await render()
                except grpc.aio.AioRpcError as error:
                    if error.code() in SIGNED_OUT_CODES:
                        yield sse("", "signed-out")
                        return
                    html = None  # job_service unreachable for now: keep the last view
                if html is not None and html != last:
                    yield sse(html)
                    last = html
                else:
                    yield ": idle\n\n"
                await asyncio.sleep(interval)  # the refresh period of a live view

        return StreamingResponse(events(), media_type="text/event-stream")

    # --- jobs -----------------------------------------------------------------------------

    @staticmethod
    def filters(request: Request) -> dict[str, str]:
        names = ("job_type", "status", "queue", "user_id", "created_after", "created_before")
        return {n: request.query_params.get(n, "").strip() for n in names}

    async def _list(
        self, session: Session, filters: dict[str, str], page_token: str, page_size: int = 50
    ) -> Any:
        return await self.api.list_jobs(
            session.token,
            job_type=filters["job_type"],
            status=status_value(filters["status"]),
            queue=filters["queue"],
            user_id=filters["user_id"],
            created_after=parse_time(filters["created_after"]),
            created_before=parse_time(filters["created_before"]),
            page_token=page_token,
            page_size=page_size,
        )

    async def jobs_page(self, request: Request, session: Session) -> Response:
        filters = self.filters(request)
        page_token = request.query_params.get("page_token", "")
        page_size = page_size_of(request)
        try:
            parse_time(filters["created_after"]), parse_time(filters["created_before"])
        except ValueError:
            return self.page(
                "error.html",
                session,
                400,
                title="Bad request",
                message="Times are YYYY-MM-DDTHH:MM (UTC).",
            )
        page, definitions = await asyncio.gather(
            self._list(session, filters, page_token, page_size),
            self.api.definitions(session.token),
        )
        chosen = {k: v for k, v in filters.items() if v}
        if page_size != 50:
            chosen["page_size"] = str(page_size)
        query = urlencode(chosen)
        return self.page(
            "jobs.html",
            session,
            nav="jobs",
            jobs=page.jobs,
            filters=filters,
            job_types=sorted(d.job_type for d in definitions),
            queues=sorted({d.queue for d in definitions}),
            next_page=f"/jobs?{urlencode({**chosen, 'page_token': page.next_page_token})}"
            if page.next_page_token
            else "",
            first_page=f"/jobs?{query}" if page_token else "",
            live=f"/jobs/live?{query}" if not page_token else "",
        )

    async def jobs_live(self, request: Request) -> Response:
        session = self.session_of(request)
        if session is None:
            return Response(status_code=204)
        filters = self.filters(request)
        try:
            parse_time(filters["created_after"]), parse_time(filters["created_before"])
        except ValueError:
            return Response(status_code=204)

        async def render() -> str | None:
            page = await self._list(session, filters, "", page_size_of(request))
            return self.render("_job_rows.html", jobs=page.jobs)

        return self.stream(render, self.settings.console_live_interval_s)

    async def job_page(self, request: Request, session: Session) -> Response:
        job = await self.api.job(session.token, request.path_params["job_id"])
        return self.page("job.html", session, nav="jobs", job=job)

    async def job_live(self, request: Request) -> Response:
        session = self.session_of(request)
        if session is None:
            return Response(status_code=204)
        try:
            job = await self.api.job(session.token, request.path_params["job_id"])
        except grpc.aio.AioRpcError:
            return Response(status_code=204)

        async def events() -> AsyncIterator[str]:
            yield "retry: 2000\n\n"
            # A job that ended between the page's render and this request (a cancel ends a
            # running job within milliseconds) goes straight to "done": the page reloads
            # and shows the end. Answering 204 here left the page on the state it was
            # rendered with, for good (the browser does not reconnect after a 204).
            if not is_terminal(job):
                try:
                    async with asyncio.timeout(self.stream_max_s):
                        async for state in self.api.watch(session.token, job):
                            yield sse(self.render("_job_status.html", job=state))
                except TimeoutError:
                    return  # the browser reconnects
                except grpc.aio.AioRpcError:
                    return
            yield sse("", "done")  # terminal: the page reloads with the final artifacts

        return StreamingResponse(events(), media_type="text/event-stream")

    async def confirm_cancel(self, request: Request, session: Session) -> Response:
        job = await self.api.job(session.token, request.path_params["job_id"])
        return self.confirm(session, job, "cancel", f"Cancel job {job.id}?")

    def confirm(
        self,
        session: Session,
        job: job_pb2.Job,
        action: str,
        question: str,
        error: str = "",
        status: int = 200,
    ) -> Response:
        return self.page(
            "confirm.html",
            session,
            status,
            nav="jobs",
            job=job,
            question=question,
            action=f"/jobs/{job.id}/{action}",
            back=f"/jobs/{job.id}",
            error=error,
            fields=[],
        )

    async def cancel(self, request: Request, session: Session) -> Response:
        job = await self.api.job(session.token, request.path_params["job_id"])
        try:
            await self.api.cancel(session.token, job)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            return self.confirm(
                session, job, "cancel", f"Cancel job {job.id}?", describe(error), 409
            )
        return RedirectResponse(f"/jobs/{job.id}", status_code=303)

    async def confirm_retry(self, request: Request, session: Session) -> Response:
        job = await self.api.job(session.token, request.path_params["job_id"])
        return self.confirm(
            session, job, "retry", f"Retry job {job.id} as a new job from its snapshot?"
        )

    async def retry(self, request: Request, session: Session) -> Response:
        job_id = request.path_params["job_id"]
        try:
            new = await self.api.retry(session.token, job_id)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            job = await self.api.job(session.token, job_id)
            return self.confirm(session, job, "retry", f"Retry job {job.id}?", describe(error), 409)
        return RedirectResponse(f"/jobs/{new.id}", status_code=303)

    # --- dead letters ---------------------------------------------------------------------

    async def dead_letters(self, request: Request, session: Session) -> Response:
        page_token = request.query_params.get("page_token", "")
        page = await self.api.dead_letters(session.token, page_token=page_token)
        return self.page(
            "dead_letters.html",
            session,
            nav="dead",
            page=page,
            next_page=f"/dead-letters?{urlencode({'page_token': page.next_page_token})}"
            if page.next_page_token
            else "",
            notice=request.query_params.get("redriven", ""),
        )

    async def confirm_redrive(self, request: Request, session: Session) -> Response:
        ids = [i for i in request.query_params.getlist("event_id") if i.isdigit()]
        everything = request.query_params.get("all") == "1"
        if not ids and not everything:
            return RedirectResponse("/dead-letters", status_code=303)
        question = (
            "Redrive every dead outbox event?"
            if everything
            else f"Redrive dead outbox event{'s' if len(ids) > 1 else ''} {', '.join(ids)}?"
        )
        fields = [("all", "1")] if everything else [("event_id", i) for i in ids]
        return self.page(
            "confirm.html",
            session,
            nav="dead",
            question=question,
            action="/dead-letters/redrive",
            back="/dead-letters",
            fields=fields,
            error="",
        )

    async def redrive(self, request: Request, session: Session) -> Response:
        form: dict[str, list[str]] = request.state.form
        ids = [int(i) for i in form.get("event_id", []) if i.isdigit()]
        if not ids and first(form, "all") != "1":
            return RedirectResponse("/dead-letters", status_code=303)
        redriven = await self.api.redrive(session.token, ids)
        return RedirectResponse(f"/dead-letters?redriven={redriven}", status_code=303)

    # --- queues and rate limits -----------------------------------------------------------

    async def queues_page(self, request: Request, session: Session) -> Response:
        queues, limits = await asyncio.gather(
            self.api.queues(session.token), self.api.rate_limits(session.token)
        )
        return self.page(
            "queues.html",
            session,
            nav="queues",
            queues=queues,
            limits=limits,
            paused=request.query_params.get("paused", ""),
            resumed=request.query_params.get("resumed", ""),
        )

    async def confirm_pause(self, request: Request, session: Session) -> Response:
        return await self.confirm_queue(request, session, "pause")

    async def confirm_resume(self, request: Request, session: Session) -> Response:
        return await self.confirm_queue(request, session, "resume")

    async def confirm_queue(self, request: Request, session: Session, action: str) -> Response:
        """The confirmation page of pause/resume; a name that is no queue is 404."""
        name = request.path_params["queue"]
        queue = next((q for q in await self.api.queues(session.token) if q.name == name), None)
        if queue is None:
            return self.page(
                "error.html", session, 404, title="Not found", message=f"No queue named {name}."
            )
        question = (
            f"Pause queue {name}? No more of its jobs start until it is resumed; running "
            "jobs finish, and new jobs can still be created."
            if action == "pause"
            else f"Resume queue {name}? Its waiting jobs are granted to workers again."
        )
        return self.page(
            "confirm.html",
            session,
            nav="queues",
            question=question,
            queue=queue,
            action=f"/queues/{name}/{action}",
            back="/queues",
            fields=[],
            error="",
        )

    async def pause(self, request: Request, session: Session) -> Response:
        name = request.path_params["queue"]
        await self.api.pause(session.token, name)  # an unknown queue: INVALID_ARGUMENT, 400
        return RedirectResponse(f"/queues?{urlencode({'paused': name})}", status_code=303)

    async def resume(self, request: Request, session: Session) -> Response:
        name = request.path_params["queue"]
        await self.api.resume(session.token, name)
        return RedirectResponse(f"/queues?{urlencode({'resumed': name})}", status_code=303)

    # --- definitions ----------------------------------------------------------------------

    async def definitions(self, request: Request, session: Session) -> Response:
        found = await self.api.definitions(session.token)
        return self.page(
            "definitions.html",
            session,
            nav="definitions",
            definitions=sorted(found, key=lambda d: d.job_type),
        )

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    def app(self) -> Starlette:
        guard = self.signed_in
        routes = [
            Route("/healthz", self.healthz),
            Route("/signin", self.signin_form, methods=["GET"]),
            Route("/signin", self.signin, methods=["POST"]),
            Route("/signout", guard(self.signout), methods=["POST"]),
            Route("/", guard(self.overview_page)),
            Route("/overview/live", self.overview_live),
            Route("/jobs", guard(self.jobs_page)),
            Route("/jobs/live", self.jobs_live),
            Route("/jobs/{job_id}", guard(self.job_page)),
            Route("/jobs/{job_id}/live", self.job_live),
            Route("/jobs/{job_id}/cancel", guard(self.confirm_cancel), methods=["GET"]),
            Route("/jobs/{job_id}/cancel", guard(self.cancel), methods=["POST"]),
            Route("/jobs/{job_id}/retry", guard(self.confirm_retry), methods=["GET"]),
            Route("/jobs/{job_id}/retry", guard(self.retry), methods=["POST"]),
            Route("/dead-letters", guard(self.dead_letters)),
            Route("/dead-letters/redrive", guard(self.confirm_redrive), methods=["GET"]),
            Route("/dead-letters/redrive", guard(self.redrive), methods=["POST"]),
            Route("/definitions", guard(self.definitions)),
            Route("/queues", guard(self.queues_page)),
            Route("/queues/{queue}/pause", guard(self.confirm_pause), methods=["GET"]),
            Route("/queues/{queue}/pause", guard(self.pause), methods=["POST"]),
            Route("/queues/{queue}/resume", guard(self.confirm_resume), methods=["GET"]),
            Route("/queues/{queue}/resume", guard(self.resume), methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
        app = Starlette(routes=routes, lifespan=self.lifespan)
        app.add_middleware(ServerTiming)
        return app


def page_size_of(request: Request) -> int:
    size = request.query_params.get("page_size", "")
    return min(int(size), MAX_PAGE_SIZE) if size.isdigit() and int(size) else 50


def first(form: dict[str, list[str]], name: str) -> str | None:
    values = form.get(name)
    return values[0] if values else None


async def read_form(request: Request) -> dict[str, list[str]]:
    """An urlencoded form body (the only kind the console's forms send)."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


def create_app(settings: ConsoleSettings | None = None) -> Starlette:
    return Console(settings or ConsoleSettings()).app()


__all__ = ["RETRYABLE", "Console", "create_app"]
