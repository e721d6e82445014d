"""One admission: every way a new job enters — CreateJob, an item of CreateJobs, a projected
child, a schedule's slot, a re-run — refuses the same bad input the same way (CreateJob's
error: its type, message and fields) and stores no job for it.

A row is one bad input; its producers are the ones that can carry it at all (``CARRIED``
says why the others cannot). A slot's template and a re-run's job are planted in the
database: the API refuses to store them bad, but a template (or a stored job) may have been
good under other limits or another definition, and is judged again when its job is made.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from job_service.domain.checks import MAX_INPUT_BYTES, MAX_INPUT_DEPTH
from shared.errors import FieldViolation, InvalidInput, JobsError, UnknownJobType
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pbconv import struct_from_dict
from shared.rpc_errors import error_from_rpc, error_from_status
from tests.support.ai import FEYNMAN_INPUT
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import count_rows, result_request

__all__ = ["shared_stack"]

USER = "admitted"
# A refused child fails its parent's attempt with this before CreateJob's message.
CHILD_PREFIX = "a child job's "
CHILD_TYPE = "review_card_generation"  # the child type feynman_evaluation may create
VALID_CARD = {
    "userId": USER,
    "parentJobId": "p-1",
    "sourceResultId": "r-1",
    "knowledgeItemId": "ki-1",
    "knowledgeBaseId": "kb-1",
    "title": "Photosynthesis",
    "summary": "Plants make sugar from light.",
    "cardCount": 1,
}


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"k": value}
    return value


@dataclass(frozen=True)
class Bad:
    """A bad input as CreateJob takes it (``request``: CreateJobRequest fields, input as a
    dict) and as a stored template or job holds it (``stored``: column -> value), with
    the error CreateJob answers."""

    error: type[JobsError]
    message: str
    fields: tuple[str, ...]
    request: dict[str, Any]
    stored: dict[str, Any] = field(default_factory=dict)
    job_type: str = "synthetic"


BAD = {
    "input too large": Bad(
        InvalidInput,
        "input is too large",
        ("input",),
        {"input": {"pad": "x" * MAX_INPUT_BYTES}},
        {"input": {"pad": "x" * MAX_INPUT_BYTES}},
    ),
    "input too deep": Bad(
        InvalidInput,
        "input is nested too deeply",
        ("input",),
        {"input": nested(MAX_INPUT_DEPTH + 5)},
        {"input": nested(MAX_INPUT_DEPTH + 5)},
    ),
    "input not storable as JSON": Bad(
        InvalidInput,
        "input cannot be stored as JSON",
        ("input",),
        {"input": {"x": float("nan")}},
    ),
    "input not of the type's schema": Bad(
        InvalidInput,
        f"input does not match the {CHILD_TYPE} schema",
        ("input.cardCount",),
        {"input": {**VALID_CARD, "cardCount": 9}},
        {"input": {**VALID_CARD, "cardCount": 9}},
        job_type=CHILD_TYPE,
    ),
    "idempotency key malformed": Bad(
        InvalidInput,
        "idempotency_key is missing or malformed",
        ("idempotency_key",),
        {"idempotency_key": "k" * 256},
    ),
    "priority out of range": Bad(
        InvalidInput,
        "priority is out of range",
        ("priority",),
        {"priority": 5000},
        {"priority": 5000},
    ),
    "unknown prompt version": Bad(
        InvalidInput,
        "unknown prompt version for feynman_evaluation",
        ("prompt_version",),
        {"input": FEYNMAN_INPUT, "prompt_version": "9.9.9"},
        {"prompt_version": "9.9.9"},
        job_type="feynman_evaluation",
    ),
    "negative delay": Bad(
        InvalidInput, "delay is negative", ("delay",), {"delay": Duration(seconds=-1)}
    ),
    "unknown job type": Bad(
        UnknownJobType,
        "no worker has declared job type 'nope'",
        ("job_type",),
        {"job_type": "nope"},
        {"job_type": "nope"},
    ),
}

# Which producers can carry each bad input, and why the others cannot:
# - JSON that is not storable (NaN) cannot be stored in a template or a job to begin with;
# - a slot's idempotency key is the engine's (schedule:<id>:<slot>), a re-run has none;
# - only CreateJob pins versions (a re-run keeps its job's), only CreateJob delays;
# - a re-run re-admits its stored input as it is (a snapshot, not re-validated);
# - a parent names the child types it may create: another type is refused before.
CARRIED = {
    "input too large": {"create_job", "create_jobs", "child", "slot", "rerun"},
    "input too deep": {"create_job", "create_jobs", "child", "slot", "rerun"},
    "input not storable as JSON": {"create_job", "create_jobs", "child"},
    "input not of the type's schema": {"create_job", "create_jobs", "child", "slot"},
    "idempotency key malformed": {"create_job", "create_jobs", "child"},
    "priority out of range": {"create_job", "create_jobs", "child", "slot", "rerun"},
    "unknown prompt version": {"create_job", "create_jobs", "rerun"},
    "negative delay": {"create_job", "create_jobs"},
    "unknown job type": {"create_job", "create_jobs", "slot", "rerun"},
}


def create_request(bad: Bad) -> jpb.CreateJobRequest:
    fields = {"user_id": USER, "job_type": bad.job_type, "input": {}, **bad.request}
    fields["input"] = struct_from_dict(fields["input"])
    return jpb.CreateJobRequest(**fields)


def refusal(error: JobsError | None) -> tuple[type[JobsError] | None, str, tuple[str, ...]]:
    if error is None:
        return None, "", ()
    return type(error), error.message, tuple(dict.fromkeys(v.field for v in error.violations))


# --- the producers: each makes (or tries to make) a job of ``bad``; the refused call
# itself must store nothing (``stored_nothing``) --------------------------------------


async def stored_nothing(
    stack: SharedStack,
    call: Callable[[], Awaitable[JobsError | None]],
    tables: tuple[str, ...] | None = None,
) -> JobsError | None:
    """What ``call`` answers, having changed no row of ``tables`` (None: of any table)."""
    before = await count_rows(stack.database_url)
    error = await call()
    after = await count_rows(stack.database_url)
    changed = [t for t in tables or before if after[t] != before[t]]
    assert not changed, f"the refused call wrote {changed}"
    return error


async def rpc_error(call: Awaitable[Any]) -> JobsError | None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return error_from_rpc(raised.value)


async def via_create_job(stack: SharedStack, bad: Bad) -> JobsError | None:
    return await stored_nothing(
        stack, lambda: rpc_error(stack.client.jobs.CreateJob(create_request(bad)))
    )


async def via_create_jobs(stack: SharedStack, bad: Bad) -> JobsError | None:
    async def call() -> JobsError | None:
        answer = await stack.client.jobs.CreateJobs(
            jpb.CreateJobsRequest(requests=[create_request(bad)])
        )
        [result] = answer.results
        assert result.HasField("error"), "the item was created"
        return error_from_status(result.error)

    return await stored_nothing(stack, call)


async def via_child(stack: SharedStack, bad: Bad) -> JobsError | None:
    """A feynman_evaluation parent whose result projects the bad child: the projection is
    refused (no child, no artifact), failing the parent's attempt with CreateJob's message
    after "a child job's" (the child's fields are not kept: CreateJob's are assumed)."""
    parent = (
        await stack.client.create(user_id=USER, job_type="feynman_evaluation", **FEYNMAN_INPUT)
    ).job
    lease = (await stack.client.lock(parent.id)).job
    child = {"input": VALID_CARD, "idempotency_key": "card-1", **bad.request}
    request = result_request(parent.id, lease.lease_token, {"ok": True})
    request.child_jobs.append(
        epb.ChildJob(
            job_type=CHILD_TYPE,
            input=struct_from_dict(child["input"]),
            idempotency_key=child["idempotency_key"],
            priority=child.get("priority"),
        )
    )
    await stored_nothing(
        stack,
        lambda: stack.client.executor.SubmitResult(request),
        ("jobs", "job_snapshots", "job_artifacts"),
    )
    view = (await stack.client.admin.GetJob(apb.AdminGetJobRequest(job_id=parent.id))).job
    assert view.error_code == "INTERNAL_PROJECTION_REFUSED"
    message = view.internal_error_message
    assert message.startswith(CHILD_PREFIX), message
    return bad.error(
        message.removeprefix(CHILD_PREFIX), [FieldViolation(f, "") for f in bad.fields]
    )


async def plant(stack: SharedStack, statement: str, *args: Any) -> None:
    conn = await asyncpg.connect(stack.database_url)
    try:
        await conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )
        await conn.execute(statement, *args)
    finally:
        await conn.close()


async def via_schedule_slot(stack: SharedStack, bad: Bad) -> JobsError | None:
    """A paused schedule of a good template, the bad one planted, then TriggerSchedule."""
    template_input = VALID_CARD if bad.job_type == CHILD_TYPE else {}
    created = await stack.client.schedules.CreateSchedule(
        spb.CreateScheduleRequest(
            user_id=USER,
            spec=spb.ScheduleSpec(
                cron="0 2 * * *",
                job_template=spb.JobTemplate(
                    job_type=bad.job_type, input=struct_from_dict(template_input)
                ),
            ),
            paused=True,
        )
    )
    schedule_id = created.schedule.id
    for column, value in bad.stored.items():
        await plant(stack, f"UPDATE schedules SET {column} = $2 WHERE id = $1", schedule_id, value)
    trigger = spb.TriggerScheduleRequest(schedule_id=schedule_id, user_id=USER)
    return await stored_nothing(
        stack, lambda: rpc_error(stack.client.schedules.TriggerSchedule(trigger))
    )


async def via_rerun(stack: SharedStack, bad: Bad) -> JobsError | None:
    """A cancelled job, the bad input (or column) planted, then RetryJob."""
    job_input = FEYNMAN_INPUT if bad.job_type == "feynman_evaluation" else {}
    job_type = "feynman_evaluation" if bad.job_type == "feynman_evaluation" else "synthetic"
    job = (await stack.client.create(user_id=USER, job_type=job_type, **job_input)).job
    await stack.client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id=USER))
    for column, value in bad.stored.items():
        if column == "input":
            statement = "UPDATE job_snapshots SET payload = $2 WHERE job_id = $1"
        else:
            statement = f"UPDATE jobs SET {column} = $2 WHERE id = $1"
        await plant(stack, statement, job.id, value)
    retry = apb.RetryJobRequest(job_id=job.id)
    return await stored_nothing(stack, lambda: rpc_error(stack.client.admin.RetryJob(retry)))


PRODUCERS: dict[str, Callable[[SharedStack, Bad], Awaitable[JobsError | None]]] = {
    "create_job": via_create_job,
    "create_jobs": via_create_jobs,
    "child": via_child,
    "slot": via_schedule_slot,
    "rerun": via_rerun,
}


@pytest.mark.parametrize(
    ("case", "producer"),
    [(case, producer) for case in BAD for producer in PRODUCERS if producer in CARRIED[case]],
)
async def test_every_producer_refuses_a_bad_input_as_create_job_does_and_stores_nothing(
    shared_stack: SharedStack, case: str, producer: str
) -> None:
    bad = BAD[case]

    error = await PRODUCERS[producer](shared_stack, bad)

    assert refusal(error) == (bad.error, bad.message, bad.fields)
