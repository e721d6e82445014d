"""The overview (``/``): the figures of ``console.overview``, and their live refresh."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console import overview
from console.live import refreshed
from console.sessions import Session
from console.site import Site


async def figures(site: Site, session: Session) -> overview.Overview:
    assert site.http is not None
    return await overview.build(
        site.jobs(session.token).admin,
        site.http,
        site.settings.console_metrics_url,
        site.settings.worker_metrics_urls(),
    )


async def overview_page(site: Site, request: Request, session: Session) -> Response:
    view = await figures(site, session)
    return site.page("overview.html", session, view=view, nav="overview", **overview.NAMES)


async def overview_live(site: Site, request: Request) -> Response:
    session = await site.live_session(request)
    if session is None:
        return Response(status_code=204)  # 204 tells EventSource to stop reconnecting

    async def render() -> str | None:
        return site.render("_overview.html", view=await figures(site, session), **overview.NAMES)

    return refreshed(render, site.settings.console_live_interval_s * 2, site.stream_max_s)


def routes(site: Site) -> list[Route]:
    return [
        Route("/", site.guarded(overview_page)),
        Route("/overview/live", site.open(overview_live)),
    ]
