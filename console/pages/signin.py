"""Signing in with an admin token, and out; ending another principal's sessions.

The sign-in form carries a random nonce that must match its cookie (login CSRF). The token
opens a console session in job_service (AdminService.OpenConsoleSession, with the console's
idle timeout and maximum age) before the session cookie is set; signing out closes it, so a
copy of the cookie is refused by every replica from then on. A visitor who is not signed in
is told whether the token was refused, never what went wrong inside (job_service down: only
that the service is unavailable).
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from urllib.parse import urlencode

from durable_jobs_client import JobsError, PermissionDenied, Unauthenticated
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from console.backend import UNAVAILABLE
from console.forms import first, read_form, safe_next
from console.ids import echo
from console.sessions import SESSION_COOKIE, SIGNIN_COOKIE, Session, csrf_ok
from console.site import Site

# job_service's longest principal name is far shorter; a form field is bounded anyway.
MAX_PRINCIPAL_CHARS = 200


async def signin_form(site: Site, request: Request) -> Response:
    # A live session goes on to where it was going; an ended one (a stale or copied cookie)
    # gets the form.
    if await site.live_session(request) is not None:
        return RedirectResponse(safe_next(request.query_params.get("next")), 303)
    nonce = secrets.token_urlsafe(24)
    response = site.page(
        "signin.html", None, nonce=nonce, next=safe_next(request.query_params.get("next"))
    )
    response.set_cookie(
        SIGNIN_COOKIE,
        nonce,
        httponly=True,
        samesite="strict",
        secure=site.secure(request),
        path="/signin",
    )
    return response


async def signin(site: Site, request: Request) -> Response:
    form = await read_form(request)
    nonce = request.cookies.get(SIGNIN_COOKIE, "")
    target = safe_next(first(form, "next"))

    def refused(status: int, message: str) -> Response:
        # No Set-Cookie at all: the same sign-in nonce is rendered again.
        return site.page("signin.html", None, status, nonce=nonce, next=target, error=message)

    if not csrf_ok(nonce, first(form, "nonce")):
        return refused(403, "The sign-in form expired; reload the page and try again.")
    token = (first(form, "token") or "").strip()
    if not token:
        return refused(400, "Paste an admin token.")
    try:
        opened = await site.jobs(token).admin.open_console_session(
            idle_timeout=timedelta(seconds=site.settings.console_idle_timeout_s),
            max_age=timedelta(seconds=site.sessions.ttl_s),
        )
    except Unauthenticated:
        return refused(401, "That token is not valid.")
    except PermissionDenied:
        return refused(403, "That token does not have the admin role.")
    except JobsError:
        return refused(503, UNAVAILABLE)
    _, cookie = site.sessions.new(token, opened.session_id, opened.principal)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=int(site.sessions.ttl_s),
        httponly=True,
        samesite="strict",
        secure=site.secure(request),
        path="/",
    )
    response.delete_cookie(SIGNIN_COOKIE, path="/signin")
    return response


async def signout(site: Site, request: Request, session: Session) -> Response:
    await site.jobs(session.token).admin.close_console_session(session.session_id)
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


async def sessions_page(site: Site, request: Request, session: Session) -> Response:
    """Ending a principal's console sessions (a lost laptop, a colleague who left)."""
    return site.page(
        "sessions.html",
        session,
        nav="sessions",
        principal=session.principal,
        idle_minutes=int(site.settings.console_idle_timeout_s // 60),
        revoked=request.query_params.get("revoked", ""),
        count=request.query_params.get("count", ""),
    )


async def confirm_revoke(site: Site, request: Request, session: Session) -> Response:
    principal = request.query_params.get("principal", "").strip()[:MAX_PRINCIPAL_CHARS]
    if not principal:
        return site.error(session, 400, "Bad request", "Name a principal, e.g. ops-ada.")
    mine = " Yours included: you will be signed out." if principal == session.principal else ""
    return site.page(
        "confirm.html",
        session,
        nav="sessions",
        question=f"End every console session of {echo(principal)}?{mine}",
        action="/sessions/revoke",
        back="/sessions",
        fields=[("principal", principal)],
        error="",
    )


async def revoke(site: Site, request: Request, session: Session) -> Response:
    principal = (first(request.state.form, "principal") or "").strip()[:MAX_PRINCIPAL_CHARS]
    if not principal:
        return site.error(session, 400, "Bad request", "Name a principal, e.g. ops-ada.")
    count = await site.jobs(session.token).admin.revoke_console_sessions(principal)
    query = urlencode({"revoked": principal, "count": count})
    return RedirectResponse(f"/sessions?{query}", status_code=303)


def routes(site: Site) -> list[Route]:
    return [
        Route("/signin", site.open(signin_form), methods=["GET"]),
        Route("/signin", site.open(signin), methods=["POST"]),
        Route("/signout", site.guarded(signout), methods=["POST"]),
        Route("/sessions", site.guarded(sessions_page), methods=["GET"]),
        Route("/sessions/revoke", site.guarded(confirm_revoke), methods=["GET"]),
        Route("/sessions/revoke", site.guarded(revoke), methods=["POST"]),
    ]
