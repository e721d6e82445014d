"""What the provider saw, and what redaction promised: two rules of the chaos checker.

Provider rate (per model tier, sliding windows). The fake provider logs one line per
request before it does anything (``fake provider call N``, JSON with ``ts`` to the
millisecond and the ``job_id`` it serves), the calls of killed workers included: that is
the provider's request log. A call's tier is the one its line names (``tier``/``model``,
when the provider logs it), else the model tier of the job it served. A tier limited by
JOBS_RATE_LIMITS to ``rpm`` requests per minute with a bucket of ``burst`` requests (its
refill rate r = rpm / 60 per second, the bucket full at the start of any window) admits at
most

    floor(burst + r x w)   requests in any window [t, t + w)

so at no moment more than that: the rule checks every window of w = 1 s and w = 60 s
that starts at a call (the windows that matter), with no slack.

Redaction. Every succeeded job of a type with ``output_redaction``: the fields' values as
the fake provider answered them (recomputed from the job's snapshot through the job type's
own code and the fake provider, as a worker computes them) must appear in no stored row
the checker can read (jobs, events, artifacts, steps, snapshots, usage, outbox, schedule
runs) and in no process's log. A row that belongs to another job, not the redacted job nor
one of its descendants, is not searched: the fake provider answers the same input with the
same text, so a job of a non-redacting type with that input stores it rightly.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from job_service.domain.rate_limits import DEFAULT_CALL_SLACK_S, RateLimit
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pbconv import struct_from_dict
from shared.registry import Registry
from tests.support.ai import HandContext

CALL_LINE = "fake provider call "
WINDOWS_S = (1.0, 60.0)
# Rate-rule breaches that known defects still cause, reported as notes instead of
# violations. Empty since every provider call takes a slot (issue 25 item 1).
KNOWN_DEFECTS: frozenset[str] = frozenset()
# Where a redacted value must never be: every row of these tables, as text, each with the
# job it belongs to (NULL, or an id that is no job's: searched for every redacted job).
STORED = {
    "jobs": "id::text",
    "job_events": "job_id::text",
    "job_artifacts": "job_id::text",
    "job_steps": "job_id::text",
    "job_snapshots": "job_id::text",
    "usage_logs": "job_id::text",
    "outbox_events": "aggregate_id",
    "schedule_runs": "job_id::text",
}
JOB_PARENTS = "SELECT id::text AS id, parent_job_id::text AS parent FROM jobs"
# Channels where redacted values still show, reported as notes instead of violations.
# Empty since the projection's artifacts and child inputs are scrubbed (shared/redaction.py
# ``scrubbed``): this rule found both (feynman_result, the review-card child's snapshot).
KNOWN_LEAK_CHANNELS: frozenset[str] = frozenset()
JOB_TIERS = "SELECT id::text AS id, coalesce(model_tier, '') AS tier FROM jobs"
REDACTED_JOBS = """
SELECT j.id::text AS id, j.job_type, j.user_id, j.prompt_key, j.prompt_version,
       s.payload::text AS snapshot
FROM jobs j JOIN job_snapshots s ON s.job_id = j.id
WHERE j.status = 'succeeded' AND j.job_type = ANY($1::text[])
"""


@dataclass(frozen=True)
class TierWindows:
    """A tier's provider requests: in all, and the most in any window of 1 s and 60 s,
    each against its bound floor(burst + rate x w)."""

    calls: int
    peak_1s: int
    bound_1s: int
    peak_60s: int
    bound_60s: int

    def detail(self, tier: str) -> str:
        return (
            f"{tier} {self.calls} calls, most in 1 s {self.peak_1s} (≤ {self.bound_1s}),"
            f" in 60 s {self.peak_60s} (≤ {self.bound_60s})"
        )


def provider_calls(log_dir: Path) -> list[dict[str, Any]]:
    """Every request the fake provider logged, from every worker's log."""
    calls = []
    for path in sorted(log_dir.glob("w*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if CALL_LINE not in line:
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a SIGKILL
            if isinstance(entry, dict) and str(entry.get("msg", "")).startswith(CALL_LINE):
                calls.append(entry)
    return calls


def window_bound(limit: RateLimit, window_s: float) -> int:
    """The most requests the engine promises the provider sees in any window of
    ``window_s``: max(burst, 1 + rate x slack) + rate x window (ADR 0002, rate limits at
    the call; the chaos stack keeps the default slack)."""
    rate = limit.requests_per_second
    floor = max(limit.request_burst, 1 + rate * DEFAULT_CALL_SLACK_S)
    return math.floor(floor + rate * window_s + 1e-9)


def most_in_window(times: Sequence[float], window_s: float) -> tuple[int, float]:
    """The most of ``times`` (sorted) in any window [t, t + window_s), and where it starts."""
    peak, start, i = 0, times[0] if times else 0.0, 0
    for j, t in enumerate(times):
        while t - times[i] >= window_s:
            i += 1
        if j - i + 1 > peak:
            peak, start = j - i + 1, times[i]
    return peak, start


def tier_windows(
    calls: Sequence[Mapping[str, Any]],
    job_tiers: Mapping[str, str],
    limits: Mapping[str, RateLimit],
) -> tuple[dict[str, TierWindows], list[str]]:
    """Per rate-limited tier: its figures and a breach per window size it exceeded."""
    times: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        tier = (
            call.get("tier")
            or _tier_of_model(call.get("model"))
            or job_tiers.get(str(call.get("job_id", "")), "")
        )
        if tier in limits:
            times[tier].append(datetime.fromisoformat(call["ts"]).timestamp())
    figures: dict[str, TierWindows] = {}
    breaches: list[str] = []
    for tier, limit in sorted(limits.items()):
        ordered = sorted(times[tier])
        found = {}
        for window in WINDOWS_S:
            peak, start = most_in_window(ordered, window)
            bound = window_bound(limit, window)
            found[window] = (peak, bound)
            if peak > bound:
                breaches.append(
                    f"provider rate of tier {tier}: {peak} requests in {window:g} s from"
                    f" {datetime.fromtimestamp(start).isoformat()} (limit {bound}:"
                    f" burst {limit.request_burst:g} + {limit.requests_per_minute:g}/min)"
                )
        figures[tier] = TierWindows(
            len(ordered), found[1.0][0], found[1.0][1], found[60.0][0], found[60.0][1]
        )
    return figures, breaches


def _tier_of_model(model: object) -> str:
    # the fake router's models are "fake-<tier>" (worker_service/model_router.py)
    return model.removeprefix("fake-") if isinstance(model, str) else ""


async def provider_rate(
    pool: asyncpg.Pool, log_dir: Path, limits: Mapping[str, RateLimit]
) -> tuple[dict[str, TierWindows], list[str], list[str]]:
    """(figures per tier, violations, notes): breaches are notes while a known defect."""
    calls = await asyncio.to_thread(provider_calls, log_dir)
    tiers = {r["id"]: r["tier"] for r in await pool.fetch(JOB_TIERS)}
    figures, breaches = tier_windows(calls, tiers, limits)
    if "provider_rate" in KNOWN_DEFECTS:
        return figures, [], [f"known defect (issue 25): {b}" for b in breaches]
    return figures, breaches, []


async def redacted_values(pool: asyncpg.Pool, registry: Registry) -> dict[str, list[str]]:
    """Per succeeded job of a redacting type: the text of its redacted fields as the fake
    provider answered them."""
    redacting = {d.job_type: d for d in registry if d.output_redaction}
    values: dict[str, list[str]] = {}
    for row in await pool.fetch(REDACTED_JOBS, list(redacting)):
        definition = redacting[row["job_type"]]
        locked = epb.LockedJob(
            job_id=row["id"],
            job_type=row["job_type"],
            attempt=1,
            input=struct_from_dict(json.loads(row["snapshot"])),
            user_id=row["user_id"],
            prompt_key=row["prompt_key"] or "",
            prompt_version=row["prompt_version"] or "",
        )
        job_input = definition.input_model.model_validate(json.loads(row["snapshot"]))
        result = await definition.execute(job_input, HandContext(locked))
        output = result.output.model_dump(mode="json")
        values[row["id"]] = [
            text
            for name in sorted(definition.output_redaction)
            if (text := _searchable(output.get(name)))
        ]
    return values


def _searchable(value: object) -> str:
    """A redacted value as it would show in text: a string itself, else its JSON."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) >= 8 else ""  # shorter values match by chance


async def redaction_leaks(
    pool: asyncpg.Pool, log_dir: Path, registry: Registry
) -> tuple[str, list[str], list[str]]:
    """The rule's figure, a violation per (job, channel) where a value showed, and a note
    per known leaking channel (KNOWN_LEAK_CHANNELS) with the jobs it showed for."""
    values = await redacted_values(pool, registry)
    if not values:
        return "no job of a redacting type succeeded", [], []
    parents = {r["id"]: r["parent"] for r in await pool.fetch(JOB_PARENTS)}
    rows: dict[str, list[tuple[str | None, str]]] = {}
    for table, owner in STORED.items():
        fetched = await pool.fetch(f"SELECT {owner} AS owner, t::text AS row FROM {table} t")
        rows[table] = [(r["owner"], r["row"]) for r in fetched]
    rows["logs"] = [(None, await asyncio.to_thread(_all_logs, log_dir))]
    leaked = leaking_channels(values, parents, rows)
    jobs = {job_id for ids in leaked.values() for job_id in ids}
    figure = f"{len(values)} redacted jobs checked, {len(jobs)} leaked" + (
        " (" + ", ".join(f"{c}: {len(ids)}" for c, ids in sorted(leaked.items())) + ")"
        if leaked
        else ""
    )
    violations = [
        f"redaction: job {job_id}'s redacted output shows in {channel}"
        for channel, ids in sorted(leaked.items())
        if channel not in KNOWN_LEAK_CHANNELS
        for job_id in ids
    ]
    notes = [
        f"known leak (issue 25): the redacted output of {len(ids)} jobs shows in {channel},"
        f" e.g. job {ids[0]}"
        for channel, ids in sorted(leaked.items())
        if channel in KNOWN_LEAK_CHANNELS
    ]
    return figure, violations, notes


def leaking_channels(
    values: Mapping[str, Sequence[str]],
    parents: Mapping[str, str | None],
    rows: Mapping[str, Sequence[tuple[str | None, str]]],
) -> dict[str, list[str]]:
    """Channel -> the redacted jobs whose values show in it. ``rows``: per channel, each
    row's text with the job it belongs to. A redacted job's values are searched in the rows
    that belong to no job (or to an id that is no job's), to the job itself and to its
    descendants; not in another job's rows, which may rightly hold the same text."""
    shared: dict[str, list[str]] = defaultdict(list)
    owned: dict[tuple[str, str], list[str]] = defaultdict(list)  # (channel, job) -> texts
    for channel, channel_rows in rows.items():
        for owner, text in channel_rows:
            if owner is None or owner not in parents:
                shared[channel].append(text)
                continue
            for job_id in _lineage(owner, parents):
                if job_id in values:
                    owned[channel, job_id].append(text)
    leaked: dict[str, list[str]] = defaultdict(list)
    for job_id, texts in sorted(values.items()):
        for channel in rows:
            searched = [*shared[channel], *owned[channel, job_id]]
            if any(value in text for text in searched for value in texts):
                leaked[channel].append(job_id)
    return leaked


def _lineage(job_id: str, parents: Mapping[str, str | None]) -> list[str]:
    """The job and its ancestors, nearest first: a row of a child is searched for its
    parent's redacted values (a child's input comes from its parent's output)."""
    chain: list[str] = []
    node: str | None = job_id
    while node is not None and node not in chain:
        chain.append(node)
        node = parents.get(node)
    return chain


def _all_logs(log_dir: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(log_dir.glob("*.log")))
