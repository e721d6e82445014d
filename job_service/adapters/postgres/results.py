"""Results on PostgreSQL: commit a batch of results, each fenced by its lease token, with
artifacts, timeline and domain events, and (when a batch carries them) child jobs and usage
rows, in one statement; the results use case settles the ones it refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from job_service.adapters.postgres.units import attach, attach_retrying
from job_service.adapters.postgres.vocabulary.children import CHILD_COLUMNS, children_of
from job_service.adapters.postgres.vocabulary.dependencies import SIBLINGS
from job_service.adapters.postgres.vocabulary.line import place_in_line, released_slot_tokens
from job_service.adapters.postgres.vocabulary.new_job import (
    KEY_COLUMNS,
    NEW_JOB_COLUMNS,
    SNAPSHOT_FIELDS,
    NewJobCtes,
    new_job_record,
    new_job_rows,
    queued_or_created,
    record_values,
    snapshot_row,
    snapshot_values,
    user_keys,
)
from job_service.adapters.postgres.vocabulary.outbox_rows import (
    domain_event_rows,
    handed,
    handed_messages,
)
from job_service.adapters.postgres.vocabulary.statuses import sql_status, timeline_event
from job_service.adapters.postgres.vocabulary.usage_rows import insert_usage, usage_row
from job_service.domain.attempts import Submission
from job_service.domain.jobs import NewChild
from job_service.domain.lifecycle import JobStatus, Step, transition
from job_service.ports.results import Committed

# A result moves its job from running to succeeded.
_RUNNING = JobStatus.RUNNING
_SUCCEEDED = transition(_RUNNING, Step.SUCCEED)


def _submit_core(owner: str) -> str:
    """Commits each result whose lease token is current, with its artifacts, timeline event
    and domain event (and, with _PROJECTION, its child jobs and usage rows). $1..$4 are
    JSON arrays: one element per result, artifact, child, provider call; ``owner`` the
    parameter naming the replica whose dispatcher publishes the outbox rows."""
    return f"""
WITH input AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb)
        AS i(job_id uuid, lease_token uuid, output jsonb, output_hash text,
             model_provider text, model_name text)
), done AS (
    UPDATE jobs j SET status = {sql_status(_SUCCEEDED)}, validated_output = i.output,
        output_hash = i.output_hash, progress = 1, finished_at = now(), updated_at = now(),
        model_provider = coalesce(i.model_provider, j.model_provider),
        model_name = coalesce(i.model_name, j.model_name),
        lock_until = NULL, error_code = NULL, public_error_message = NULL
    FROM input i
    WHERE j.id = i.job_id AND j.lease_token = i.lease_token AND j.status = {sql_status(_RUNNING)}
    RETURNING j.id, j.user_id, j.job_type, j.status, j.attempt_count, j.locked_by,
              j.credential_mode, j.credential_id, j.queue, j.concurrency_key, j.lease_token
), release AS (
    {released_slot_tokens("done", owner=owner)}
), artifacts AS (
    INSERT INTO job_artifacts (job_id, artifact_type, artifact_id, ordinal, payload)
    SELECT a.job_id, a.artifact_type, a.artifact_id, a.ordinal, a.payload
    FROM jsonb_to_recordset($2::jsonb)
        AS a(job_id uuid, artifact_type text, artifact_id text, ordinal int, payload jsonb)
    JOIN done ON done.id = a.job_id
), event AS (
    {timeline_event("done", _RUNNING, _SUCCEEDED, worker_id="locked_by")}
), domain_event AS (
    {domain_event_rows("done", owner=owner)}
"""


_CHILDREN = NewJobCtes("children", "child_snapshots", "child_events", "child_dispatch")
# A child's snapshot: its item's, found by the child's idempotency key.
_CHILD_SNAPSHOT_SOURCE = """FROM children ch JOIN children_in c
        ON c.parent_job_id = ch.parent_job_id AND c.job_type = ch.job_type
       AND c.idempotency_key = ch.idempotency_key"""
# Child jobs (each with its snapshot, timeline event and dispatch row; a child whose
# idempotency key exists already is left as it is; a join is created waiting, and attached
# to its siblings after this statement, in its transaction) and usage rows of the results
# `done`;
# $5 names the replica whose dispatcher publishes the outbox rows.
_PROJECTION = f"""
), children_in AS (
    {children_of("$3", "done")}
), children_keyed AS (
    SELECT {", ".join(f"c.{col}" for col in NEW_JOB_COLUMNS if col not in KEY_COLUMNS)},
           c.parent_job_id, {user_keys("c")}
    FROM children_in c
), {
    new_job_rows(
        {
            **record_values("c"),
            "trigger_type": "'child_job'",
            "parent_job_id": "c.parent_job_id",
            "status": queued_or_created("c"),
            "queued_at": "now()",
            "sched_key": place_in_line("c"),
        },
        "FROM children_keyed c",
        snapshot=snapshot_row("ch.id", snapshot_values("c"), _CHILD_SNAPSHOT_SOURCE),
        status="status",
        reason="'child_job'",
        trace="NULL::jsonb",
        owner="$5::text",
        due="coalesce(src.next_run_at, now())",
        returning=(
            "j.id, j.queue, j.parent_job_id, j.job_type, j.idempotency_key, j.status, j.next_run_at"
        ),
        ctes=_CHILDREN,
    )
}, usage AS (
    {insert_usage("$4", "done.attempt_count", "JOIN done ON done.id = u.job_id")}
)
"""

_DONE = "SELECT id::text AS id, job_type, {} FROM done"
_FIRST = "row_number() OVER () = 1"
SUBMIT_RESULTS = (
    _submit_core("$3::text") + ")\n" + _DONE.format(handed(_FIRST, "release", "domain_event"))
)
# The same with projections: only batches that carry children or usage pay for it.
SUBMIT_RESULTS_PROJECTED = (
    _submit_core("$5::text")
    + _PROJECTION
    + _DONE.format(handed(_FIRST, "release", "domain_event", _CHILDREN.dispatch))
)

# A join parent $1's result created just now (type $2, key $3): not yet attached.
JOIN_CREATED = """
SELECT id::text AS id, user_id FROM jobs
WHERE parent_job_id = $1 AND job_type = $2 AND idempotency_key = $3
  AND dependency_policy IS NULL
"""

JOB_TYPES = """
SELECT id::text AS id, job_type, definition_version FROM jobs WHERE id = ANY($1::text[]::uuid[])
"""

JOB_OWNERS = "SELECT id::text AS id, user_id FROM jobs WHERE id = ANY($1::text[]::uuid[])"


class ResultRepository:
    """Results and their projections, on one asyncpg pool. ``owner``: the replica whose
    dispatcher is handed the outbox rows a submit writes (claimed for it as they are
    written); None leaves them to any dispatcher's claim."""

    def __init__(self, pool: asyncpg.Pool, owner: str | None = None) -> None:
        self._pool = pool
        self._owner = owner

    async def job_types(self, job_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        rows = await self._pool.fetch(JOB_TYPES, list(job_ids))
        return {r["id"]: (r["job_type"], r["definition_version"]) for r in rows}

    async def owners(self, job_ids: Sequence[str]) -> dict[str, str]:
        rows = await self._pool.fetch(JOB_OWNERS, list(job_ids))
        return {r["id"]: r["user_id"] for r in rows}

    async def submit_results(
        self, results: Sequence[Submission], children: Sequence[NewChild] = ()
    ) -> Committed:
        """Commits each result (distinct jobs) with its current lease, exactly once, in one
        statement with its artifacts, ``children`` (of these results) and usage rows. A
        result whose lease is not current writes nothing."""
        items = [
            {
                "job_id": r.job_id,
                "lease_token": r.lease_token,
                "output": r.output,
                "output_hash": r.output_hash,
                # the provider and model of the attempt's last call (seed 003 §2.2)
                "model_provider": r.usage[-1].provider if r.usage else None,
                "model_name": r.usage[-1].model if r.usage else None,
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
        usage = [usage_row(r.job_id, u) for r in results for u in r.usage]
        joins = [c for c in children if c.siblings]
        if joins:
            # the joins are attached to their siblings in the result's transaction
            async def projected(
                conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
            ) -> list[asyncpg.Record]:
                rows = await conn.fetch(
                    SUBMIT_RESULTS_PROJECTED, items, artifacts, child_rows, usage, self._owner
                )
                committed = {row["id"] for row in rows}
                for join in joins:
                    if join.parent_job_id in committed:
                        await _attach_join(conn, join)
                return rows

            rows = await attach_retrying(self._pool, projected)
        else:
            async with self._pool.acquire() as conn:
                if child_rows or usage:
                    rows = await conn.fetch(
                        SUBMIT_RESULTS_PROJECTED, items, artifacts, child_rows, usage, self._owner
                    )
                else:
                    rows = await conn.fetch(SUBMIT_RESULTS, items, artifacts, self._owner)
        return Committed({row["id"]: row["job_type"] for row in rows}, handed_messages(rows))


async def _attach_join(
    conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record], join: NewChild
) -> None:
    """Attaches a join this result created to its siblings (found by type and key among
    the parent's user's jobs); a join whose key named an existing job is left as it is."""
    found = await conn.fetchrow(
        JOIN_CREATED, join.parent_job_id, join.job.job_type, join.job.idempotency_key
    )
    if found is None:
        return
    types, keys = [t for t, _ in join.siblings], [k for _, k in join.siblings]
    siblings = [r["id"] for r in await conn.fetch(SIBLINGS, found["user_id"], types, keys)]
    await attach(conn, found["id"], siblings, join.job.dependencies.policy, found["user_id"])


def _child_row(child: NewChild) -> dict[str, Any]:
    record = new_job_record(child.job, {**CHILD_COLUMNS, **SNAPSHOT_FIELDS})
    # the rows travel as JSON: a join's next_run_at (it waits for its siblings) as text
    if record.get("next_run_at") is not None:
        record["next_run_at"] = record["next_run_at"].isoformat()
    return {
        "parent_job_id": child.parent_job_id,
        **record,
        "inherits_credential": child.inherits_credential,
    }
