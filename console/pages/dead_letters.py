"""Dead letters: failed jobs and dead outbox events, and redriving events after a
confirmation page."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from console.forms import DEFAULT_PAGE_SIZE, first
from console.sessions import Session
from console.site import Site


async def dead_letters(site: Site, request: Request, session: Session) -> Response:
    page_token = request.query_params.get("page_token", "")
    page = await site.jobs(session.token).admin.list_dead_letters(
        page_size=DEFAULT_PAGE_SIZE, page_token=page_token
    )
    return site.page(
        "dead_letters.html",
        session,
        nav="dead",
        page=page,
        next_page=f"/dead-letters?{urlencode({'page_token': page.next_page_token})}"
        if page.next_page_token
        else "",
        notice=request.query_params.get("redriven", ""),
    )


async def confirm_redrive(site: Site, request: Request, session: Session) -> Response:
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
    return site.page(
        "confirm.html",
        session,
        nav="dead",
        question=question,
        action="/dead-letters/redrive",
        back="/dead-letters",
        fields=fields,
        error="",
    )


async def redrive(site: Site, request: Request, session: Session) -> Response:
    form: dict[str, list[str]] = request.state.form
    ids = [int(i) for i in form.get("event_id", []) if i.isdigit()]
    if not ids and first(form, "all") != "1":
        return RedirectResponse("/dead-letters", status_code=303)
    # No ids ("all"): every dead event.
    redriven = await site.jobs(session.token).admin.redrive_dead_letters(ids)
    return RedirectResponse(f"/dead-letters?redriven={redriven}", status_code=303)


def routes(site: Site) -> list[Route]:
    return [
        Route("/dead-letters", site.guarded(dead_letters)),
        Route("/dead-letters/redrive", site.guarded(confirm_redrive), methods=["GET"]),
        Route("/dead-letters/redrive", site.guarded(redrive), methods=["POST"]),
    ]
