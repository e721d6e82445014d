"""The console's HTTP application: the pages of ``console.pages`` behind one guard, the
static files, and the response headers of ``console.middleware``.

Every page but the sign-in form needs a session that job_service still knows (else a
redirect to ``/signin``: ``console.sessions``, ``console.site``); every POST
needs the session's CSRF token (else 403, and nothing is called). A call job_service refuses
for the token (revoked, or its admin role taken away) ends the session (``console.site``).
Live parts are Server-Sent Events that ``static/console.js`` swaps into the page
(``console.live``): the jobs table and the overview are re-rendered every
``JOBS_CONSOLE_LIVE_INTERVAL_S``; a job that can still change follows its ``WatchJob``
stream, each state change re-rendering the page's changing parts (actions, state, error,
timeline) with the page's own partials.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from console.middleware import ServerTiming
from console.pages import (
    bulk,
    dead_letters,
    definitions,
    erasure,
    jobs,
    overview,
    queues,
    schedules,
    signin,
    usage,
)
from console.render import STATIC
from console.settings import ConsoleSettings
from console.site import Site

# In the order the routes are matched: a page module's fixed paths come before its
# parameterised ones (``/jobs/live`` before ``/jobs/{job_id}``).
PAGES = (
    signin,
    overview,
    jobs,
    bulk,
    schedules,
    usage,
    dead_letters,
    definitions,
    queues,
    erasure,
)


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


class Console(Site):
    """The console: its ``Site`` (settings, sessions, job_service) and the application
    serving it."""

    def app(self) -> Starlette:
        routes: list[BaseRoute] = [Route("/healthz", healthz)]
        for module in PAGES:
            routes += module.routes(self)
        routes.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
        app = Starlette(routes=routes, lifespan=self.lifespan)
        app.add_middleware(ServerTiming)
        return app


def create_app(settings: ConsoleSettings | None = None) -> Starlette:
    return Console(settings or ConsoleSettings()).app()


__all__ = ["Console", "create_app"]
