"""Schedules: one user's at a time (ScheduleService lists a single user's schedules, so the
page asks for the user, and a job created by a schedule links to it); a schedule's page with
its next fire times and recent runs; pausing, resuming, triggering now and deleting it, each
behind a confirmation page."""

from __future__ import annotations

from urllib.parse import urlencode

from durable_jobs_client.protos import schedule_service_pb2
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from console.forms import DEFAULT_PAGE_SIZE, first, page_size_of
from console.ids import echo, short_id
from console.sessions import Session
from console.site import Site

# action -> (the question, whether it is the destructive kind)
ACTIONS = {
    "pause": ("Pause schedule {id}? Slots passing while it is paused never fire.", True),
    "resume": ("Resume schedule {id}? It fires again from its next slot after now.", False),
    "trigger": (
        "Trigger schedule {id} now? Its job is created at once, whatever its cron, "
        "overlap policy or pause.",
        False,
    ),
    "delete": (
        "Delete schedule {id} and its run history? The jobs it created stay.",
        True,
    ),
}


def outcome_label(value: int) -> str:
    """``OUTCOME_SKIPPED_OVERLAP`` -> ``skipped overlap``."""
    try:
        name = schedule_service_pb2.ScheduleRun.Outcome.Name(value)
    except ValueError:
        return str(value)
    return name.removeprefix("OUTCOME_").replace("_", " ").lower()


def policy_label(value: int) -> str:
    """``OVERLAP_POLICY_SKIP`` -> ``skip``; unset -> the service's default, ``skip``."""
    if not value:
        return "skip"
    try:
        name = schedule_service_pb2.OverlapPolicy.Name(value)
    except ValueError:
        return str(value)
    return name.removeprefix("OVERLAP_POLICY_").replace("_", " ").lower()


def at(schedule_id: str, user_id: str, **more: str) -> str:
    return f"/schedules/{schedule_id}?{urlencode({'user_id': user_id, **more})}"


async def schedules_page(site: Site, request: Request, session: Session) -> Response:
    user_id = request.query_params.get("user_id", "").strip()
    page_token = request.query_params.get("page_token", "")
    page_size = page_size_of(request)
    schedules: list[schedule_service_pb2.Schedule] = []
    next_page = ""
    if user_id:
        page = await site.jobs(session.token).schedules.list_page(
            user_id=user_id, page_token=page_token, page_size=page_size
        )
        schedules = list(page.schedules)
        if page.next_page_token:
            query = {"user_id": user_id, "page_token": page.next_page_token}
            if page_size != DEFAULT_PAGE_SIZE:
                query["page_size"] = str(page_size)
            next_page = f"/schedules?{urlencode(query)}"
    return site.page(
        "schedules.html",
        session,
        nav="schedules",
        user_id=user_id,
        schedules=schedules,
        next_page=next_page,
        first_page=f"/schedules?{urlencode({'user_id': user_id})}" if page_token else "",
        deleted=request.query_params.get("deleted", ""),
    )


async def schedule_page(site: Site, request: Request, session: Session) -> Response:
    user_id = request.query_params.get("user_id", "").strip()
    if not user_id:
        return site.error(session, 400, "Bad request", "A schedule is looked up with its user.")
    found = await site.jobs(session.token).schedules.get(
        request.path_params["schedule_id"], user_id=user_id
    )
    return site.page(
        "schedule.html",
        session,
        nav="schedules",
        schedule=found.schedule,
        next_fire_times=list(found.next_fire_times),
        runs=list(found.recent_runs),
        outcome=outcome_label,
        overlap=policy_label(found.schedule.spec.overlap_policy),
        done=request.query_params.get("done", ""),
        triggered=request.query_params.get("triggered", ""),
    )


async def confirm_action(site: Site, request: Request, session: Session) -> Response:
    action = request.path_params["action"]
    if action not in ACTIONS:
        return site.error(session, 404, "Not found", f"No action {echo(action)}.")
    user_id = request.query_params.get("user_id", "").strip()
    if not user_id:
        return site.error(session, 400, "Bad request", "A schedule is looked up with its user.")
    found = await site.jobs(session.token).schedules.get(
        request.path_params["schedule_id"], user_id=user_id
    )
    schedule = found.schedule
    question, _ = ACTIONS[action]
    return site.page(
        "confirm.html",
        session,
        nav="schedules",
        question=question.format(id=short_id(schedule.id)),
        schedule=schedule,
        action=f"/schedules/{schedule.id}/{action}",
        back=at(schedule.id, user_id),
        fields=[("user_id", user_id)],
        error="",
    )


async def act(site: Site, request: Request, session: Session) -> Response:
    action = request.path_params["action"]
    if action not in ACTIONS:
        return site.error(session, 404, "Not found", f"No action {echo(action)}.")
    user_id = (first(request.state.form, "user_id") or "").strip()
    if not user_id:
        return site.error(session, 400, "Bad request", "A schedule is looked up with its user.")
    schedule_id = request.path_params["schedule_id"]
    schedules = site.jobs(session.token).schedules
    if action == "pause":
        await schedules.pause(schedule_id, user_id=user_id)
    elif action == "resume":
        await schedules.resume(schedule_id, user_id=user_id)
    elif action == "delete":
        await schedules.delete(schedule_id, user_id=user_id)
        query = urlencode({"user_id": user_id, "deleted": schedule_id})
        return RedirectResponse(f"/schedules?{query}", status_code=303)
    else:
        job = await schedules.trigger(schedule_id, user_id=user_id)
        return RedirectResponse(at(schedule_id, user_id, triggered=job.id), status_code=303)
    return RedirectResponse(at(schedule_id, user_id, done=action), status_code=303)


def routes(site: Site) -> list[Route]:
    return [
        Route("/schedules", site.guarded(schedules_page)),
        Route("/schedules/{schedule_id}", site.guarded(schedule_page)),
        Route("/schedules/{schedule_id}/{action}", site.guarded(confirm_action), methods=["GET"]),
        Route("/schedules/{schedule_id}/{action}", site.guarded(act), methods=["POST"]),
    ]
