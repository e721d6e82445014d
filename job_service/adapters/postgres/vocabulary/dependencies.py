"""Dependencies in SQL: attaching a job to the jobs it depends on, as the statements that
create jobs do it (CreateJob, a result's join, an operator's re-run): the edges and the
count of edges the resolver has yet to count; and the resolver's ``outcome`` of a waiting
job's count. Running the attach (and retrying it) is a unit of work (``units.attach``); the
resolver and the reads are ``dependencies.py``'s; the trigger that marks an ending
dependency's edges is migration 0021's (rendered in ``schema.sql``).

Attaching locks the dependencies' rows FOR KEY SHARE NOWAIT, which a running dependency's
heartbeats (and every other change short of its end) do not conflict with, so that a join
over thousands of running jobs attaches in one try (issue 43). A job's end locks its row FOR
UPDATE before its status changes (migration 0045's trigger), which conflicts with it: a
dependency is either ended (committed) when it is attached, and counted as ended then (a
snapshot older than the end finds the row updated and reads the end), or ends after the
attach has committed, when the trigger sees the edge. NOWAIT makes an attach never wait for
(so never deadlock with) a statement ending a dependency: a row being ended fails the
attach, whose transaction is run again (``units.attach_retrying``).
"""

from __future__ import annotations

from job_service.adapters.postgres.vocabulary.statuses import sql_status, statuses_sql
from job_service.domain.dependencies import Outcome
from job_service.domain.lifecycle import TERMINAL, JobStatus, Step, transition
from shared.dependencies import DependencyPolicy
from shared.errors import ErrorCode

_TERMINAL = statuses_sql(TERMINAL)
_CREATED = sql_status(JobStatus.CREATED)

# Which of $1 (job ids) are jobs of user $2.
# (Each id looked up by the primary key: a generic plan of ``id = ANY($1)`` may scan the
# user's jobs and compare each with every id, quadratic for a wide join.)
OWNED = """
SELECT d.id::text AS id FROM unnest($1::text[]::uuid[]) AS x(id) JOIN jobs d ON d.id = x.id
WHERE d.user_id = $2
"""

# Attaches job $1's dependencies $2 (jobs of user $4) with policy $3, in the transaction
# that created it: locks them (FOR KEY SHARE NOWAIT: a dependency ending now fails the
# statement, a heartbeat does not) and writes an edge per dependency, already ended for
# those that have; every edge is left for the resolver to count (the ended ones at its next
# round), so that one path decides when the job runs. Answers how many were attached and
# how many not ended.
ATTACH = f"""
WITH deps AS (
    SELECT d.id, d.status FROM unnest($2::text[]::uuid[]) AS x(id) JOIN jobs d ON d.id = x.id
    WHERE d.user_id = $4
    ORDER BY d.id FOR KEY SHARE OF d NOWAIT
), edges AS (
    INSERT INTO job_dependencies (job_id, depends_on_id, ended_status, ended_at)
    SELECT $1::uuid, d.id, CASE WHEN d.status IN {_TERMINAL} THEN d.status END,
           CASE WHEN d.status IN {_TERMINAL} THEN now() END
    FROM deps d
    RETURNING ended_status
), facts AS (
    SELECT count(*) AS attached, count(*) FILTER (WHERE ended_status IS NULL) AS pending
    FROM edges
), counted AS (
    UPDATE jobs j SET dependency_policy = $3::text, dependencies_uncounted = facts.attached
    FROM facts WHERE j.id = $1::uuid
)
SELECT attached, pending FROM facts
"""

# A join's siblings: the jobs of user $1 with job types $2 and idempotency keys $3, pair
# by pair (a sibling whose key named an existing job is that job).
SIBLINGS = """
SELECT j.id::text AS id FROM unnest($2::text[], $3::text[]) AS s(job_type, idempotency_key)
JOIN jobs j ON j.user_id = $1 AND j.job_type = s.job_type
           AND j.idempotency_key = s.idempotency_key
"""

# An operator re-ran job $1 as job $2: each job still waiting for $1 waits for $2 too (an
# edge, ended already if the re-run has, and one more to count). The re-run's row is
# locked as an attach locks a dependency's; the waiting jobs in id order, as the resolver
# locks them.
MOVE_WAITING = f"""
WITH rerun AS (
    SELECT id, status FROM jobs WHERE id = $2::uuid FOR KEY SHARE NOWAIT
), waiting AS (
    SELECT e.job_id FROM job_dependencies e JOIN jobs j ON j.id = e.job_id
    WHERE e.depends_on_id = $1::uuid AND j.status = {_CREATED}
    ORDER BY e.job_id FOR UPDATE OF j
), edges AS (
    INSERT INTO job_dependencies (job_id, depends_on_id, ended_status, ended_at)
    SELECT w.job_id, rerun.id, CASE WHEN rerun.status IN {_TERMINAL} THEN rerun.status END,
           CASE WHEN rerun.status IN {_TERMINAL} THEN now() END
    FROM waiting w, rerun
    ON CONFLICT DO NOTHING
    RETURNING job_id
), counted AS (
    UPDATE jobs j SET dependencies_uncounted = j.dependencies_uncounted + 1
    FROM edges WHERE j.id = edges.job_id
)
SELECT count(*) FROM edges
"""

# For the rest of the attaching transaction.
CUSTOM_PLANS = "SET LOCAL plan_cache_mode = force_custom_plan"


def outcome(policy: str, failed: str, left: str, waiting: str) -> str:
    """What the resolver does with a job whose counted edges say ``failed`` (a dependency
    failed or was cancelled), with ``left`` edges still to count, under dependency policy
    ``policy`` (``waiting``: the job still waits, CREATED): the SQL rendering of
    ``domain.dependencies.outcome`` (each argument SQL), as its value or NULL."""
    run, fail, cancel = (f"'{o.value}'" for o in (Outcome.RUN, Outcome.FAIL, Outcome.CANCEL))
    return f"""CASE WHEN NOT ({waiting}) THEN NULL
                WHEN {failed} AND {policy} <> '{DependencyPolicy.RUN.value}'
                THEN CASE WHEN {policy} = '{DependencyPolicy.CANCEL.value}' THEN {cancel}
                          ELSE {fail} END
                WHEN {left} = 0 THEN {run} END"""


def outcome_writes(outcome: str) -> str:
    """What an ``outcome`` (SQL: ``outcome``'s value, or NULL) writes on the job ``j`` it
    ends: its policy's status and error code and the public message (a job it leaves
    waiting, or makes due, keeps its own), as assignments of an UPDATE of ``jobs j``."""
    fail, cancel = (f"'{o.value}'" for o in (Outcome.FAIL, Outcome.CANCEL))
    failed = sql_status(transition(JobStatus.CREATED, Step.DEPENDENCY_FAILED))
    cancelled = sql_status(transition(JobStatus.CREATED, Step.CANCEL))
    return f"""status = CASE {outcome} WHEN {cancel} THEN {cancelled}
                                WHEN {fail} THEN {failed}
                                ELSE j.status END,
        error_code = CASE {outcome} WHEN {cancel} THEN '{ErrorCode.DEPENDENCY_CANCELLED.value}'
                                    WHEN {fail} THEN '{ErrorCode.DEPENDENCY_FAILED.value}'
                                    ELSE j.error_code END,
        public_error_message = CASE WHEN {outcome} IN ({fail}, {cancel})
            THEN 'A job it depends on failed or was cancelled.'
            ELSE j.public_error_message END"""
