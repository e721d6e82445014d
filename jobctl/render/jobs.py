"""Jobs as jobctl shows them: the table of a listing, one job's detail (its hold,
dependencies, artifacts and timeline), the live lines of ``watch``, the failed jobs of the
dead letters. Status names and the terminal set are the client library's
(``durable_jobs_client.statuses``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from durable_jobs_client.protos import job_pb2
from durable_jobs_client.statuses import has_hold, hold_name, status_name
from google.protobuf import json_format

from jobctl.render.text import as_json, enum_name, table, when

BAR_WIDTH = 24
PAYLOAD_WIDTH = 72


def jobs_table(jobs: Sequence[job_pb2.Job]) -> str:
    if not jobs:
        return "no jobs"
    return table(
        ["ID", "TYPE", "STATUS", "QUEUE", "ATTEMPTS", "CREATED"],
        [
            [
                j.id,
                j.job_type,
                status_name(j.status),
                j.queue,
                f"{j.attempt_count}/{j.max_attempts}",
                when(j.created_at),
            ]
            for j in jobs
        ],
    )


def job_detail(job: job_pb2.Job) -> str:
    fields = [
        ("id", job.id),
        ("type", job.job_type),
        ("status", status_name(job.status)),
        ("queue", job.queue),
        ("priority", str(job.priority)),
        ("attempts", f"{job.attempt_count}/{job.max_attempts}"),
        ("progress", f"{job.progress:.0%}"),
        ("created", when(job.created_at)),
        ("started", when(job.started_at)),
        ("finished", when(job.finished_at)),
    ]
    if job.HasField("next_run_at"):
        fields.append(("next run", when(job.next_run_at)))
    fields.extend(hold_fields(job))
    if job.definition_version:
        fields.append(("version", job.definition_version))
    if job.concurrency_key:
        fields.append(("concurrency key", job.concurrency_key))
    if job.error_code:
        fields.append(("error", f"{job.error_code}: {job.error_message}"))
    if job.internal_error_message:
        fields.append(("internal", job.internal_error_message))
    if job.retried_from_job_id:
        fields.append(("retry of", job.retried_from_job_id))
    if job.HasField("output"):
        fields.append(("output", as_json(json_format.MessageToDict(job.output))))
    if job.parent_job_id:
        fields.append(("parent", job.parent_job_id))
    if job.child_job_ids:
        more = left_out(len(job.child_job_ids), job.child_jobs_total)
        fields.append(
            ("children", " ".join(job.child_job_ids) + (f" (+{more} more)" if more else ""))
        )
    if job.depends_on:
        more = left_out(len(job.depends_on), job.dependencies_total)
        fields.append(
            ("depends on", " ".join(job.depends_on) + (f" (+{more} more)" if more else ""))
        )
        policy = enum_name(job_pb2.DependencyPolicy, job.dependency_policy, "DEPENDENCY_POLICY_")
        fields.append(("if one fails", policy))
    if job.dependent_job_ids:
        more = left_out(len(job.dependent_job_ids), job.dependents_total)
        fields.append(
            ("dependents", " ".join(job.dependent_job_ids) + (f" (+{more} more)" if more else ""))
        )
    if job.total_input_tokens or job.total_output_tokens or job.total_cost_usd:
        fields.append(
            (
                "usage",
                f"{job.total_input_tokens} tokens in, {job.total_output_tokens} out, "
                f"${job.total_cost_usd:.6f}",
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
    width = max(len(k) for k, _ in fields)
    lines = [f"{k.ljust(width)}  {v}" for k, v in fields]
    lines.extend(artifact_lines(job.artifacts))
    if job.events:
        lines.append("timeline")
        if earlier := left_out(len(job.events), job.events_total):
            lines.append(f"  ({earlier} earlier events not shown)")
        for event in job.events:
            reason = f"  ({event.reason})" if event.reason else ""
            before = status_name(event.from_status) if event.from_status else "-"
            lines.append(
                f"  {when(event.at)}  {before} -> "
                f"{status_name(event.to_status)}  attempt {event.attempt}{reason}"
            )
    return "\n".join(lines)


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
        f"{payload_summary(json_format.MessageToDict(a.payload))}"
        for a in artifacts
    ]


def progress_line(job: job_pb2.Job) -> str:
    """``[########----------------]  35%  running  attempt 1/4``"""
    done = round(max(0.0, min(1.0, job.progress)) * BAR_WIDTH)
    bar = "#" * done + "-" * (BAR_WIDTH - done)
    return (
        f"[{bar}] {job.progress:4.0%}  {status_name(job.status)}"
        f"  attempt {job.attempt_count}/{job.max_attempts}"
    )


def status_change(job: job_pb2.Job) -> str:
    now = datetime.now(UTC).strftime("%H:%M:%S")
    detail = f"  {job.error_code}: {job.error_message}" if job.error_code else ""
    return f"{now}  {status_name(job.status)}  attempt {job.attempt_count}{detail}"


def failed_jobs_table(jobs: Sequence[job_pb2.Job]) -> str:
    if not jobs:
        return "none"
    return table(
        ["ID", "TYPE", "USER", "ATTEMPTS", "FINISHED", "ERROR"],
        [
            [
                j.id,
                j.job_type,
                j.user_id,
                f"{j.attempt_count}/{j.max_attempts}",
                when(j.finished_at),
                j.error_code or "-",
            ]
            for j in jobs
        ],
    )
