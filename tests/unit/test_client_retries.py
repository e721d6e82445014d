"""The client library's retries against a scripted in-process JobService: a
RESOURCE_EXHAUSTED with RetryInfo is retried after its delay with the same idempotency key;
a quota whose RetryInfo is too far off raises QuotaExceeded with retry_after."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent import futures
from datetime import timedelta
from typing import Any

import grpc
import pytest
from durable_jobs_client import JobsClient, QuotaExceeded, RetryPolicy, Unavailable
from durable_jobs_client._pb.jobs.v1 import job_pb2, job_service_pb2_grpc
from durable_jobs_client._pb.jobs.v1 import job_service_pb2 as pb

from shared.errors import QuotaExceeded as ServerQuotaExceeded
from shared.errors import TooManyJobs
from shared.rpc_errors import status_for


class Scripted(job_service_pb2_grpc.JobServiceServicer):
    def __init__(self, refusals: list[Any]) -> None:
        self.refusals = refusals
        self.calls: list[tuple[float, str]] = []

    def CreateJob(self, request: pb.CreateJobRequest, context: grpc.ServicerContext) -> Any:
        self.calls.append((time.monotonic(), request.idempotency_key))
        if self.refusals:
            context.abort_with_status(status_for(self.refusals.pop(0), "jobs.v1.JobService"))
        return pb.CreateJobResponse(job=job_pb2.Job(id="j-1"), created=True)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[grpc.Server] = []

    def start(servicer: Scripted) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        job_service_pb2_grpc.add_JobServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(None)


def test_resource_exhausted_is_retried_after_its_retry_info_with_the_same_key(serve: Any) -> None:
    servicer = Scripted([TooManyJobs("at most 100 unfinished jobs", retry_after_s=0.3)])
    with JobsClient(serve(servicer), user_id="u", token="") as jobs:
        created = jobs.create("synthetic", {})

    assert created.job.id == "j-1"
    (first, key), (second, again) = servicer.calls
    assert key == again and key.startswith("client-")
    assert second - first >= 0.3


def test_a_quota_resetting_later_than_the_policy_waits_is_raised(serve: Any) -> None:
    servicer = Scripted([ServerQuotaExceeded("at most 5 jobs per day", retry_after_s=3600)])
    with (
        JobsClient(serve(servicer), user_id="u", token="", retry=RetryPolicy(max_wait=30)) as jobs,
        pytest.raises(QuotaExceeded) as raised,
    ):
        jobs.create("synthetic", {}, idempotency_key="mine")

    assert raised.value.retry_after == pytest.approx(timedelta(hours=1).total_seconds())
    assert [key for _, key in servicer.calls] == ["mine"]


def test_backoff_is_jittered_within_its_share() -> None:
    """Clients a restarting service turned away spread their retries over half the
    backoff around it (the default share), instead of coming back in step, and wait as
    long on average (a policy's attempts still ride out as long an outage)."""
    unavailable = Unavailable("down", code=grpc.StatusCode.UNAVAILABLE)
    draws = iter([0.0, 1.0, 0.5])
    policy = RetryPolicy(initial_backoff=1.0, max_backoff=8.0, random=lambda: next(draws))
    assert [policy.delay(unavailable, 3) for _ in range(3)] == [3.0, 5.0, 4.0]
    assert RetryPolicy(jitter=0).delay(unavailable, 1) == 0.2
    spread = {RetryPolicy().delay(unavailable, 2) for _ in range(50)}
    assert len(spread) > 40 and all(0.3 <= d <= 0.5 for d in spread if d is not None)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=1.5)


class CancelledOnce(Scripted):
    """A replica stopping mid-call: its grace ran out, the call is answered CANCELLED."""

    def CreateJob(self, request: pb.CreateJobRequest, context: grpc.ServicerContext) -> Any:
        self.calls.append((time.monotonic(), request.idempotency_key))
        if len(self.calls) == 1:
            context.abort(grpc.StatusCode.CANCELLED, "Cancelled on server side")
        return pb.CreateJobResponse(job=job_pb2.Job(id="j-1"), created=True)


def test_a_create_a_stopping_replica_cancelled_is_sent_again_with_the_same_key(
    serve: Any,
) -> None:
    """The rolling-restart test of the manifests saw a create end CANCELLED once: a
    replica's shutdown grace ran out mid-call. The same idempotency key makes the replay
    safe; a call that is not replay-safe is not sent again."""
    servicer = CancelledOnce([])
    with JobsClient(serve(servicer), user_id="u", token="") as jobs:
        created = jobs.create("synthetic", {})
    assert created.job.id == "j-1"
    (_, key), (_, again) = servicer.calls
    assert key == again
    cancelled = Unavailable("cancelled", code=grpc.StatusCode.CANCELLED)
    assert RetryPolicy().delay(cancelled, 1, replay_safe=False) is None
