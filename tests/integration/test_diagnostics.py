"""What an engineer with grpcurl relies on: health and server reflection, no protos needed;
and a start-up that can be repeated against the same NATS without harm."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from nats.aio.client import Client as NatsClient

from job_service.app import JobServiceApp
from shared.constants import DISPATCH_STREAM, EVENTS_STREAM
from shared.jetstream import ensure_dispatch_consumer, ensure_streams


async def test_health_reports_serving_for_the_server_and_each_service(
    job_service: JobServiceApp,
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{job_service.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in (
            "",
            "jobs.v1.JobService",
            "jobs.v1.ExecutorService",
            "jobs.v1.AdminService",
            "jobs.v1.CredentialService",
            "jobs.v1.UsageService",
            "jobs.v1.ScheduleService",
        ):
            answer = await stub.Check(health_pb2.HealthCheckRequest(service=service))
            assert answer.status == health_pb2.HealthCheckResponse.SERVING


def _describe(target: str) -> tuple[list[str], list[str]]:
    with grpc.insecure_channel(target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = sorted(database.get_services())
        methods = [
            m.name
            for m in database.FindFileContainingSymbol("jobs.v1.JobService").service[0].method
        ]
        return services, methods


async def test_reflection_describes_every_service(job_service: JobServiceApp) -> None:
    # the reflection client is synchronous: keep it off the loop the server runs on
    services, methods = await asyncio.to_thread(_describe, f"127.0.0.1:{job_service.port}")

    assert services == [
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "jobs.v1.AdminService",
        "jobs.v1.CredentialService",
        "jobs.v1.ExecutorService",
        "jobs.v1.JobService",
        "jobs.v1.ScheduleService",
        "jobs.v1.UsageService",
    ]
    assert methods == [
        "CreateJob",
        "GetJob",
        "CancelJob",
        "ListJobs",
        "WatchJob",
        "CreateJobs",
        "SendSignal",
    ]


async def test_streams_and_consumers_can_be_declared_again(nats_client: NatsClient) -> None:
    js = nats_client.jetstream()

    for _ in range(2):
        await ensure_streams(js)
        await ensure_dispatch_consumer(js, "ai-interactive")

    names = sorted(info.config.name for info in await js.streams_info())
    assert names == sorted([DISPATCH_STREAM, EVENTS_STREAM])
    consumers = await js.consumers_info(DISPATCH_STREAM)
    assert [c.name for c in consumers] == ["workers-ai-interactive"]
