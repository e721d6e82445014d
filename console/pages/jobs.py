"""Jobs: every user's jobs, filtered and paged, with a live table; one job, following its
``WatchJob`` stream while it can change (each state change re-renders the page's changing
parts), with the graph of the jobs linked to it (``console.graph``) and the signals it
received; cancel and retry, each behind a confirmation page; sending a signal; the
header's "go to job" box, which takes a whole id or the end of one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlencode

import grpc
from durable_jobs_client import JobsError, job_selection
from durable_jobs_client.protos import admin_service_pb2, job_pb2
from durable_jobs_client.statuses import is_terminal, status_name, status_value
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from console.backend import code_of, describe
from console.forms import DEFAULT_PAGE_SIZE, first, page_size_of, parse_time
from console.graph import neighbourhood
from console.ids import echo, parse_id_suffix, parse_job_id, short_id
from console.live import RECONNECT, refreshed, sse
from console.sessions import Session
from console.site import Site

# What an operator's cancel or retry of one job writes on its timeline, after
# "admin <principal>: " (job_service adds who).
REASON = "console"
FILTERS = ("job_type", "status", "queue", "user_id", "created_after", "created_before")


def filters_of(request: Request) -> dict[str, str]:
    return {n: request.query_params.get(n, "").strip() for n in FILTERS}


async def listed(
    site: Site,
    session: Session,
    filters: dict[str, str],
    page_token: str,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> admin_service_pb2.AdminListJobsResponse:
    return await site.jobs(session.token).admin.list_jobs(
        job_type=filters["job_type"],
        status=status_value(filters["status"]),
        queue=filters["queue"],
        user_id=filters["user_id"],
        created_after=parse_time(filters["created_after"]),
        created_before=parse_time(filters["created_before"]),
        page_token=page_token,
        page_size=page_size,
    )


async def jobs_page(site: Site, request: Request, session: Session) -> Response:
    filters = filters_of(request)
    page_token = request.query_params.get("page_token", "")
    page_size = page_size_of(request)
    try:
        parse_time(filters["created_after"]), parse_time(filters["created_before"])
    except ValueError:
        return site.error(session, 400, "Bad request", "Times are YYYY-MM-DDTHH:MM (UTC).")
    page, definitions = await asyncio.gather(
        listed(site, session, filters, page_token, page_size),
        site.jobs(session.token).admin.list_job_definitions(),
    )
    chosen = {k: v for k, v in filters.items() if v}
    if page_size != DEFAULT_PAGE_SIZE:
        chosen["page_size"] = str(page_size)
    query = urlencode(chosen)
    return site.page(
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
        bulk_query=urlencode({k: v for k, v in filters.items() if v}),
    )


async def jobs_live(site: Site, request: Request) -> Response:
    session = await site.live_session(request)
    if session is None:
        return Response(status_code=204)
    filters = filters_of(request)
    try:
        parse_time(filters["created_after"]), parse_time(filters["created_before"])
    except ValueError:
        return Response(status_code=204)

    async def render() -> str | None:
        page = await listed(site, session, filters, "", page_size_of(request))
        return site.render("_job_rows.html", jobs=page.jobs)

    return refreshed(render, site.settings.console_live_interval_s, site.stream_max_s)


async def go_to_job(site: Site, request: Request, session: Session) -> Response:
    """The header's "go to job" box: a whole job id opens its page (which says when there
    is no such job); the end of one (6 to 32 hex digits, as lists show the last 8) opens the
    one job it ends, says there is none (404), or lists the jobs it ends to choose from;
    anything else is a 400 page saying why. The box keeps what was typed."""
    given = request.query_params.get("id", "")
    try:
        job_id = parse_job_id(given)
    except ValueError as error:
        suffix = parse_id_suffix(given)
        if suffix is None:
            return not_a_job_id(site, session, given, error)
        return await find_by_suffix(site, session, given, suffix)
    return RedirectResponse(f"/jobs/{job_id}", status_code=303)


async def find_by_suffix(site: Site, session: Session, given: str, suffix: str) -> Response:
    # Two are enough to know the short id is ambiguous; the page says when there are more.
    found = await site.jobs(session.token).admin.list_jobs(id_suffix=suffix, page_size=2)
    if len(found.jobs) == 1 and not found.next_page_token:
        return RedirectResponse(f"/jobs/{found.jobs[0].id}", status_code=303)
    if not found.jobs:
        return site.page(
            "error.html",
            session,
            404,
            title="No such job",
            message=f"No job ends with “{echo(given.strip())}”.",
            goto=given,
        )
    return site.page(
        "choose_job.html",
        session,
        nav="jobs",
        jobs=found.jobs,
        suffix=suffix,
        more=bool(found.next_page_token),
        goto=given,
    )


def not_a_job_id(site: Site, session: Session, given: str, error: ValueError) -> Response:
    message = str(error)
    if parse_id_suffix(given) is None and given.strip():
        message += " The box also takes an id's last 6 to 32 hex digits (lists show the last 8)."
    return site.page("error.html", session, 400, title="Not a job id", message=message, goto=given)


async def job_page(site: Site, request: Request, session: Session) -> Response:
    admin = site.jobs(session.token).admin
    given = request.path_params["job_id"]
    try:
        parse_job_id(given)
    except ValueError as error:  # a mistyped or cut address: say so before asking the service
        return not_a_job_id(site, session, given, error)
    job = await admin.get_job(given)
    drawn = await neighbourhood(job, admin.get_job)
    return site.page(
        "job.html",
        session,
        nav="jobs",
        job=job,
        graph=drawn,
        signalled=request.query_params.get("signalled", ""),
    )


async def send_signal(site: Site, request: Request, session: Session) -> Response:
    """The job page's signal form: sent as the job's owner (the admin role may act for any
    user), its payload a JSON object; the page shows the signal's name, never a payload."""
    jobs = site.jobs(session.token)
    job = await jobs.admin.get_job(request.path_params["job_id"])
    form = request.state.form
    name = (first(form, "name") or "").strip()
    text = (first(form, "payload") or "").strip()
    try:
        payload = json.loads(text) if text else {}
    except ValueError as error:
        return site.error(session, 400, "Bad request", f"The payload is not JSON: {error}.")
    if not isinstance(payload, dict):
        return site.error(session, 400, "Bad request", "The payload is a JSON object: {…}.")
    # An unknown name or a finished job: job_service says so (INVALID_ARGUMENT,
    # FAILED_PRECONDITION), and the guard shows it.
    await jobs.signal(job.id, name, payload, user_id=job.user_id)
    return RedirectResponse(f"/jobs/{job.id}?{urlencode({'signalled': name})}", status_code=303)


async def job_live(site: Site, request: Request) -> Response:
    session = await site.live_session(request)
    if session is None:
        return Response(status_code=204)
    jobs = site.jobs(session.token)
    try:
        job = await jobs.admin.get_job(request.path_params["job_id"])
    except JobsError:
        return Response(status_code=204)

    async def events() -> AsyncIterator[str]:
        yield RECONNECT
        # A job that ended between the page's render and this request (a cancel ends a
        # running job within milliseconds) goes straight to "done": the page reloads
        # and shows the end. Answering 204 here left the page on the state it was
        # rendered with, for good (the browser does not reconnect after a 204).
        if not is_terminal(job):
            try:
                async with asyncio.timeout(site.stream_max_s):
                    async for whole in followed(jobs.admin.get_job, job, jobs.watch):
                        yield sse(site.render("_job_live.html", job=whole))
            except TimeoutError:
                return  # the browser reconnects
            except JobsError:
                return
        yield sse("", "done")  # terminal: the page reloads with the final artifacts

    return StreamingResponse(events(), media_type="text/event-stream")


Watch = Callable[..., AsyncIterator[object]]


def step_of(job: job_pb2.Job) -> tuple[int, int, str, int]:
    """What a state change is, as against a progress report: the parts of a WatchJob
    state after which the whole job is read again."""
    return (job.status, job.attempt_count, job.error_code, job.error_attempt)


async def followed(
    read: Callable[[str], Awaitable[job_pb2.Job]], job: job_pb2.Job, watch: Watch
) -> AsyncIterator[job_pb2.Job]:
    """The whole job (as AdminService.GetJob answers it) after each WatchJob state: read
    again on each state change (a new step on the timeline, a new error, started or
    finished), and between them the last one read with the state's progress. WatchJob's
    states are summaries (no events, no input): the page's parts need the whole job."""
    whole, last = job, step_of(job)
    async for state in watch(job.id, user_id=job.user_id):
        if not isinstance(state, job_pb2.Job):
            continue  # a partial output: the page does not show those
        if step_of(state) != last:
            whole = await read(job.id)
            last = step_of(state)
        else:
            whole = copy_of(whole)
            whole.progress = state.progress
            whole.updated_at.CopyFrom(state.updated_at)
        yield whole


def copy_of(job: job_pb2.Job) -> job_pb2.Job:
    copied = job_pb2.Job()
    copied.CopyFrom(job)
    return copied


def confirm(
    site: Site,
    session: Session,
    job: job_pb2.Job,
    action: str,
    question: str,
    error: str = "",
    status: int = 200,
) -> Response:
    return site.page(
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


async def confirm_cancel(site: Site, request: Request, session: Session) -> Response:
    job = await site.jobs(session.token).admin.get_job(request.path_params["job_id"])
    return confirm(site, session, job, "cancel", f"Cancel job {job.id}?")


async def cancel(site: Site, request: Request, session: Session) -> Response:
    jobs = site.jobs(session.token)
    job = await jobs.admin.get_job(request.path_params["job_id"])
    # AdminService.CancelJobs over this one id, not JobService.CancelJob: the job's
    # timeline then names the operator ("admin <principal>: console").
    answer = await jobs.admin.cancel_jobs(job_selection(job_ids=[job.id]), reason=REASON)
    if not answer.cancelled:
        now = await jobs.admin.get_job(job.id)
        why = (
            f"Not cancelled: the job is {status_name(now.status)}."
            if is_terminal(now) or now.status == job_pb2.JOB_STATUS_CANCEL_REQUESTED
            else "Not cancelled: its job type cannot be cancelled."
        )
        return confirm(site, session, now, "cancel", f"Cancel job {job.id}?", why, 409)
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


async def confirm_retry(site: Site, request: Request, session: Session) -> Response:
    job = await site.jobs(session.token).admin.get_job(request.path_params["job_id"])
    question = f"Retry job {job.id} as a new job from its snapshot?"
    if job.retried_as_job_ids:
        # job_service refuses a second retry while the first lives (LIVE_RETRY_EXISTS).
        retries = ", ".join(short_id(r) for r in job.retried_as_job_ids)
        question = f"Job {job.id} was already retried (as {retries}). Retry it again?"
    return confirm(site, session, job, "retry", question)


async def retry(site: Site, request: Request, session: Session) -> Response:
    jobs = site.jobs(session.token)
    job_id = request.path_params["job_id"]
    try:
        new = await jobs.admin.retry_job(job_id)
    except JobsError as error:
        if code_of(error) != grpc.StatusCode.FAILED_PRECONDITION:
            raise
        job = await jobs.admin.get_job(job_id)
        return confirm(site, session, job, "retry", f"Retry job {job.id}?", describe(error), 409)
    return RedirectResponse(f"/jobs/{new.id}", status_code=303)


def routes(site: Site) -> list[Route]:
    return [
        Route("/jobs", site.guarded(jobs_page)),
        Route("/jobs/live", site.open(jobs_live)),
        Route("/jobs/go", site.guarded(go_to_job)),
        Route("/jobs/{job_id}", site.guarded(job_page)),
        Route("/jobs/{job_id}/live", site.open(job_live)),
        Route("/jobs/{job_id}/cancel", site.guarded(confirm_cancel), methods=["GET"]),
        Route("/jobs/{job_id}/cancel", site.guarded(cancel), methods=["POST"]),
        Route("/jobs/{job_id}/retry", site.guarded(confirm_retry), methods=["GET"]),
        Route("/jobs/{job_id}/retry", site.guarded(retry), methods=["POST"]),
        Route("/jobs/{job_id}/signal", site.guarded(send_signal), methods=["POST"]),
    ]
