"""The key an attempt runs with: none fetched for the platform's key, the owner's key
fetched once under the attempt's lease, and every refusal mapped to what the job service
must be told (or to silence, when the lease is lost)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from jobtypes import synthetic
from shared.credentials import CredentialMode, fingerprint
from shared.errors import (
    CredentialNotFound,
    CredentialUnavailable,
    ErrorCode,
    ExecutionError,
    LeaseLost,
    PlatformUnavailable,
)
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import job_pb2
from shared.rpc_errors import status_for
from worker_service.attempt import Attempt
from worker_service.credentials import CredentialResolver
from worker_service.domain.errors import ExecutorUnreachable
from worker_service.domain.model import LockedJob, LockResult, UserKey
from worker_service.pipeline import Pipeline
from worker_service.results import ResultBatcher

from .fakes import FakeExecutor, locked
from .test_worker_grpc_adapter import client_answering, rpc_error

API_KEY = "sk-unit-worker-5e8d2b"


def on_user_key(job_id: str = "j1") -> LockedJob:
    return dataclasses.replace(
        locked(job_id, job_type="synthetic"),
        credential_mode=CredentialMode.USER,
        credential_id="cred-1",
    )


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
def resolver(executor: FakeExecutor) -> CredentialResolver:
    return CredentialResolver(executor)


async def test_a_platform_job_needs_no_call(
    resolver: CredentialResolver, executor: FakeExecutor
) -> None:
    assert await resolver.resolve(locked("j1")) is None
    assert executor.resolve_calls == []


async def test_a_user_job_gets_its_key_under_its_lease(
    resolver: CredentialResolver, executor: FakeExecutor
) -> None:
    executor.credentials["j1"] = [UserKey(API_KEY, "deepseek", "cred-1")]

    assert await resolver.resolve(on_user_key()) == API_KEY
    assert executor.resolve_calls == [("j1", "token-j1-1")]


@pytest.mark.parametrize(
    "refusal",
    [CredentialNotFound("deleted"), CredentialUnavailable("cannot be opened")],
)
async def test_an_unusable_key_fails_the_attempt_as_a_credential_error(
    resolver: CredentialResolver, executor: FakeExecutor, refusal: Exception
) -> None:
    executor.credentials["j1"] = [refusal]

    with pytest.raises(ExecutionError) as raised:
        await resolver.resolve(on_user_key())

    assert raised.value.code == ErrorCode.CREDENTIAL_UNAVAILABLE
    assert "cred-1" in raised.value.detail


async def test_a_lost_lease_is_passed_on(
    resolver: CredentialResolver, executor: FakeExecutor
) -> None:
    executor.credentials["j1"] = [LeaseLost("gone")]

    with pytest.raises(LeaseLost):
        await resolver.resolve(on_user_key())


async def test_transport_hiccups_are_retried_a_few_times(
    resolver: CredentialResolver, executor: FakeExecutor
) -> None:
    executor.credentials["j1"] = [
        ExecutorUnreachable("blip"),
        PlatformUnavailable("db restarting"),
        UserKey(API_KEY, "deepseek", "cred-1"),
    ]
    assert await resolver.resolve(on_user_key()) == API_KEY

    executor.credentials["j2"] = [ExecutorUnreachable("down")]
    with pytest.raises(ExecutorUnreachable):
        await resolver.resolve(on_user_key("j2"))
    assert len(executor.resolve_calls) == 3 + 3


def test_a_user_keys_repr_hides_the_key() -> None:
    assert API_KEY not in repr(UserKey(API_KEY, "deepseek", "cred-1"))


# --- through the pipeline (synthetic asks for its key as an AI job would) ----------------


@pytest.fixture
async def pipeline(executor: FakeExecutor) -> AsyncIterator[Pipeline]:
    async with ResultBatcher(executor) as results:
        yield Pipeline(executor, results, {"synthetic": synthetic.DEFINITION}.__getitem__)


async def test_a_job_on_its_owners_key_runs_with_it(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.credentials["j1"] = [UserKey(API_KEY, "deepseek", "cred-1")]

    await pipeline.run(on_user_key())

    [result] = executor.results
    assert result["artifacts"][0].payload["api_key"] == fingerprint(API_KEY)
    assert API_KEY not in repr(result)


async def test_a_deleted_key_fails_the_job_without_retry_class(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.credentials["j1"] = [CredentialNotFound("deleted")]

    await pipeline.run(on_user_key())

    assert executor.results == []
    assert [f["error_code"] for f in executor.failures] == ["CREDENTIAL_UNAVAILABLE"]


async def test_a_lease_lost_while_resolving_reports_nothing(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.credentials["j1"] = [LeaseLost("another worker has it")]

    await pipeline.run(on_user_key())

    assert executor.results == [] and executor.failures == []


async def test_an_attempt_fetches_its_key_once(
    resolver: CredentialResolver, executor: FakeExecutor
) -> None:
    executor.credentials["j1"] = [UserKey(API_KEY, "deepseek", "cred-1")]
    attempt = Attempt(on_user_key(), credentials=resolver)

    assert [await attempt.api_key(), await attempt.api_key()] == [API_KEY, API_KEY]
    assert len(executor.resolve_calls) == 1


# --- the gRPC adapter ----------------------------------------------------------------------


async def test_a_locked_job_carries_its_credential_mode_and_id() -> None:
    user_job = pb.LockedJob(
        job_id="j",
        lease_token="t",
        credential_mode=job_pb2.CREDENTIAL_MODE_USER,
        credential_id="cred-1",
    )
    client, _ = client_answering(
        pb.LockJobsResponse(
            responses=[
                pb.LockJobResponse(outcome=pb.LOCK_OUTCOME_LOCKED, job=user_job),
                pb.LockJobResponse(outcome=pb.LOCK_OUTCOME_LOCKED, job=pb.LockedJob(job_id="k")),
            ]
        )
    )

    mine, platform = await client.lock_jobs(["j", "k"], "w", timeout_s=3)

    assert isinstance(mine, LockResult) and mine.job is not None
    assert (mine.job.credential_mode, mine.job.credential_id) == (CredentialMode.USER, "cred-1")
    assert isinstance(platform, LockResult) and platform.job is not None
    assert platform.job.credential_mode is CredentialMode.PLATFORM


async def test_resolve_credential_sends_the_lease_and_returns_the_key() -> None:
    client, stub = client_answering(
        pb.ResolveCredentialResponse(api_key=API_KEY, provider="deepseek", credential_id="c")
    )

    key = await client.resolve_credential("j", "t", timeout_s=2)

    assert (key.api_key, key.provider, key.credential_id) == (API_KEY, "deepseek", "c")
    [(rpc, request, timeout)] = stub.requests
    assert (rpc, request.job_id, request.lease_token, timeout) == ("ResolveCredential", "j", "t", 2)


@pytest.mark.parametrize(
    ("refusal", "expected"),
    [
        (LeaseLost("stale"), LeaseLost),
        (CredentialNotFound("deleted"), CredentialNotFound),
        (CredentialUnavailable("platform job"), CredentialUnavailable),
    ],
)
async def test_resolve_credential_refusals_become_product_errors(
    refusal: Exception, expected: type[Exception]
) -> None:
    status = status_for(refusal, "jobs.v1.ExecutorService")  # type: ignore[arg-type]
    client, _ = client_answering(
        rpc_error(status.code, status.trailing_metadata, details=status.details)
    )

    with pytest.raises(expected):
        await client.resolve_credential("j", "t", timeout_s=2)
