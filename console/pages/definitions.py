"""The job types workers declared: each (type, version) with its queue, limits and schemas,
which version is current, and which worker declared it first and last."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console.sessions import Session
from console.site import Site


async def definitions(site: Site, request: Request, session: Session) -> Response:
    found = await site.jobs(session.token).admin.list_job_definitions()
    return site.page(
        "definitions.html",
        session,
        nav="definitions",
        # by type, each type's versions in the order the service lists them (oldest first)
        definitions=sorted(found, key=lambda d: d.job_type),
    )


def routes(site: Site) -> list[Route]:
    return [Route("/definitions", site.guarded(definitions))]
