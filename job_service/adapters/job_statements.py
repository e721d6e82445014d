"""Every SQL statement the job repository runs (``repository.py`` binds and maps them).

The hot-path statements are single round trips: data-modifying CTEs write a job's status,
timeline event, snapshot, artifacts, usage rows and outbox rows atomically. Every status
write is a compare-and-set whose ``WHERE status = ANY(...)`` comes from the lifecycle table.
"""

from __future__ import annotations

from job_service.domain.lifecycle import JobStatus, Step, sources
from shared.constants import DISPATCH_SUBJECT_PREFIX, EVENTS_SUBJECT_PREFIX


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
