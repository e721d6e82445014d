"""The job store on PostgreSQL: the only writer of a job's status.

Every status write is a compare-and-set whose ``WHERE status = ANY(...)`` comes from the
lifecycle table (``lifecycle.sources``); an update that matches no row lost a race and
changes nothing. The hot path (create, lock, heartbeat, submit result) is one statement
each: data-modifying CTEs write the job, its timeline event, snapshot, artifacts and outbox
row atomically in a single round trip. Queries run on the asyncpg driver directly (the
ORM runs this path at a fifth of the speed); the schema itself is ``tables.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

import asyncpg

from job_service import metrics
from job_service.domain.lifecycle import JobStatus, Step, sources, transition
from job_service.domain.models import (
    Artifact,
    AttemptFacts,
    FailureOutcome,
    HeartbeatAck,
    Job,
    JobEvent,
    LockGrant,
    LockRefusal,
    NewChild,
    NewJob,
    QuotaRefusal,
    Quotas,
    RetrySpec,
    Submission,
)
from job_service.domain.retry import Outcome, RetryDecision
from job_service.ports import Decide
from shared.ai.provider import UsageRecord
from shared.constants import DISPATCH_SUBJECT_PREFIX, EVENTS_SUBJECT_PREFIX
from shared.credentials import CredentialMode
from shared.errors import ErrorCode, LeaseLost, public_message


def _statuses(step: Step) -> list[str]:
    return sorted(s.value for s in sources(step))


LOCKABLE = _statuses(Step.LOCK)  # queued, retrying
LEASED = [JobStatus.RUNNING.value, JobStatus.CANCEL_REQUESTED.value]

JOB_COLUMNS = """
    j.id::text AS id, j.user_id, j.job_type, j.status, j.queue, j.priority, j.attempt_count,
    j.max_attempts, j.idempotency_key, j.request_hash, j.progress, j.validated_output,
    j.output_hash, j.error_code, j.public_error_message, j.internal_error_message,
    j.created_at, j.updated_at, j.started_at, j.finished_at, j.next_run_at,
    j.parent_job_id::text AS parent_job_id, j.prompt_key, j.prompt_version, j.model_tier,
    j.trigger_type, j.retried_from_job_id::text AS retried_from_job_id,
    j.credential_mode, j.credential_id::text AS credential_id
"""

# Unfinished statuses, spelled as the partial index jobs_user_active spells them.
ACTIVE_SQL = "('created', 'queued', 'running', 'retrying', 'cancel_requested')"

# Inserts the dispatch outbox row for a job in `src` (a CTE with id, queue), available at
# `available_at`, deduplicated by `dedupe`. Shared by create and retry. `trace` is a jsonb
# trace-context carrier or NULL: kept in the payload under "trace", sent as NATS headers.
_DISPATCH_ROW = f"""
    INSERT INTO outbox_events
        (event_type, aggregate_type, aggregate_id, dedupe_key, subject, payload, available_at)
    SELECT 'job.dispatch', 'job', src.id::text, {{dedupe}},
           '{DISPATCH_SUBJECT_PREFIX}.' || src.queue,
           jsonb_strip_nulls(jsonb_build_object('job_id', src.id::text, 'attempt', {{attempt}},
                                                'trace', {{trace}})),
           {{available_at}}
    FROM {{src}} src
"""

# The domain event of a terminal status, for other services (jobs.events.<type>.<status>).
_DOMAIN_EVENT_ROW = f"""
    INSERT INTO outbox_events
        (event_type, aggregate_type, aggregate_id, dedupe_key, subject, payload)
    SELECT 'job.' || src.status, 'job', src.id::text, 'job.' || src.status || ':' || src.id,
           '{EVENTS_SUBJECT_PREFIX}.' || src.job_type || '.' || src.status,
           jsonb_build_object('job_id', src.id::text, 'job_type', src.job_type,
                              'status', src.status)
    FROM {{src}} src
"""

# A retry's dispatch continues the job's trace: the create row's context (while it is kept).
RETRY_TRACE = """(SELECT o.payload->'trace' FROM outbox_events o
    WHERE o.dedupe_key = 'job.dispatch:' || src.id || ':create')"""

# Quotas: the unfinished-jobs count stops at its limit ($21; 0 counts nothing), so it
# costs at most that many index entries; jobs created today (UTC) are a counter row per
# user and day ($22 the limit; 0 leaves the counter alone), bumped in the same statement.
CREATE_JOB = f"""
WITH usage AS (
    SELECT
        (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE user_id = $1
                               AND status IN {ACTIVE_SQL} LIMIT $21) a) AS active,
        coalesce((SELECT created FROM job_quota_usage
                  WHERE $22::int > 0 AND user_id = $1
                    AND day = (now() AT TIME ZONE 'UTC')::date), 0) AS today
), inserted AS (
    INSERT INTO jobs AS j (user_id, job_type, queue, priority, idempotency_key, request_hash,
                      status, max_attempts, timeout_ms, input_schema_version,
                      output_schema_version, definition_version, queued_at, prompt_key,
                      prompt_version, model_tier, credential_mode, credential_id)
    SELECT $1::varchar, $2::varchar, $3::varchar, $4::smallint, $5::varchar, $6::varchar,
           'queued', $7::int, $8::int, $9::varchar, $10::varchar, $11::varchar, now(),
           $15::varchar, $16::varchar, $17::varchar, $18::varchar, $19::uuid
    FROM usage
    WHERE ($21::int = 0 OR usage.active < $21::int) AND ($22::int = 0 OR usage.today < $22::int)
    ON CONFLICT (user_id, job_type, idempotency_key) WHERE idempotency_key IS NOT NULL
        DO NOTHING
    RETURNING {JOB_COLUMNS}
), snapshot AS (
    INSERT INTO job_snapshots (job_id, payload, content_hash, schema_version, expires_at)
    SELECT id::uuid, $12, $13, $9, now() + $14 * interval '1 second' FROM inserted
), event AS (
    INSERT INTO job_events (job_id, from_status, to_status, attempt)
    SELECT id::uuid, NULL, 'queued', 0 FROM inserted
), dispatch AS (
    {
    _DISPATCH_ROW.format(
        src="inserted",
        dedupe="'job.dispatch:' || src.id || ':create'",
        attempt="1",
        available_at="now()",
        trace="$20::jsonb",
    )
}
), counted AS (
    INSERT INTO job_quota_usage AS q (user_id, day, created)
    SELECT $1, (now() AT TIME ZONE 'UTC')::date, 1 FROM inserted WHERE $22::int > 0
    ON CONFLICT (user_id, day) DO UPDATE SET created = q.created + 1
)
SELECT inserted.*, usage.active AS quota_active, usage.today AS quota_today
FROM usage LEFT JOIN inserted ON true
"""

# A new job from a finished one's snapshot ($1, in a status of $2), trigger "retry".
RETRY_JOB = f"""
WITH src AS (
    SELECT j.*, s.payload, s.content_hash, s.schema_version
    FROM jobs j JOIN job_snapshots s ON s.job_id = j.id
    WHERE j.id = $1 AND j.status = ANY($2::text[])
), inserted AS (
    INSERT INTO jobs AS j (user_id, job_type, trigger_type, queue, priority, request_hash,
                      retried_from_job_id, status, max_attempts, timeout_ms,
                      input_schema_version, output_schema_version, definition_version,
                      queued_at, credential_mode, credential_id, prompt_key, prompt_version,
                      model_tier)
    SELECT user_id, job_type, 'retry', queue, priority, request_hash, id, 'queued',
           $3::int, $4::int, input_schema_version, output_schema_version, $5::varchar, now(),
           credential_mode, credential_id, prompt_key, prompt_version, model_tier
    FROM src
    RETURNING {JOB_COLUMNS}
), snapshot AS (
    INSERT INTO job_snapshots (job_id, payload, content_hash, schema_version, expires_at)
    SELECT inserted.id::uuid, src.payload, src.content_hash, src.schema_version,
           now() + $6 * interval '1 second'
    FROM inserted, src
), event AS (
    INSERT INTO job_events (job_id, from_status, to_status, attempt, reason)
    SELECT id::uuid, NULL, 'queued', 0, 'retry' FROM inserted
), dispatch AS (
    {
    _DISPATCH_ROW.format(
        src="inserted",
        dedupe="'job.dispatch:' || src.id || ':create'",
        attempt="1",
        available_at="now()",
        trace="NULL::jsonb",
    )
}
)
SELECT * FROM inserted
"""

FIND_BY_IDEMPOTENCY_KEY = f"""
SELECT {JOB_COLUMNS} FROM jobs j
WHERE j.user_id = $1 AND j.job_type = $2 AND j.idempotency_key = $3
"""

GET_JOB = f"""
SELECT {JOB_COLUMNS},
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'artifact_type', a.artifact_type, 'artifact_id', a.artifact_id,
                'ordinal', a.ordinal, 'payload', a.payload) ORDER BY a.ordinal, a.id), '[]')
     FROM job_artifacts a WHERE a.job_id = j.id) AS artifacts,
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'from', e.from_status, 'to', e.to_status, 'attempt', e.attempt,
                'reason', e.reason, 'at', e.created_at) ORDER BY e.id), '[]')
     FROM job_events e WHERE e.job_id = j.id) AS events,
    (SELECT coalesce(array_agg(c.id::text ORDER BY c.created_at, c.id), '{{}}')
     FROM jobs c WHERE c.parent_job_id = j.id) AS child_job_ids,
    usage.*
FROM jobs j
CROSS JOIN LATERAL (
    SELECT coalesce(sum(u.input_tokens), 0)::bigint AS total_input_tokens,
           coalesce(sum(u.output_tokens), 0)::bigint AS total_output_tokens,
           coalesce(sum(u.cost_usd), 0)::float8 AS total_cost_usd
    FROM usage_logs u WHERE u.job_id = j.id
) usage
WHERE j.id = $1 AND ($2::text IS NULL OR j.user_id = $2)
"""

# Locks every lockable job of $1 (rows taken in id order, so that concurrent batches
# cannot deadlock; FOR UPDATE waits for a concurrent writer rather than skipping a row whose
# dispatch would then be dropped).
LOCK_JOBS = """
WITH prior AS (
    SELECT id, status, coalesce(next_run_at, queued_at) AS due_at FROM jobs
    WHERE id = ANY($1::text[]::uuid[]) AND status = ANY($4::text[])
      AND (status = 'queued' OR next_run_at <= now())
    ORDER BY id
    FOR UPDATE
), locked AS (
    UPDATE jobs j SET status = 'running', locked_by = $2, locked_at = now(),
        lock_until = now() + $3 * interval '1 millisecond', lease_token = gen_random_uuid(),
        attempt_count = j.attempt_count + 1, started_at = coalesce(j.started_at, now()),
        next_run_at = NULL, progress = 0, updated_at = now()
    FROM prior WHERE j.id = prior.id
    RETURNING j.id, j.job_type, j.user_id, j.lease_token::text AS lease_token,
              j.attempt_count, j.lock_until, j.prompt_key, j.prompt_version,
              prior.status AS from_status, j.credential_mode,
              j.credential_id::text AS credential_id,
              extract(epoch FROM now() - prior.due_at)::float8 AS waited_s
), event AS (
    INSERT INTO job_events (job_id, from_status, to_status, attempt, worker_id)
    SELECT id, from_status, 'running', attempt_count, $2 FROM locked
)
SELECT l.id::text AS id, l.job_type, l.user_id, l.lease_token, l.attempt_count, l.lock_until,
       l.prompt_key, l.prompt_version, s.payload, l.credential_mode, l.credential_id, l.waited_s
FROM locked l JOIN job_snapshots s ON s.job_id = l.id
"""

NOT_DUE = """
SELECT id::text AS id, next_run_at FROM jobs
WHERE id = ANY($1::text[]::uuid[]) AND status = 'retrying' AND next_run_at > now()
"""

HEARTBEAT = """
UPDATE jobs SET lock_until = now() + $3 * interval '1 millisecond',
    progress = CASE WHEN $4::float8 >= 0 THEN least($4::float8, 1) ELSE progress END
WHERE id = $1 AND lease_token = $2 AND status = ANY($5::text[])
RETURNING lock_until, status
"""

_USAGE_COLUMNS = """
    job_id uuid, provider text, model text, credential_mode text, input_tokens int,
    output_tokens int, cost_usd numeric, latency_ms int, error_code text
"""

# Commits each result whose lease token is current, with its artifacts, timeline event and
# domain event (and, with _PROJECTION, its child jobs and usage rows). $1..$4 are JSON
# arrays: one element per result, artifact, child, provider call.
_SUBMIT_CORE = f"""
WITH input AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb)
        AS i(job_id uuid, lease_token uuid, output jsonb, output_hash text)
), done AS (
    UPDATE jobs j SET status = 'succeeded', validated_output = i.output,
        output_hash = i.output_hash, progress = 1, finished_at = now(), updated_at = now(),
        lock_until = NULL, error_code = NULL, public_error_message = NULL
    FROM input i
    WHERE j.id = i.job_id AND j.lease_token = i.lease_token AND j.status = 'running'
    RETURNING j.id, j.user_id, j.job_type, j.status, j.attempt_count, j.locked_by,
              j.credential_mode, j.credential_id
), artifacts AS (
    INSERT INTO job_artifacts (job_id, artifact_type, artifact_id, ordinal, payload)
    SELECT a.job_id, a.artifact_type, a.artifact_id, a.ordinal, a.payload
    FROM jsonb_to_recordset($2::jsonb)
        AS a(job_id uuid, artifact_type text, artifact_id text, ordinal int, payload jsonb)
    JOIN done ON done.id = a.job_id
), event AS (
    INSERT INTO job_events (job_id, from_status, to_status, attempt, worker_id)
    SELECT id, 'running', 'succeeded', attempt_count, locked_by FROM done
), domain_event AS (
    {_DOMAIN_EVENT_ROW.format(src="done")}
"""

# Child jobs (each with its snapshot, timeline event and dispatch row; a child whose
# idempotency key exists already is left as it is) and usage rows of the results `done`.
_PROJECTION = f"""
), children_in AS (
    SELECT c.*, done.user_id,
           CASE WHEN c.inherits_credential THEN done.credential_mode ELSE 'platform'
           END AS credential_mode,
           CASE WHEN c.inherits_credential THEN done.credential_id END AS credential_id
    FROM jsonb_to_recordset($3::jsonb) AS c(
        parent_job_id uuid, job_type text, queue text, priority int, idempotency_key text,
        request_hash text, max_attempts int, timeout_ms int, input_schema_version text,
        output_schema_version text, definition_version text, prompt_key text,
        prompt_version text, model_tier text, snapshot jsonb, snapshot_hash text,
        snapshot_ttl_s float8, inherits_credential bool)
    JOIN done ON done.id = c.parent_job_id
), children AS (
    INSERT INTO jobs AS j (user_id, job_type, trigger_type, queue, priority, idempotency_key,
                      request_hash, parent_job_id, status, max_attempts, timeout_ms,
                      input_schema_version, output_schema_version, definition_version,
                      prompt_key, prompt_version, model_tier, queued_at, credential_mode,
                      credential_id)
    SELECT user_id, job_type, 'child_job', queue, priority, idempotency_key, request_hash,
           parent_job_id, 'queued', max_attempts, timeout_ms, input_schema_version,
           output_schema_version, definition_version, prompt_key, prompt_version, model_tier,
           now(), credential_mode, credential_id
    FROM children_in
    ON CONFLICT (user_id, job_type, idempotency_key) WHERE idempotency_key IS NOT NULL
        DO NOTHING
    RETURNING j.id, j.queue, j.parent_job_id, j.job_type, j.idempotency_key
), child_snapshots AS (
    INSERT INTO job_snapshots (job_id, payload, content_hash, schema_version, expires_at)
    SELECT ch.id, c.snapshot, c.snapshot_hash, c.input_schema_version,
           now() + c.snapshot_ttl_s * interval '1 second'
    FROM children ch JOIN children_in c
        ON c.parent_job_id = ch.parent_job_id AND c.job_type = ch.job_type
       AND c.idempotency_key = ch.idempotency_key
), child_events AS (
    INSERT INTO job_events (job_id, from_status, to_status, attempt, reason)
    SELECT id, NULL, 'queued', 0, 'child_job' FROM children
), child_dispatch AS (
    {
    _DISPATCH_ROW.format(
        src="children",
        dedupe="'job.dispatch:' || src.id || ':create'",
        attempt="1",
        available_at="now()",
        trace="NULL::jsonb",
    )
}
), usage AS (
    INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode, input_tokens,
                            output_tokens, cost_usd, latency_ms, error_code)
    SELECT u.job_id, done.attempt_count, u.provider, u.model, u.credential_mode,
           u.input_tokens, u.output_tokens, u.cost_usd, u.latency_ms, nullif(u.error_code, '')
    FROM jsonb_to_recordset($4::jsonb) AS u({_USAGE_COLUMNS}) JOIN done ON done.id = u.job_id
)
"""

SUBMIT_RESULTS = _SUBMIT_CORE + ")\nSELECT id::text AS id, job_type FROM done"
# The same with projections: only batches that carry children or usage pay for it.
SUBMIT_RESULTS_PROJECTED = _SUBMIT_CORE + _PROJECTION + "SELECT id::text AS id, job_type FROM done"


INSERT_USAGE = f"""
INSERT INTO usage_logs (job_id, attempt, provider, model, credential_mode, input_tokens,
                        output_tokens, cost_usd, latency_ms, error_code)
SELECT u.job_id, $2, u.provider, u.model, u.credential_mode, u.input_tokens,
       u.output_tokens, u.cost_usd, u.latency_ms, nullif(u.error_code, '')
FROM jsonb_to_recordset($1::jsonb) AS u({_USAGE_COLUMNS})
"""

# Cancels the unfinished descendants of job $1: each moves as the lifecycle's CANCEL step
# says ($2: a JSON map from status to status), with its timeline and domain events.
CANCEL_DESCENDANTS = f"""
WITH RECURSIVE tree AS (
    SELECT id FROM jobs WHERE parent_job_id = $1
    UNION
    SELECT c.id FROM jobs c JOIN tree ON c.parent_job_id = tree.id
), targets AS (
    SELECT j.id, j.status FROM jobs j JOIN tree ON tree.id = j.id
    WHERE $2::jsonb ? j.status
    ORDER BY j.id
    FOR UPDATE OF j
), changed AS (
    UPDATE jobs j SET status = $2::jsonb ->> t.status, cancel_requested_at = now(),
        updated_at = now(), next_run_at = NULL,
        finished_at = CASE WHEN $2::jsonb ->> t.status = 'cancelled' THEN now() END,
        error_code = CASE WHEN $2::jsonb ->> t.status = 'cancelled' THEN $3 END,
        public_error_message = CASE WHEN $2::jsonb ->> t.status = 'cancelled' THEN $4 END
    FROM targets t WHERE j.id = t.id
    RETURNING j.id, j.job_type, j.status, j.attempt_count, t.status AS from_status
), event AS (
    INSERT INTO job_events (job_id, from_status, to_status, attempt, reason)
    SELECT id, from_status, status, attempt_count, 'parent_cancelled' FROM changed
), domain_event AS (
    {_DOMAIN_EVENT_ROW.format(src="(SELECT * FROM changed WHERE status = 'cancelled')")}
)
SELECT id::text AS id, status FROM changed
"""

# Removes expired snapshots of finished jobs (an unfinished job still needs its input).
DELETE_EXPIRED_SNAPSHOTS = """
DELETE FROM job_snapshots WHERE job_id IN (
    SELECT s.job_id FROM job_snapshots s JOIN jobs j ON j.id = s.job_id
    WHERE s.expires_at < now() AND j.status = ANY($1::text[])
    ORDER BY s.expires_at LIMIT $2
    FOR UPDATE OF s SKIP LOCKED
)
"""

SUBMIT_STATE = """
SELECT status, lease_token::text AS lease_token, output_hash FROM jobs WHERE id = $1
"""

ATTEMPT_FOR_UPDATE = """
SELECT id::text AS id, job_type, status, attempt_count, max_attempts,
       lease_token::text AS lease_token, locked_by
FROM jobs WHERE id = $1 AND lease_token = $2 AND status = ANY($3::text[])
FOR UPDATE
"""

EXPIRED_LEASES = """
SELECT id::text AS id, job_type, status, attempt_count, max_attempts,
       lease_token::text AS lease_token, locked_by
FROM jobs WHERE status = ANY($1::text[]) AND lock_until < now()
ORDER BY lock_until LIMIT $2
FOR UPDATE SKIP LOCKED
"""

# Ends an attempt that did not succeed; $4 is the new status. Retries get a new dispatch
# row available at next_run_at; terminal statuses get their domain event.
END_ATTEMPT = f"""
WITH ended AS (
    UPDATE jobs SET status = $4::text, error_code = $5, public_error_message = $6,
        internal_error_message = $7, lock_until = NULL, updated_at = now(),
        attempt_count = attempt_count - $8,
        next_run_at = CASE WHEN $4::text = 'retrying'
                           THEN now() + $9 * interval '1 second' END,
        finished_at = CASE WHEN $4::text = ANY($10::text[]) THEN now() END,
        cancel_requested_at = CASE WHEN $4::text = 'cancelled'
                                   THEN coalesce(cancel_requested_at, now())
                                   ELSE cancel_requested_at END
    WHERE id = $1 AND lease_token = $2 AND status = $3
    RETURNING id, job_type, queue, status, attempt_count, next_run_at, locked_by
), event AS (
    INSERT INTO job_events (job_id, from_status, to_status, attempt, reason, worker_id)
    SELECT id, $3, status, attempt_count + $8, $5, locked_by FROM ended
), dispatch AS (
    {
    _DISPATCH_ROW.format(
        src="(SELECT * FROM ended WHERE status = 'retrying')",
        dedupe="'job.dispatch:' || src.id || ':retry:' || $2",
        attempt="src.attempt_count + 1",
        available_at="src.next_run_at",
        trace=RETRY_TRACE,
    )
}
), domain_event AS (
    {_DOMAIN_EVENT_ROW.format(src="(SELECT * FROM ended WHERE status <> 'retrying')")}
)
SELECT status, next_run_at FROM ended
"""

CANCEL_STATE = """
SELECT status, lease_token::text AS lease_token, attempt_count FROM jobs
WHERE id = $1 AND user_id = $2 FOR UPDATE
"""

# queued/retrying -> cancelled at once, or running -> cancel_requested.
CANCEL = f"""
WITH changed AS (
    UPDATE jobs SET status = $3::text, cancel_requested_at = now(), updated_at = now(),
        finished_at = CASE WHEN $3::text = 'cancelled' THEN now() END,
        next_run_at = NULL,
        error_code = CASE WHEN $3::text = 'cancelled' THEN $4 END,
        public_error_message = CASE WHEN $3::text = 'cancelled' THEN $5 END
    WHERE id = $1 AND status = $2
    RETURNING id, job_type, status, attempt_count
), event AS (
    INSERT INTO job_events (job_id, from_status, to_status, attempt, reason)
    SELECT id, $2, status, attempt_count, 'cancel' FROM changed
), domain_event AS (
    {_DOMAIN_EVENT_ROW.format(src="(SELECT * FROM changed WHERE status = 'cancelled')")}
)
SELECT status FROM changed
"""

# Waiting jobs whose dispatch message may be lost (NATS lost its store, or a message
# vanished): queued, or retrying and due, untouched for $1 s, and with no dispatch row still
# in the outbox (that one is the dispatcher's business). Each gets a new dispatch row and
# its updated_at moved, so the next round passes it over for another $1 s. SKIP LOCKED and
# that re-check keep concurrent replicas from re-dispatching one job twice; a duplicate
# would be harmless anyway (LockJobs grants a job once).
REDISPATCH_STRANDED = f"""
WITH stranded AS (
    SELECT j.id FROM jobs j
    WHERE j.status = ANY($3::text[])
      AND greatest(j.updated_at, j.next_run_at) < now() - $1 * interval '1 second'
      AND NOT EXISTS (
          SELECT 1 FROM outbox_events o
          WHERE o.status = 'pending' AND o.event_type = 'job.dispatch'
            AND o.aggregate_id = j.id::text)
      AND NOT EXISTS (
          SELECT 1 FROM outbox_events o
          WHERE o.status = 'processing' AND o.event_type = 'job.dispatch'
            AND o.aggregate_id = j.id::text)
    ORDER BY j.updated_at LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
), touched AS (
    UPDATE jobs j SET updated_at = now() FROM stranded WHERE j.id = stranded.id
    RETURNING j.id, j.queue, j.attempt_count
), dispatch AS (
    {
    _DISPATCH_ROW.format(
        src="touched",
        dedupe="'job.dispatch:' || src.id || ':redispatch:' || "
        "(extract(epoch FROM now()) * 1000000)::bigint",
        attempt="src.attempt_count + 1",
        available_at="now()",
        trace=RETRY_TRACE,
    )
}
    ON CONFLICT (dedupe_key) DO NOTHING
    RETURNING aggregate_id
)
SELECT count(*) FROM dispatch
"""

TERMINAL = sorted(s.value for s in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED))
RETRYABLE = sorted(s.value for s in (JobStatus.FAILED, JobStatus.CANCELLED))


class JobRepository:
    """Jobs, their snapshots, artifacts, timeline and outbox rows, on one asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool, *, lease_ttl_s: float) -> None:
        self._pool = pool
        self._lease_ttl_ms = lease_ttl_s * 1000

    # --- clients -----------------------------------------------------------------------

    async def create(self, new: NewJob, quotas: Quotas) -> tuple[Job, bool] | QuotaRefusal:
        """Stores the job, its snapshot, its first timeline event and its dispatch row.
        Returns the existing job instead when the idempotency key was used before (even at
        a quota limit), and a QuotaRefusal (nothing stored) when the user is at a limit."""
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                CREATE_JOB,
                new.user_id,
                new.job_type,
                new.queue,
                new.priority,
                new.idempotency_key,
                new.request_hash,
                new.max_attempts,
                new.timeout_ms,
                new.input_schema_version,
                new.output_schema_version,
                new.definition_version,
                new.snapshot,
                new.snapshot_hash,
                new.snapshot_ttl_s,
                new.prompt_key,
                new.prompt_version,
                new.model_tier,
                new.credential_mode.value,
                new.credential_id,
                new.trace,
                quotas.max_active,
                quotas.daily,
            )
            assert row is not None, "the usage row is always there"
            if row["id"] is not None:
                return _job(row), True
            refusal = QuotaRefusal(active=row["quota_active"], today=row["quota_today"])
            if new.idempotency_key is None:
                return refusal
            # The key exists: ON CONFLICT waited for its writer to commit, so it is visible.
            existing = await conn.fetchrow(
                FIND_BY_IDEMPOTENCY_KEY, new.user_id, new.job_type, new.idempotency_key
            )
        if existing is None:
            return refusal  # not a conflict: the quota kept the row out
        return _job(existing), False

    async def retry(self, job_id: str, spec: RetrySpec) -> Job | None:
        """A new job from a failed or cancelled job's snapshot; None when that job is not
        (or no longer) failed or cancelled, or its snapshot is gone."""
        row = await self._pool.fetchrow(
            RETRY_JOB,
            job_id,
            RETRYABLE,
            spec.max_attempts,
            spec.timeout_ms,
            spec.definition_version,
            spec.snapshot_ttl_s,
        )
        return None if row is None else _job(row)

    async def get(self, job_id: str, user_id: str | None) -> Job | None:
        """The job with artifacts and timeline; ``user_id`` None reads any user's job."""
        row = await self._pool.fetchrow(GET_JOB, job_id, user_id)
        if row is None:
            return None
        return replace(
            _job(
                row,
                artifacts=[Artifact(**a) for a in row["artifacts"]],
                events=[_event(e) for e in row["events"]],
            ),
            child_job_ids=list(row["child_job_ids"]),
            total_input_tokens=row["total_input_tokens"],
            total_output_tokens=row["total_output_tokens"],
            total_cost_usd=row["total_cost_usd"],
        )

    async def cancel(
        self, job_id: str, user_id: str
    ) -> tuple[JobStatus, JobStatus, list[str]] | None:
        """Applies CancelJob to the job and, in the same transaction, its unfinished
        descendants; returns (status before, status after, descendants now
        CANCEL_REQUESTED), or None when the user has no such job. The caller judges
        statuses that cannot be cancelled (the descendants are then left alone)."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(CANCEL_STATE, job_id, user_id)
            if row is None:
                return None
            before = JobStatus(row["status"])
            if before not in sources(Step.CANCEL):
                return before, before, []
            after = transition(before, Step.CANCEL)
            changed = await conn.fetchval(
                CANCEL,
                job_id,
                before.value,
                after.value,
                ErrorCode.CANCELLED.value,
                public_message(ErrorCode.CANCELLED),
            )
            assert changed == after.value, "cancel raced although the row was locked"
            return before, after, await _cancel_descendants(conn, job_id)

    async def cancel_descendants(self, job_id: str, user_id: str) -> list[tuple[str, JobStatus]]:
        """Cancels the unfinished descendants of a (finished) job of the user; returns each
        one changed with its new status."""
        async with self._pool.acquire() as conn, conn.transaction():
            if await conn.fetchrow(CANCEL_STATE, job_id, user_id) is None:
                return []
            rows = await conn.fetch(
                CANCEL_DESCENDANTS,
                job_id,
                _CANCEL_STEP,
                ErrorCode.CANCELLED.value,
                public_message(ErrorCode.CANCELLED),
            )
        return [(r["id"], JobStatus(r["status"])) for r in rows]

    async def job_types(self, job_ids: Sequence[str]) -> dict[str, str]:
        rows = await self._pool.fetch(
            "SELECT id::text AS id, job_type FROM jobs WHERE id = ANY($1::text[]::uuid[])",
            list(job_ids),
        )
        return {r["id"]: r["job_type"] for r in rows}

    async def delete_expired_snapshots(self, limit: int) -> int:
        """Removes up to ``limit`` expired snapshots of finished jobs; returns how many."""
        done = await self._pool.execute(DELETE_EXPIRED_SNAPSHOTS, TERMINAL, limit)
        return int(done.split()[-1])

    # --- workers -----------------------------------------------------------------------

    async def lock(self, job_ids: Sequence[str], worker_id: str) -> list[LockGrant | LockRefusal]:
        """Takes a lease on every lockable job of ``job_ids`` (distinct ids) in one
        statement; answers per id, in order. A refusal carries ``retry_after`` when the job
        is only not due yet."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                LOCK_JOBS, list(job_ids), worker_id, self._lease_ttl_ms, LOCKABLE
            )
            grants = {
                row["id"]: LockGrant(
                    job_id=row["id"],
                    job_type=row["job_type"],
                    lease_token=row["lease_token"],
                    attempt=row["attempt_count"],
                    lease_expires_at=row["lock_until"],
                    input=row["payload"],
                    user_id=row["user_id"],
                    prompt_key=row["prompt_key"] or "",
                    prompt_version=row["prompt_version"] or "",
                    credential_mode=CredentialMode(row["credential_mode"]),
                    credential_id=row["credential_id"],
                )
                for row in rows
            }
            for row in rows:
                metrics.picked_up(row["job_type"], row["waited_s"] or 0.0)
            refused = [job_id for job_id in job_ids if job_id not in grants]
            not_due = (
                {r["id"]: r["next_run_at"] for r in await conn.fetch(NOT_DUE, refused)}
                if refused
                else {}
            )
        return [grants.get(job_id) or LockRefusal(not_due.get(job_id)) for job_id in job_ids]

    async def heartbeat(self, job_id: str, lease_token: str, progress: float) -> HeartbeatAck:
        row = await self._pool.fetchrow(
            HEARTBEAT, job_id, lease_token, self._lease_ttl_ms, progress, LEASED
        )
        if row is None:
            raise LeaseLost("the lease on this job is no longer held")
        return HeartbeatAck(
            lease_expires_at=row["lock_until"],
            cancel_requested=row["status"] == JobStatus.CANCEL_REQUESTED,
        )

    async def submit_results(
        self, results: Sequence[Submission], children: Sequence[NewChild] = ()
    ) -> list[JobStatus | LeaseLost]:
        """Commits each result (distinct jobs) with its current lease, exactly once, in one
        statement with its artifacts, ``children`` (of these results) and usage rows;
        answers per result, in order. A repeat of a committed submit is answered SUCCEEDED
        again (and adds nothing); a cancel that won the race ends the job CANCELLED and
        drops the result; anything else is LeaseLost."""
        items = [
            {
                "job_id": r.job_id,
                "lease_token": r.lease_token,
                "output": r.output,
                "output_hash": r.output_hash,
            }
            for r in results
        ]
        artifacts = [
            {
                "job_id": r.job_id,
                "artifact_type": a.artifact_type,
                "artifact_id": a.artifact_id,
                "ordinal": a.ordinal,
                "payload": a.payload,
            }
            for r in results
            for a in r.artifacts
        ]
        child_rows = [_child_row(c) for c in children]
        usage = [_usage_row(r.job_id, u) for r in results for u in r.usage]
        async with self._pool.acquire() as conn:
            if child_rows or usage:
                rows = await conn.fetch(
                    SUBMIT_RESULTS_PROJECTED, items, artifacts, child_rows, usage
                )
            else:
                rows = await conn.fetch(SUBMIT_RESULTS, items, artifacts)
            done = {row["id"]: row["job_type"] for row in rows}
        for job_type in done.values():
            metrics.job_succeeded(job_type)
        return [
            JobStatus.SUCCEEDED if r.job_id in done else await self._settle_refused(r)
            for r in results
        ]

    async def _settle_refused(self, result: Submission) -> JobStatus | LeaseLost:
        """Why a result was not committed: a repeat, a cancel that won, or a lost lease."""
        state = await self._pool.fetchrow(SUBMIT_STATE, result.job_id)
        if state is None or state["lease_token"] != result.lease_token:
            return LeaseLost("the lease on this job is no longer held")
        status = JobStatus(state["status"])
        if status is JobStatus.SUCCEEDED and state["output_hash"] == result.output_hash:
            return status
        if status is JobStatus.CANCEL_REQUESTED:
            outcome = await self.end_attempt(
                result.job_id, result.lease_token, ErrorCode.CANCELLED, "", _always_cancel
            )
            return outcome.status
        return LeaseLost("the lease on this job is no longer held")

    async def end_attempt(
        self,
        job_id: str,
        lease_token: str,
        code: str,
        message: str,
        decide: Decide,
        usage: Sequence[UsageRecord] = (),
    ) -> FailureOutcome:
        """Ends a failed attempt as ``decide`` says (a cancel pending wins), storing its
        usage rows in the same transaction. A repeat of the same report is answered with
        the status it led to (and stores nothing); otherwise LeaseLost."""
        async with self._pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(ATTEMPT_FOR_UPDATE, job_id, lease_token, LEASED)
            if row is not None:
                if usage:
                    await conn.execute(
                        INSERT_USAGE,
                        [_usage_row(job_id, u) for u in usage],
                        row["attempt_count"],
                    )
                return await _end(conn, row, code, message, decide)
            state = await conn.fetchrow(SUBMIT_STATE, job_id)
        if state is not None and state["lease_token"] == lease_token:
            status = JobStatus(state["status"])
            if status is not JobStatus.SUCCEEDED and status not in set(LEASED):
                return FailureOutcome(status)
        raise LeaseLost("the lease on this job is no longer held")

    async def reap_expired_leases(self, limit: int, decide: Decide) -> list[FailureOutcome]:
        """Ends attempts whose lease ran out (the database clock decides), as ``decide``
        says for LEASE_EXPIRED; a pending cancel ends cancelled. Safe across replicas."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(EXPIRED_LEASES, LEASED, limit)
            return [
                await _end(conn, row, ErrorCode.LEASE_EXPIRED, "lease expired", decide)
                for row in rows
            ]

    async def redispatch_stranded(self, after_s: float, limit: int) -> int:
        """Writes a new dispatch row for up to ``limit`` waiting jobs that nothing has
        touched for ``after_s`` seconds although their dispatch left the outbox (see
        REDISPATCH_STRANDED); returns how many. Safe across replicas."""
        count: int = await self._pool.fetchval(REDISPATCH_STRANDED, after_s, limit, LOCKABLE)
        return count


_CANCEL = RetryDecision(Outcome.CANCEL)
_CANCEL_STEP = {s.value: transition(s, Step.CANCEL).value for s in sources(Step.CANCEL)}


async def _cancel_descendants(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record], job_id: str
) -> list[str]:
    """Cancels the job's unfinished descendants; the ids of those now CANCEL_REQUESTED
    (their workers must be told)."""
    rows = await conn.fetch(
        CANCEL_DESCENDANTS,
        job_id,
        _CANCEL_STEP,
        ErrorCode.CANCELLED.value,
        public_message(ErrorCode.CANCELLED),
    )
    return [r["id"] for r in rows if r["status"] == JobStatus.CANCEL_REQUESTED]


def _child_row(child: NewChild) -> dict[str, Any]:
    new = child.job
    return {
        "parent_job_id": child.parent_job_id,
        "job_type": new.job_type,
        "queue": new.queue,
        "priority": new.priority,
        "idempotency_key": new.idempotency_key,
        "request_hash": new.request_hash,
        "max_attempts": new.max_attempts,
        "timeout_ms": new.timeout_ms,
        "input_schema_version": new.input_schema_version,
        "output_schema_version": new.output_schema_version,
        "definition_version": new.definition_version,
        "prompt_key": new.prompt_key,
        "prompt_version": new.prompt_version,
        "model_tier": new.model_tier,
        "snapshot": new.snapshot,
        "snapshot_hash": new.snapshot_hash,
        "snapshot_ttl_s": new.snapshot_ttl_s,
        "inherits_credential": child.inherits_credential,
    }


def _usage_row(job_id: str, usage: UsageRecord) -> dict[str, Any]:
    return {"job_id": job_id, **asdict(usage)}


def _always_cancel(facts: AttemptFacts, code: str) -> RetryDecision:
    return _CANCEL


async def _end(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
    row: asyncpg.Record,
    code: str,
    message: str,
    decide: Decide,
) -> FailureOutcome:
    status = JobStatus(row["status"])
    facts = AttemptFacts(
        row["id"], row["job_type"], status, row["attempt_count"], row["max_attempts"]
    )
    if status is JobStatus.CANCEL_REQUESTED:
        decision, code = _CANCEL, ErrorCode.CANCELLED
    else:
        decision = decide(facts, code)
    step = {Outcome.RETRY: Step.RETRY, Outcome.FAIL: Step.FAIL, Outcome.CANCEL: Step.CONFIRM_CANCEL}
    new_status = transition(status, step[decision.outcome])
    ended = await conn.fetchrow(
        END_ATTEMPT,
        row["id"],
        row["lease_token"],
        status.value,
        new_status.value,
        code,
        public_message(code),
        message,
        1 if decision.refund_attempt else 0,
        decision.delay_s,
        TERMINAL,
    )
    assert ended is not None, "attempt changed although its row was locked"
    metrics.attempt_ended(row["job_type"], code, JobStatus(ended["status"]))
    return FailureOutcome(JobStatus(ended["status"]), ended["next_run_at"])


def _job(
    row: asyncpg.Record,
    artifacts: list[Artifact] | None = None,
    events: list[JobEvent] | None = None,
) -> Job:
    return Job(
        id=row["id"],
        user_id=row["user_id"],
        job_type=row["job_type"],
        status=JobStatus(row["status"]),
        queue=row["queue"],
        priority=row["priority"],
        attempt_count=row["attempt_count"],
        max_attempts=row["max_attempts"],
        idempotency_key=row["idempotency_key"],
        request_hash=row["request_hash"],
        progress=row["progress"],
        validated_output=row["validated_output"],
        output_hash=row["output_hash"],
        error_code=row["error_code"],
        public_error_message=row["public_error_message"],
        internal_error_message=row["internal_error_message"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        next_run_at=row["next_run_at"],
        artifacts=artifacts or [],
        events=events or [],
        parent_job_id=row["parent_job_id"],
        prompt_key=row["prompt_key"],
        prompt_version=row["prompt_version"],
        model_tier=row["model_tier"],
        trigger=row["trigger_type"],
        retried_from_job_id=row["retried_from_job_id"],
        credential_mode=CredentialMode(row["credential_mode"]),
        credential_id=row["credential_id"],
    )


# The listing queries (adapters/listing.py) build summaries the same way.
job_from_row = _job


def _event(raw: dict[str, Any]) -> JobEvent:
    return JobEvent(
        from_status=JobStatus(raw["from"]) if raw["from"] else None,
        to_status=JobStatus(raw["to"]),
        attempt=raw["attempt"],
        reason=raw["reason"],
        at=datetime.fromisoformat(raw["at"]),
    )


async def init_connection(conn: asyncpg.Connection) -> None:
    """jsonb in and out as Python values."""
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def keep_session(conn: asyncpg.Connection) -> None:
    """Release a connection to the pool as it is. The default reset costs a round trip
    per checkout (RESET ALL, UNLISTEN, ...) to undo session state these queries never
    create; an open transaction is still rolled back by asyncpg itself."""


class DatabaseUnreachable(ConnectionError):
    """No new connection to PostgreSQL could be made (down, restarting, refusing, at its
    connection limit): an outage to report as PLATFORM_UNAVAILABLE, whatever the cause."""


async def _connect(*args: Any, **kwargs: Any) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(*args, **kwargs)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        raise DatabaseUnreachable(f"cannot connect to PostgreSQL: {error}") from error


async def create_pool(database_url: str, size: int) -> asyncpg.Pool:
    return await asyncpg.create_pool(
        database_url,
        connect=_connect,
        min_size=min(2, size),
        max_size=size,
        init=init_connection,
        reset=keep_session,
    )
