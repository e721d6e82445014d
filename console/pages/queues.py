"""Queues and rate limits: every queue with its counts, each model tier's limit, and
pausing and resuming a queue after a confirmation page."""

from __future__ import annotations

import asyncio
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from console.sessions import Session
from console.site import Site


async def queues_page(site: Site, request: Request, session: Session) -> Response:
    admin = site.jobs(session.token).admin
    queues, limits = await asyncio.gather(admin.list_queues(), admin.list_rate_limits())
    return site.page(
        "queues.html",
        session,
        nav="queues",
        queues=queues,
        limits=limits,
        paused=request.query_params.get("paused", ""),
        resumed=request.query_params.get("resumed", ""),
    )


async def confirm_pause(site: Site, request: Request, session: Session) -> Response:
    return await confirm_queue(site, request, session, "pause")


async def confirm_resume(site: Site, request: Request, session: Session) -> Response:
    return await confirm_queue(site, request, session, "resume")


async def confirm_queue(site: Site, request: Request, session: Session, action: str) -> Response:
    """The confirmation page of pause/resume; a name that is no queue is 404."""
    name = request.path_params["queue"]
    queues = await site.jobs(session.token).admin.list_queues()
    queue = next((q for q in queues if q.name == name), None)
    if queue is None:
        return site.error(session, 404, "Not found", f"No queue named {name}.")
    question = (
        f"Pause queue {name}? No more of its jobs start until it is resumed; running "
        "jobs finish, and new jobs can still be created."
        if action == "pause"
        else f"Resume queue {name}? Its waiting jobs are granted to workers again."
    )
    return site.page(
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


async def pause(site: Site, request: Request, session: Session) -> Response:
    name = request.path_params["queue"]
    # An unknown queue: INVALID_ARGUMENT, the guard's 400.
    await site.jobs(session.token).admin.pause_queue(name)
    return RedirectResponse(f"/queues?{urlencode({'paused': name})}", status_code=303)


async def resume(site: Site, request: Request, session: Session) -> Response:
    name = request.path_params["queue"]
    await site.jobs(session.token).admin.resume_queue(name)
    return RedirectResponse(f"/queues?{urlencode({'resumed': name})}", status_code=303)


def routes(site: Site) -> list[Route]:
    return [
        Route("/queues", site.guarded(queues_page)),
        Route("/queues/{queue}/pause", site.guarded(confirm_pause), methods=["GET"]),
        Route("/queues/{queue}/pause", site.guarded(pause), methods=["POST"]),
        Route("/queues/{queue}/resume", site.guarded(confirm_resume), methods=["GET"]),
        Route("/queues/{queue}/resume", site.guarded(resume), methods=["POST"]),
    ]
