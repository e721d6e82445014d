"""The gauges KEDA scales workers on (deploy/k8s/keda-scaledobject.yaml): a queue's
eligible jobs are its waiting jobs that are due, none while it is paused."""

from __future__ import annotations

import asyncpg
from google.protobuf.duration_pb2 import Duration
from prometheus_client import REGISTRY

from job_service.adapters.postgres.gauges import GaugeRepository
from job_service.adapters.postgres.outbox import OutboxRepository
from job_service.usecases.gauges import DatabaseGauges
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from tests.support.stack import Client

QUEUE = "ai-interactive"  # the synthetic type's


def _sample(name: str, queue: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"queue": queue})


async def test_a_queues_eligible_jobs_are_the_due_ones_and_none_while_it_is_paused(
    client: Client, database_url: str
) -> None:
    for _ in range(3):
        await client.create(user_id="gauged")
    await client.jobs.CreateJob(  # delayed: waiting, not due
        jpb.CreateJobRequest(user_id="gauged", job_type="synthetic", delay=Duration(seconds=600))
    )
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    try:
        gauges = DatabaseGauges(GaugeRepository(pool), OutboxRepository(pool), [QUEUE])

        await gauges.refresh()
        assert (_sample("jobs_queue_eligible", QUEUE), _sample("jobs_queue_paused", QUEUE)) == (
            3.0,
            0.0,
        )

        await client.admin.PauseQueue(apb.PauseQueueRequest(queue=QUEUE))
        await gauges.refresh()
        assert (_sample("jobs_queue_eligible", QUEUE), _sample("jobs_queue_paused", QUEUE)) == (
            0.0,
            1.0,
        )
    finally:
        await pool.close()
