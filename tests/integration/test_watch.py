"""WatchJob: the current state first, then each change, ending after a terminal state —
whichever replica made the change."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from shared.errors import InvalidInput, JobNotFound
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.rpc_errors import error_from_rpc
from tests.support.stack import Client, open_channel, result_request, running_job_service
from tests.support.wait import eventually

S = job_pb2


class Watch:
    """A WatchJob stream read in the background, its answers collected."""

    def __init__(self, client: Client, job_id: str, user_id: str = "user-1") -> None:
        self.call = client.jobs.WatchJob(jpb.WatchJobRequest(job_id=job_id, user_id=user_id))
        self.jobs: list[job_pb2.Job] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for answer in self.call:
            self.jobs.append(answer.job)

    @property
    def statuses(self) -> list[int]:
        return [j.status for j in self.jobs]

    async def seen(self, status: int) -> None:
        await eventually(lambda: status in self.statuses, timeout=10, message="no update")


async def test_a_watch_follows_a_job_to_its_end(client: Client) -> None:
    job = (await client.create()).job
    watch = Watch(client, job.id)
    await watch.seen(S.JOB_STATUS_QUEUED)

    lease = await client.lock(job.id)
    await watch.seen(S.JOB_STATUS_RUNNING)
    await client.executor.Heartbeat(
        epb.HeartbeatRequest(job_id=job.id, lease_token=lease.job.lease_token, progress=0.5)
    )
    await eventually(lambda: any(j.progress == 0.5 for j in watch.jobs), message="no progress")
    await client.executor.SubmitResult(
        result_request(job.id, lease.job.lease_token, {"attempt": 1, "data": "x"})
    )
    await asyncio.wait_for(watch.task, 10)  # the stream ends by itself

    assert watch.statuses[0] == S.JOB_STATUS_QUEUED
    assert watch.statuses[-1] == S.JOB_STATUS_SUCCEEDED
    assert watch.jobs[-1].output["data"] == "x"
    # each answer is a change
    assert all(
        (a.status, a.progress, a.updated_at) != (b.status, b.progress, b.updated_at)
        for a, b in zip(watch.jobs, watch.jobs[1:], strict=False)
    )


async def test_a_reconnecting_watcher_sees_the_current_state_again(client: Client) -> None:
    job = (await client.create()).job
    await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))
    for _ in range(2):
        answers = [
            a.job.status
            async for a in client.jobs.WatchJob(
                jpb.WatchJobRequest(job_id=job.id, user_id="user-1")
            )
        ]
        assert answers == [S.JOB_STATUS_CANCELLED]


async def test_another_users_or_a_malformed_job_is_refused(client: Client) -> None:
    job = (await client.create(user_id="alice")).job
    for request, kind, code in [
        (jpb.WatchJobRequest(job_id=job.id, user_id="mallory"), JobNotFound, "NOT_FOUND"),
        (
            jpb.WatchJobRequest(job_id="not-a-uuid", user_id="alice"),
            InvalidInput,
            "INVALID_ARGUMENT",
        ),
        (jpb.WatchJobRequest(job_id=job.id, user_id=""), InvalidInput, "INVALID_ARGUMENT"),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            async for _ in client.jobs.WatchJob(request):
                pass
        assert raised.value.code().name == code
        assert type(error_from_rpc(raised.value)) is kind


async def test_a_change_made_through_another_replica_reaches_the_watcher(
    database_url: str, nats_url: str
) -> None:
    async with (
        running_job_service(database_url, nats_url) as a,
        running_job_service(database_url, nats_url) as b,
        open_channel(f"127.0.0.1:{a.port}") as channel_a,
        open_channel(f"127.0.0.1:{b.port}") as channel_b,
    ):
        via_a, via_b = Client(channel_a), Client(channel_b)
        job = (await via_a.create()).job
        watch = Watch(via_a, job.id)
        await watch.seen(S.JOB_STATUS_QUEUED)

        await via_b.lock(job.id)
        await watch.seen(S.JOB_STATUS_RUNNING)
        await via_b.jobs.CancelJob(jpb.CancelJobRequest(job_id=job.id, user_id="user-1"))
        await watch.seen(S.JOB_STATUS_CANCEL_REQUESTED)
        watch.task.cancel()


async def test_a_stopping_replica_ends_its_watches_instead_of_waiting_for_them(
    database_url: str, nats_url: str
) -> None:
    app = running_job_service(database_url, nats_url, shutdown_grace_s=120)
    service = await app.__aenter__()
    try:
        async with open_channel(f"127.0.0.1:{service.port}") as channel:
            client = Client(channel)
            job = (await client.create()).job
            watch = Watch(client, job.id)
            await watch.seen(S.JOB_STATUS_QUEUED)
            # far less than the 120 s grace: the open stream does not hold the shutdown
            await asyncio.wait_for(service.stop(), 20)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await watch.task
    finally:
        await app.__aexit__(None, None, None)
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
    assert raised.value.details() == "this server is shutting down; watch the job again"
