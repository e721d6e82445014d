"""JetStream topology, created idempotently by whichever process starts first.

Both streams are declared here so that the job service (which publishes) and the workers
(which consume) agree on them; re-running against an existing stream updates it in place.
"""

from __future__ import annotations

import dataclasses

from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, NotFoundError

from shared.constants import (
    DISPATCH_STREAM,
    DISPATCH_SUBJECT_PREFIX,
    EVENTS_STREAM,
    EVENTS_SUBJECT_PREFIX,
    dispatch_consumer,
    dispatch_subject,
)

# Publishes with the same Nats-Msg-Id inside this window are stored once.
DUPLICATE_WINDOW_S = 120.0
EVENTS_MAX_AGE_S = 7 * 24 * 3600.0
# A delivered dispatch message is acked as soon as LockJobs answers (the worker gives the
# call 5 s); this bounds how long a worker that froze or died between fetch and LockJobs
# holds the message: a work token its last fetch took just before it froze (a fetch waits
# up to JOBS_WORKER_FETCH_TIMEOUT_S) comes back to the fleet after this (issue 29: it was
# 30 s). A redelivered token whose first copy is acked late is harmless: claims decide.
DISPATCH_ACK_WAIT_S = 10.0

STREAMS = (
    # num_replicas is set by ensure_streams (JOBS_NATS_STREAM_REPLICAS)
    StreamConfig(
        name=DISPATCH_STREAM,
        subjects=[f"{DISPATCH_SUBJECT_PREFIX}.>"],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW_S,
    ),
    StreamConfig(
        name=EVENTS_STREAM,
        subjects=[f"{EVENTS_SUBJECT_PREFIX}.>"],
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        duplicate_window=DUPLICATE_WINDOW_S,
        max_age=EVENTS_MAX_AGE_S,
    ),
)


def replicated(config: StreamConfig, replicas: int) -> StreamConfig:
    """``config`` stored on ``replicas`` servers of a JetStream cluster (R3: survives one
    server's loss, acknowledged by a quorum). The consumers inherit it."""
    return dataclasses.replace(config, num_replicas=replicas)


async def ensure_streams(js: JetStreamContext, replicas: int | None = None) -> None:
    """Declares the streams, or updates them in place. ``replicas`` None (the workers)
    keeps an existing stream's replica count and creates a missing one with 1: only the job
    service, which knows JOBS_NATS_STREAM_REPLICAS, chooses it — a worker declaring the
    streams after a store loss must not scale an R3 stream down to one server."""
    for base in STREAMS:
        try:
            info = await js.stream_info(base.name)  # type: ignore[arg-type]
        except NotFoundError:
            try:
                await js.add_stream(replicated(base, replicas or 1))
                continue
            except BadRequestError:
                info = await js.stream_info(base.name)  # type: ignore[arg-type]
        keep = info.config.num_replicas or 1
        await js.update_stream(replicated(base, replicas or keep))


def dispatch_consumer_config(queue: str) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=dispatch_consumer(queue),
        filter_subject=dispatch_subject(queue),
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=DISPATCH_ACK_WAIT_S,
        max_ack_pending=20_000,
        max_waiting=512,
    )


async def ensure_dispatch_consumer(js: JetStreamContext, queue: str) -> None:
    await js.add_consumer(DISPATCH_STREAM, dispatch_consumer_config(queue))
