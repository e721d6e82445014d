"""The role table, per RPC: every method of every service, tried with each role and each
kind of scoped token (JOBS_AUTH_TOKENS' ``users`` and ``job_types``). A refused call is
PERMISSION_DENIED and writes nothing; the operator role changes nothing; a scoped token
reaches no user or job type outside its scope (docs/api.md, "Auth, TLS and quotas")."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from job_service.app import JobServiceApp
from jobtypes import synthetic
from shared.job_type_specs import spec_of
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import credential_service_pb2 as cpb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pb.jobs.v1 import usage_service_pb2 as upb
from shared.pbconv import struct_from_dict
from tests.support.stack import TOKENS, count_rows, open_channel, running_job_service

CLIENT, ADMIN, OPERATOR, WORKER = "client", "admin", "operator", "worker"
LISTED, PREFIXED, TYPED = "client-listed", "client-prefixed", "client-typed"
TOKEN = {name: f"role-table-token-{name}" for name in (OPERATOR, LISTED, PREFIXED, TYPED)}
TOKEN |= {
    CLIENT: "test-token-client-0000",
    ADMIN: "test-token-admin-00000",
    WORKER: "test-token-worker-0000",
}
SCOPED_TOKENS = {
    TOKEN[OPERATOR]: {"principal": "ops-ada", "roles": ["operator"]},
    TOKEN[LISTED]: {"principal": "listed", "roles": ["client"], "users": ["in-1"]},
    TOKEN[PREFIXED]: {"principal": "prefixed", "roles": ["client"], "users": {"prefix": "in-"}},
    TOKEN[TYPED]: {"principal": "typed", "roles": ["client"], "job_types": ["synthetic"]},
}
OTHER_TYPE = "feynman_evaluation"
FEYNMAN_INPUT = {
    "knowledge_item_id": "ki-7",
    "knowledge_base_id": "kb-1",
    "title": "Osmosis",
    "content": "Water moves through a membrane towards the higher concentration of solutes.",
    "explanation": "Water goes where there is more salt.",
}
UNKNOWN = "00000000-0000-4000-8000-000000000000"
ROLE_TABLE_TYPE = replace(synthetic.DEFINITION, job_type="role_table_type", version="1")

# Every RPC by what it does, written out by hand (not read from the code under test): who
# may call it. A method missing here fails test_every_rpc_is_in_the_table.
CLIENT_READS = {
    "JobService": ["GetJob", "ListJobs", "WatchJob"],
    "CredentialService": ["ListCredentials"],
    "UsageService": ["GetUsage"],
    "ScheduleService": ["GetSchedule", "ListSchedules"],
}
CLIENT_WRITES = {
    "JobService": ["CreateJob", "CreateJobs", "CancelJob", "SendSignal"],
    "CredentialService": ["PutCredential", "DeleteCredential"],
    "ScheduleService": [
        "CreateSchedule",
        "UpdateSchedule",
        "PauseSchedule",
        "ResumeSchedule",
        "TriggerSchedule",
        "DeleteSchedule",
    ],
}
ADMIN_READS = {
    "AdminService": [
        "ListJobs",
        "GetJob",
        "ListDeadLetters",
        "ListJobDefinitions",
        "ListQueues",
        "ListRateLimits",
        "ListWorkers",
        "CountJobs",
        "OpenConsoleSession",
        "CheckConsoleSession",
        "CloseConsoleSession",
    ]
}
ADMIN_WRITES = {
    "AdminService": [
        "RetryJob",
        "RedriveDeadLetters",
        "PauseQueue",
        "ResumeQueue",
        "CancelJobs",
        "RetryJobs",
        "RevokeConsoleSessions",
        "EraseUserData",
    ]
}
WORKER_CALLS = {
    "ExecutorService": [m.name for m in epb.DESCRIPTOR.services_by_name["ExecutorService"].methods]
}
MAY_CALL = {
    CLIENT: [CLIENT_READS, CLIENT_WRITES],
    ADMIN: [CLIENT_READS, CLIENT_WRITES, ADMIN_READS, ADMIN_WRITES],
    OPERATOR: [CLIENT_READS, ADMIN_READS],
    WORKER: [WORKER_CALLS],
    LISTED: [CLIENT_READS, CLIENT_WRITES],
    PREFIXED: [CLIENT_READS, CLIENT_WRITES],
    TYPED: [CLIENT_READS, CLIENT_WRITES],
}
SERVICES = {
    "JobService": jpb,
    "CredentialService": cpb,
    "UsageService": upb,
    "ScheduleService": spb,
    "AdminService": apb,
    "ExecutorService": epb,
}
# The order calls are made in: reads first, deletes last (a token's objects stay until
# every call that names them has been made).
LAST = ("DeleteSchedule", "DeleteCredential")


def methods(groups: list[dict[str, list[str]]]) -> set[str]:
    return {f"/jobs.v1.{s}/{m}" for group in groups for s, names in group.items() for m in names}


def every_rpc() -> list[str]:
    found = [
        f"/jobs.v1.{service}/{method.name}"
        for service, module in SERVICES.items()
        for method in module.DESCRIPTOR.services_by_name[service].methods
    ]
    return sorted(found, key=lambda m: (m.rsplit("/", 1)[1] in LAST, m))


def test_every_rpc_is_in_the_table() -> None:
    table = methods([CLIENT_READS, CLIENT_WRITES, ADMIN_READS, ADMIN_WRITES, WORKER_CALLS])
    assert set(every_rpc()) == table


@dataclass
class Objects:
    """One user's things a call may name."""

    user: str
    job: str
    schedule: str
    credential: str
    job_type: str = "synthetic"


def make(method: str, /, **fields: Any) -> Message:
    """``method``'s request with ``fields``."""
    made: Message = message_factory.GetMessageClass(_method(method).input_type)(**fields)
    return made


def requests(o: Objects) -> dict[str, Message]:
    """A request per RPC, naming ``o``'s user and things; each would change something
    if it got through."""
    template = spb.JobTemplate(job_type=o.job_type, input=struct_from_dict({}))
    spec = spb.ScheduleSpec(cron="0 0 1 1 *", job_template=template)
    create = jpb.CreateJobRequest(user_id=o.user, job_type=o.job_type)
    if o.job_type == OTHER_TYPE:
        create.input.CopyFrom(struct_from_dict(FEYNMAN_INPUT))
        spec.job_template.input.CopyFrom(struct_from_dict(FEYNMAN_INPUT))
    by_job = {"job_id": o.job, "user_id": o.user}
    by_schedule = {"schedule_id": o.schedule, "user_id": o.user}
    lease = {"job_id": o.job, "lease_token": UNKNOWN}
    since = Timestamp()
    since.FromSeconds(1_700_000_000)
    selection = apb.JobSelection(job_ids=[o.job])
    j, c = "/jobs.v1.JobService/", "/jobs.v1.CredentialService/"
    s, a, e = "/jobs.v1.ScheduleService/", "/jobs.v1.AdminService/", "/jobs.v1.ExecutorService/"
    day, until = Timestamp(), Timestamp()
    day.FromSeconds(1_699_920_000)  # a UTC midnight
    until.FromSeconds(1_699_920_000 + 86_400)
    return {
        j + "CreateJob": create,
        j + "CreateJobs": make(j + "CreateJobs", requests=[create]),
        j + "GetJob": make(j + "GetJob", **by_job),
        j + "CancelJob": make(j + "CancelJob", **by_job),
        j + "ListJobs": make(j + "ListJobs", user_id=o.user),
        j + "WatchJob": make(j + "WatchJob", **by_job),
        j + "SendSignal": make(j + "SendSignal", **by_job, name="nudge"),
        c + "PutCredential": make(
            c + "PutCredential", user_id=o.user, provider="openai", api_key="sk-role-table"
        ),
        c + "ListCredentials": make(c + "ListCredentials", user_id=o.user),
        c + "DeleteCredential": make(
            c + "DeleteCredential", user_id=o.user, credential_id=o.credential
        ),
        "/jobs.v1.UsageService/GetUsage": make(
            "/jobs.v1.UsageService/GetUsage", user_id=o.user, start_time=day, end_time=until
        ),
        s + "CreateSchedule": make(s + "CreateSchedule", user_id=o.user, spec=spec, paused=True),
        s + "GetSchedule": make(s + "GetSchedule", **by_schedule),
        s + "ListSchedules": make(s + "ListSchedules", user_id=o.user),
        s + "UpdateSchedule": make(s + "UpdateSchedule", **by_schedule, spec=spec),
        s + "PauseSchedule": make(s + "PauseSchedule", **by_schedule),
        s + "ResumeSchedule": make(s + "ResumeSchedule", **by_schedule),
        s + "DeleteSchedule": make(s + "DeleteSchedule", **by_schedule),
        s + "TriggerSchedule": make(s + "TriggerSchedule", **by_schedule),
        a + "ListJobs": make(a + "ListJobs"),
        a + "GetJob": make(a + "GetJob", job_id=o.job),
        a + "RetryJob": make(a + "RetryJob", job_id=o.job),
        a + "ListDeadLetters": make(a + "ListDeadLetters"),
        a + "RedriveDeadLetters": make(a + "RedriveDeadLetters", event_ids=[1]),
        a + "ListJobDefinitions": make(a + "ListJobDefinitions"),
        a + "PauseQueue": make(a + "PauseQueue", queue="default"),
        a + "ResumeQueue": make(a + "ResumeQueue", queue="default"),
        a + "ListQueues": make(a + "ListQueues"),
        a + "ListRateLimits": make(a + "ListRateLimits"),
        a + "CancelJobs": make(a + "CancelJobs", selection=selection),
        a + "RetryJobs": make(a + "RetryJobs", selection=selection),
        a + "ListWorkers": make(a + "ListWorkers"),
        a + "CountJobs": make(a + "CountJobs", since=since),
        a + "OpenConsoleSession": make(a + "OpenConsoleSession"),
        a + "CheckConsoleSession": make(a + "CheckConsoleSession", session_id=UNKNOWN),
        a + "CloseConsoleSession": make(a + "CloseConsoleSession", session_id=UNKNOWN),
        a + "RevokeConsoleSessions": make(a + "RevokeConsoleSessions", principal="test-client"),
        # a user with nothing stored: an admin's erase goes through and finds nothing
        a + "EraseUserData": make(a + "EraseUserData", user_id="role-table-nobody"),
        e + "LockJob": make(e + "LockJob", job_id=o.job, worker_id="role-table"),
        e + "Heartbeat": make(e + "Heartbeat", **lease),
        e + "SubmitResult": make(e + "SubmitResult", **lease),
        e + "SubmitFailure": make(e + "SubmitFailure", **lease, error_code="X"),
        e + "LockJobs": make(e + "LockJobs"),
        e + "SubmitResults": make(e + "SubmitResults"),
        e + "ResolveCredential": make(e + "ResolveCredential", **lease),
        e + "WorkerSession": make(e + "WorkerSession", worker_id="role-table", goodbye=True),
        e + "ReportUsage": make(e + "ReportUsage", **lease),
        e + "RecordStep": make(e + "RecordStep", **lease),
        e + "RecordStepResult": make(e + "RecordStepResult", **lease),
        e + "FetchSignals": make(e + "FetchSignals", **lease),
        e + "AcquireCallPermit": make(e + "AcquireCallPermit", **lease),
        e + "ReportRateLimited": make(e + "ReportRateLimited", **lease),
        e + "FetchDependencyResults": make(e + "FetchDependencyResults", **lease),
        # a valid spec of a type not declared yet: stored if the call got through
        e + "DeclareJobType": make(
            e + "DeclareJobType", worker_id="role-table", spec=spec_of(ROLE_TABLE_TYPE)
        ),
    }


def _method(name: str) -> Any:
    service, method = name.strip("/").split("/")
    module = SERVICES[service.removeprefix("jobs.v1.")]
    return module.DESCRIPTOR.services_by_name[service.removeprefix("jobs.v1.")].methods_by_name[
        method
    ]


async def call(channel: grpc.aio.Channel, name: str, request: Message) -> str:
    """The call's outcome: "ok", or the gRPC status code's name."""
    descriptor = _method(name)
    answer = message_factory.GetMessageClass(descriptor.output_type)
    options: dict[str, Callable[..., Any]] = {
        "request_serializer": type(request).SerializeToString,
        "response_deserializer": answer.FromString,
    }
    try:
        if descriptor.client_streaming:
            stream = channel.stream_stream(name, **options)(iter([request]), timeout=10)
            async for _ in stream:
                pass
        elif descriptor.server_streaming:
            watch = channel.unary_stream(name, **options)(request, timeout=10)
            async for _ in watch:
                watch.cancel()  # the first answer says it got through
                break
        else:
            await channel.unary_unary(name, **options)(request, timeout=10)
    except grpc.aio.AioRpcError as error:
        return str(error.code().name)
    return "ok"


async def fingerprint(database_url: str) -> tuple[object, ...]:
    """What a write would change: row counts, jobs' status and priority, schedules' state,
    queues' pauses, credentials and console sessions."""
    conn = await asyncpg.connect(database_url)
    try:
        rows = [
            await conn.fetch(query)
            for query in (
                "SELECT id::text, status::text, priority FROM jobs ORDER BY id",
                "SELECT id::text, paused, cron, job_type FROM schedules ORDER BY id",
                "SELECT queue, paused FROM queue_controls ORDER BY queue",
                "SELECT id::text FROM credentials ORDER BY id",
                "SELECT count(*) FROM console_sessions",
            )
        ]
    finally:
        await conn.close()
    counts = await count_rows(database_url)
    return (tuple(sorted(counts.items())), *(tuple(tuple(r) for r in rs) for rs in rows))


@pytest.fixture
async def service(database_url: str, nats_url: str) -> AsyncIterator[JobServiceApp]:
    tokens = json.dumps({**TOKENS, **SCOPED_TOKENS})
    # long leases: the job the worker role locks must not expire (and be retried, a write
    # of the reaper's) while the table's later calls are checked for writing nothing
    async with running_job_service(
        database_url, nats_url, auth_tokens=tokens, lease_ttl_s=600, heartbeat_interval_s=1
    ) as app:
        yield app


async def objects_of(target: str, user: str, job_type: str = "synthetic") -> Objects:
    """A queued job, a paused schedule and a stored key of ``user``, made by an admin."""
    async with open_channel(target, TOKEN[ADMIN]) as channel:
        made = requests(Objects(user, UNKNOWN, UNKNOWN, UNKNOWN, job_type))
        job = jpb.CreateJobResponse.FromString(
            await _raw(channel, "/jobs.v1.JobService/CreateJob", made)
        ).job.id
        schedule = spb.CreateScheduleResponse.FromString(
            await _raw(channel, "/jobs.v1.ScheduleService/CreateSchedule", made)
        ).schedule.id
        credential = cpb.PutCredentialResponse.FromString(
            await _raw(channel, "/jobs.v1.CredentialService/PutCredential", made)
        ).credential.id
    return Objects(user, job, schedule, credential, job_type)


async def _raw(channel: grpc.aio.Channel, name: str, made: dict[str, Message]) -> bytes:
    answer: bytes = await channel.unary_unary(name)(made[name].SerializeToString(), timeout=10)
    return answer


ROLES = [CLIENT, ADMIN, OPERATOR, WORKER, LISTED, PREFIXED, TYPED]


@pytest.mark.parametrize("role", ROLES)
async def test_each_role_and_scope_reaches_what_it_may_and_writes_nothing_else(
    service: JobServiceApp, database_url: str, role: str
) -> None:
    target = f"127.0.0.1:{service.port}"
    allowed = methods(MAY_CALL[role])
    mine = await objects_of(target, "in-1")
    outcomes: dict[str, str] = {}
    async with open_channel(target, TOKEN[role]) as channel:
        for name, request in sorted(requests(mine).items(), key=lambda i: every_rpc().index(i[0])):
            before = await fingerprint(database_url)
            outcomes[name] = await call(channel, name, request)
            if outcomes[name] == "PERMISSION_DENIED":
                assert await fingerprint(database_url) == before, f"{name} wrote"
    denied = {name for name, outcome in outcomes.items() if outcome == "PERMISSION_DENIED"}
    assert "UNAUTHENTICATED" not in outcomes.values()
    if role == TYPED:  # usage adds up every job type: not for a token narrowed to some
        allowed.remove("/jobs.v1.UsageService/GetUsage")
    assert denied == set(outcomes) - allowed, role
    if role == WORKER:  # the one role that declares job types, and it does
        assert outcomes["/jobs.v1.ExecutorService/DeclareJobType"] == "ok"


@pytest.mark.parametrize("role", [LISTED, PREFIXED])
async def test_a_user_scoped_token_reaches_no_other_user(
    service: JobServiceApp, database_url: str, role: str
) -> None:
    target = f"127.0.0.1:{service.port}"
    theirs = await objects_of(target, "out-1")
    mine = await objects_of(target, "in-1")
    # their things named with their user id: refused before anything is read or written
    async with open_channel(target, TOKEN[role]) as channel:
        for name in methods([CLIENT_READS, CLIENT_WRITES]):
            before = await fingerprint(database_url)
            assert await call(channel, name, requests(theirs)[name]) == "PERMISSION_DENIED", name
            assert await fingerprint(database_url) == before, name
        # their things named with my user id: not found, as another user's always were
        stolen = Objects("in-1", theirs.job, theirs.schedule, theirs.credential)
        for name in ("GetJob", "CancelJob", "WatchJob", "SendSignal"):
            outcome = await call(
                channel,
                f"/jobs.v1.JobService/{name}",
                requests(stolen)[f"/jobs.v1.JobService/{name}"],
            )
            assert outcome == "NOT_FOUND", name
        listed = jpb.ListJobsResponse.FromString(
            await channel.unary_unary("/jobs.v1.JobService/ListJobs")(
                jpb.ListJobsRequest(user_id="in-1").SerializeToString()
            )
        )
    assert {j.user_id for j in listed.jobs} == {"in-1"}
    assert mine.job in {j.id for j in listed.jobs}
    assert theirs.job not in {j.id for j in listed.jobs}


async def test_a_type_scoped_token_reaches_no_other_job_type(
    service: JobServiceApp, database_url: str
) -> None:
    target = f"127.0.0.1:{service.port}"
    other = await objects_of(target, "in-1", OTHER_TYPE)
    mine = await objects_of(target, "in-1")
    async with open_channel(target, TOKEN[TYPED]) as channel:
        # creating another type's job or schedule is refused; usage adds up every type
        for name in (
            "/jobs.v1.JobService/CreateJob",
            "/jobs.v1.JobService/CreateJobs",
            "/jobs.v1.ScheduleService/CreateSchedule",
            "/jobs.v1.ScheduleService/UpdateSchedule",
            "/jobs.v1.UsageService/GetUsage",
        ):
            before = await fingerprint(database_url)
            assert await call(channel, name, requests(other)[name]) == "PERMISSION_DENIED", name
            assert await fingerprint(database_url) == before, name
        # another type's job or schedule, by id: not found, and untouched
        by_id = [
            f"/jobs.v1.JobService/{m}" for m in ("GetJob", "CancelJob", "WatchJob", "SendSignal")
        ]
        by_id += [
            f"/jobs.v1.ScheduleService/{m}"
            for m in ("GetSchedule", "PauseSchedule", "ResumeSchedule", "TriggerSchedule")
        ]
        for name in by_id:
            before = await fingerprint(database_url)
            assert await call(channel, name, requests(other)[name]) == "NOT_FOUND", name
            assert await fingerprint(database_url) == before, name
        # lists hold only its types
        jobs = jpb.ListJobsResponse.FromString(
            await channel.unary_unary("/jobs.v1.JobService/ListJobs")(
                jpb.ListJobsRequest(user_id="in-1").SerializeToString()
            )
        )
        schedules = spb.ListSchedulesResponse.FromString(
            await channel.unary_unary("/jobs.v1.ScheduleService/ListSchedules")(
                spb.ListSchedulesRequest(user_id="in-1").SerializeToString()
            )
        )
    assert [j.id for j in jobs.jobs] == [mine.job]
    assert [s.id for s in schedules.schedules] == [mine.schedule]
