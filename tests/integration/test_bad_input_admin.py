"""Bad input changes nothing (test_bad_input.py has the contract): the AdminService, the
CredentialService (roles and ids; its own validation is tested with it) and the
UsageService."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import credential_service_pb2 as cpb
from shared.pb.jobs.v1 import usage_service_pb2 as upb
from tests.support.bad_input import (
    ADMIN,
    CONTROL,
    CRED,
    INVALID,
    LONG,
    MIDNIGHT,
    NOT_FOUND,
    NOW,
    PRECONDITION,
    SHELL,
    SQL,
    UNKNOWN_ID,
    USAGE,
    Case,
    assert_refused_and_unchanged,
    usage,
)
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import (
    ALL_ROLES_TOKEN,
    CLIENT_TOKEN,
    WORKER_TOKEN,
)

__all__ = ["shared_stack"]  # the module's stack, used as a fixture

CASES: dict[str, Case] = {
    "admin list: id suffix longer than an id": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(id_suffix="0" * 33),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- AdminService
    "admin get: malformed id": Case(
        ADMIN + "GetJob", lambda s: apb.AdminGetJobRequest(job_id=SHELL), INVALID, "INVALID_INPUT"
    ),
    "admin get: unknown id": Case(
        ADMIN + "GetJob",
        lambda s: apb.AdminGetJobRequest(job_id=UNKNOWN_ID),
        NOT_FOUND,
        "JOB_NOT_FOUND",
    ),
    "admin get: client role": Case(
        ADMIN + "GetJob",
        lambda s: apb.AdminGetJobRequest(job_id=s.queued),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "retry: a queued job": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.queued),
        PRECONDITION,
        "JOB_NOT_RETRYABLE",
    ),
    "retry: a running job": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.running),
        PRECONDITION,
        "JOB_NOT_RETRYABLE",
    ),
    "retry: a succeeded job": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.succeeded),
        PRECONDITION,
        "JOB_NOT_RETRYABLE",
    ),
    "retry: unknown job": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=UNKNOWN_ID),
        NOT_FOUND,
        "JOB_NOT_FOUND",
    ),
    "retry: no id": Case(
        ADMIN + "RetryJob", lambda s: apb.RetryJobRequest(), INVALID, "INVALID_INPUT"
    ),
    "retry: an oversized idempotency key": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.cancelled, idempotency_key="k" * 256),
        INVALID,
        "INVALID_INPUT",
    ),
    "retry: an idempotency key with a control character": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.cancelled, idempotency_key="op\x00-1"),
        INVALID,
        "INVALID_INPUT",
    ),
    "retry: client role": Case(
        ADMIN + "RetryJob",
        lambda s: apb.RetryJobRequest(job_id=s.cancelled),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "admin list: unknown status": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(status=1234),  # type: ignore[arg-type]
        INVALID,
        "INVALID_INPUT",
    ),
    "admin list: SQL job type": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(job_type=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "admin list: target id without a type": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(target_id="ki-1"),
        INVALID,
        "INVALID_INPUT",
    ),
    "admin list: target id with control characters": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(target_type="knowledge_item", target_id=CONTROL),
        INVALID,
        "INVALID_INPUT",
    ),
    "admin list: SQL queue": Case(
        ADMIN + "ListJobs", lambda s: apb.AdminListJobsRequest(queue=SQL), INVALID, "INVALID_INPUT"
    ),
    "admin list: user with control characters": Case(
        ADMIN + "ListJobs",
        lambda s: apb.AdminListJobsRequest(user_id=CONTROL),
        INVALID,
        "INVALID_INPUT",
    ),
    "dead letters: negative page size": Case(
        ADMIN + "ListDeadLetters",
        lambda s: apb.ListDeadLettersRequest(page_size=-7),
        INVALID,
        "INVALID_INPUT",
    ),
    "dead letters: forged token": Case(
        ADMIN + "ListDeadLetters",
        lambda s: apb.ListDeadLettersRequest(page_token="a.b"),
        INVALID,
        "INVALID_INPUT",
    ),
    "redrive: negative id": Case(
        ADMIN + "RedriveDeadLetters",
        lambda s: apb.RedriveDeadLettersRequest(event_ids=[-1]),
        INVALID,
        "INVALID_INPUT",
    ),
    "redrive: too many ids": Case(
        ADMIN + "RedriveDeadLetters",
        lambda s: apb.RedriveDeadLettersRequest(event_ids=list(range(1, 1002))),
        INVALID,
        "INVALID_INPUT",
    ),
    "definitions: worker role": Case(
        ADMIN + "ListJobDefinitions",
        lambda s: apb.ListJobDefinitionsRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    # --- CredentialService (its own validation is tested with it; here: roles, ids)
    "put credential: worker role": Case(
        CRED + "PutCredential",
        lambda s: cpb.PutCredentialRequest(user_id="alice", provider="deepseek", api_key="sk-1"),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    "put credential: no token": Case(
        CRED + "PutCredential",
        lambda s: cpb.PutCredentialRequest(user_id="alice", provider="deepseek", api_key="sk-1"),
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
        token="",
    ),
    "put credential: shell in the provider": Case(
        CRED + "PutCredential",
        lambda s: cpb.PutCredentialRequest(user_id="alice", provider=SHELL, api_key="sk-1"),
        INVALID,
        "INVALID_INPUT",
    ),
    "delete credential: SQL id": Case(
        CRED + "DeleteCredential",
        lambda s: cpb.DeleteCredentialRequest(user_id="alice", credential_id=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- UsageService (issue 19)
    "usage: no start": Case(USAGE, usage(start=None), INVALID, "INVALID_INPUT"),
    "usage: no end": Case(USAGE, usage(end=None), INVALID, "INVALID_INPUT"),
    "usage: start inside a day": Case(
        USAGE, usage(start=MIDNIGHT - 86_400 + 1), INVALID, "INVALID_INPUT"
    ),
    "usage: end inside a day": Case(USAGE, usage(end=MIDNIGHT + 3600), INVALID, "INVALID_INPUT"),
    "usage: end before start": Case(
        USAGE, usage(start=MIDNIGHT, end=MIDNIGHT - 86_400), INVALID, "INVALID_INPUT"
    ),
    "usage: an empty range": Case(
        USAGE, usage(start=MIDNIGHT, end=MIDNIGHT), INVALID, "INVALID_INPUT"
    ),
    "usage: over 400 days": Case(
        USAGE, usage(start=MIDNIGHT - 401 * 86_400), INVALID, "INVALID_INPUT"
    ),
    "usage: start out of range": Case(USAGE, usage(start=-(2**62)), INVALID, "INVALID_INPUT"),
    "usage: unknown grouping": Case(USAGE, usage(group_by=[99]), INVALID, "INVALID_INPUT"),
    "usage: unspecified grouping": Case(
        USAGE, usage(group_by=[upb.USAGE_GROUPING_UNSPECIFIED]), INVALID, "INVALID_INPUT"
    ),
    "usage: a grouping twice": Case(
        USAGE,
        usage(group_by=[upb.USAGE_GROUPING_DAY, upb.USAGE_GROUPING_DAY]),
        INVALID,
        "INVALID_INPUT",
    ),
    "usage: user with control characters": Case(
        USAGE, usage(user_id=CONTROL), INVALID, "INVALID_INPUT"
    ),
    "usage: user too long": Case(USAGE, usage(user_id=LONG), INVALID, "INVALID_INPUT"),
    "usage: client role without a user": Case(
        USAGE, usage(user_id=""), INVALID, "INVALID_INPUT", token=CLIENT_TOKEN
    ),
    "usage: worker role": Case(
        USAGE, usage(), grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", token=WORKER_TOKEN
    ),
    "usage: no token": Case(
        USAGE, usage(), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", token=""
    ),
    "pause: unknown queue": Case(
        ADMIN + "PauseQueue",
        lambda s: apb.PauseQueueRequest(queue="nope"),
        INVALID,
        "INVALID_INPUT",
    ),
    "pause: SQL queue": Case(
        ADMIN + "PauseQueue", lambda s: apb.PauseQueueRequest(queue=SQL), INVALID, "INVALID_INPUT"
    ),
    "pause: client role": Case(
        ADMIN + "PauseQueue",
        lambda s: apb.PauseQueueRequest(queue="ai-interactive"),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "resume: unknown queue": Case(
        ADMIN + "ResumeQueue", lambda s: apb.ResumeQueueRequest(queue=""), INVALID, "INVALID_INPUT"
    ),
    "queues: worker role": Case(
        ADMIN + "ListQueues",
        lambda s: apb.ListQueuesRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    "count jobs: no window start": Case(
        ADMIN + "CountJobs", lambda s: apb.CountJobsRequest(), INVALID, "INVALID_INPUT"
    ),
    "count jobs: a window of 40 days": Case(
        ADMIN + "CountJobs",
        lambda s: apb.CountJobsRequest(
            since=Timestamp(seconds=NOW - 40 * 86400), until=Timestamp(seconds=NOW)
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "count jobs: an empty window": Case(
        ADMIN + "CountJobs",
        lambda s: apb.CountJobsRequest(since=Timestamp(seconds=NOW), until=Timestamp(seconds=NOW)),
        INVALID,
        "INVALID_INPUT",
    ),
    "console session: malformed id": Case(
        ADMIN + "CheckConsoleSession",
        lambda s: apb.CheckConsoleSessionRequest(session_id=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "console session: closed with no id": Case(
        ADMIN + "CloseConsoleSession",
        lambda s: apb.CloseConsoleSessionRequest(),
        INVALID,
        "INVALID_INPUT",
    ),
    "console sessions: revoked for nobody": Case(
        ADMIN + "RevokeConsoleSessions",
        lambda s: apb.RevokeConsoleSessionsRequest(principal=""),
        INVALID,
        "INVALID_INPUT",
    ),
    "console session: client role": Case(
        ADMIN + "OpenConsoleSession",
        lambda s: apb.OpenConsoleSessionRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "workers: client role": Case(
        ADMIN + "ListWorkers",
        lambda s: apb.ListWorkersRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "workers: worker role": Case(
        ADMIN + "ListWorkers",
        lambda s: apb.ListWorkersRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    "rate limits: client role": Case(
        ADMIN + "ListRateLimits",
        lambda s: apb.ListRateLimitsRequest(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    # --- EraseUserData (issue 44): a user id, admins only, never while jobs run
    "erase: no user": Case(
        ADMIN + "EraseUserData", lambda s: apb.EraseUserDataRequest(), INVALID, "INVALID_INPUT"
    ),
    "erase: user with control characters": Case(
        ADMIN + "EraseUserData",
        lambda s: apb.EraseUserDataRequest(user_id=CONTROL),
        INVALID,
        "INVALID_INPUT",
    ),
    "erase: user too long": Case(
        ADMIN + "EraseUserData",
        lambda s: apb.EraseUserDataRequest(user_id=LONG),
        INVALID,
        "INVALID_INPUT",
    ),
    "erase: a user with a queued and a running job": Case(
        ADMIN + "EraseUserData",
        lambda s: apb.EraseUserDataRequest(user_id="alice"),
        PRECONDITION,
        "USER_HAS_RUNNING_JOBS",
    ),
    "erase: client role": Case(
        ADMIN + "EraseUserData",
        lambda s: apb.EraseUserDataRequest(user_id="alice", cancel_running=True),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "erase: worker role": Case(
        ADMIN + "EraseUserData",
        lambda s: apb.EraseUserDataRequest(user_id="alice", cancel_running=True),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    # --- CancelJobs / RetryJobs (issue 13): the selection, limit, token and reason
    **{
        f"bulk {verb}: {what}": Case(ADMIN + method, request, code, reason, token=token)
        for verb, method, cls in (
            ("cancel", "CancelJobs", apb.CancelJobsRequest),
            ("retry", "RetryJobs", apb.RetryJobsRequest),
        )
        for what, request, code, reason, token in (
            ("empty selection", lambda s, c=cls: c(), INVALID, "INVALID_INPUT", ALL_ROLES_TOKEN),
            (
                "ids and filters together",
                lambda s, c=cls: c(
                    selection=apb.JobSelection(job_ids=[s.cancelled], user_id="alice")
                ),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "1001 ids",
                lambda s, c=cls: c(selection=apb.JobSelection(job_ids=[UNKNOWN_ID] * 1001)),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "a malformed id",
                lambda s, c=cls: c(selection=apb.JobSelection(job_ids=[s.cancelled, SQL])),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "negative limit",
                lambda s, c=cls: c(selection=apb.JobSelection(user_id="alice"), limit=-1),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "limit over 1000",
                lambda s, c=cls: c(selection=apb.JobSelection(user_id="alice"), limit=1001),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "forged page token",
                lambda s, c=cls: c(
                    selection=apb.JobSelection(user_id="alice"), page_token="eyJqb2JzIjpbXX0.AAAA"
                ),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "reason with control characters",
                lambda s, c=cls: c(selection=apb.JobSelection(user_id="alice"), reason=CONTROL),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "reason too long",
                lambda s, c=cls: c(selection=apb.JobSelection(user_id="alice"), reason=LONG),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "unknown status",
                lambda s, c=cls: c(selection=apb.JobSelection(status=1234)),  # type: ignore[arg-type]
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "SQL job type",
                lambda s, c=cls: c(selection=apb.JobSelection(job_type=SQL)),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "empty creation range",
                lambda s, c=cls: c(
                    selection=apb.JobSelection(
                        created_after=Timestamp(seconds=NOW), created_before=Timestamp(seconds=NOW)
                    )
                ),
                INVALID,
                "INVALID_INPUT",
                ALL_ROLES_TOKEN,
            ),
            (
                "client role",
                lambda s, c=cls: c(selection=apb.JobSelection(job_ids=[s.cancelled])),
                grpc.StatusCode.PERMISSION_DENIED,
                "PERMISSION_DENIED",
                CLIENT_TOKEN,
            ),
            (
                "worker role",
                lambda s, c=cls: c(selection=apb.JobSelection(job_ids=[s.queued])),
                grpc.StatusCode.PERMISSION_DENIED,
                "PERMISSION_DENIED",
                WORKER_TOKEN,
            ),
        )
    },
}


@pytest.mark.parametrize("name", list(CASES))
async def test_bad_input_is_refused_and_changes_nothing(
    shared_stack: SharedStack, name: str
) -> None:
    await assert_refused_and_unchanged(shared_stack, name, CASES[name])
