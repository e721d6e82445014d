"""Every NATS subject, stream and consumer name, and the queue names, in one place."""

from __future__ import annotations

from enum import StrEnum


class Queue(StrEnum):
    INTERACTIVE = "ai-interactive"
    BACKGROUND = "ai-background"


# Work-queue stream: a dispatch message is "job X may be worked on", removed once acked.
DISPATCH_STREAM = "JOBS_DISPATCH"
DISPATCH_SUBJECT_PREFIX = "jobs.dispatch"
# Domain events for other services: jobs.events.<job_type>.<status>.
EVENTS_STREAM = "JOBS_EVENTS"
EVENTS_SUBJECT_PREFIX = "jobs.events"
# Core NATS (not persisted): "stop job X now". Heartbeats are the durable backstop.
CANCEL_SUBJECT = "jobs.control.cancel"
# Core NATS (not persisted): "job X has signals up to seq N". The worker running X fetches
# them (ExecutorService.FetchSignals); heartbeats carry the latest seq as the backstop.
SIGNAL_SUBJECT = "jobs.control.signal"

# Core NATS (not persisted, never stored): a running job's partial model output, as
# jobs.v1.PartialOutput messages on jobs.partial.<job_id>.
PARTIAL_SUBJECT_PREFIX = "jobs.partial"

# The JetStream header that makes a publish idempotent within the stream's window.
MSG_ID_HEADER = "Nats-Msg-Id"


def dispatch_subject(queue: str) -> str:
    return f"{DISPATCH_SUBJECT_PREFIX}.{queue}"


def dispatch_consumer(queue: str) -> str:
    """The durable pull consumer every worker of a queue shares."""
    return f"workers-{queue}"


def partial_subject(job_id: str) -> str:
    """Where a job's partial output is published while it runs."""
    return f"{PARTIAL_SUBJECT_PREFIX}.{job_id}"
