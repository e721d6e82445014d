"""What operators read: queues, rate limits, the job type registry, dead outbox events,
and a user's stored credentials."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from jobctl.ids import short_id
from jobctl.render.text import table, when


def queues_table(queues: Sequence[Any]) -> str:
    if not queues:
        return "no queues"
    return table(
        ["QUEUE", "PAUSED", "WAITING", "ELIGIBLE", "RUNNING", "LIMIT", "PAUSED-SINCE"],
        [
            [
                q.name,
                "yes" if q.paused else "no",
                str(q.waiting),
                str(q.eligible),
                str(q.running),
                str(q.concurrency_limit) if q.concurrency_limit else "-",
                f"{when(q.paused_at)} by {q.paused_by}" if q.paused else "",
            ]
            for q in queues
        ],
    )


def rate_limits_table(limits: Sequence[Any], now: datetime | None = None) -> str:
    """A row per model tier; BLOCKED-UNTIL only while it lies ahead."""
    if not limits:
        return "no rate limits (JOBS_RATE_LIMITS is empty)"
    now = now or datetime.now(UTC)

    def blocked(stamp: Timestamp) -> str:
        if not stamp.seconds and not stamp.nanos:
            return "-"
        return when(stamp) if stamp.ToDatetime(tzinfo=UTC) > now else "-"

    return table(
        [
            "KEY",
            "REQ/MIN",
            "TOK/MIN",
            "FACTOR",
            "REQ-AVAIL",
            "TOK-AVAIL",
            "WAITING",
            "429S",
            "BLOCKED-UNTIL",
        ],
        [
            [
                r.key,
                f"{r.requests_per_minute:g}",
                f"{r.tokens_per_minute:g}" if r.tokens_per_minute else "-",
                f"{r.effective_factor:.2f}",
                f"{r.requests_available:.1f}",
                f"{r.tokens_available:.0f}" if r.tokens_per_minute else "-",
                str(r.waiting),
                str(r.throttled_total),
                blocked(r.blocked_until),
            ]
            for r in limits
        ],
    )


def workers_table(workers: Sequence[Any]) -> str:
    if not workers:
        return "no workers connected"
    return table(
        ["WORKER", "CONNECTED", "RUNNING", "DEFINITIONS"],
        [
            [
                w.worker_id,
                when(w.connected_at),
                str(w.running_jobs),
                ",".join(w.definitions) or "-",
            ]
            for w in workers
        ],
    )


def definitions_table(definitions: Sequence[Any]) -> str:
    """A row per declared (type, version): which version new jobs get (CURRENT), and
    which worker declared the spec first and last, and when."""
    if not definitions:
        return "no job types declared (a type exists once a worker declares it)"
    return table(
        [
            "TYPE",
            "VERSION",
            "CURRENT",
            "QUEUE",
            "TIMEOUT",
            "ATTEMPTS",
            "CONCURRENCY",
            "FIRST-DECLARED",
            "LAST-DECLARED",
        ],
        [
            [
                d.job_type,
                d.version,
                "yes" if d.current else "no",
                d.queue,
                f"{d.timeout_seconds:g}s",
                str(d.max_attempts),
                str(d.max_concurrency),
                f"{when(d.first_declared_at)} by {d.first_declared_by}",
                f"{when(d.last_declared_at)} by {d.last_declared_by}",
            ]
            for d in definitions
        ],
    )


def dead_events_table(events: Sequence[Any]) -> str:
    if not events:
        return "none"
    return table(
        ["EVENT", "JOB", "SUBJECT", "ATTEMPTS", "CREATED", "LAST-ERROR"],
        [
            [
                str(e.id),
                short_id(e.job_id),
                e.subject,
                str(e.attempts),
                when(e.created_at),
                e.last_error.splitlines()[0][:60] if e.last_error else "-",
            ]
            for e in events
        ],
    )


def credentials_table(credentials: Sequence[Any]) -> str:
    if not credentials:
        return "no credentials"
    return table(
        ["ID", "PROVIDER", "FINGERPRINT", "CREATED", "LAST-USED", "LABEL"],
        [
            [
                c.id,
                c.provider,
                c.fingerprint,
                when(c.created_at),
                when(c.last_used_at),
                c.label,
            ]
            for c in credentials
        ],
    )
