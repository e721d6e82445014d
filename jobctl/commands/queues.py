"""The fleet, for operators: queues (list, pause, resume), rate limits, job definitions,
the workers connected now."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from durable_jobs_client import AsyncJobsClient
from durable_jobs_client.protos import admin_service_pb2 as apb

from jobctl import render
from jobctl.commands import Commands
from jobctl.exits import Exit, UsageError
from jobctl.output import show
from jobctl.prompt import confirmed


def register(commands: Commands) -> None:
    commands.add(
        "definitions",
        definitions,
        "the job types workers declared: each version, which is current, who declared it and when",
    )
    commands.add("queues", queues, "the queues: paused, waiting, eligible, running, limit")
    p = commands.add("pause", pause, "stop granting a queue's jobs (running ones finish; admin)")
    p.add_argument("queue")
    p = commands.add("resume", resume, "grant a paused queue's jobs again (admin)")
    p.add_argument("queue")
    commands.add("workers", workers, "the workers connected now: what each runs (admin)")
    commands.add(
        "rate-limits",
        rate_limits,
        "the fleet-wide provider rate limits per model tier and their 429 back-off (admin)",
    )


async def definitions(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    found = await client.admin.list_job_definitions()
    answer = apb.ListJobDefinitionsResponse(definitions=found)
    show(args, out, answer, render.definitions_table(found), items=found)
    return Exit.OK


async def queues(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    found = await client.admin.list_queues()
    show(args, out, apb.ListQueuesResponse(queues=found), render.queues_table(found), found)
    return Exit.OK


async def pause(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    if not args.yes:
        # Read first, to name the queue's work in the question (and to refuse a name that
        # is no queue before asking anything).
        known = {q.name: q for q in await client.admin.list_queues()}
        if args.queue not in known:
            raise UsageError(
                f"no queue named {args.queue!r}; the queues are: {', '.join(sorted(known))}"
            )
        queue = known[args.queue]
        question = (
            f"Pause queue {queue.name}? No more of its jobs start ({queue.waiting} waiting); "
            f"the {queue.running} running finish."
        )
        if not confirmed(question):
            print(f"jobctl: not confirmed; queue {args.queue} was not paused", file=sys.stderr)
            return Exit.NOT_CONFIRMED
    info = await client.admin.pause_queue(args.queue)
    human = f"paused {info.name}: {info.waiting} waiting, {info.running} running (they finish)"
    show(args, out, info, human)
    return Exit.OK


async def resume(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    info = await client.admin.resume_queue(args.queue)
    show(args, out, info, f"resumed {info.name}: {info.waiting} waiting, {info.running} running")
    return Exit.OK


async def rate_limits(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    found = await client.admin.list_rate_limits()
    answer = apb.ListRateLimitsResponse(limits=found)
    show(args, out, answer, render.rate_limits_table(found), items=found)
    return Exit.OK


async def workers(args: argparse.Namespace, client: AsyncJobsClient, out: TextIO) -> Exit:
    found = await client.admin.list_workers()
    answer = apb.ListWorkersResponse(workers=found)
    show(args, out, answer, render.workers_table(found), items=found)
    return Exit.OK
