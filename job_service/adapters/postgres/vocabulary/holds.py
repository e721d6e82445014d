"""What holds a waiting job back, in SQL: a paused queue, a full concurrency key, no live
worker that runs its definition (the no-worker gauge's), and ``held`` for the statements
that must leave a held job alone (the dispatch reconciler). Each hold ``held`` names has
its own way back to the job when it lifts (a resumed queue's tokens, a released slot's
token, a worker of its version taking the tokens handed back meanwhile, and the reconciler
once nothing holds it), so nothing needs to act on a held job each round.
``domain/holds.py`` explains one job's hold from the same facts.
"""

from __future__ import annotations

from job_service.adapters.postgres.vocabulary.statuses import statuses_sql
from job_service.domain.lifecycle import LEASED

# A worker is live when it asked for work this recently.
LIVE_WORKER_S = 30.0
_LEASED = statuses_sql(LEASED)


def queue_paused(job: str) -> str:
    return f"EXISTS (SELECT 1 FROM queue_controls q WHERE q.queue = {job}.queue AND q.paused)"


def key_full(job: str) -> str:
    """The job's concurrency key runs its limit (counted now; a claim counts under the
    key's lock)."""
    return f"""({job}.concurrency_key IS NOT NULL AND (
        SELECT count(*) FROM jobs r
        WHERE r.concurrency_key = {job}.concurrency_key AND r.status IN {_LEASED}
    ) >= {job}.concurrency_limit)"""


def no_worker_for_version(job: str, live_s: str) -> str:
    """Live workers have said what they run of the queues they claim from
    (``worker_definitions``), and none runs the job's definition. Without any live record
    there is nothing to judge by: not held."""
    live = f"w.seen_at > now() - {live_s} * interval '1 second'"
    return f"""(EXISTS (SELECT 1 FROM worker_definitions w WHERE {live})
    AND NOT EXISTS (
        SELECT 1 FROM worker_definitions w
        WHERE {live} AND {job}.job_type || '@' || {job}.definition_version = ANY(w.definitions)))"""


def another_version_runs(job: str, live_s: str) -> str:
    """Live workers run the job's type, none at its version (a rolling deploy's jobs of the
    new version, the old workers still live). Narrower than ``no_worker_for_version`` on
    purpose, for the statements that leave held jobs alone: a worker is live only while it
    claims, and a worker of the job's queue claims whenever that queue has tokens — so when
    workers of the type are live, a worker of its version would be too; whereas any live
    worker elsewhere says nothing of the job's queue, whose workers may idle for want of the
    one token that was lost."""
    live = f"w.seen_at > now() - {live_s} * interval '1 second'"
    return f"""(EXISTS (
        SELECT 1 FROM worker_definitions w, unnest(w.definitions) d
        WHERE {live} AND split_part(d, '@', 1) = {job}.job_type)
    AND NOT EXISTS (
        SELECT 1 FROM worker_definitions w
        WHERE {live} AND {job}.job_type || '@' || {job}.definition_version = ANY(w.definitions)))"""


def held(job: str, live_s: str) -> str:
    """A paused queue, a full key, or another version of its type running but not its
    own: the holds whose lifting gives the job a token (or a reconcile) by itself."""
    return f"({queue_paused(job)} OR {key_full(job)} OR {another_version_runs(job, live_s)})"
