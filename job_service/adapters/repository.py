"""The job store on PostgreSQL: the only writer of a job's status.

Every status write is a compare-and-set whose ``WHERE status = ANY(...)`` comes from the
lifecycle table (``lifecycle.sources``); an update that matches no row lost a race and
changes nothing. The hot path (create, lock, heartbeat, submit result) is one statement
each: data-modifying CTEs write the job, its timeline event, snapshot, artifacts and outbox
row atomically in a single round trip. Queries run on the asyncpg driver directly (the
ORM runs this path at a fifth of the speed); the statements are ``job_statements.py``,
the schema ``tables.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

import asyncpg

from job_service import metrics
from job_service.adapters.job_statements import (
    ATTEMPT_FOR_UPDATE,
    CANCEL,
    CANCEL_DESCENDANTS,
    CANCEL_STATE,
    CREATE_JOB,
    DELETE_EXPIRED_SNAPSHOTS,
    END_ATTEMPT,
    EXPIRED_LEASES,
    FIND_BY_IDEMPOTENCY_KEY,
    GET_JOB,
    HEARTBEAT,
    INSERT_USAGE,
    LEASED,
    LOCK_JOBS,
    LOCKABLE,
    NOT_DUE,
    REDISPATCH_STRANDED,
    RETRY_JOB,
    RETRYABLE,
    SUBMIT_RESULTS,
    SUBMIT_RESULTS_PROJECTED,
    SUBMIT_STATE,
    TERMINAL,
)
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
from shared.credentials import CredentialMode
from shared.errors import ErrorCode, LeaseLost, public_message


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
