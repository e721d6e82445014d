"""A waiting job's place in line (``sched_key``) in SQL, which every statement that makes a
job wait embeds: a new job's (``place_in_line``, the rendering of the pure
``job_service.domain.claims.place_in_line``), a retry's (``retry_place``); and the work
tokens an ended attempt re-issues when it frees a limited slot (``released_slot_tokens``).

Two creates of one line at once are serialised (``LOCK_LINES``, or ``jobs_line_tail`` inside
CreateJob's one statement), so each reads the place the other took.

The line's settings reach every statement through session settings the pool sets
(JOBS_SCHED_*: ``JobServiceSettings``, ``create_pool``), with the policy's defaults when a
pool was made without them.
"""

from __future__ import annotations

from collections.abc import Iterable

from job_service.adapters.postgres.vocabulary.outbox_rows import dispatch_key, dispatch_rows
from job_service.adapters.postgres.vocabulary.statuses import WAITING
from job_service.domain import claims as policy


def _setting(name: str, default: float) -> str:
    return f"coalesce(nullif(current_setting('jobs.{name}', true), '')::float8, {default})"


PRIORITY_STEP = _setting("priority_step_s", policy.DEFAULT_PRIORITY_STEP_S)
FAIR_QUANTUM = _setting("fair_quantum_s", policy.DEFAULT_FAIR_QUANTUM_S)
# Queues with a concurrency limit: their jobs' ends re-issue a token, as keyed jobs' do.
LIMITED_QUEUES = "string_to_array(nullif(current_setting('jobs.limited_queues', true), ''), ',')"


def place_in_line(src: str, *, locked: bool = False) -> str:
    """The SQL of a new waiting job's ``sched_key`` from ``src`` (with queue, priority,
    fairness_key, next_run_at): its due time moved ahead by its priority, and never ahead
    of one quantum after the last due job of its fairness key at its priority. ``locked``:
    the last place read under the line's lock by ``jobs_line_tail`` (migration 0055), for
    a statement that creates one job alone in its transaction; otherwise the caller took
    the lock first (``LOCK_LINES``), or takes none."""
    tail = (
        f"jobs_line_tail({src}.queue, {src}.fairness_key, {src}.priority)"
        if locked
        else f"""(SELECT max(w.sched_key) FROM jobs w
         WHERE w.queue = {src}.queue AND w.fairness_key = {src}.fairness_key
           AND w.priority = {src}.priority AND w.status IN {WAITING}
           AND (w.next_run_at IS NULL OR w.next_run_at <= now()))"""
    )
    return f"""greatest(
        extract(epoch FROM coalesce({src}.next_run_at, now()))::float8
            - {src}.priority * {PRIORITY_STEP},
        {tail} + {FAIR_QUANTUM})"""


def _line_lock_key(queue: str, fairness_key: str, priority: str) -> str:
    return (
        f"hashtextextended('line' || chr(31) || {queue} || chr(31) || {fairness_key}"
        f" || chr(31) || {priority}, 0)"
    )


# Places in line are taken one at a time per (queue, fairness key, priority): a new job's
# place reads the last place of its line, so two creates running at once would both read
# the same one. Each creating transaction takes an advisory lock per line it adds to
# (sorted: no deadlock) in a statement of its own, before its insert, whose snapshot then
# sees every place a concurrent create took. $1 queues, $2 fairness keys, $3 priorities.
LOCK_LINES = f"""
SELECT pg_advisory_xact_lock(h) FROM (
    SELECT DISTINCT {_line_lock_key("q", "k", "p")} AS h
    FROM unnest($1::text[], $2::text[], $3::int[]) AS x(q, k, p) ORDER BY 1
) lines
"""

# The lock of the line a re-run of job $1 joins (its source's: a re-run's fairness key is
# its source's, or the user).
LOCK_RERUN_LINE = f"""
SELECT pg_advisory_xact_lock({
    _line_lock_key("queue", "coalesce(fairness_key, user_id)", "priority")
}) FROM jobs WHERE id = $1
"""


def lines_of(
    jobs: Iterable[tuple[str, str | None, str, int]],
) -> tuple[list[str], list[str], list[int]]:
    """LOCK_LINES' arguments for new jobs given as (queue, fairness key as defined, which
    may read "{user}", user id, priority); a job without a fairness key joins no line."""
    lines = sorted(
        {
            (queue, key.replace("{user}", user), priority)
            for queue, key, user, priority in jobs
            if key is not None
        }
    )
    return [q for q, _, _ in lines], [k for _, k, _ in lines], [p for _, _, p in lines]


def retry_place(next_run_at: str, priority: str) -> str:
    """A retry's place in line: its due time moved ahead by its priority (it has had its
    fair turn)."""
    return f"extract(epoch FROM {next_run_at})::float8 - {priority} * {PRIORITY_STEP}"


def released_slot_tokens(ended: str, *, owner: str | None = None) -> str:
    """Inserts a work token for each attempt of ``ended`` (id, queue, concurrency_key,
    lease_token) that frees a limited slot (a concurrency key or a limited queue): the
    jobs it held back get their turn, since their own tokens were dropped. ``owner`` as
    for ``dispatch_rows``."""
    return dispatch_rows(
        f"(SELECT * FROM {ended} WHERE concurrency_key IS NOT NULL"
        f" OR queue = ANY({LIMITED_QUEUES}))",
        dispatch_key("src.id", "release", "src.lease_token::text"),
        trace="NULL::jsonb",
        owner=owner,
    )
