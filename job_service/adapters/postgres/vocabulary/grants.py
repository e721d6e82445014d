"""A claim's grant in SQL (step 4 of ``claims.py``): the jobs a claim admitted become
RUNNING with a fresh lease, their timeline events written, their snapshots returned in line
order, and each row as the claims use case takes it (``granted``). Both of a claim's
grants are built from it: of the jobs a claim admitted (``claims.GRANT``) and of a queue
nothing can hold a job back in (``claims.GRANT_UNLIMITED``).
"""

from __future__ import annotations

import asyncpg

from job_service.adapters.postgres.vocabulary.deadlines import lease_until
from job_service.adapters.postgres.vocabulary.statuses import sql_status, timeline_event
from job_service.domain.claims import Granted
from job_service.domain.grants import LockGrant
from job_service.domain.lifecycle import JobStatus
from job_service.domain.outbox import OutboxStatus
from shared.credentials import CredentialMode

# A grant moves each waiting job (LOCKABLE) to running.
_GRANTED = JobStatus.RUNNING
_PUBLISHED, _PROCESSING = OutboxStatus.PUBLISHED.value, OutboxStatus.PROCESSING.value


def grant(prior: str, worker: str, ttl_ms: str, mark_ids: str, mark_owner: str) -> str:
    """The grant of the jobs ``prior`` selects (id, status, due_at, tokens; locked): each
    RUNNING with a fresh lease, its timeline event, its snapshot returned in line order; and
    as many of the dispatch rows ``mark_ids`` (bigint[], NULL: none; in order, claimed by
    ``mark_owner``) marked published as it granted jobs (a pushed grant's tokens, marked
    in the grant's own statement: ``domain.outbox.DispatchMark``)."""
    return f"""
WITH prior AS ({prior}
), locked AS (
    UPDATE jobs j SET status = {sql_status(_GRANTED)}, locked_by = {worker}, locked_at = now(),
        lock_until = {lease_until(ttl_ms, "now()", "j.timeout_ms")},
        lease_token = gen_random_uuid(),
        attempt_count = j.attempt_count + 1, started_at = coalesce(j.started_at, now()),
        next_run_at = NULL, progress = 0, updated_at = now(), reserved_tokens = prior.tokens
    FROM prior WHERE j.id = prior.id
    RETURNING j.id, j.job_type, j.definition_version, j.user_id,
              j.lease_token::text AS lease_token,
              j.attempt_count, j.lock_until, j.prompt_key, j.prompt_version,
              prior.status AS from_status, j.credential_mode,
              j.credential_id::text AS credential_id,
              extract(epoch FROM now() - prior.due_at)::float8 AS waited_s, j.sched_key
), event AS (
    -- the time of the grant itself, not of the transaction's start: a claim may wait for a
    -- key's lock, and its timeline must not show it running before the job it waited for
    -- ended
    {
        timeline_event(
            "locked", "from_status", _GRANTED, worker_id=worker, created_at="clock_timestamp()"
        )
    }
), marked AS (
    UPDATE outbox_events o SET status = '{_PUBLISHED}', published_at = now(), locked_by = NULL,
        last_error = NULL
    FROM unnest({mark_ids}::bigint[]) WITH ORDINALITY AS m(id, n)
    WHERE o.id = m.id AND m.n <= (SELECT count(*) FROM locked)
      AND o.locked_by = {mark_owner} AND o.status = '{_PROCESSING}'
)
SELECT l.id::text AS id, l.job_type, l.definition_version, l.user_id, l.lease_token,
       l.attempt_count, l.lock_until,
       l.prompt_key, l.prompt_version, s.payload, l.credential_mode, l.credential_id, l.waited_s,
       (EXISTS (SELECT 1 FROM job_steps st WHERE st.job_id = l.id)
        OR EXISTS (SELECT 1 FROM job_step_results sr WHERE sr.job_id = l.id)) AS has_steps,
       (SELECT count(*) FROM job_dependencies dep WHERE dep.job_id = l.id)::int
           AS dependency_count
FROM locked l JOIN job_snapshots s ON s.job_id = l.id
ORDER BY l.sched_key
"""


def granted(row: asyncpg.Record) -> Granted:
    lock_grant = LockGrant(
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
        has_steps=row["has_steps"],
        dependency_count=row["dependency_count"],
        definition_version=row["definition_version"],
    )
    return Granted(lock_grant, row["waited_s"] or 0.0)
