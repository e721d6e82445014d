"""Bad input changes nothing: every request type, sent malformed, is refused with its
documented code and reason (exactly one ErrorInfo), and every table keeps its row count.

The table below is the contract; docs/api.md ("The API", its error table) documents the
same codes. This module: the JobService (CreateJob, CreateJobs, GetJob, ListJobs,
CancelJob, WatchJob, SendSignal, dependencies); the ExecutorService and the WorkerSession
stream: test_bad_input_executor.py; the AdminService, CredentialService and UsageService:
test_bad_input_admin.py; the ScheduleService: test_bad_input_schedules.py."""

from __future__ import annotations

import uuid

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from job_service.domain.checks import MAX_INPUT_BYTES
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from tests.support.ai import FEYNMAN_INPUT
from tests.support.bad_input import (
    CONTROL,
    INVALID,
    JOB,
    LONG,
    NOT_FOUND,
    NOW,
    PRECONDITION,
    SHELL,
    SQL,
    UNKNOWN_ID,
    Case,
    assert_refused_and_unchanged,
    create,
    deep_create,
    encoded_field,
    nested_input,
    signal,
)
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import (
    ALL_ROLES_TOKEN,
    WORKER_TOKEN,
    count_rows,
)

__all__ = ["shared_stack"]  # the module's stack, used as a fixture

CASES: dict[str, Case] = {
    # --- CreateJob
    "create: no user": Case(JOB + "CreateJob", create(user_id=""), INVALID, "INVALID_INPUT"),
    "create: user with control characters": Case(
        JOB + "CreateJob", create(user_id=CONTROL), INVALID, "INVALID_INPUT"
    ),
    "create: user too long": Case(
        JOB + "CreateJob", create(user_id=LONG), INVALID, "INVALID_INPUT"
    ),
    "create: no job type": Case(JOB + "CreateJob", create(job_type=""), INVALID, "INVALID_INPUT"),
    "create: unknown job type": Case(
        JOB + "CreateJob", create(job_type="nope"), NOT_FOUND, "UNKNOWN_JOB_TYPE"
    ),
    "create: SQL in job type": Case(
        JOB + "CreateJob", create(job_type=SQL), INVALID, "INVALID_INPUT"
    ),
    "create: shell in job type": Case(
        JOB + "CreateJob", create(job_type=SHELL), INVALID, "INVALID_INPUT"
    ),
    "create: input fails the schema": Case(
        JOB + "CreateJob", create(input={"sleep_ms": -1}), INVALID, "INVALID_INPUT"
    ),
    "create: input of the wrong type": Case(
        JOB + "CreateJob", create(input={"fail": SQL}), INVALID, "INVALID_INPUT"
    ),
    "create: unknown input field": Case(
        JOB + "CreateJob", create(input={"rm -rf /": SHELL}), INVALID, "INVALID_INPUT"
    ),
    "create: huge number": Case(
        JOB + "CreateJob", create(input={"sleep_ms": 1e300}), INVALID, "INVALID_INPUT"
    ),
    "create: negative huge number": Case(
        JOB + "CreateJob", create(input={"output_bytes": -(2**62)}), INVALID, "INVALID_INPUT"
    ),
    "create: NaN": Case(
        JOB + "CreateJob", create(input={"sleep_ms": float("nan")}), INVALID, "INVALID_INPUT"
    ),
    "create: control characters in input": Case(
        JOB + "CreateJob", create(input={"fail": "none\x00"}), INVALID, "INVALID_INPUT"
    ),
    "create: input over the documented 256 KiB": Case(
        JOB + "CreateJob",
        create(input={"pad": "x" * (MAX_INPUT_BYTES + 1)}),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: input nested 21 deep": Case(
        JOB + "CreateJob", create(input=nested_input(21)), INVALID, "INVALID_INPUT"
    ),
    "create: input nested past protobuf's limit": Case(
        JOB + "CreateJob", lambda s: deep_create(200), INVALID, "INVALID_INPUT"
    ),
    # --- CreateJob: targets and version pins (issue 14)
    "create: SQL in target type": Case(
        JOB + "CreateJob", create(target_type=SQL, target_id="ki-1"), INVALID, "INVALID_INPUT"
    ),
    "create: target id without a type": Case(
        JOB + "CreateJob", create(target_id="ki-1"), INVALID, "INVALID_INPUT"
    ),
    "create: target type without an id": Case(
        JOB + "CreateJob", create(target_type="knowledge_item"), INVALID, "INVALID_INPUT"
    ),
    "create: target id too long": Case(
        JOB + "CreateJob",
        create(target_type="knowledge_item", target_id=LONG),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: target type too long": Case(
        JOB + "CreateJob", create(target_type="t" * 33, target_id="x"), INVALID, "INVALID_INPUT"
    ),
    "create: unknown prompt version": Case(
        JOB + "CreateJob",
        create(job_type="feynman_evaluation", input=FEYNMAN_INPUT, prompt_version="9.9.9"),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: prompt version for a type without a prompt": Case(
        JOB + "CreateJob", create(prompt_version="1.0.0"), INVALID, "INVALID_INPUT"
    ),
    "create: SQL as prompt version": Case(
        JOB + "CreateJob",
        create(job_type="feynman_evaluation", input=FEYNMAN_INPUT, prompt_version=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: unknown output schema version": Case(
        JOB + "CreateJob", create(output_schema_version="2"), INVALID, "INVALID_INPUT"
    ),
    "create: priority too high": Case(
        JOB + "CreateJob", create(priority=2**31 - 1), INVALID, "INVALID_INPUT"
    ),
    "create: priority too low": Case(
        JOB + "CreateJob", create(priority=-(2**31)), INVALID, "INVALID_INPUT"
    ),
    "create: idempotency key with control characters": Case(
        JOB + "CreateJob", create(idempotency_key="k\x07"), INVALID, "INVALID_INPUT"
    ),
    "create: idempotency key reused for another request": Case(
        JOB + "CreateJob",
        create(idempotency_key="the-key", input={"sleep_ms": 2}),
        PRECONDITION,
        "IDEMPOTENCY_KEY_REUSED",
    ),
    "create: non-UTF-8 user id": Case(
        JOB + "CreateJob",
        lambda s: b"\x0a\x04al\xff\xfe\x12\x09synthetic",
        INVALID,
        "INVALID_INPUT",
    ),
    "create: not a protobuf at all": Case(
        JOB + "CreateJob", lambda s: b"\xff\xff\xff\xff", INVALID, "INVALID_INPUT"
    ),
    "create: no token": Case(
        JOB + "CreateJob", create(), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", token=""
    ),
    "create: wrong token": Case(
        JOB + "CreateJob",
        create(),
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
        token="test-token-client-0001",
    ),
    "create: worker role": Case(
        JOB + "CreateJob",
        create(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    # --- GetJob / CancelJob / WatchJob
    **{
        f"{verb}: {what}": Case(JOB + method, request, code, reason, stream=method == "WatchJob")
        for verb, method, cls in (
            ("get", "GetJob", jpb.GetJobRequest),
            ("cancel", "CancelJob", jpb.CancelJobRequest),
            ("watch", "WatchJob", jpb.WatchJobRequest),
        )
        for what, request, code, reason in (
            ("no id", lambda s, c=cls: c(user_id="alice"), INVALID, "INVALID_INPUT"),
            ("SQL id", lambda s, c=cls: c(job_id=SQL, user_id="alice"), INVALID, "INVALID_INPUT"),
            (
                "no user",
                lambda s, c=cls: c(job_id=s.queued, user_id=""),
                INVALID,
                "INVALID_INPUT",
            ),
            (
                "another user's job",
                lambda s, c=cls: c(job_id=s.queued, user_id="mallory"),
                NOT_FOUND,
                "JOB_NOT_FOUND",
            ),
            (
                "SQL as user",
                lambda s, c=cls: c(job_id=s.queued, user_id=SQL),
                NOT_FOUND,
                "JOB_NOT_FOUND",
            ),
            (
                "unknown job",
                lambda s, c=cls: c(job_id=UNKNOWN_ID, user_id="alice"),
                NOT_FOUND,
                "JOB_NOT_FOUND",
            ),
        )
    },
    "cancel: a finished job": Case(
        JOB + "CancelJob",
        lambda s: jpb.CancelJobRequest(job_id=s.succeeded, user_id="alice"),
        PRECONDITION,
        "JOB_NOT_CANCELLABLE",
    ),
    "cancel: a cancelled job": Case(
        JOB + "CancelJob",
        lambda s: jpb.CancelJobRequest(job_id=s.cancelled, user_id="alice"),
        PRECONDITION,
        "JOB_ALREADY_CANCELLED",
    ),
    "cancel: worker role": Case(
        JOB + "CancelJob",
        lambda s: jpb.CancelJobRequest(job_id=s.queued, user_id="alice"),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    # --- ListJobs
    "list: negative page size": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", page_size=-1),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: forged page token": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", page_token="eyJqb2JzIjpbXX0.AAAA"),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: SQL page token": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", page_token=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: id suffix too short": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", id_suffix="abc12"),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: id suffix not hexadecimal": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", id_suffix="zz1234"),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: SQL id suffix": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", id_suffix=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: no user": Case(
        JOB + "ListJobs", lambda s: jpb.ListJobsRequest(), INVALID, "INVALID_INPUT"
    ),
    "list: SQL target type": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", target_type=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: target id without a type": Case(
        JOB + "ListJobs",
        lambda s: jpb.ListJobsRequest(user_id="alice", target_id="ki-1"),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- scheduling
    "create: both run_at and delay": Case(
        JOB + "CreateJob",
        create(run_at=Timestamp(seconds=NOW + 60), delay=Duration(seconds=5)),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: negative delay": Case(
        JOB + "CreateJob", create(delay=Duration(seconds=-1)), INVALID, "INVALID_INPUT"
    ),
    "create: delay over a year": Case(
        JOB + "CreateJob", create(delay=Duration(seconds=400 * 86400)), INVALID, "INVALID_INPUT"
    ),
    "create: run_at over a year ahead": Case(
        JOB + "CreateJob",
        create(run_at=Timestamp(seconds=NOW + 400 * 86400)),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: run_at beyond year 9999": Case(
        JOB + "CreateJob",
        create(run_at=Timestamp(seconds=253_402_300_800)),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- deadlines (issue 45)
    "create: deadline passed": Case(
        JOB + "CreateJob", create(deadline=Timestamp(seconds=NOW - 60)), INVALID, "INVALID_INPUT"
    ),
    "create: deadline before run_at": Case(
        JOB + "CreateJob",
        create(run_at=Timestamp(seconds=NOW + 600), deadline=Timestamp(seconds=NOW + 300)),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: deadline within the delay": Case(
        JOB + "CreateJob",
        create(delay=Duration(seconds=600), deadline=Timestamp(seconds=NOW + 300)),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: deadline over a year after due": Case(
        JOB + "CreateJob",
        create(deadline=Timestamp(seconds=NOW + 400 * 86400)),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: deadline beyond year 9999": Case(
        JOB + "CreateJob",
        create(deadline=Timestamp(seconds=253_402_300_800)),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- CreateJobs (issue 13): the call as a whole; a bad item is refused in its answer
    "create batch: no items": Case(
        JOB + "CreateJobs", lambda s: jpb.CreateJobsRequest(), INVALID, "INVALID_INPUT"
    ),
    "create batch: 501 items": Case(
        JOB + "CreateJobs",
        lambda s: jpb.CreateJobsRequest(
            requests=[jpb.CreateJobRequest(user_id="alice", job_type="synthetic")] * 501
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "create batch: not UTF-8 inside an item": Case(
        JOB + "CreateJobs",
        lambda s: encoded_field(1, encoded_field(1, b"\xff\xfe") + encoded_field(2, b"synthetic")),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- SendSignal
    **{
        f"signal: {label}": Case(JOB + "SendSignal", request, code, reason)
        for label, request, code, reason in (
            ("no name", lambda s: signal(s.running, name=""), INVALID, "INVALID_INPUT"),
            ("name too long", lambda s: signal(s.running, name="n" * 65), INVALID, "INVALID_INPUT"),
            ("SQL as name", lambda s: signal(s.running, name=SQL), INVALID, "INVALID_INPUT"),
            (
                "control characters in name",
                lambda s: signal(s.running, name=CONTROL),
                INVALID,
                "INVALID_INPUT",
            ),
            (
                "payload too large",
                lambda s: signal(s.running, payload={"x": "y" * 70_000}),
                INVALID,
                "INVALID_INPUT",
            ),
            (
                "payload nested too deeply",
                lambda s: signal(s.running, payload=nested_input(25)),
                INVALID,
                "INVALID_INPUT",
            ),
            (
                "NUL in payload",
                lambda s: signal(s.running, payload={"x": "a\x00b"}),
                INVALID,
                "INVALID_INPUT",
            ),
            ("malformed job id", lambda s: signal(SQL), INVALID, "INVALID_INPUT"),
            ("no user", lambda s: signal(s.running, user_id=""), INVALID, "INVALID_INPUT"),
            (
                "key too long",
                lambda s: signal(s.running, idempotency_key=LONG),
                INVALID,
                "INVALID_INPUT",
            ),
            ("unknown job", lambda s: signal(UNKNOWN_ID), NOT_FOUND, "JOB_NOT_FOUND"),
            (
                "another user's job",
                lambda s: signal(s.running, user_id="mallory"),
                NOT_FOUND,
                "JOB_NOT_FOUND",
            ),
            ("a succeeded job", lambda s: signal(s.succeeded), PRECONDITION, "JOB_FINISHED"),
            ("a cancelled job", lambda s: signal(s.cancelled), PRECONDITION, "JOB_FINISHED"),
        )
    },
    "signal: worker role": Case(
        JOB + "SendSignal",
        lambda s: signal(s.running),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    # --- dependencies: CreateJob's depends_on, FetchDependencyResults
    "create: a dependency that is no job id": Case(
        JOB + "CreateJob", create(depends_on=[SQL]), INVALID, "INVALID_INPUT"
    ),
    "create: another user's job as a dependency": Case(
        JOB + "CreateJob",
        lambda s: jpb.CreateJobRequest(user_id="bob", job_type="synthetic", depends_on=[s.running]),
        grpc.StatusCode.NOT_FOUND,
        "JOB_NOT_FOUND",
    ),
    "create: a dependency named twice": Case(
        JOB + "CreateJob",
        lambda s: jpb.CreateJobRequest(
            user_id="alice", job_type="synthetic", depends_on=[s.running, s.running.upper()]
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: dependencies and a delay": Case(
        JOB + "CreateJob",
        lambda s: jpb.CreateJobRequest(
            user_id="alice",
            job_type="synthetic",
            depends_on=[s.running],
            delay=Duration(seconds=5),
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: a dependency policy without dependencies": Case(
        JOB + "CreateJob",
        create(dependency_policy=job_pb2.DEPENDENCY_POLICY_RUN),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: an unknown dependency policy": Case(
        JOB + "CreateJob",
        lambda s: jpb.CreateJobRequest(
            user_id="alice", job_type="synthetic", depends_on=[s.running], dependency_policy=99
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: 10,001 dependencies": Case(
        JOB + "CreateJob",
        create(depends_on=[str(uuid.UUID(int=n)) for n in range(10_001)]),
        INVALID,
        "INVALID_INPUT",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_bad_input_is_refused_and_changes_nothing(
    shared_stack: SharedStack, name: str
) -> None:
    await assert_refused_and_unchanged(shared_stack, name, CASES[name])


async def test_a_request_over_the_grpc_message_limit_changes_nothing(
    shared_stack: SharedStack,
) -> None:
    before = await count_rows(shared_stack.database_url)
    big = jpb.CreateJobRequest(
        user_id="alice",
        job_type="synthetic",
        input=struct_from_dict({"pad": "x" * (65 * 1024 * 1024)}),
    )
    # a client willing to send it; the server's limit (64 MiB) refuses it
    options = [("grpc.max_send_message_length", 128 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(shared_stack.target, options=options) as channel:
        call = channel.unary_unary(
            JOB + "CreateJob", request_serializer=jpb.CreateJobRequest.SerializeToString
        )
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call(big, metadata=(("authorization", f"Bearer {ALL_ROLES_TOKEN}"),))
    assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert await count_rows(shared_stack.database_url) == before


async def test_metacharacters_in_free_text_fields_are_stored_as_data(
    shared_stack: SharedStack,
) -> None:
    """user_id and idempotency_key are opaque strings: metacharacters are kept verbatim
    (queries are parameterised), and the job is found again under exactly that user."""
    client = shared_stack.client
    for value in (SQL, SHELL, "ünïcödé ☃ 𝄞", "' OR '1'='1"):
        created = await client.create(user_id=value, key=value)
        assert created.created
        assert (await client.get(created.job.id, user_id=value)).idempotency_key == value
        listed = await client.jobs.ListJobs(jpb.ListJobsRequest(user_id=value))
        assert [j.id for j in listed.jobs] == [created.job.id]
