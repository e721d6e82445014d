"""worker_service's Prometheus metrics (conventions in ``shared.metrics``; provider calls
are recorded with ``shared.metrics.record_provider_call``).

Slot gauges read the intakes' state when scraped: running a job costs no metric update
beyond one histogram observation and one counter increment when its attempt ends.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram

from shared.metrics import DURATION_BUCKETS, child

ATTEMPTS = Counter(
    "jobs_worker_attempts_total",
    "Attempts this worker ran, by outcome: succeeded, an error class (PROVIDER, TIMEOUT, "
    "...), or lease_lost (another worker owns the job now).",
    ["job_type", "outcome"],
)
RUN_DURATION = Histogram(
    "jobs_run_duration_seconds",
    "How long an attempt executed on a worker (lock to outcome, submit excluded).",
    ["job_type", "outcome"],
    buckets=DURATION_BUCKETS,
)
USAGE_REPORTED = Counter(
    "jobs_worker_usage_reported_total",
    "Provider calls of uncommitted attempts (a lost lease, a stopped attempt) this worker "
    "reported through ReportUsage and the job service stored.",
)
SLOTS = Gauge("jobs_worker_slots", "Executor slots per queue (jobs run at once).", ["queue"])
SLOTS_IN_USE = Gauge(
    "jobs_worker_slots_in_use",
    "Executor slots taken per queue: jobs being locked, run or submitted.",
    ["queue"],
)


def watch_slots(queue: str, slots: int, in_use: Callable[[], float]) -> None:
    """Report a queue's slots; ``in_use`` is read at scrape time."""
    child(SLOTS, queue).set(slots)
    child(SLOTS_IN_USE, queue).set_function(in_use)


def attempt_ended(job_type: str, outcome: str, duration_s: float) -> None:
    child(ATTEMPTS, job_type, outcome).inc()
    child(RUN_DURATION, job_type, outcome).observe(max(0.0, duration_s))


RERUNS_AFTER_RECONNECT = Counter(
    "jobs_worker_reruns_after_reconnect_total",
    "Attempts this worker stopped when its session came back because the job service had "
    "ended their leases while it was cut off (JOBS_WORKER_RECONNECT_GRACE_S): their jobs "
    "run again elsewhere, the cost of the grace for a live worker.",
    ["job_type"],
)


def rerun_after_reconnect(job_type: str) -> None:
    child(RERUNS_AFTER_RECONNECT, job_type).inc()


def usage_reported_late(stored: int) -> None:
    if stored:
        USAGE_REPORTED.inc(stored)


STEPS = Counter(
    "jobs_worker_steps_total",
    "Checkpointed provider calls (named steps) of this worker's attempts, by result: "
    "recorded (the response is stored through RecordStep), reused (answered from an "
    "earlier attempt's record: no provider call), unrecorded (the job service could not "
    "be reached: a later attempt calls again).",
    ["job_type", "result"],
)


def step(job_type: str, result: str) -> None:
    child(STEPS, job_type, result).inc()


# Signals: counted when job code receives one (ctx.signal / ctx.poll_signal), once per
# attempt; the latency runs from the job service storing it to job code having it (two
# clocks: the job service's and this worker's).
SIGNALS_DELIVERED = Counter(
    "jobs_signals_delivered_total",
    "Signals job code received (each attempt of a job receives them again).",
    ["job_type"],
)
SIGNAL_DELIVERY_LATENCY = Histogram(
    "jobs_signal_delivery_seconds",
    "From a signal being stored (SendSignal) to job code receiving it, for signals that "
    "arrived while their attempt ran (not those an attempt found waiting at its start).",
    ["job_type"],
    buckets=DURATION_BUCKETS,
)


def signal_delivered(job_type: str, latency_s: float | None) -> None:
    child(SIGNALS_DELIVERED, job_type).inc()
    if latency_s is not None:
        child(SIGNAL_DELIVERY_LATENCY, job_type).observe(max(0.0, latency_s))


PARTIAL_OUTPUT = Counter(
    "jobs_worker_partial_output_messages_total",
    "Partial-output messages published (coalesced text deltas of streamed provider calls).",
)
PARTIAL_OUTPUT_BYTES = Counter(
    "jobs_worker_partial_output_bytes_total",
    "Bytes of partial-output text published (sizes only: the text is never logged).",
)
PARTIAL_OUTPUT_DROPPED = Counter(
    "jobs_worker_partial_output_dropped_total",
    "Partial-output messages whose publish failed (watchers see a gap in seq).",
)


def partial_output_published(size: int) -> None:
    PARTIAL_OUTPUT.inc()
    PARTIAL_OUTPUT_BYTES.inc(size)


def partial_output_dropped() -> None:
    PARTIAL_OUTPUT_DROPPED.inc()


CALL_PERMIT_WAIT = Histogram(
    "jobs_worker_call_permit_wait_seconds",
    "How long provider calls waited for their rate-limit permit, per tier (limited tiers).",
    ["tier"],
    buckets=(0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
CALL_PERMITS_LATE = Counter(
    "jobs_worker_call_permits_late_total",
    "Permits that arrived after their validity (spent without a call; asked again).",
    ["tier"],
)


def call_permit_waited(tier: str, seconds: float) -> None:
    CALL_PERMIT_WAIT.labels(tier).observe(seconds)


def call_permit_late(tier: str) -> None:
    CALL_PERMITS_LATE.labels(tier).inc()
