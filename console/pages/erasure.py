"""Erasing a user (AdminService.EraseUserData, admin): the user's id, then a dry run that
counts what would go with a confirmation form, then the erase and what it deleted. A user
whose jobs have not ended is refused; asked to cancel them, the erase cancels them and the
page offers to try again once they have ended. A read-only token is refused at the dry
run (the guard's 403 page)."""

from __future__ import annotations

from durable_jobs_client import UserHasRunningJobs
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console.forms import first
from console.sessions import Session
from console.site import Site


async def erase_page(site: Site, request: Request, session: Session) -> Response:
    """The form; with ``user_id``, its dry run and the confirmation."""
    user_id = request.query_params.get("user_id", "").strip()
    counted = None
    if user_id:
        counted = await site.jobs(session.token).admin.erase_user_data(user_id, dry_run=True)
    return site.page(
        "erase_user.html", session, nav="usage", user_id=user_id, counted=counted, erased=None
    )


async def erase(site: Site, request: Request, session: Session) -> Response:
    form = request.state.form
    user_id = (first(form, "user_id") or "").strip()
    cancel_running = first(form, "cancel_running") == "on"
    admin = site.jobs(session.token).admin
    refused = ""
    erased = None
    try:
        erased = await admin.erase_user_data(user_id, cancel_running=cancel_running)
    except UserHasRunningJobs as error:
        refused = error.message
    counted = None if erased else await admin.erase_user_data(user_id, dry_run=True)
    return site.page(
        "erase_user.html",
        session,
        nav="usage",
        user_id=user_id,
        counted=counted,
        erased=erased,
        refused=refused,
    )


def routes(site: Site) -> list[Route]:
    return [
        Route("/users/erase", site.guarded(erase_page), methods=["GET"]),
        Route("/users/erase", site.guarded(erase), methods=["POST"]),
    ]
