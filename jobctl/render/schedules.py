"""Cron schedules: the table of a listing and one schedule's detail, with its next fire
times and recent runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from durable_jobs_client import to_python
from durable_jobs_client.protos import schedule_service_pb2 as spb
from google.protobuf.timestamp_pb2 import Timestamp

from jobctl.render.text import as_json, enum_name, is_set, moment, table, when


def fire_time(stamp: Timestamp, time_zone: str) -> str:
    """``2030-01-31T08:00:00Z (09:00 Europe/Berlin)``: in UTC, and on the schedule's own
    clock when it keeps another zone's."""
    shown = when(stamp)
    if not is_set(stamp) or time_zone in ("", "UTC", "Etc/UTC"):
        return shown
    try:
        local = moment(stamp).astimezone(ZoneInfo(time_zone))
    except (ZoneInfoNotFoundError, ValueError):
        return shown
    return f"{shown} ({local:%Y-%m-%d %H:%M} {time_zone})"


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
        ("input", as_json(to_python(template.input))),
        ("state", schedule_state(schedule)),
        ("overlap", enum_name(spb.OverlapPolicy, spec.overlap_policy, "OVERLAP_POLICY_")),
        ("catch-up", f"{window:g}s" if window else "default (60s)"),
        ("catch-up mode", enum_name(spb.CatchUpMode, spec.catch_up_mode, "CATCH_UP_MODE_")),
        ("start", when(spec.start_at)),
        ("end", when(spec.end_at)),
        ("next", fire_time(schedule.next_fire_at, spec.time_zone)),
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
        lines.extend(f"  {fire_time(t, spec.time_zone)}" for t in next_fire_times)
    if runs:
        lines.append("recent runs")
        for run in runs:
            outcome = enum_name(spb.ScheduleRun.Outcome, run.outcome, "OUTCOME_")
            detail = f"  ({run.detail})" if run.detail else ""
            lines.append(f"  {when(run.slot)}  {outcome}  {run.job_id or '-'}{detail}")
    return "\n".join(lines)
