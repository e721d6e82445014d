"""Signing in with an admin token, and out.

The sign-in form carries a random nonce that must match its cookie (login CSRF); the token
is checked with one AdminService call before a session cookie is set.
"""

from __future__ import annotations

import secrets

from durable_jobs_client import JobsError, PermissionDenied, Unauthenticated
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from console.backend import describe
from console.forms import first, read_form, safe_next
from console.sessions import SESSION_COOKIE, SIGNIN_COOKIE, Session, csrf_ok
from console.site import Site


async def signin_form(site: Site, request: Request) -> Response:
    if site.session_of(request) is not None:
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
        await site.jobs(token).admin.list_job_definitions()
    except Unauthenticated:
        return refused(401, "That token is not valid.")
    except PermissionDenied:
        return refused(403, "That token does not have the admin role.")
    except JobsError as error:
        return refused(503, f"job_service did not answer: {describe(error)}")
    _, cookie = site.sessions.new(token)
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
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def routes(site: Site) -> list[Route]:
    return [
        Route("/signin", site.open(signin_form), methods=["GET"]),
        Route("/signin", site.open(signin), methods=["POST"]),
        Route("/signout", site.guarded(signout), methods=["POST"]),
    ]
