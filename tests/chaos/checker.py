"""The checker: reads the database after the run and classifies every job the workload
tried to create (the Jepsen approach: judge outcomes, not the absence of exceptions).

- terminal     the job exists and ended (succeeded, failed, cancelled)
- lost         acknowledged, but the database has no such job, or it never started
               (still waiting for a dispatch at the end)
- duplicated   more than one accepted outcome: more than one terminal transition, a
               result's artifacts applied twice or from another attempt than its output,
               more than one child of a type per parent, or two jobs for one key
               (a succeeded parent missing its child job counts as lost)
- stuck        exists and started, but still not terminal after the quiescence deadline

The scheduler's limits, judged from the timeline (``job_events``) as the database saw it,
each breach a violation:

- delayed      a job created with ``run_at`` whose first attempt started before that time
- concurrency  more attempts of one concurrency key leased at once than its limit
               (``jobs.concurrency_limit``); an attempt is leased from its transition into
               running until its next transition out of running/cancel_requested, so a
               killed worker's attempt counts until the reaper expires its lease (what the
               limit counts); overlaps shorter than KEY_OVERLAP_SLACK_S are not counted
- rate limit   per rate-limited model tier, more grants (transitions into running of its
               jobs, retries included) in a window [t1, t2] than its token bucket allows:
               burst + rate x (t2 - t1), plus RATE_SLACK (so at most rate + burst + 1 in
               any second)

Parents and children, and billing:

- live children  a parent with more than one child of a type that is unfinished or
                 succeeded (admin retries of children included: one live child per parent
                 and type), or more than one child its projection created: duplicated
- billing        provider calls (the fake provider logs each one, a killed worker's
                 included) against usage rows: more rows than calls, or more calls missing
                 than the attempts marked usage-unknown (reaped without their usage: a
                 killed worker's) can have made, is a violation

Liveness: every job a fault hit (a killed or paused worker's, a lost dispatch's) is back at
work (a new attempt, or its end) within the fault's bound, counted from the injection. A
job of an AI type is held to its fault's AI bound where the fault has one (its retry
backoff is its type's, 2 s first, against the synthetic type's 0.2 s: seed 31 had a
paused worker's review-card child back after 5.7 s against the synthetic 5.7 s). A keyed
job's time while its key ran its limit of other jobs' attempts is not counted: it was
waiting its turn (priority and fair share decide who runs next), not stranded (seed 43 had
two paused worker's keyed jobs of priority -1 and -2 wait 5 s behind the key's
default-priority jobs).

A frozen or cut-off replica (``replica_freeze``, ``replica_partition``): what waited on it
(its transactions ended by the server, a statement needing the rows they held) within the
held rows' bound, and every slot of the run's schedule due during the fault fired within
the slot bound (tests/chaos/replica_faults.py; bounds in profiles.StackSettings).

What the provider saw (tests/chaos/provider_checks.py):

- provider rate  per rate-limited tier, the provider's requests (the fake provider's log)
                 in any sliding window of 1 s and of 60 s against the engine's promise,
                 floor(max(burst, 1 + rate x slack) + rate x w)
- redaction      no redacted output value of a succeeded job shows in any stored row or log

Joins (tests/chaos/joins.py): every join waits for exactly the jobs it was created with,
started no attempt before its last dependency ended and left CREATED once; one its policy
lets run succeeded, one its policy ended (a failed or cancelled dependency under FAIL or
CANCEL) never ran and carries its policy's error.

Agents (tests/chaos/agents.py): no ``ctx.step`` effect called again after its record
(duplicated), none recorded without its call (lost), no sleeper past its durable sleep
before its time, no acknowledged approval lost by a durable signal wait.

Stale submits refused are counted from the workers' logs (the job service answers a stale
submit LEASE_LOST and changes nothing, so the database cannot show them); the checker also
proves none was applied (duplicated = 0).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from job_service.domain.rate_limits import RateLimit
from shared.registry import Registry
from tests.chaos import agents, joins, signals
from tests.chaos.faults import FaultRecord
from tests.chaos.provider_checks import TierWindows, provider_rate, redaction_leaks
from tests.chaos.step_faults import calls_per_job
from tests.chaos.workload import Submission

TERMINAL = ("succeeded", "failed", "cancelled")
# an attempt holds its concurrency key's slot in these
LEASED = ("running", "cancel_requested")
# The job types whose result the artifact checks know (the synthetic job and its copies).
SYNTHETIC_TYPES = frozenset({"synthetic", "keyed", "metered"})
# Event times are their transactions' start times (now()): an attempt's end committed while
# a claim's transaction was already under way can carry a later time than the grant it made
# room for. Overlaps of one key's attempts shorter than this are therefore not counted (the
# keyed jobs of the workload run for 0.5 s at least, so an over-grant lasts longer).
KEY_OVERLAP_SLACK_S = 0.25
# grants a rate-limited tier may exceed its bucket by in a window (timestamp boundaries)
RATE_SLACK = 1.0

JOBS = """
SELECT j.id::text AS id, j.user_id, j.idempotency_key AS key, j.status, j.attempt_count,
       j.validated_output->>'attempt' AS output_attempt,
       (SELECT count(*) FROM job_events e
        WHERE e.job_id = j.id AND e.to_status = ANY($1::text[])) AS terminal_events,
       (SELECT count(*) FROM job_events e
        WHERE e.job_id = j.id AND e.to_status = 'running') AS attempts_started,
       (SELECT coalesce(array_agg(a.payload->>'attempt'), '{}') FROM job_artifacts a
        WHERE a.job_id = j.id) AS artifact_attempts,
       (SELECT count(*) FROM jobs c WHERE c.parent_job_id = j.id) AS children,
       (SELECT min(e.created_at) FROM job_events e
        WHERE e.job_id = j.id AND e.to_status = 'running') AS first_started,
       j.priority
FROM jobs j
"""

# every transition of every job with a concurrency key, in order per job
KEYED_EVENTS = """
SELECT e.job_id::text AS job_id, j.concurrency_key AS key, j.concurrency_limit AS "limit",
       e.to_status, e.created_at AS at
FROM job_events e JOIN jobs j ON j.id = e.job_id
WHERE j.concurrency_key IS NOT NULL
ORDER BY e.job_id, e.id
"""

# the grants of jobs of these model tiers (attempts started), in time order
TIER_GRANTS = """
SELECT j.model_tier AS tier, e.created_at AS at
FROM job_events e JOIN jobs j ON j.id = e.job_id
WHERE e.to_status = 'running' AND j.model_tier = ANY($1::text[])
ORDER BY e.created_at, e.id
"""

# children a projection created (an admin retry of a child is a child too, and counted
# by LIVE_CHILDREN instead)
EXTRA_CHILDREN = """
SELECT parent_job_id::text AS parent, job_type, count(*) AS n FROM jobs
WHERE parent_job_id IS NOT NULL AND trigger_type <> 'retry' GROUP BY 1, 2 HAVING count(*) > 1
"""

# more than one child of a type that is unfinished or succeeded (admin retries included)
LIVE_CHILDREN = """
SELECT parent_job_id::text AS parent, job_type, count(*) AS n FROM jobs
WHERE parent_job_id IS NOT NULL AND status NOT IN ('failed', 'cancelled')
GROUP BY 1, 2 HAVING count(*) > 1
"""

RETRIED_CHILDREN = (
    "SELECT count(*) FROM jobs WHERE parent_job_id IS NOT NULL AND trigger_type = 'retry'"
)

USAGE = """
SELECT (SELECT count(*) FROM usage_logs WHERE NOT reused) AS usage_rows,
       (SELECT coalesce(sum(cost_usd), 0)::float8 FROM usage_logs) AS cost_usd,
       (SELECT count(*) FROM job_events WHERE usage_unknown) AS usage_unknown
"""
# provider calls one attempt can make: the call, and one repair call (jobtypes/aijob.py)
CALLS_PER_ATTEMPT = 2
PROVIDER_CALL = re.compile(r"fake provider call \d+")

# the first sign of a job back at work after a fault: a new attempt, or its end; or its
# end before the fault (an event's time is its transaction's start: an attempt that ended
# just before the injection can commit after the fault listed the job as affected)
RECOVERED_AT = """
SELECT extract(epoch FROM coalesce(
    (SELECT min(created_at) FROM job_events
     WHERE job_id = $1::uuid AND created_at > to_timestamp($2)
       AND (to_status = 'running' OR to_status = ANY($3::text[]))),
    (SELECT min(created_at) FROM job_events
     WHERE job_id = $1::uuid AND to_status = ANY($3::text[]))))
"""

# jobs of an AI type (a model tier): their retry backoff is their type's, not synthetic's
AI_JOBS = "SELECT id::text AS id FROM jobs WHERE coalesce(model_tier, '') <> ''"

# the latest a schedule slot due in a window [$1, $2] (database clock) fired, and how many
SLOT_LAG = """
SELECT extract(epoch FROM max(recorded_at - slot)) AS lag, count(*) AS n FROM schedule_runs
WHERE slot BETWEEN to_timestamp($1) AND to_timestamp($2)
"""

LEASE_EXPIRED_AFTER_SHUTDOWN = """
SELECT count(*) FROM job_events
WHERE job_id = ANY($1::uuid[]) AND worker_id = $2 AND reason = 'LEASE_EXPIRED'
  AND created_at > to_timestamp($3)
"""

MAX_DETAIL_LINES = 30
STALE_REFUSED = re.compile(r"refused, the lease is lost; dropping the outcome")
STALE_STOPPED = re.compile(
    r"lease lost; stopping without reporting|lease ran out without a heartbeat getting through"
)


@dataclass
class Recovery:
    kind: str
    target: str
    seconds: float | None
    bound_s: float | None
    what: str
    # jobs the fault hit whose recovery this is (0: a fresh job's, the client's view)
    jobs: int = 0


@dataclass
class Report:
    profile: str
    seed: int
    elapsed_s: float = 0.0
    submitted: int = 0
    acknowledged: int = 0
    never_acknowledged: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    terminal: Counter[str] = field(default_factory=Counter)
    # jobs no client created (projections' children), by status
    derived: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    stale_refused: int = 0
    stale_stopped: int = 0
    attempts_started: int = 0
    # parents and children: admin retries of children made and refused, retried children
    child_retries_made: int = 0
    child_retries_refused: Counter[str] = field(default_factory=Counter)
    retried_children: int = 0
    # billing: provider calls (the fake provider's log lines), usage rows, their cost, and
    # attempts reaped without their usage
    provider_calls: int = 0
    usage_rows: int = 0
    usage_cost_usd: float = 0.0
    usage_unknown: int = 0
    # checkpoints: answered provider calls per succeeded AI job (tests/chaos/step_faults.py)
    calls_per_job: str = ""
    # scheduling: jobs created delayed, and of those started before their time
    delayed: int = 0
    started_early: int = 0
    prioritised: int = 0
    # per concurrency key: (jobs, most attempts leased at once, limit)
    keys: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # per rate-limited tier: (grants, most grants in one second, rate + burst per second)
    tiers: dict[str, tuple[int, int, float]] = field(default_factory=dict)
    # per rate-limited tier: the requests the provider saw, in sliding windows
    # (tests/chaos/provider_checks.py)
    provider_tiers: dict[str, TierWindows] = field(default_factory=dict)
    # redacted output values: jobs checked and where any showed
    redaction: str = ""
    # joins judged (tests/chaos/joins.py), and how they ended
    joins: int = 0
    joins_detail: str = ""
    recoveries: list[Recovery] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.stuck or self.violations)

    def longest_recovery(self) -> Recovery | None:
        measured = [r for r in self.recoveries if r.seconds is not None]
        return max(measured, key=lambda r: r.seconds or 0.0, default=None)

    def _per_kind(self) -> list[str]:
        """Per fault kind: how often, how many jobs it hit, the slowest recovery of those
        jobs against its bound, and the slowest fresh job through afterwards."""
        lines = [
            "| fault | injected | jobs hit | slowest back at work (bound) | fresh job through |",
            "|---|---:|---:|---:|---:|",
        ]
        for kind, count in sorted(self.faults.items()):
            ours = [r for r in self.recoveries if r.kind == kind]
            hit = [r for r in ours if r.jobs]
            bounds = {r.bound_s for r in hit if r.bound_s is not None}
            bound = f" (≤ {max(bounds):.1f} s)" if bounds else ""
            fresh = [r for r in ours if not r.jobs]
            lines.append(
                f"| {kind} | {count} | {sum(r.jobs for r in hit)} | {_slowest(hit)}{bound}"
                f" | {_slowest(fresh)} |"
            )
        return lines

    def table(self) -> str:
        longest = self.longest_recovery()
        faults = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items()))
        ended = ", ".join(f"{s} {self.terminal[s]}" for s in TERMINAL)
        rows = [
            (
                "jobs submitted",
                f"{self.submitted}",
                f"acknowledged {self.acknowledged}, never acknowledged {self.never_acknowledged}",
            ),
            ("faults injected", f"{sum(self.faults.values())}", faults),
            ("terminal", f"{sum(self.terminal.values())}", ended),
            (
                "child jobs",
                f"{sum(self.derived.values())}",
                ", ".join(f"{s} {n}" for s, n in sorted(self.derived.items())),
            ),
            ("lost", f"{len(self.lost)}", ""),
            ("duplicated", f"{len(self.duplicated)}", ""),
            ("stuck", f"{len(self.stuck)}", ""),
            (
                "stale submits refused",
                f"{self.stale_refused}",
                f"+ {self.stale_stopped} stale attempts stopped by their worker before submitting",
            ),
            ("attempts started", f"{self.attempts_started}", "at-least-once: re-runs included"),
            (
                "admin child retries",
                f"{self.child_retries_made}",
                f"{self.retried_children} retried children; refused: "
                + ", ".join(f"{k} {n}" for k, n in sorted(self.child_retries_refused.items())),
            ),
            (
                "provider calls",
                f"{self.provider_calls}",
                f"usage rows {self.usage_rows} (${self.usage_cost_usd:.4f}), "
                f"{self.usage_unknown} attempts with unknown usage (killed workers)",
            ),
            ("calls per AI job", "", self.calls_per_job),
            (
                "delayed jobs",
                f"{self.delayed}",
                f"run_at ahead of the create; {self.started_early} started before it",
            ),
            ("prioritised jobs", f"{self.prioritised}", "a priority other than the default"),
            (
                "keyed jobs",
                f"{sum(n for n, _, _ in self.keys.values())}",
                "most leased at once: "
                + ", ".join(f"{k} {peak} of {limit}" for k, (_, peak, limit) in self.keys.items()),
            ),
            (
                "rate-limited grants",
                f"{sum(n for n, _, _ in self.tiers.values())}",
                "most in 1 s: "
                + ", ".join(
                    f"{tier} {peak} (bucket: {per_s:g} + 1)"
                    for tier, (_, peak, per_s) in self.tiers.items()
                ),
            ),
            (
                "provider requests",
                f"{sum(w.calls for w in self.provider_tiers.values())}",
                "per rate-limited tier: "
                + ", ".join(w.detail(tier) for tier, w in self.provider_tiers.items()),
            ),
            ("redaction", "", self.redaction),
            ("joins", f"{self.joins}", self.joins_detail),
            (
                "longest recovery",
                f"{longest.seconds:.1f} s" if longest and longest.seconds is not None else "-",
                f"{longest.kind} ({longest.what})" if longest else "",
            ),
        ]
        width = max(len(r[0]) for r in rows)
        lines = [
            f"chaos run: profile {self.profile}, seed {self.seed}, {self.elapsed_s:.0f} s",
            "",
            f"| {'figure':<{width}} | {'value':>8} | detail",
            f"|{'-' * (width + 2)}|{'-' * 10}|-------",
        ]
        lines += [f"| {a:<{width}} | {b:>8} | {c}" for a, b, c in rows]
        lines += ["", *self._per_kind()]
        if len(self.recoveries) <= MAX_DETAIL_LINES:
            lines += ["", "recovery per fault (seconds; bound where the stack promises one):"]
            for r in self.recoveries:
                took = f"{r.seconds:6.1f}" if r.seconds is not None else "     -"
                bound = f"≤ {r.bound_s:.1f}" if r.bound_s is not None else ""
                lines.append(f"  {r.kind:<26} {r.target:<8} {took} {bound:<8} {r.what}")
        # what failed last, right above the result: CI shows a run's tail (a failed run's
        # violations once scrolled away above 30 notes, and could not be told)
        for title, items in (
            ("notes", self.notes),
            ("unexpected outcomes (allowed, for information)", self.unexpected),
            ("LOST", self.lost),
            ("DUPLICATED", self.duplicated),
            ("STUCK", self.stuck),
            ("VIOLATIONS", self.violations),
        ):
            if items:
                lines += ["", f"{title}:"] + [f"  {item}" for item in items[:30]]
                if len(items) > 30:
                    lines.append(f"  ... and {len(items) - 30} more")
        lines += ["", "RESULT: " + ("PASS" if self.ok else "FAIL")]
        return "\n".join(lines)


async def check(
    pool: asyncpg.Pool,
    submissions: list[Submission],
    faults: list[FaultRecord],
    log_dir: Path,
    report: Report,
    rate_limits: Mapping[str, RateLimit] | None = None,
    registry: Registry | None = None,
    recovery_s: float = 0.0,
) -> Report:
    """``rate_limits``: the tiers' limits the stack ran with (JOBS_RATE_LIMITS);
    ``registry``: its job types (the redaction rule reads their output_redaction);
    ``recovery_s``: how long a lost dispatch and a dead worker may hold a job up."""
    every = await pool.fetch(JOBS, list(TERMINAL))
    report.attempts_started = sum(r["attempts_started"] for r in every)
    by_key = {(r["user_id"], r["key"]): r for r in every if r["key"] is not None}
    report.submitted = len(submissions)
    judged: set[str] = set()
    for sub in submissions:
        row = by_key.get((sub.user_id, sub.key))
        classify_job(sub, row, report)
        if row is not None:
            judged.add(row["id"])
    # jobs no client created (children of the jobs above): they too must end
    for row in every:
        if row["id"] in judged:
            continue
        report.derived[row["status"]] += 1
        if row["status"] not in TERMINAL:
            report.stuck.append(f"derived job {row['id']} ({row['key']}): still {row['status']}")
    for row in await pool.fetch(EXTRA_CHILDREN):
        report.duplicated.append(f"parent {row['parent']}: {row['n']} {row['job_type']} children")
    for row in await pool.fetch(LIVE_CHILDREN):
        report.duplicated.append(
            f"parent {row['parent']}: {row['n']} live {row['job_type']} children"
        )
    for sub in submissions:
        report.child_retries_made += sub.child_retries_made
        report.child_retries_refused.update(sub.child_retries_refused)
    report.retried_children = await pool.fetchval(RETRIED_CHILDREN)
    await signals.check(pool, submissions, report)
    await agents.check(pool, submissions, report, log_dir, recovery_s)
    await joins.check(pool, submissions, report)
    keyed_events = await pool.fetch(KEYED_EVENTS)
    report.keys, breaches = key_breaches(keyed_events)
    report.violations += breaches
    keys = KeyedLeases.of(keyed_events)
    ai_jobs = {r["id"] for r in await pool.fetch(AI_JOBS)}
    limits = dict(rate_limits or {})
    grants: dict[str, list[datetime]] = {tier: [] for tier in sorted(limits)}
    for row in await pool.fetch(TIER_GRANTS, list(limits)):
        grants[row["tier"]].append(row["at"])
    for tier, times in grants.items():
        report.tiers[tier], breaches = rate_breaches(tier, times, limits[tier])
        report.violations += breaches
    for record in faults:
        report.faults[record.kind] += 1
        report.violations += [f"{record.kind} {record.target}: {v}" for v in record.violations]
        report.notes += [f"{record.kind} {record.target}: {n}" for n in record.notes]
        await _recoveries(pool, record, report, keys, ai_jobs)
        await _waits(pool, record, report)
    text = await asyncio.to_thread(_worker_logs, log_dir)
    report.stale_refused = len(STALE_REFUSED.findall(text))
    report.stale_stopped = len(STALE_STOPPED.findall(text))
    usage = await pool.fetchrow(USAGE)
    assert usage is not None, "the USAGE query always answers one row"
    report.violations += billing_breaches(
        len(PROVIDER_CALL.findall(text)), usage["usage_rows"], usage["usage_unknown"], report
    )
    report.usage_cost_usd = usage["cost_usd"]
    report.calls_per_job, breaches = await calls_per_job(pool, log_dir)
    report.violations += breaches
    report.provider_tiers, breaches, notes = await provider_rate(pool, log_dir, limits)
    report.violations += breaches
    report.notes += notes
    if registry is not None:
        report.redaction, breaches, notes = await redaction_leaks(pool, log_dir, registry)
        report.violations += breaches
        report.notes += notes
    return report


def billing_breaches(calls: int, rows: int, unknown: int, report: Report) -> list[str]:
    """Every provider call billed once: no more usage rows than calls, and no more calls
    without a row than the attempts marked usage-unknown can have made."""
    report.provider_calls, report.usage_rows, report.usage_unknown = calls, rows, unknown
    if rows > calls:
        return [f"billing: {rows} usage rows for {calls} provider calls"]
    if calls - rows > CALLS_PER_ATTEMPT * unknown:
        return [
            f"billing: {calls - rows} provider calls without a usage row, but only {unknown}"
            f" attempts (at most {CALLS_PER_ATTEMPT} calls each) have unknown usage"
        ]
    return []


def _worker_logs(log_dir: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(log_dir.glob("w*.log")))


def _slowest(recoveries: list[Recovery]) -> str:
    times = [r.seconds for r in recoveries if r.seconds is not None]
    return f"{max(times):.1f} s" if times else "-"


def classify_job(
    sub: Submission, row: asyncpg.Record | Mapping[str, Any] | None, report: Report
) -> None:
    """Adds the verdict on one job the workload tried to create to ``report``."""
    acked = sub.job_id is not None
    report.acknowledged += acked
    if row is None:
        if acked:
            report.lost.append(f"{sub.key} ({sub.kind.name}): acknowledged as {sub.job_id}, no row")
        else:
            report.never_acknowledged += 1
        return
    if not acked:
        report.never_acknowledged += 1  # created after all: judged like the others below
    elif row["id"] != sub.job_id:
        report.duplicated.append(f"{sub.key}: acknowledged as {sub.job_id}, stored as {row['id']}")
    what = f"{sub.key} ({sub.kind.name}) job {row['id']}"
    _check_schedule(sub, row, what, report)
    status = row["status"]
    if status in TERMINAL:
        report.terminal[status] += 1
        if status not in sub.kind.ends:
            report.unexpected.append(f"{what}: {status}")
    elif row["attempts_started"] == 0:
        report.lost.append(f"{what}: still {status}, never started")
    else:
        report.stuck.append(f"{what}: still {status} after {row['attempts_started']} attempts")
    if row["terminal_events"] > 1:
        report.duplicated.append(f"{what}: {row['terminal_events']} terminal transitions")
    children = row.get("children", 0)
    if status == "succeeded" and children < sub.kind.children:
        report.lost.append(f"{what}: succeeded with {children} of its {sub.kind.children} children")
    artifacts = list(row["artifact_attempts"])
    if sub.kind.job_type not in SYNTHETIC_TYPES:
        return  # the artifact checks below know what a synthetic result looks like
    if status == "succeeded" and (len(artifacts) != 1 or artifacts[0] != row["output_attempt"]):
        report.duplicated.append(
            f"{what}: output of attempt {row['output_attempt']}, artifacts of {artifacts}"
        )
    elif status != "succeeded" and artifacts:
        report.duplicated.append(f"{what}: {status} with artifacts {artifacts}")


def _check_schedule(
    sub: Submission, row: asyncpg.Record | Mapping[str, Any], what: str, report: Report
) -> None:
    """A delayed job must not start before its time; an asked priority must be stored."""
    if sub.priority is not None:
        report.prioritised += 1
        if row.get("priority", sub.priority) != sub.priority:
            report.violations.append(
                f"{what}: stored with priority {row['priority']}, created with {sub.priority}"
            )
    if sub.run_at is None:
        return
    report.delayed += 1
    started = row.get("first_started")
    if started is not None and started < sub.run_at:
        report.started_early += 1
        report.violations.append(
            f"{what}: delayed until {sub.run_at.isoformat()}, started"
            f" {(sub.run_at - started).total_seconds():.3f}s early at {started.isoformat()}"
        )


def key_breaches(
    events: Iterable[asyncpg.Record | Mapping[str, Any]], slack_s: float = KEY_OVERLAP_SLACK_S
) -> tuple[dict[str, tuple[int, int, int]], list[str]]:
    """From every transition (job_id, key, limit, to_status, at; in order per job) of the
    jobs with a concurrency key: per key (jobs, most attempts leased at once, limit), and
    a breach for each time a key had more leased than its limit. An attempt is leased from
    its transition into running until the next one out of LEASED (never: still leased);
    each interval's start is moved ``slack_s`` later (see KEY_OVERLAP_SLACK_S)."""
    # per key: (time, +1 start / -1 end, job id); limits and jobs per key
    points: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
    limits: dict[str, int] = {}
    jobs: dict[str, set[str]] = defaultdict(set)
    open_since: dict[str, float] = {}  # job id -> start of its leased attempt
    for event in events:
        key, job_id = event["key"], event["job_id"]
        limits[key] = min(limits.get(key, event["limit"]), event["limit"])
        jobs[key].add(job_id)
        at = event["at"].timestamp()
        if job_id in open_since and (
            event["to_status"] == "running" or event["to_status"] not in LEASED
        ):
            _interval(points[key], job_id, open_since.pop(job_id) + slack_s, at)
        if event["to_status"] == "running":
            open_since[job_id] = at
    keys_of = {job_id: key for key, ids in jobs.items() for job_id in ids}
    for job_id, start in open_since.items():
        _interval(points[keys_of[job_id]], job_id, start + slack_s, math.inf)
    figures: dict[str, tuple[int, int, int]] = {}
    breaches: list[str] = []
    for key in sorted(jobs):
        limit, leased, peak = limits[key], set[str](), 0
        # ends before starts at one instant: a slot freed and taken again is no overlap
        for at, step, job_id in sorted(points[key], key=lambda p: (p[0], p[1])):
            was = len(leased)
            if step > 0:
                leased.add(job_id)
            else:
                leased.discard(job_id)
            peak = max(peak, len(leased))
            if was <= limit < len(leased):
                breaches.append(
                    f"concurrency key {key}: {len(leased)} attempts leased at once (limit"
                    f" {limit}) at {datetime.fromtimestamp(at, UTC).isoformat()}: "
                    + ", ".join(sorted(leased))
                )
        figures[key] = (len(jobs[key]), peak, limit)
    return figures, breaches


def _interval(points: list[tuple[float, int, str]], job_id: str, start: float, end: float) -> None:
    if start < end:
        points += [(start, 1, job_id), (end, -1, job_id)]


def rate_breaches(
    tier: str, grants: Sequence[datetime], limit: RateLimit, slack: float = RATE_SLACK
) -> tuple[tuple[int, int, float], list[str]]:
    """The grants of a rate-limited tier, in time order, against its token bucket: every
    window [t_i, t_j] holds at most burst + rate x (t_j - t_i) + ``slack`` of them (a bucket
    full at t_i, refilled at the full rate). Returns (grants, most in any one second,
    rate + burst per second) and a breach per run of windows over the bound."""
    rate = limit.requests_per_minute / 60
    burst = limit.request_burst
    times = [g.timestamp() for g in grants]
    breaches: list[str] = []
    # the window ending at grant j with the most grants beyond its refill starts at the
    # i <= j with the largest rate * t_i - i: one pass keeps it
    best, best_i, over = -math.inf, 0, False
    for j, t in enumerate(times):
        if rate * t - j > best:
            best, best_i = rate * t - j, j
        excess = j + 1 - rate * t + best
        if excess > burst + slack and not over:
            span = t - times[best_i]
            breaches.append(
                f"rate limit of tier {tier}: {j - best_i + 1} grants in {span:.3f}s from"
                f" {grants[best_i].isoformat()} (its bucket allows {burst:g} +"
                f" {rate:g}/s x {span:.3f}s + {slack:g})"
            )
        over = excess > burst + slack
    peak, i = 0, 0
    for j, t in enumerate(times):
        while t - times[i] >= 1.0:
            i += 1
        peak = max(peak, j - i + 1)
    return (len(times), peak, rate + burst), breaches


@dataclass
class KeyedLeases:
    """Per concurrency key, its limit and its jobs' leased attempts (start, end, job id);
    and each keyed job's key."""

    limits: dict[str, int]
    leases: dict[str, list[tuple[float, float, str]]]
    key_of: dict[str, str]

    @classmethod
    def of(cls, events: Iterable[asyncpg.Record | Mapping[str, Any]]) -> KeyedLeases:
        """From every transition of the keyed jobs, in order per job (KEYED_EVENTS)."""
        keys = cls({}, defaultdict(list), {})
        open_since: dict[str, float] = {}
        for event in events:
            key, job_id, at = event["key"], event["job_id"], event["at"].timestamp()
            keys.limits[key] = event["limit"]
            keys.key_of[job_id] = key
            if job_id in open_since and (
                event["to_status"] == "running" or event["to_status"] not in LEASED
            ):
                keys.leases[key].append((open_since.pop(job_id), at, job_id))
            if event["to_status"] == "running":
                open_since[job_id] = at
        for job_id, start in open_since.items():
            keys.leases[keys.key_of[job_id]].append((start, math.inf, job_id))
        return keys

    def full_for_others(self, job_id: str, start: float, end: float) -> float:
        """Seconds of [start, end) in which the job's key ran its limit of other jobs'
        attempts: time the job waited its turn, not time it was stranded."""
        key = self.key_of.get(job_id)
        if key is None:
            return 0.0
        # (time, +1 start / -1 end), ends first at one instant: a slot freed and taken
        # again is not full for that instant
        points = sorted(
            (at, step)
            for a, b, other in self.leases[key]
            if other != job_id and a < end and b > start
            for at, step in ((max(a, start), 1), (min(b, end), -1))
        )
        full, running, since = 0.0, 0, start
        for at, step in points:
            if running >= self.limits[key]:
                full += at - since
            running += step
            since = at
        return full


def bound_for(record: FaultRecord, job_id: str, ai_jobs: set[str]) -> float | None:
    """The bound a job the fault hit is held to: the fault's AI bound for an AI job, where
    the fault has one, else its bound."""
    if job_id in ai_jobs and record.ai_bound_s is not None:
        return record.ai_bound_s
    return record.bound_s


async def _recoveries(
    pool: asyncpg.Pool,
    record: FaultRecord,
    report: Report,
    keys: KeyedLeases,
    ai_jobs: set[str],
) -> None:
    if record.probe_s is not None:
        report.recoveries.append(
            Recovery(record.kind, record.target, record.probe_s, None, "a fresh job succeeded")
        )
    if record.handed_back_by is not None and record.affected:
        left = await pool.fetchval(
            LEASE_EXPIRED_AFTER_SHUTDOWN, record.affected, record.handed_back_by, record.injected_at
        )
        if left:
            report.violations.append(
                f"{record.kind} {record.target}: {left} jobs waited for their lease to expire"
                " after a clean shutdown"
            )
    slowest: float | None = None
    for job_id in record.affected:
        at = await pool.fetchval(RECOVERED_AT, job_id, record.injected_at, list(TERMINAL))
        if at is None:
            report.violations.append(f"{record.kind} {record.target}: job {job_id} never resumed")
            continue
        took = max(float(at) - record.injected_at, 0.0)  # 0: it had ended before the fault
        # a keyed job waits while its key runs its limit of others (priority, fair share)
        waited = keys.full_for_others(job_id, record.injected_at, float(at))
        took -= waited
        slowest = took if slowest is None else max(slowest, took)
        bound = bound_for(record, job_id, ai_jobs)
        if bound is not None and took > bound:
            report.violations.append(
                f"{record.kind} {record.target}: job {job_id} resumed after {took:.1f}s"
                f" (bound {bound:.1f}s)"
                + (f", besides {waited:.1f}s its key ran its limit of others" if waited else "")
            )
    if record.affected:
        report.recoveries.append(
            Recovery(
                record.kind,
                record.target,
                slowest,
                record.bound_s,
                f"slowest of {len(record.affected)} affected jobs back at work",
                jobs=len(record.affected),
            )
        )


async def _waits(pool: asyncpg.Pool, record: FaultRecord, report: Report) -> None:
    """A frozen or cut-off replica's bounds: what waited on it, and the schedule's slots
    due while it was stopped."""
    waits = dict(record.waits)
    bounds: dict[str, float | None] = dict.fromkeys(waits, record.wait_bound_s)
    if record.slot_window is not None:
        row = await pool.fetchrow(SLOT_LAG, *record.slot_window)
        if row is None or not row["n"]:
            report.violations.append(f"{record.kind} {record.target}: no schedule slot fired")
        else:
            what = f"the latest of {row['n']} schedule slots due meanwhile fired"
            waits[what], bounds[what] = float(row["lag"]), record.slot_bound_s
    for what, took in waits.items():
        bound = bounds[what]
        report.recoveries.append(Recovery(record.kind, record.target, took, bound, what))
        if bound is not None and took > bound:
            report.violations.append(
                f"{record.kind} {record.target}: {what} after {took:.1f}s (bound {bound:.1f}s)"
            )
