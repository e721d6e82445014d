"""Bad input changes nothing (test_bad_input.py has the contract): the ExecutorService's
requests, and the WorkerSession stream, each message checked as it comes."""

from __future__ import annotations

import grpc
import pytest

from shared.pb.jobs.v1 import executor_service_pb2 as epb
from tests.support.bad_input import (
    CONTROL,
    EXEC,
    INVALID,
    LONG,
    PRECONDITION,
    SHELL,
    SQL,
    UNKNOWN_ID,
    Case,
    assert_refused_and_unchanged,
    declaration,
    encoded_field,
    padded_schema,
    reasons,
    step,
    step_result,
    submit_and_grant,
)
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import (
    CLIENT_TOKEN,
    WORKER_TOKEN,
    count_rows,
    open_channel,
    result_request,
)

__all__ = ["shared_stack"]  # the module's stack, used as a fixture

CASES: dict[str, Case] = {
    # --- ExecutorService
    "report usage: a token of no attempt": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(
            job_id=s.running,
            lease_token=UNKNOWN_ID,
            usage=[epb.ProviderUsage(provider="fake", model="m", call_id="c-1")],
        ),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "report usage: no records": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(job_id=s.running, lease_token=s.lease_token),
        INVALID,
        "INVALID_INPUT",
    ),
    "report usage: a record without its call id": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(
            job_id=s.running,
            lease_token=s.lease_token,
            usage=[epb.ProviderUsage(provider="fake", model="m")],
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "report usage: SQL job id": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(
            job_id=SQL,
            lease_token=s.lease_token,
            usage=[epb.ProviderUsage(provider="fake", model="m", call_id="c-1")],
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "report usage: client role": Case(
        EXEC + "ReportUsage",
        lambda s: epb.ReportUsageRequest(
            job_id=s.running,
            lease_token=s.lease_token,
            usage=[epb.ProviderUsage(provider="fake", model="m", call_id="c-1")],
        ),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "record step result: without the lease": Case(
        EXEC + "RecordStepResult",
        lambda s: step_result(s, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "record step result: SQL job id": Case(
        EXEC + "RecordStepResult", lambda s: step_result(s, job_id=SQL), INVALID, "INVALID_INPUT"
    ),
    "record step result: a name with a shell command": Case(
        EXEC + "RecordStepResult", lambda s: step_result(s, name=SHELL), INVALID, "INVALID_INPUT"
    ),
    "record step result: no name": Case(
        EXEC + "RecordStepResult", lambda s: step_result(s, name=""), INVALID, "INVALID_INPUT"
    ),
    "record step result: a negative ordinal": Case(
        EXEC + "RecordStepResult", lambda s: step_result(s, ordinal=-1), INVALID, "INVALID_INPUT"
    ),
    "record step result: an ordinal past the limit": Case(
        EXEC + "RecordStepResult",
        lambda s: step_result(s, ordinal=10_000),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step result: no outcome": Case(
        EXEC + "RecordStepResult",
        lambda s: step_result(s, epb.StepOutcome()),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step result: a result that is not JSON": Case(
        EXEC + "RecordStepResult",
        lambda s: step_result(s, epb.StepOutcome(result_json="{'a'")),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step result: a result nested past any limit": Case(
        EXEC + "RecordStepResult",
        lambda s: step_result(s, epb.StepOutcome(result_json="[" * 100_000 + "]" * 100_000)),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step result: a NUL in the result": Case(
        EXEC + "RecordStepResult",
        lambda s: step_result(s, epb.StepOutcome(result_json='"a\\u0000b"')),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step result: a result past 1 MB": Case(
        EXEC + "RecordStepResult",
        lambda s: step_result(s, epb.StepOutcome(result_json='"' + "a" * 1_000_001 + '"')),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step result: an error code in lower case": Case(
        EXEC + "RecordStepResult",
        lambda s: step_result(s, epb.StepOutcome(error=epb.StepError(code="oops; DROP"))),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step result: a NUL in the error message": Case(
        EXEC + "RecordStepResult",
        lambda s: step_result(
            s, epb.StepOutcome(error=epb.StepError(code="JOB_REJECTED", message="a\x00b"))
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step result: client role": Case(
        EXEC + "RecordStepResult",
        step_result,
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "record step: without the lease": Case(
        EXEC + "RecordStep",
        lambda s: step(s, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "record step: a step name with a shell command": Case(
        EXEC + "RecordStep", lambda s: step(s, step=SHELL), INVALID, "INVALID_INPUT"
    ),
    "record step: no step name": Case(
        EXEC + "RecordStep", lambda s: step(s, step=""), INVALID, "INVALID_INPUT"
    ),
    "record step: no response": Case(
        EXEC + "RecordStep", lambda s: step(s, text=""), INVALID, "INVALID_INPUT"
    ),
    "record step: parsed JSON that is not an object": Case(
        EXEC + "RecordStep", lambda s: step(s, parsed_json="[1, 2]"), INVALID, "INVALID_INPUT"
    ),
    "record step: parsed JSON that is not JSON": Case(
        EXEC + "RecordStep", lambda s: step(s, parsed_json="{'a'"), INVALID, "INVALID_INPUT"
    ),
    "record step: parsed JSON nested past any limit": Case(
        EXEC + "RecordStep",
        lambda s: step(s, parsed_json='{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step: a NUL in the response": Case(
        EXEC + "RecordStep", lambda s: step(s, text="a\x00b"), INVALID, "INVALID_INPUT"
    ),
    "record step: usage without its call id": Case(
        EXEC + "RecordStep", lambda s: step(s, call_id=""), INVALID, "INVALID_INPUT"
    ),
    "record step: the usage of a failed call": Case(
        EXEC + "RecordStep",
        lambda s: step(s, error_code="PROVIDER_TIMEOUT"),
        INVALID,
        "INVALID_INPUT",
    ),
    "record step: SQL job id": Case(
        EXEC + "RecordStep", lambda s: step(s, job_id=SQL), INVALID, "INVALID_INPUT"
    ),
    "record step: client role": Case(
        EXEC + "RecordStep",
        lambda s: step(s),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "call permit: without the lease": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(
            job_id=s.running, lease_token=UNKNOWN_ID, model_tier="primary"
        ),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "call permit: no tier": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(job_id=s.running, lease_token=s.lease_token),
        INVALID,
        "INVALID_INPUT",
    ),
    "call permit: a tier past any length": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(
            job_id=s.running, lease_token=s.lease_token, model_tier="t" * 65
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "call permit: SQL job id": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(
            job_id=SQL, lease_token=s.lease_token, model_tier="primary"
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "call permit: client role": Case(
        EXEC + "AcquireCallPermit",
        lambda s: epb.AcquireCallPermitRequest(
            job_id=s.running, lease_token=s.lease_token, model_tier="primary"
        ),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "report 429: without the lease": Case(
        EXEC + "ReportRateLimited",
        lambda s: epb.ReportRateLimitedRequest(
            job_id=s.running, lease_token=UNKNOWN_ID, model_tier="primary"
        ),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "report 429: a negative Retry-After": Case(
        EXEC + "ReportRateLimited",
        lambda s: epb.ReportRateLimitedRequest(
            job_id=s.running, lease_token=s.lease_token, model_tier="primary", retry_after_ms=-1
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "report 429: a Retry-After past an hour": Case(
        EXEC + "ReportRateLimited",
        lambda s: epb.ReportRateLimitedRequest(
            job_id=s.running,
            lease_token=s.lease_token,
            model_tier="primary",
            retry_after_ms=3_600_001,
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "report 429: client role": Case(
        EXEC + "ReportRateLimited",
        lambda s: epb.ReportRateLimitedRequest(
            job_id=s.running, lease_token=s.lease_token, model_tier="primary"
        ),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "resolve credential: without the lease": Case(
        EXEC + "ResolveCredential",
        lambda s: epb.ResolveCredentialRequest(job_id=s.running, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "resolve credential: client role": Case(
        EXEC + "ResolveCredential",
        lambda s: epb.ResolveCredentialRequest(job_id=s.running, lease_token=s.lease_token),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "lock: no worker id": Case(
        EXEC + "LockJob", lambda s: epb.LockJobRequest(job_id=s.queued), INVALID, "INVALID_INPUT"
    ),
    "lock: worker id with control characters": Case(
        EXEC + "LockJob",
        lambda s: epb.LockJobRequest(job_id=s.queued, worker_id=CONTROL),
        INVALID,
        "INVALID_INPUT",
    ),
    "lock: client role": Case(
        EXEC + "LockJob",
        lambda s: epb.LockJobRequest(job_id=s.queued, worker_id="w"),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "lock batch: empty": Case(
        EXEC + "LockJobs", lambda s: epb.LockJobsRequest(), INVALID, "INVALID_INPUT"
    ),
    "heartbeat: without the lease": Case(
        EXEC + "Heartbeat",
        lambda s: epb.HeartbeatRequest(job_id=s.running, lease_token=UNKNOWN_ID, progress=0.9),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "heartbeat: malformed token": Case(
        EXEC + "Heartbeat",
        lambda s: epb.HeartbeatRequest(job_id=s.running, lease_token=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit: without the lease": Case(
        EXEC + "SubmitResult",
        lambda s: result_request(s.running, UNKNOWN_ID, {"attempt": 1, "data": "x"}),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "submit: for a job never locked": Case(
        EXEC + "SubmitResult",
        lambda s: result_request(s.queued, UNKNOWN_ID, {"attempt": 1, "data": "x"}),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "submit: hash does not match": Case(
        EXEC + "SubmitResult",
        lambda s: epb.SubmitResultRequest(
            job_id=s.running, lease_token=s.lease_token, output_hash="0" * 64
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit: client role": Case(
        EXEC + "SubmitResult",
        lambda s: result_request(s.running, s.lease_token, {"attempt": 1, "data": "x"}),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    # lock on submit (issue 28): refused before anything is committed, the results too
    "submit batch: next grants of an unknown queue": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(s, epb.QueueSlots(queue="no-such-queue", slots=1)),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit batch: next grants of no slots": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(s, epb.QueueSlots(queue="ai-interactive", slots=0)),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit batch: next grants of too many slots": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(s, epb.QueueSlots(queue="ai-interactive", slots=257)),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit batch: next grants for no worker": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(s, epb.QueueSlots(queue="ai-interactive", slots=1), ""),
        INVALID,
        "INVALID_INPUT",
    ),
    "submit batch: next grants with malformed definitions": Case(
        EXEC + "SubmitResults",
        lambda s: submit_and_grant(
            s, epb.QueueSlots(queue="ai-interactive", slots=1), runnable=[SQL]
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "failure: malformed code": Case(
        EXEC + "SubmitFailure",
        lambda s: epb.SubmitFailureRequest(
            job_id=s.running, lease_token=s.lease_token, error_code=SQL
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "lock jobs: unknown queue": Case(
        EXEC + "LockJobs",
        lambda s: epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=s.queued, worker_id="w")], queue="nope"
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "lock jobs: a runnable definition with SQL in it": Case(
        EXEC + "LockJobs",
        lambda s: epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=s.queued, worker_id="w")],
            queue="ai-interactive",
            runnable_definitions=[SQL],
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "lock jobs: too many runnable definitions": Case(
        EXEC + "LockJobs",
        lambda s: epb.LockJobsRequest(
            requests=[epb.LockJobRequest(job_id=s.queued, worker_id="w")],
            queue="ai-interactive",
            runnable_definitions=[f"t{n}@1" for n in range(300)],
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "failure: without the lease": Case(
        EXEC + "SubmitFailure",
        lambda s: epb.SubmitFailureRequest(
            job_id=s.running, lease_token=UNKNOWN_ID, error_code="PROVIDER_TIMEOUT"
        ),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    # --- FetchSignals
    "fetch signals: without the lease": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(job_id=s.running, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "fetch signals: for a job never locked": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(job_id=s.queued, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "fetch signals: malformed token": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(job_id=s.running, lease_token=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "fetch signals: negative seq": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(
            job_id=s.running, lease_token=s.lease_token, after_seq=-1
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "fetch signals: client role": Case(
        EXEC + "FetchSignals",
        lambda s: epb.FetchSignalsRequest(job_id=s.running, lease_token=s.lease_token),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    "fetch dependency results: without the lease": Case(
        EXEC + "FetchDependencyResults",
        lambda s: epb.FetchDependencyResultsRequest(job_id=s.running, lease_token=UNKNOWN_ID),
        grpc.StatusCode.ABORTED,
        "LEASE_LOST",
    ),
    "fetch dependency results: malformed token": Case(
        EXEC + "FetchDependencyResults",
        lambda s: epb.FetchDependencyResultsRequest(job_id=s.running, lease_token=SQL),
        INVALID,
        "INVALID_INPUT",
    ),
    "fetch dependency results: malformed after_job_id": Case(
        EXEC + "FetchDependencyResults",
        lambda s: epb.FetchDependencyResultsRequest(
            job_id=s.running, lease_token=s.lease_token, after_job_id=SQL
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    **{
        f"fetch dependency results: page size {size}": Case(
            EXEC + "FetchDependencyResults",
            lambda s, size=size: epb.FetchDependencyResultsRequest(
                job_id=s.running, lease_token=s.lease_token, page_size=size
            ),
            INVALID,
            "INVALID_INPUT",
        )
        for size in (-1, 101)
    },
    "fetch dependency results: client role": Case(
        EXEC + "FetchDependencyResults",
        lambda s: epb.FetchDependencyResultsRequest(job_id=s.running, lease_token=s.lease_token),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
    # --- DeclareJobType (issue 41): a spec is refused naming its bad fields, stored never
    "declare: no worker id": Case(
        EXEC + "DeclareJobType", declaration(worker_id=""), INVALID, "INVALID_INPUT"
    ),
    "declare: worker id with control characters": Case(
        EXEC + "DeclareJobType", declaration(worker_id=CONTROL), INVALID, "INVALID_INPUT"
    ),
    "declare: worker id too long": Case(
        EXEC + "DeclareJobType", declaration(worker_id=LONG), INVALID, "INVALID_INPUT"
    ),
    "declare: no spec": Case(
        EXEC + "DeclareJobType",
        lambda s: epb.DeclareJobTypeRequest(worker_id="w-declares"),
        INVALID,
        "INVALID_INPUT",
    ),
    "declare: SQL job type": Case(
        EXEC + "DeclareJobType", declaration(job_type=SQL), INVALID, "INVALID_INPUT"
    ),
    "declare: shell job type": Case(
        EXEC + "DeclareJobType", declaration(job_type=SHELL), INVALID, "INVALID_INPUT"
    ),
    "declare: a version of control characters": Case(
        EXEC + "DeclareJobType", declaration(version=CONTROL), INVALID, "INVALID_INPUT"
    ),
    "declare: a queue of no deployment": Case(
        EXEC + "DeclareJobType", declaration(queue="no-such-queue"), INVALID, "INVALID_INPUT"
    ),
    "declare: an input schema that is not JSON": Case(
        EXEC + "DeclareJobType", declaration(input_schema_json="{'a'"), INVALID, "INVALID_INPUT"
    ),
    "declare: an output schema that is not an object": Case(
        EXEC + "DeclareJobType", declaration(output_schema_json="[1]"), INVALID, "INVALID_INPUT"
    ),
    "declare: an input schema that is no JSON Schema": Case(
        EXEC + "DeclareJobType",
        declaration(input_schema_json='{"type": 5}'),
        INVALID,
        "INVALID_INPUT",
    ),
    "declare: a schema that refers outside itself": Case(
        EXEC + "DeclareJobType",
        declaration(input_schema_json='{"$ref": "http://169.254.169.254/latest/meta-data"}'),
        INVALID,
        "INVALID_INPUT",
    ),
    "declare: a schema nested past any limit": Case(
        EXEC + "DeclareJobType",
        declaration(input_schema_json='{"properties": {"a": ' * 2000 + "{}" + "}}" * 2000),
        INVALID,
        "INVALID_INPUT",
    ),
    "declare: an oversized schema": Case(
        EXEC + "DeclareJobType",
        declaration(input_schema_json=padded_schema(4 * 1024 * 1024)),
        INVALID,
        "INVALID_INPUT",
    ),
    "declare: a timeout that is not a number": Case(
        EXEC + "DeclareJobType",
        declaration(timeout_seconds=float("nan")),
        INVALID,
        "INVALID_INPUT",
    ),
    "declare: a fairness key outside the input schema": Case(
        EXEC + "DeclareJobType",
        declaration(fairness_key="input.not_declared"),
        INVALID,
        "INVALID_INPUT",
    ),
    "declare: child job types with SQL": Case(
        EXEC + "DeclareJobType", declaration(child_job_types=[SQL]), INVALID, "INVALID_INPUT"
    ),
    "declare: an unknown credential mode": Case(
        EXEC + "DeclareJobType", declaration(credential_modes=[99]), INVALID, "INVALID_INPUT"
    ),
    "declare: another spec for a declared version": Case(
        EXEC + "DeclareJobType",
        declaration(job_type="synthetic", version="1.0.0", timeout_seconds=31.0),
        PRECONDITION,
        "JOB_TYPE_SPEC_CONFLICT",
    ),
    "declare: client role": Case(
        EXEC + "DeclareJobType",
        declaration(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=CLIENT_TOKEN,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_bad_input_is_refused_and_changes_nothing(
    shared_stack: SharedStack, name: str
) -> None:
    await assert_refused_and_unchanged(shared_stack, name, CASES[name])


# WorkerSession (issue 18): a stream of requests, each checked as it comes.
SESSION = "/jobs.v1.ExecutorService/WorkerSession"
SESSION_CASES: dict[str, list[bytes]] = {
    "session: first message without worker_id": [epb.WorkerSessionRequest().SerializeToString()],
    "session: goodbye before naming the worker": [
        epb.WorkerSessionRequest(goodbye=True).SerializeToString()
    ],
    "session: worker_id with control characters": [
        epb.WorkerSessionRequest(worker_id=CONTROL).SerializeToString()
    ],
    "session: worker_id too long": [epb.WorkerSessionRequest(worker_id=LONG).SerializeToString()],
    "session: worker_id not UTF-8": [encoded_field(1, b"\xff\xfe")],
    "session: worker_id again after the first message": [
        epb.WorkerSessionRequest(worker_id="w-bad-1").SerializeToString(),
        epb.WorkerSessionRequest(worker_id="w-bad-2").SerializeToString(),
    ],
    "session: incarnation with control characters": [
        epb.WorkerSessionRequest(worker_id="w-bad-3", incarnation=CONTROL).SerializeToString()
    ],
    "session: incarnation too long": [
        epb.WorkerSessionRequest(worker_id="w-bad-4", incarnation=LONG).SerializeToString()
    ],
    "session: incarnation again after the first message": [
        epb.WorkerSessionRequest(worker_id="w-bad-5", incarnation="i-1").SerializeToString(),
        epb.WorkerSessionRequest(incarnation="i-2").SerializeToString(),
    ],
    "session: runnable definitions after the first message": [
        epb.WorkerSessionRequest(worker_id="w-bad-6").SerializeToString(),
        epb.WorkerSessionRequest(runnable_definitions=["synthetic@1.0.0"]).SerializeToString(),
    ],
}


@pytest.mark.parametrize("name", list(SESSION_CASES))
async def test_malformed_session_requests_are_refused(shared_stack: SharedStack, name: str) -> None:
    before = await count_rows(shared_stack.database_url)
    async with open_channel(shared_stack.target, WORKER_TOKEN) as channel:
        call = channel.stream_stream(
            SESSION, request_serializer=lambda b: b, response_deserializer=None
        )(iter(SESSION_CASES[name]))
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            async for _ in call:
                pass

    assert (raised.value.code(), reasons(raised.value, SESSION)) == (INVALID, ["INVALID_INPUT"])
    assert await count_rows(shared_stack.database_url) == before
