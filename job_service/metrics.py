"""job_service's Prometheus metrics (conventions in ``shared.metrics``).

Transitions are counted where they are written (the use cases and the postgres adapters), once per
job and transition: an idempotent repeat of a create or a submit counts nothing. Database
gauges (queue depth, outbox backlog) are refreshed by ``job_service.usecases.gauges``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from job_service.domain.lifecycle import JobStatus
from shared.errors import ErrorCode, classify
from shared.metrics import DURATION_BUCKETS, child

CREATED = Counter(
    "jobs_created_total", "Jobs created (idempotent repeats not counted).", ["job_type", "queue"]
)
FINISHED = Counter(
    "jobs_finished_total",
    "Jobs that reached a terminal status; outcome is succeeded, failed or cancelled.",
    ["job_type", "outcome"],
)
RETRIES = Counter(
    "jobs_retries_total",
    "Failed attempts that the job service scheduled for a retry, by error class.",
    ["job_type", "error_class"],
)
CANCELLATIONS = Counter(
    "jobs_cancellations_total",
    "Accepted CancelJob calls; state is waiting (cancelled at once) or running "
    "(its worker stops it).",
    ["job_type", "state"],
)
DEADLINES_EXCEEDED = Counter(
    "jobs_deadline_exceeded_total",
    "Jobs the deadline keeper ended DEADLINE_EXCEEDED; state is waiting (ended at once) or "
    "running (its attempt stopped).",
    ["job_type", "state"],
)
LEASE_EXPIRIES = Counter(
    "jobs_lease_expiries_total",
    "Attempts ended by the reaper because their worker stopped heartbeating.",
    ["job_type"],
)
DELETED = Counter(
    "jobs_deleted_total",
    "Finished jobs deleted by the retention loop (with their events, artifacts, snapshot, "
    "usage rows folded into daily aggregates).",
    ["job_type"],
)
USAGE_UNKNOWN = Counter(
    "jobs_attempts_usage_unknown_total",
    "Attempts of AI jobs ended by lease expiry without their usage reported: their provider "
    "calls may be missing from usage_logs (a late ReportUsage fills them in).",
    ["job_type"],
)
USAGE_REPORTED_LATE = Counter(
    "jobs_usage_reported_late_total",
    "Usage rows stored through ReportUsage (calls of an attempt that lost its lease or was "
    "stopped), repeats not counted.",
)
STALE_SUBMITS = Counter(
    "jobs_stale_submits_total",
    "Worker calls refused with LEASE_LOST (a stale lease token); nothing was changed.",
    ["rpc"],
)
PICKUP_LATENCY = Histogram(
    "jobs_pickup_latency_seconds",
    "From a job being due (created, or its retry's next_run_at) to its lock by a worker.",
    ["job_type"],
    buckets=DURATION_BUCKETS,
)
QUEUE_DEPTH = Gauge(
    "jobs_queue_depth",
    "Unfinished jobs by queue and status (from the database, every collect interval).",
    ["queue", "status"],
)
QUEUE_ELIGIBLE = Gauge(
    "jobs_queue_eligible",
    "Jobs a claim could grant now, by queue: waiting and due, in a queue that is not paused "
    "(from the database; rate limits and concurrency keys are not judged here).",
    ["queue"],
)
QUEUE_PAUSED = Gauge(
    "jobs_queue_paused", "1 while the queue is paused (AdminService.PauseQueue), else 0.", ["queue"]
)
OUTBOX_ROWS = Gauge(
    "jobs_outbox_rows",
    "Outbox rows waiting to be published (pending, processing) or dead-lettered (dead).",
    ["status"],
)
OUTBOX_OLDEST_DUE_AGE = Gauge(
    "jobs_outbox_oldest_due_age_seconds",
    "How long the oldest due, unpublished outbox row has waited (0 when none).",
)
OUTBOX_PUBLISHED = Counter("jobs_outbox_published_total", "Outbox rows published to NATS.")
OUTBOX_PUBLISH_FAILURES = Counter(
    "jobs_outbox_publish_failures_total", "Outbox publishes that failed (retried later)."
)
OUTBOX_PUBLISH_LAG = Histogram(
    "jobs_outbox_publish_lag_seconds",
    "From an outbox row being due to its publish being acknowledged by JetStream.",
    buckets=DURATION_BUCKETS,
)
TOKENS_UNUSED = Counter(
    "jobs_work_tokens_unused_total",
    "Work tokens (dispatch messages) a claim could not use: handed back for later (a rate "
    "limit or a missing worker version held jobs back) or dropped (nothing else waits, or "
    "the waiting jobs get new tokens when a limit frees up).",
    ["queue", "outcome"],
)
GRANTS_AHEAD = Counter(
    "jobs_grants_ahead_total",
    "Jobs granted to a worker without a work token of its own: pushed down its session as "
    "they became due (pushed), or answered with the results it submitted (on_submit).",
    ["queue", "path"],
)
JOBS_WITHOUT_WORKER = Gauge(
    "jobs_waiting_without_worker",
    "Due jobs whose definition version no live worker runs (from the database).",
)
JOBS_SUSPENDED = Gauge(
    "jobs_suspended",
    "Jobs whose code sleeps (reason=sleep) or waits for a signal (reason=signal), holding no "
    "worker slot (from the database).",
    ["reason"],
)
RATE_LIMIT_FACTOR = Gauge(
    "jobs_rate_limit_factor",
    "The effective share of a tier's configured rate (1 = full; halved by each 429).",
    ["tier"],
)
RATE_LIMIT_REQUESTS_AVAILABLE = Gauge(
    "jobs_rate_limit_requests_available", "Requests a tier's bucket holds now.", ["tier"]
)
RATE_LIMIT_TOKENS_AVAILABLE = Gauge(
    "jobs_rate_limit_tokens_available", "Tokens a tier's bucket holds now.", ["tier"]
)
RATE_LIMIT_WAITING = Gauge(
    "jobs_rate_limit_waiting", "Due jobs waiting for a rate-limited tier.", ["tier"]
)
RATE_LIMIT_THROTTLED = Gauge(
    "jobs_rate_limit_throttled", "429s reported for a tier (all time, from the database).", ["tier"]
)
# Read from the database by every replica alike: each reports the same figure, so the
# dashboard and the alerts take their max across replicas, never their sum
# (docs/operations.md, "Metrics"; tests/unit/test_observability_files.py holds both to it).
REPLICATED_GAUGES = (
    QUEUE_DEPTH,
    QUEUE_ELIGIBLE,
    QUEUE_PAUSED,
    OUTBOX_ROWS,
    OUTBOX_OLDEST_DUE_AGE,
    JOBS_WITHOUT_WORKER,
    JOBS_SUSPENDED,
    RATE_LIMIT_FACTOR,
    RATE_LIMIT_REQUESTS_AVAILABLE,
    RATE_LIMIT_TOKENS_AVAILABLE,
    RATE_LIMIT_WAITING,
    RATE_LIMIT_THROTTLED,
)
CALL_PERMITS = Counter(
    "jobs_call_permits_total",
    "Provider-call permits asked for, per rate-limited tier and answer: granted (call now), "
    "reserved (a slot a moment ahead), wait (no slot near enough: ask again later), "
    "blocked (a reserved slot a 429 voided), late (a reserved slot confirmed past its slack).",
    ["tier", "answer"],
)


def call_permit(tier: str, answer: str) -> None:
    CALL_PERMITS.labels(tier, answer).inc()


def tokens_unused(queue: str, count: int, *, handed_back: bool) -> None:
    if count:
        TOKENS_UNUSED.labels(queue, "handed_back" if handed_back else "dropped").inc(count)


def grants_pushed(queue: str, count: int) -> None:
    GRANTS_AHEAD.labels(queue, "pushed").inc(count)


def grants_on_submit(queue: str, count: int) -> None:
    if count:
        GRANTS_AHEAD.labels(queue, "on_submit").inc(count)


def job_created(job_type: str, queue: str) -> None:
    child(CREATED, job_type, queue).inc()


def job_cancelled(job_type: str, before: JobStatus, after: JobStatus) -> None:
    """A CancelJob that changed the job (from ``before`` to ``after``)."""
    child(CANCELLATIONS, job_type, "running" if before is JobStatus.RUNNING else "waiting").inc()
    if after is JobStatus.CANCELLED:
        child(FINISHED, job_type, after.value).inc()


def deadline_exceeded(job_type: str, before: JobStatus) -> None:
    """The deadline keeper ended a job that was ``before``."""
    child(
        DEADLINES_EXCEEDED, job_type, "running" if before is JobStatus.RUNNING else "waiting"
    ).inc()
    child(FINISHED, job_type, JobStatus.FAILED.value).inc()


def jobs_deleted(job_type: str, count: int) -> None:
    if count:
        child(DELETED, job_type).inc(count)


def job_succeeded(job_type: str) -> None:
    child(FINISHED, job_type, JobStatus.SUCCEEDED.value).inc()


def attempt_ended(job_type: str, code: str, status: JobStatus) -> None:
    """A failed attempt's end as written: retrying, or a terminal status."""
    if code == ErrorCode.LEASE_EXPIRED:
        child(LEASE_EXPIRIES, job_type).inc()
    elif code == ErrorCode.WORKER_DISCONNECTED:
        child(LEASE_DISCONNECTS, job_type).inc()
    if status is JobStatus.RETRYING:
        child(RETRIES, job_type, classify(code).value).inc()
    elif status.terminal:
        child(FINISHED, job_type, status.value).inc()


def picked_up(job_type: str, waited_s: float) -> None:
    child(PICKUP_LATENCY, job_type).observe(max(0.0, waited_s))


def usage_unknown(job_type: str) -> None:
    child(USAGE_UNKNOWN, job_type).inc()


def usage_reported_late(count: int) -> None:
    if count:
        USAGE_REPORTED_LATE.inc(count)


def stale_submit(rpc: str, count: int = 1) -> None:
    if count:
        child(STALE_SUBMITS, rpc).inc(count)


def outbox_published(lags_s: list[float]) -> None:
    OUTBOX_PUBLISHED.inc(len(lags_s))
    for lag in lags_s:
        OUTBOX_PUBLISH_LAG.observe(max(0.0, lag))


def outbox_failed(count: int) -> None:
    if count:
        OUTBOX_PUBLISH_FAILURES.inc(count)


# Worker sessions (docs/adr/0003-worker-sessions.md).
LEASE_DISCONNECTS = Counter(
    "jobs_lease_disconnects_total",
    "Attempts ended because their worker's session closed without a goodbye and no new one"
    " came within the grace (it crashed); jobs_lease_expiries_total counts the reaper's.",
    ["job_type"],
)
WORKER_SESSIONS_OPEN = Gauge(
    "jobs_worker_sessions_open", "Worker sessions (streams) open on this replica."
)


def worker_sessions_open(count: int) -> None:
    WORKER_SESSIONS_OPEN.set(count)


# Schedules (docs/adr/0005-schedules.md).
SCHEDULE_RUNS = Counter(
    "jobs_schedule_runs_total",
    "Schedule slots handled, by outcome: fired (a job created), skipped_missed (outside the "
    "catch-up window), skipped_overlap (the previous job still ran), refused (CreateJob "
    "refused the job: a quota, or the template no longer valid), triggered (TriggerSchedule).",
    ["outcome"],
)
SCHEDULE_FIRE_LAG = Histogram(
    "jobs_schedule_fire_lag_seconds",
    "From a schedule slot's time to its job's creation (the firing transaction's commit).",
    buckets=DURATION_BUCKETS,
)


def schedule_runs(outcome: str, count: int = 1) -> None:
    if count:
        SCHEDULE_RUNS.labels(outcome).inc(count)


def schedule_fired(lag_s: float) -> None:
    SCHEDULE_RUNS.labels("fired").inc()
    SCHEDULE_FIRE_LAG.observe(max(0.0, lag_s))


# Signals (docs/adr/0006-signals.md).
SIGNALS_SENT = Counter(
    "jobs_signals_sent_total",
    "Signals stored by SendSignal (idempotent repeats not counted).",
    ["job_type"],
)
SIGNALS_FETCHED = Counter(
    "jobs_signals_fetched_total",
    "Signals handed to workers by FetchSignals (each attempt of a job fetches them again).",
)


def signal_sent(job_type: str) -> None:
    child(SIGNALS_SENT, job_type).inc()


def signals_fetched(count: int) -> None:
    if count:
        SIGNALS_FETCHED.inc(count)


DEPENDENTS_RELEASED = Counter(
    "jobs_dependents_released_total",
    "Jobs waiting for dependencies that the resolver acted on: made due once their last"
    " dependency ended (outcome=due), or ended by their dependency policy (outcome=ended).",
    ["outcome"],
)


def dependencies_resolved(*, due: int, ended: int) -> None:
    if due:
        DEPENDENTS_RELEASED.labels("due").inc(due)
    if ended:
        DEPENDENTS_RELEASED.labels("ended").inc(ended)


DEPENDENCY_ATTACH_RETRIES = Counter(
    "jobs_dependency_attach_retries_total",
    "Transactions attaching a job to its dependencies run again because a dependency's row"
    " was being ended (a join over running jobs attaches in one try: heartbeats never count).",
)


def dependency_attach_retried() -> None:
    DEPENDENCY_ATTACH_RETRIES.inc()


PARTIAL_OUTPUT_FORWARDED = Counter(
    "jobs_watch_partial_output_messages_total",
    "Partial-output pieces sent to WatchJob clients (counts only: the text is never logged).",
)
PARTIAL_OUTPUT_DROPPED = Counter(
    "jobs_watch_partial_output_dropped_total",
    "Partial-output pieces dropped for a WatchJob client that read slower than they came.",
)


def partial_output_forwarded() -> None:
    PARTIAL_OUTPUT_FORWARDED.inc()


def partial_output_dropped() -> None:
    PARTIAL_OUTPUT_DROPPED.inc()
