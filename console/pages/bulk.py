"""Cancelling or retrying every job a filter selects (AdminService.CancelJobs/RetryJobs).

Three steps, each carrying the same filter: a dry run says how many jobs the selection holds
now and which (the first ``SHOWN`` by short id), with a confirmation form; the confirmed
POST then acts a batch at a time, following ``next_page_token`` until the selection is
done or ``STEP_S`` has passed, when the page shows the progress so far and a form that
continues from the token (bound by job_service to the same action and selection). Each job's
timeline records ``admin <principal>: <reason>``: job_service names the principal of the
token the session signed in with, the console adds the reason (the operator's, or
``REASON``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from urllib.parse import urlencode

from durable_jobs_client import job_selection
from durable_jobs_client.protos import admin_service_pb2
from durable_jobs_client.statuses import status_value
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console.forms import first, parse_time
from console.ids import echo
from console.pages.jobs import FILTERS
from console.sessions import Session
from console.site import Site

ACTIONS = ("cancel", "retry")
# Ids a dry run shows; jobs acted on per call (job_service's maximum is 1,000).
SHOWN = 50
BATCH = 500
# How long one confirmed POST keeps calling before it shows its progress.
STEP_S = 8.0
# job_service keeps 64 characters of a reason.
MAX_REASON_CHARS = 64
REASON = {"cancel": "console bulk cancel", "retry": "console bulk retry"}


@dataclass
class Progress:
    """What the confirmed calls did so far (carried from one POST to the next)."""

    done: int = 0
    skipped: int = 0
    failed: int = 0
    calls: int = 0
    next_page_token: str = ""
    examples: list[str] = field(default_factory=list)


def count(value: str | None) -> int:
    """A running total carried by the continue form (0 when it is not one)."""
    return int(value) if value and value.isdigit() else 0


def selection_of(filters: dict[str, str]) -> admin_service_pb2.JobSelection:
    """The filters as a JobSelection; ValueError for a time that is none."""
    return job_selection(
        job_type=filters["job_type"],
        status=status_value(filters["status"]) or None,
        queue=filters["queue"],
        user_id=filters["user_id"],
        created_after=parse_time(filters["created_after"]),
        created_before=parse_time(filters["created_before"]),
    )


def filters_from(values: dict[str, list[str]] | None, query: dict[str, str]) -> dict[str, str]:
    if values is not None:
        return {n: (first(values, n) or "").strip() for n in FILTERS}
    return {n: query.get(n, "").strip() for n in FILTERS}


def described(filters: dict[str, str]) -> str:
    chosen = [f"{name.replace('_', ' ')} {echo(v)}" for name, v in filters.items() if v]
    return ", ".join(chosen)


def jobs_link(filters: dict[str, str]) -> str:
    return f"/jobs?{urlencode({k: v for k, v in filters.items() if v})}"


def _selection(
    site: Site, session: Session, action: str, filters: dict[str, str]
) -> admin_service_pb2.JobSelection | Response:
    """The jobs a bulk action's filters select, or the page refusing them: an unknown
    action, no filter (never "every job"), a malformed time."""
    if action not in ACTIONS:
        return site.error(session, 404, "Not found", f"No bulk action {echo(action)}.")
    if not any(filters.values()):
        return site.error(
            session, 400, "Choose a filter", "A bulk action needs at least one filter."
        )
    try:
        return selection_of(filters)
    except ValueError:
        return site.error(session, 400, "Bad request", "Times are YYYY-MM-DDTHH:MM (UTC).")


async def dry_run(site: Site, request: Request, session: Session) -> Response:
    action = request.path_params["action"]
    filters = filters_from(None, dict(request.query_params))
    selection = _selection(site, session, action, filters)
    if isinstance(selection, Response):
        return selection
    admin = site.jobs(session.token).admin
    ids: list[str]
    if action == "cancel":
        counted = await admin.cancel_jobs(selection, dry_run=True, limit=SHOWN)
        matched, ids = counted.matched, list(counted.job_ids)
    else:
        judged = await admin.retry_jobs(selection, dry_run=True, limit=SHOWN)
        matched = judged.matched
        # google.rpc.Status code 0: OK, the job would be retried
        ids = [o.job_id for o in judged.outcomes if not o.status.code]
    verb = "cancelled" if action == "cancel" else "retried as new jobs"
    return site.page(
        "confirm.html",
        session,
        nav="jobs",
        question=f"{matched} job(s) would be {verb}: {described(filters)}.",
        bulk={"matched": matched, "ids": ids, "shown": SHOWN, "jobs": jobs_link(filters)},
        action=f"/bulk/{action}",
        back=jobs_link(filters),
        fields=[(n, v) for n, v in filters.items() if v],
        reason=REASON[action],
        error="",
    )


async def act(site: Site, request: Request, session: Session) -> Response:
    action = request.path_params["action"]
    form = request.state.form
    filters = filters_from(form, {})
    selection = _selection(site, session, action, filters)
    if isinstance(selection, Response):
        return selection
    reason = ((first(form, "reason") or "").strip() or REASON[action])[:MAX_REASON_CHARS]
    progress = Progress(
        done=count(first(form, "done")),
        skipped=count(first(form, "skipped")),
        failed=count(first(form, "failed")),
        next_page_token=first(form, "page_token") or "",
    )
    await run(site, session, action, selection, reason, progress)
    carried = [(n, v) for n, v in filters.items() if v] + [("reason", reason)]
    if progress.next_page_token:
        carried += [
            ("page_token", progress.next_page_token),
            ("done", str(progress.done)),
            ("skipped", str(progress.skipped)),
            ("failed", str(progress.failed)),
        ]
    return site.page(
        "bulk_done.html",
        session,
        nav="jobs",
        action=action,
        progress=progress,
        filters=described(filters),
        jobs=jobs_link(filters),
        fields=carried,
        reason=reason,
    )


async def run(
    site: Site,
    session: Session,
    action: str,
    selection: admin_service_pb2.JobSelection,
    reason: str,
    progress: Progress,
) -> None:
    """Calls until the selection is done or ``STEP_S`` has passed."""
    admin = site.jobs(session.token).admin
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STEP_S
    while True:
        token = progress.next_page_token
        if action == "cancel":
            cancelled = await admin.cancel_jobs(
                selection, limit=BATCH, page_token=token, reason=reason
            )
            progress.done += cancelled.cancelled
            progress.skipped += cancelled.skipped
            progress.examples += list(cancelled.job_ids)[: SHOWN - len(progress.examples)]
            progress.next_page_token = cancelled.next_page_token
        else:
            retried = await admin.retry_jobs(
                selection, limit=BATCH, page_token=token, reason=reason
            )
            progress.done += retried.retried
            made = [o.new_job_id for o in retried.outcomes if o.new_job_id]
            progress.failed += sum(1 for o in retried.outcomes if not o.new_job_id)
            progress.examples += made[: SHOWN - len(progress.examples)]
            progress.next_page_token = retried.next_page_token
        progress.calls += 1
        if not progress.next_page_token or loop.time() >= deadline:
            return


def routes(site: Site) -> list[Route]:
    return [
        Route("/bulk/{action}", site.guarded(dry_run), methods=["GET"]),
        Route("/bulk/{action}", site.guarded(act), methods=["POST"]),
    ]
