"""Outbox rows as other statements write them: a job's dispatch row (its work token) and
domain event, their dedupe keys, and the rows a statement writes already claimed for its
replica's dispatcher and hands over (``handed``). The outbox's own statements (claims,
marks, re-dispatch) are ``outbox.py``'s."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from job_service.domain.outbox import OutboxMessage, OutboxStatus
from shared.constants import DISPATCH_SUBJECT_PREFIX, EVENTS_SUBJECT_PREFIX

_PENDING, _PROCESSING = OutboxStatus.PENDING.value, OutboxStatus.PROCESSING.value
DISPATCH_EVENT = "job.dispatch"


def dispatch_key(job_id: str, cause: str, suffix: str = "") -> str:
    """The SQL of a dispatch row's dedupe key (the ``Nats-Msg-Id``), from SQL expressions:
    ``job.dispatch:<job id>:create`` for a new job, ``…:retry:<lease token>`` for each
    retry (unique per attempt, even a refunded one), ``…:redispatch:<µs>`` for the
    reconciler."""
    key = f"'{DISPATCH_EVENT}:' || {job_id} || ':{cause}'"
    return f"{key} || ':' || {suffix}" if suffix else key


# Inserts the dispatch row of each job in `src` (a CTE with id, queue), available at
# `available_at`, deduplicated by `dedupe`. `trace` is a jsonb trace-context carrier or
# NULL: kept in the payload under "trace", sent as NATS headers. `owner`: see `_insert`.
def dispatch_rows(
    src: str,
    dedupe: str,
    *,
    attempt: str = "1",
    available_at: str = "now()",
    trace: str,
    owner: str | None = None,
) -> str:
    return _insert(
        f"""SELECT '{DISPATCH_EVENT}', 'job', src.id::text, {dedupe},
           '{DISPATCH_SUBJECT_PREFIX}.' || src.queue,
           jsonb_strip_nulls(jsonb_build_object('job_id', src.id::text, 'attempt', {attempt},
                                                'trace', {trace})),
           {available_at}""",
        src,
        available_at,
        owner,
    )


def domain_event_rows(src: str, *, owner: str | None = None) -> str:
    """Inserts the domain event of each job in `src` (a CTE with id, job_type and a
    terminal status), for other services: subject jobs.events.<type>.<status>. `owner`:
    see `_insert`."""
    return _insert(
        f"""SELECT 'job.' || src.status, 'job', src.id::text, 'job.' || src.status || ':' || src.id,
           '{EVENTS_SUBJECT_PREFIX}.' || src.job_type || '.' || src.status,
           jsonb_build_object('job_id', src.id::text, 'job_type', src.job_type,
                              'status', src.status),
           now()""",
        src,
        "now()",
        owner,
    )


def _insert(values: str, src: str, available_at: str, owner: str | None) -> str:
    """The outbox INSERT of ``values``, a row per row of ``src``.

    With ``owner`` (SQL: a replica's id, or NULL for none) the rows due at once are written
    already claimed by that replica's dispatcher, as its claim would leave them, and
    returned: the statement's caller hands them to that dispatcher once they have committed
    (``handed``), which publishes them without a claim statement and without waiting for
    one. A replica that dies before publishing them leaves them to the stale-claim
    takeover, like rows it had claimed."""
    columns = "event_type, aggregate_type, aggregate_id, dedupe_key, subject, payload, available_at"
    if owner is None:
        return f"""
    INSERT INTO outbox_events ({columns})
    {values}
    FROM {src} src
"""
    claimed = f"({owner} IS NOT NULL AND {available_at} <= now())"
    return f"""
    INSERT INTO outbox_events ({columns}, status, locked_by, locked_at, attempt_count)
    {values},
           CASE WHEN {claimed} THEN '{_PROCESSING}' ELSE '{_PENDING}' END,
           CASE WHEN {claimed} THEN {owner} END,
           CASE WHEN {claimed} THEN now() END,
           CASE WHEN {claimed} THEN 1 ELSE 0 END
    FROM {src} src
    RETURNING id, subject, dedupe_key, payload, attempt_count, status
"""


def handed(first_row: str, *ctes: str) -> str:
    """The ``handed`` column: the rows the outbox INSERTs ``ctes`` (written with an
    ``owner``) claimed, as one jsonb array on the row where ``first_row`` (SQL) holds and
    NULL on the others (a statement answers a row per job: each would decode them all
    again), for ``handed_messages``."""
    rows = " UNION ALL ".join(
        f"SELECT id, subject, dedupe_key, payload, attempt_count FROM {cte}"
        f" WHERE status = '{_PROCESSING}'"
        for cte in ctes
    )
    return (
        f"CASE WHEN {first_row} THEN (SELECT jsonb_agg(to_jsonb(h)) FROM ({rows}) h) END AS handed"
    )


def handed_messages(rows: Sequence[asyncpg.Record]) -> list[OutboxMessage]:
    """The messages of the ``handed`` column of a statement's rows, in id order."""
    messages = (OutboxMessage(**m) for r in rows for m in r["handed"] or ())
    return sorted(messages, key=lambda m: m.id)


# A later dispatch of `src` continues the job's trace: the create row's context (while
# that row is kept).
CREATE_TRACE = f"""(SELECT o.payload->'trace' FROM outbox_events o
    WHERE o.dedupe_key = {dispatch_key("src.id", "create")})"""
