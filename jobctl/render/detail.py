"""One job as ``jobctl get`` shows it: who and what it is, how long it waited and ran and
on which worker, its input and output, its retries, its links, its durable steps, and its
timeline with each attempt's run time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from durable_jobs_client import to_python
from durable_jobs_client.protos import job_pb2
from durable_jobs_client.statuses import has_hold, hold_name, is_terminal, status_name

from jobctl.render.text import (
    as_json,
    between,
    block,
    duration,
    enum_name,
    is_set,
    moment,
    money,
    relative,
    when,
)

PAYLOAD_WIDTH = 72
JCS = "jcs:sha256:"
# Hex digits of an output hash shown (the whole hash is in -o json).
HASH_DIGITS = 12
_RUNNING = job_pb2.JOB_STATUS_RUNNING


def job_detail(job: job_pb2.Job, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    fields = [
        ("id", job.id),
        ("user", job.user_id or "-"),
        ("type", job.job_type),
        ("status", status_name(job.status)),
        ("queue", job.queue),
        ("priority", str(job.priority)),
        ("attempts", f"{job.attempt_count}/{job.max_attempts}"),
        ("progress", f"{job.progress:.0%}"),
        ("created", when(job.created_at)),
        ("started", when(job.started_at)),
        ("finished", when(job.finished_at)),
        *times(job, now),
    ]
    if job.worker_id:
        fields.append(("worker", job.worker_id))
    fields.extend(hold_fields(job))
    if job.definition_version:
        fields.append(("version", job.definition_version))
    if job.concurrency_key:
        fields.append(("concurrency key", job.concurrency_key))
    if job.error_code:
        fields.append(("error", error_text(job)))
    if job.internal_error_message:
        fields.append(("internal", job.internal_error_message))
    if job.retried_from_job_id:
        fields.append(("retry of", job.retried_from_job_id))
    if job.retried_as_job_ids:
        fields.append(("retried as", ", ".join(job.retried_as_job_ids)))
    fields.extend(input_fields(job))
    if job.HasField("output"):
        fields.append(("output", as_json(to_python(job.output))))
    if job.output_hash:
        fields.append(("output hash", hash_label(job.output_hash)))
    fields.extend(link_fields(job))
    if job.total_input_tokens or job.total_output_tokens or job.total_cost_usd:
        fields.append(
            (
                "usage",
                f"{job.total_input_tokens} tokens in, {job.total_output_tokens} out, "
                f"{money(job.total_cost_usd)}",
            )
        )
    artifacts_more = left_out(len(job.artifacts), job.artifacts_total)
    fields.append(
        (
            "artifacts",
            f"{len(job.artifacts)}"
            + (f" shown of {job.artifacts_total}" if artifacts_more else ""),
        )
    )
    if job.signals:
        earlier = left_out(len(job.signals), job.signals_total)
        shown = ", ".join(f"#{s.seq} {s.name}" for s in job.signals)
        fields.append(("signals", (f"({earlier} earlier) " if earlier else "") + shown))
    if job.steps:
        later = left_out(len(job.steps), job.steps_total)
        shown = ", ".join(step_label(step) for step in job.steps)
        fields.append(("steps", shown + (f" ({later} more)" if later else "")))
    lines = block(fields)
    lines.extend(artifact_lines(job.artifacts))
    lines.extend(timeline(job, now))
    return "\n".join(lines)


def step_label(step: job_pb2.DurableStep) -> str:
    """A recorded durable step: its position, name, the attempt that recorded it and, when
    it recorded a job error, the error's code."""
    failed = f" {step.error_code}" if step.error_code else ""
    return f"#{step.ordinal} {step.name} (attempt {step.attempt}{failed})"


def times(job: job_pb2.Job, now: datetime) -> list[tuple[str, str]]:
    """How long the job waited (created to started) and ran (started to finished), so far
    while it has not; when it runs next (a retry, or a delayed job)."""
    fields = []
    ended = is_terminal(job)
    if is_set(job.created_at):
        if is_set(job.started_at):
            fields.append(("waited", duration(between(job.created_at, job.started_at))))
        elif not ended:
            since = (now - moment(job.created_at)).total_seconds()
            fields.append(("waited", f"{duration(since)} so far"))
    if is_set(job.started_at):
        if is_set(job.finished_at):
            fields.append(("ran", duration(between(job.started_at, job.finished_at))))
        elif not ended:
            since = (now - moment(job.started_at)).total_seconds()
            fields.append(("ran", f"{duration(since)} so far"))
    if job.HasField("next_run_at") and not ended:
        label = "next retry" if job.status == job_pb2.JOB_STATUS_RETRYING else "next run"
        fields.append((label, relative(job.next_run_at, now)))
    if job.HasField("deadline"):
        fields.append(("deadline", when(job.deadline) if ended else relative(job.deadline, now)))
    return fields


def error_text(job: job_pb2.Job, *, say_current: bool = True) -> str:
    """The last failure, labelled with the attempt it ended: while a later attempt runs,
    the error shown is an earlier attempt's (``say_current``: and say so)."""
    text = f"{job.error_code}: {job.error_message}"
    if not job.error_attempt:
        return text  # a server that does not say which attempt
    label = f"(attempt {job.error_attempt} of {job.max_attempts})"
    if say_current and job.error_attempt < job.attempt_count and not is_terminal(job):
        label += f" [attempt {job.attempt_count} is {status_name(job.status)}]"
    return f"{label} {text}"


def input_fields(job: job_pb2.Job) -> list[tuple[str, str]]:
    """The input as stored: shown, too large to show, or removed; and the fields never
    stored (secrets)."""
    fields = []
    match job.input_state:
        case job_pb2.INPUT_STATE_SHOWN:
            fields.append(("input", as_json(to_python(job.input))))
        case job_pb2.INPUT_STATE_TOO_LARGE:
            fields.append(("input", f"not shown: {size(job.input_bytes)} of JSON (too large)"))
        case job_pb2.INPUT_STATE_REMOVED:
            fields.append(("input", "removed with the job's snapshot"))
    if job.input_withheld_fields:
        withheld = ", ".join(job.input_withheld_fields)
        fields.append(("withheld", f"{withheld} (never stored: not shown)"))
    return fields


def size(n: int) -> str:
    """``812 B``, ``70.3 KiB``, ``1.5 MiB``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 / 1024:.1f} MiB"


def hash_label(output_hash: str) -> str:
    """``jcs:sha256:1a2b3c4d5e6f...``: the scheme and the first 12 hex digits."""
    scheme = JCS if output_hash.startswith(JCS) else ""
    digits = output_hash.removeprefix(scheme)
    shown = digits[:HASH_DIGITS] + ("..." if len(digits) > HASH_DIGITS else "")
    return f"{scheme}{shown}" if scheme else f"{shown} (legacy sha256)"


def link_fields(job: job_pb2.Job) -> list[tuple[str, str]]:
    """Parent, children, dependencies and dependents (each list says what it left out)."""
    fields = []
    if job.parent_job_id:
        fields.append(("parent", job.parent_job_id))
    if job.child_job_ids:
        fields.append(("children", listed(job.child_job_ids, job.child_jobs_total)))
    if job.depends_on:
        fields.append(("depends on", listed(job.depends_on, job.dependencies_total)))
        policy = enum_name(job_pb2.DependencyPolicy, job.dependency_policy, "DEPENDENCY_POLICY_")
        fields.append(("if one fails", policy))
    if job.dependent_job_ids:
        fields.append(("dependents", listed(job.dependent_job_ids, job.dependents_total)))
    return fields


def listed(ids: Sequence[str], total: int) -> str:
    more = left_out(len(ids), total)
    return " ".join(ids) + (f" (+{more} more)" if more else "")


def left_out(shown: int, total: int) -> int:
    """How many of a list GetJob left out (``total`` is 0 from older servers)."""
    return max(total - shown, 0)


def hold_fields(job: job_pb2.Job) -> list[tuple[str, str]]:
    """Why a waiting job waits (AdminService.GetJob answers only): reason, key, until and
    the service's sentence."""
    if not has_hold(job):
        return []
    hold = job.hold
    fields = [("waiting", hold_name(hold.reason))]
    if hold.key:
        fields.append(("hold key", hold.key))
    if hold.HasField("until"):
        fields.append(("hold until", when(hold.until)))
    if hold.detail:
        fields.append(("hold detail", hold.detail))
    return fields


def payload_summary(payload: dict[str, Any], width: int = PAYLOAD_WIDTH) -> str:
    """The payload as one line of compact JSON (keys sorted: a Struct has no order), cut
    to ``width`` characters."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= width else text[: width - 3] + "..."


def artifact_lines(artifacts: Sequence[job_pb2.Artifact]) -> list[str]:
    """One indented line per artifact: type, id and the start of its payload (the whole
    payload is in ``--json``)."""
    if not artifacts:
        return []
    type_width = max(len(a.artifact_type) for a in artifacts)
    id_width = max(len(a.artifact_id) for a in artifacts)
    return [
        f"  {a.artifact_type.ljust(type_width)}  {a.artifact_id.ljust(id_width)}  "
        f"{payload_summary(to_python(a.payload))}"
        for a in artifacts
    ]


def timeline(job: job_pb2.Job, now: datetime) -> list[str]:
    """A line per status change, to the millisecond; an attempt's start says on which
    worker and how long it ran (to the next change, or so far)."""
    if not job.events:
        return []
    lines = ["timeline"]
    if earlier := left_out(len(job.events), job.events_total):
        lines.append(f"  ({earlier} earlier events not shown)")
    events = list(job.events)
    for n, event in enumerate(events):
        before = status_name(event.from_status) if event.from_status else "-"
        parts = [
            when(event.at, ms=True),
            f"{before} -> {status_name(event.to_status)}",
            f"attempt {event.attempt}",
        ]
        if event.worker_id:
            parts.append(f"on {event.worker_id}")
        if event.to_status == _RUNNING:
            if n + 1 < len(events):
                parts.append(f"ran {duration(between(event.at, events[n + 1].at))}")
            elif job.status == _RUNNING:
                since = (now - moment(event.at)).total_seconds()
                parts.append(f"running for {duration(since)}")
        if event.reason:
            parts.append(f"({event.reason})")
        lines.append("  " + "  ".join(parts))
    return lines
