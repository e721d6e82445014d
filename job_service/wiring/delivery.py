"""Delivery: the NATS publisher and the outbox that feeds it (the dispatcher loop and its
upkeep). Every other concern hands its events over to the dispatcher."""

from __future__ import annotations

from dataclasses import dataclass

from job_service.adapters.nats_publisher import NatsPublisher
from job_service.adapters.postgres.outbox import OutboxRepository
from job_service.usecases.outbox import OutboxDispatcher, OutboxUpkeep
from job_service.wiring.connections import Connections


@dataclass(frozen=True)
class Delivery:
    publisher: NatsPublisher
    outbox_store: OutboxRepository
    dispatcher: OutboxDispatcher
    outbox: OutboxUpkeep


def wire_delivery(c: Connections) -> Delivery:
    s = c.settings
    publisher = NatsPublisher(c.nc, stream_replicas=s.nats_stream_replicas)
    outbox_store = OutboxRepository(c.hot)
    dispatcher = OutboxDispatcher(
        outbox_store,
        publisher,
        owner=c.instance_id,
        batch_size=s.outbox_batch_size,
        poll_interval_s=s.outbox_poll_interval_s,
        claim_ttl_s=s.outbox_claim_ttl_s,
        max_attempts=s.outbox_max_attempts,
    )
    return Delivery(publisher, outbox_store, dispatcher, OutboxUpkeep(outbox_store, dispatcher))
