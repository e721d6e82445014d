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

Stale submits refused are counted from the workers' logs (the job service answers a stale
submit LEASE_LOST and changes nothing, so the database cannot show them); the checker also
proves none was applied (duplicated = 0).
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from tests.chaos.faults import FaultRecord
from tests.chaos.workload import Submission

TERMINAL = ("succeeded", "failed", "cancelled")

JOBS = """
SELECT j.id::text AS id, j.user_id, j.idempotency_key AS key, j.status, j.attempt_count,
       j.validated_output->>'attempt' AS output_attempt,
       (SELECT count(*) FROM job_events e
        WHERE e.job_id = j.id AND e.to_status = ANY($1::text[])) AS terminal_events,
       (SELECT count(*) FROM job_events e
        WHERE e.job_id = j.id AND e.to_status = 'running') AS attempts_started,
       (SELECT coalesce(array_agg(a.payload->>'attempt'), '{}') FROM job_artifacts a
        WHERE a.job_id = j.id) AS artifact_attempts,
       (SELECT count(*) FROM jobs c WHERE c.parent_job_id = j.id) AS children
FROM jobs j
"""

EXTRA_CHILDREN = """
SELECT parent_job_id::text AS parent, job_type, count(*) AS n FROM jobs
WHERE parent_job_id IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1
"""

# the first sign of a job back at work after a fault: a new attempt, or its end
RECOVERED_AT = """
SELECT extract(epoch FROM min(created_at)) FROM job_events
WHERE job_id = $1::uuid AND created_at > to_timestamp($2)
  AND (to_status = 'running' OR to_status = ANY($3::text[]))
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
        for title, items in (
            ("LOST", self.lost),
            ("DUPLICATED", self.duplicated),
            ("STUCK", self.stuck),
            ("VIOLATIONS", self.violations),
            ("unexpected outcomes (allowed, for information)", self.unexpected),
            ("notes", self.notes),
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
) -> Report:
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
    for record in faults:
        report.faults[record.kind] += 1
        report.violations += [f"{record.kind} {record.target}: {v}" for v in record.violations]
        report.notes += [f"{record.kind} {record.target}: {n}" for n in record.notes]
        await _recoveries(pool, record, report)
    text = await asyncio.to_thread(_worker_logs, log_dir)
    report.stale_refused = len(STALE_REFUSED.findall(text))
    report.stale_stopped = len(STALE_STOPPED.findall(text))
    return report


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
    if sub.kind.job_type != "synthetic":
        return  # the artifact checks below know what a synthetic result looks like
    if status == "succeeded" and (len(artifacts) != 1 or artifacts[0] != row["output_attempt"]):
        report.duplicated.append(
            f"{what}: output of attempt {row['output_attempt']}, artifacts of {artifacts}"
        )
    elif status != "succeeded" and artifacts:
        report.duplicated.append(f"{what}: {status} with artifacts {artifacts}")


async def _recoveries(pool: asyncpg.Pool, record: FaultRecord, report: Report) -> None:
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
        took = float(at) - record.injected_at
        slowest = took if slowest is None else max(slowest, took)
        if record.bound_s is not None and took > record.bound_s:
            report.violations.append(
                f"{record.kind} {record.target}: job {job_id} resumed after {took:.1f}s"
                f" (bound {record.bound_s:.1f}s)"
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
