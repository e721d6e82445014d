"""How jobctl shows things: aligned tables and key/value blocks for people, JSON for
scripts, and the one-line live view of ``watch``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from durable_jobs_client.protos import job_pb2
from durable_jobs_client.protos import schedule_service_pb2 as spb
from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

BAR_WIDTH = 24
_TERMINAL = frozenset(
    {job_pb2.JOB_STATUS_SUCCEEDED, job_pb2.JOB_STATUS_FAILED, job_pb2.JOB_STATUS_CANCELLED}
)


# The statuses by the names the command line takes (--status).
STATUSES = [
    "created",
    "queued",
    "running",
    "retrying",
    "cancel_requested",
    "succeeded",
    "failed",
    "cancelled",
]


def status_value(name: str) -> job_pb2.JobStatus:
    """``failed`` -> JOB_STATUS_FAILED."""
    return cast(job_pb2.JobStatus, job_pb2.JobStatus.Value(f"JOB_STATUS_{name.upper()}"))


def status_name(status: int) -> str:
    try:
        return str(job_pb2.JobStatus.Name(status)).removeprefix("JOB_STATUS_").lower()
    except ValueError:
        return str(status)


def is_terminal(job: job_pb2.Job) -> bool:
    return job.status in _TERMINAL


def as_dict(message: Message) -> dict[str, Any]:
    """The message as the JSON scripts get: proto field names, enums by name."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def as_json(value: Any) -> str:
    if isinstance(value, Message):
        value = as_dict(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def when(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return "-"
    moment = datetime.fromtimestamp(stamp.seconds + stamp.nanos / 1e9, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


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
        fields.append(("children", " ".join(job.child_job_ids)))
    if job.total_input_tokens or job.total_output_tokens or job.total_cost_usd:
        fields.append(
            (
                "usage",
                f"{job.total_input_tokens} tokens in, {job.total_output_tokens} out, "
                f"${job.total_cost_usd:.6f}",
            )
        )
    fields.append(("artifacts", str(len(job.artifacts))))
    if job.signals:
        fields.append(("signals", ", ".join(f"#{s.seq} {s.name}" for s in job.signals)))
    width = max(len(k) for k, _ in fields)
    lines = [f"{k.ljust(width)}  {v}" for k, v in fields]
    lines.extend(artifact_lines(job.artifacts))
    if job.events:
        lines.append("timeline")
        for event in job.events:
            reason = f"  ({event.reason})" if event.reason else ""
            before = status_name(event.from_status) if event.from_status else "-"
            lines.append(
                f"  {when(event.at)}  {before} -> "
                f"{status_name(event.to_status)}  attempt {event.attempt}{reason}"
            )
    return "\n".join(lines)


def hold_name(reason: int) -> str:
    """``REASON_QUEUE_PAUSED`` -> ``queue_paused``."""
    try:
        return str(job_pb2.JobHold.Reason.Name(reason)).removeprefix("REASON_").lower()
    except ValueError:
        return str(reason)


def hold_fields(job: job_pb2.Job) -> list[tuple[str, str]]:
    """Why a waiting job waits (AdminService.GetJob answers only): reason, key, until and
    the service's sentence."""
    if not job.HasField("hold") or job.hold.reason == job_pb2.JobHold.REASON_UNSPECIFIED:
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


def queues_table(queues: Sequence[Any]) -> str:
    if not queues:
        return "no queues"
    return table(
        ["QUEUE", "PAUSED", "WAITING", "ELIGIBLE", "RUNNING", "LIMIT", "PAUSED-SINCE"],
        [
            [
                q.name,
                "yes" if q.paused else "no",
                str(q.waiting),
                str(q.eligible),
                str(q.running),
                str(q.concurrency_limit) if q.concurrency_limit else "-",
                f"{when(q.paused_at)} by {q.paused_by}" if q.paused else "",
            ]
            for q in queues
        ],
    )


def rate_limits_table(limits: Sequence[Any], now: datetime | None = None) -> str:
    """A row per model tier; BLOCKED-UNTIL only while it lies ahead."""
    if not limits:
        return "no rate limits (JOBS_RATE_LIMITS is empty)"
    now = now or datetime.now(UTC)

    def blocked(stamp: Timestamp) -> str:
        if not stamp.seconds and not stamp.nanos:
            return "-"
        return when(stamp) if stamp.ToDatetime(tzinfo=UTC) > now else "-"

    return table(
        [
            "KEY",
            "REQ/MIN",
            "TOK/MIN",
            "FACTOR",
            "REQ-AVAIL",
            "TOK-AVAIL",
            "WAITING",
            "429S",
            "BLOCKED-UNTIL",
        ],
        [
            [
                r.key,
                f"{r.requests_per_minute:g}",
                f"{r.tokens_per_minute:g}" if r.tokens_per_minute else "-",
                f"{r.effective_factor:.2f}",
                f"{r.requests_available:.1f}",
                f"{r.tokens_available:.0f}" if r.tokens_per_minute else "-",
                str(r.waiting),
                str(r.throttled_total),
                blocked(r.blocked_until),
            ]
            for r in limits
        ],
    )


PAYLOAD_WIDTH = 72


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


def definitions_table(definitions: Sequence[Any]) -> str:
    return table(
        ["TYPE", "QUEUE", "TIMEOUT", "ATTEMPTS", "CONCURRENCY", "VERSION", "LABEL"],
        [
            [
                d.job_type,
                d.queue,
                f"{d.timeout_seconds:g}s",
                str(d.max_attempts),
                str(d.max_concurrency),
                d.version,
                d.label,
            ]
            for d in definitions
        ],
    )


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


def dead_events_table(events: Sequence[Any]) -> str:
    if not events:
        return "none"
    return table(
        ["EVENT", "JOB", "SUBJECT", "ATTEMPTS", "CREATED", "LAST-ERROR"],
        [
            [
                str(e.id),
                e.job_id,
                e.subject,
                str(e.attempts),
                when(e.created_at),
                e.last_error.splitlines()[0][:60] if e.last_error else "-",
            ]
            for e in events
        ],
    )


def credentials_table(credentials: Sequence[Any]) -> str:
    if not credentials:
        return "no credentials"
    return table(
        ["ID", "PROVIDER", "FINGERPRINT", "CREATED", "LAST-USED", "LABEL"],
        [
            [
                c.id,
                c.provider,
                c.fingerprint,
                when(c.created_at),
                when(c.last_used_at),
                c.label,
            ]
            for c in credentials
        ],
    )


def _enum_name(enum: Any, value: int, prefix: str) -> str:
    """``OVERLAP_POLICY_CANCEL_PREVIOUS`` -> ``cancel-previous``; 0 (unset) -> ``default``."""
    if not value:
        return "default"
    try:
        return str(enum.Name(value)).removeprefix(prefix).lower().replace("_", "-")
    except ValueError:
        return str(value)


def schedule_state(schedule: Any) -> str:
    return "paused" if schedule.paused else "active"


def schedules_table(schedules: Sequence[Any]) -> str:
    if not schedules:
        return "no schedules"
    return table(
        ["ID", "CRON", "TZ", "TYPE", "STATE", "NEXT"],
        [
            [
                s.id,
                s.spec.cron,
                s.spec.time_zone or "UTC",
                s.spec.job_template.job_type,
                schedule_state(s),
                when(s.next_fire_at),
            ]
            for s in schedules
        ],
    )


def schedule_detail(
    schedule: Any, next_fire_times: Sequence[Timestamp] = (), runs: Sequence[Any] = ()
) -> str:
    spec = schedule.spec
    template = spec.job_template
    window = spec.catch_up_window.ToTimedelta().total_seconds()
    fields = [
        ("id", schedule.id),
        ("cron", spec.cron),
        ("time zone", spec.time_zone or "UTC"),
        ("type", template.job_type),
        ("input", as_json(json_format.MessageToDict(template.input))),
        ("state", schedule_state(schedule)),
        ("overlap", _enum_name(spb.OverlapPolicy, spec.overlap_policy, "OVERLAP_POLICY_")),
        ("catch-up", f"{window:g}s" if window else "default (60s)"),
        ("catch-up mode", _enum_name(spb.CatchUpMode, spec.catch_up_mode, "CATCH_UP_MODE_")),
        ("start", when(spec.start_at)),
        ("end", when(spec.end_at)),
        ("next", when(schedule.next_fire_at)),
        ("created", when(schedule.created_at)),
    ]
    if template.HasField("priority"):
        fields.append(("priority", str(template.priority)))
    if template.credential_id:
        fields.append(("credential", template.credential_id))
    width = max(len(k) for k, _ in fields)
    lines = [f"{k.ljust(width)}  {v}" for k, v in fields]
    if next_fire_times:
        lines.append("next fire times")
        lines.extend(f"  {when(t)}" for t in next_fire_times)
    if runs:
        lines.append("recent runs")
        for run in runs:
            outcome = _enum_name(spb.ScheduleRun.Outcome, run.outcome, "OUTCOME_")
            detail = f"  ({run.detail})" if run.detail else ""
            lines.append(f"  {when(run.slot)}  {outcome}  {run.job_id or '-'}{detail}")
    return "\n".join(lines)


def usage_table(usage: Any) -> str:
    """DAY USER JOB_TYPE PROVIDER MODEL CALLS FAILED IN OUT COST, a row per group and a
    TOTAL row; a column not grouped by shows ``*`` (all of them)."""

    def cell(value: str | None) -> str:
        return "*" if value is None else (value or "-")

    def counts(t: Any) -> list[str]:
        return [
            str(t.calls),
            str(t.failed_calls),
            str(t.input_tokens),
            str(t.output_tokens),
            f"{t.cost_usd:.6f}",
        ]

    rows = [
        [
            cell(g.day.isoformat() if g.day else None),
            cell(g.user_id),
            cell(g.job_type),
            cell(g.provider),
            cell(g.model),
            *counts(g.totals),
        ]
        for g in usage.groups
    ]
    rows.append(["TOTAL", "", "", "", "", *counts(usage.totals)])
    return table(
        ["DAY", "USER", "JOB_TYPE", "PROVIDER", "MODEL", "CALLS", "FAILED", "IN", "OUT", "COST"],
        rows,
    )
