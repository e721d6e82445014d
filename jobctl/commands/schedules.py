"""Cron schedules (ScheduleService): ``jobctl schedule create|get|list|update|pause|resume|
delete|trigger``.

``create`` builds the spec from flags (``--cron`` and ``--type`` required); ``update``
changes only the flags given: it reads the schedule, applies them to its spec and sends
the spec whole (UpdateSchedule replaces every field).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from durable_jobs_client import AsyncJobsClient, ScheduleNotFound
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.protos import schedule_service_pb2 as spb

from jobctl import render, timespec
from jobctl.commands import Command, Commands
from jobctl.exits import Exit, UsageError
from jobctl.output import show
from jobctl.prompt import confirmed

_OVERLAP = {
    "skip": spb.OVERLAP_POLICY_SKIP,
    "allow": spb.OVERLAP_POLICY_ALLOW,
    "cancel-previous": spb.OVERLAP_POLICY_CANCEL_PREVIOUS,
}
_CATCH_UP_MODE = {"all": spb.CATCH_UP_MODE_ALL, "latest": spb.CATCH_UP_MODE_LATEST}


def register(commands: Commands) -> None:
    group = commands.group("schedule", "jobs created on a cron schedule")
    p = group.add("create", create, "store a schedule")
    _spec_options(p, required=True)
    p.add_argument("--idempotency-key", help="default: one made for this call")
    p.add_argument("--paused", action="store_true", help="store it paused (resume to fire)")

    p = group.add("get", per_user(get), "show a schedule, its next fire times and recent runs")
    p.add_argument("schedule_id")

    group.add("list", list_schedules, "your schedules, newest first")

    p = group.add("update", per_user(update), "change a schedule (only the options given)")
    p.add_argument("schedule_id")
    _spec_options(p, required=False)

    for name, run, help in (
        ("pause", pause, "stop firing (slots passing while paused never fire)"),
        ("resume", resume, "fire again from the next slot after now"),
        ("trigger", trigger, "create the schedule's job now"),
    ):
        group.add(name, per_user(run), help).add_argument("schedule_id")

    p = group.add(
        "delete", per_user(delete), "delete a schedule and its run history (its jobs stay)"
    )
    p.add_argument("schedule_id")


def per_user(command: Command) -> Command:
    """``command``, its SCHEDULE_NOT_FOUND saying for which user it looked: schedules are
    read per user (no call lists every user's), so another user's needs ``--user``."""

    async def run(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
        try:
            return await command(args, client, out)
        except ScheduleNotFound as error:
            error.message += (
                f" (for user {client.user_id!r}; another user's schedule: --user <its owner>)"
            )
            raise

    return run


def _spec_options(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument(
        "--cron",
        required=required,
        help="five fields (minute hour day month weekday), or six with seconds first, "
        'e.g. "0 9 * * 1-5"',
    )
    p.add_argument("--tz", help="IANA time zone, e.g. Europe/Berlin (default UTC)")
    p.add_argument("--type", dest="job_type", required=required, help="the job type")
    p.add_argument("-i", "--input", help="the job's input, a JSON object")
    p.add_argument("--priority", type=int, help="-1000..1000 (default: the job type's)")
    p.add_argument("--credential", help="run on your own stored provider key (its id)")
    p.add_argument("--overlap", choices=list(_OVERLAP), help="when the previous job is unfinished")
    p.add_argument(
        "--catch-up",
        type=timespec.delay,
        metavar="DURATION",
        help="how late a missed slot may still fire, e.g. 5m (default 60s)",
    )
    p.add_argument("--catch-up-mode", choices=list(_CATCH_UP_MODE))
    p.add_argument("--start", type=timespec.run_at, metavar="TIME", help="no slot before")
    p.add_argument("--end", type=timespec.run_at, metavar="TIME", help="no slot after")


def _input(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"--input is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise UsageError("--input must be a JSON object")
    return value


def _apply(spec: spb.ScheduleSpec, args: argparse.Namespace) -> spb.ScheduleSpec:
    """``spec`` with the options given on top (those not given left as they are)."""
    template = spec.job_template
    if args.cron is not None:
        spec.cron = args.cron
    if args.tz is not None:
        spec.time_zone = args.tz
    if args.job_type is not None:
        template.job_type = args.job_type
    if args.input is not None:
        template.input.Clear()
        template.input.update(_input(args.input))
    if args.priority is not None:
        template.priority = args.priority
    if args.credential is not None:
        template.credential_mode = job_pb2.CREDENTIAL_MODE_USER
        template.credential_id = args.credential
    if args.overlap is not None:
        spec.overlap_policy = _OVERLAP[args.overlap]
    if args.catch_up is not None:
        spec.catch_up_window.FromTimedelta(args.catch_up)
    if args.catch_up_mode is not None:
        spec.catch_up_mode = _CATCH_UP_MODE[args.catch_up_mode]
    if args.start is not None:
        spec.start_at.FromDatetime(args.start)
    if args.end is not None:
        spec.end_at.FromDatetime(args.end)
    return spec


async def create(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    spec = _apply(spb.ScheduleSpec(), args)
    response = await client.schedules.create(
        spec, idempotency_key=args.idempotency_key, paused=args.paused
    )
    verb = "created" if response.created else "exists"
    show(args, out, response, f"{verb}\n{render.schedule_detail(response.schedule)}")
    return Exit.OK


async def get(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    response = await client.schedules.get(args.schedule_id)
    human = render.schedule_detail(
        response.schedule, response.next_fire_times, response.recent_runs
    )
    show(args, out, response, human)
    return Exit.OK


async def list_schedules(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    found = [schedule async for schedule in client.schedules.list()]
    answer = spb.ListSchedulesResponse(schedules=found)
    show(args, out, answer, render.schedules_table(found), items=found)
    if not found:
        print(
            f"jobctl: user {client.user_id!r} has no schedules; schedules are listed per user: "
            "--user <id> lists another user's",
            file=sys.stderr,
        )
    return Exit.OK


async def update(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    current = (await client.schedules.get(args.schedule_id)).schedule
    spec = _apply(current.spec, args)
    schedule = await client.schedules.update(args.schedule_id, spec)
    show(args, out, schedule, f"updated\n{render.schedule_detail(schedule)}")
    return Exit.OK


async def pause(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    schedule = await client.schedules.pause(args.schedule_id)
    show(args, out, schedule, f"{schedule.id}  {render.schedule_state(schedule)}")
    return Exit.OK


async def resume(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    schedule = await client.schedules.resume(args.schedule_id)
    state = render.schedule_state(schedule)
    human = f"{schedule.id}  {state}  next {render.when(schedule.next_fire_at)}"
    show(args, out, schedule, human)
    return Exit.OK


async def trigger(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    job = await client.schedules.trigger(args.schedule_id)
    show(args, out, job, f"triggered {job.id}")
    return Exit.OK


async def delete(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    question = f"Delete schedule {args.schedule_id} and its run history? Its jobs stay."
    if not args.yes and not confirmed(question):
        print("jobctl: not confirmed; the schedule was kept", file=sys.stderr)
        return Exit.NOT_CONFIRMED
    await client.schedules.delete(args.schedule_id)
    show(args, out, spb.DeleteScheduleResponse(), f"deleted {args.schedule_id}")
    return Exit.OK
