"""How jobctl shows things: aligned tables and key/value blocks for people, JSON for
scripts, and the one-line live view of ``watch``. One module per concern (``text``: the
shapes they share; ``jobs``, ``detail``, ``tree``, ``operators``, ``schedules``,
``usage``); this package names them all, so that a command writes ``render.jobs_table``."""

from durable_jobs_client.statuses import STATUS_NAMES as STATUSES
from durable_jobs_client.statuses import hold_name, is_terminal, status_name, status_value

from jobctl.render.detail import (
    PAYLOAD_WIDTH,
    artifact_lines,
    hold_fields,
    job_detail,
    payload_summary,
)
from jobctl.render.jobs import (
    BAR_WIDTH,
    failed_jobs_table,
    jobs_table,
    progress_line,
    status_change,
)
from jobctl.render.operators import (
    credentials_table,
    dead_events_table,
    definitions_table,
    queues_table,
    rate_limits_table,
    workers_table,
)
from jobctl.render.schedules import schedule_detail, schedule_state, schedules_table
from jobctl.render.text import as_dict, as_json, count, table, when
from jobctl.render.tree import job_tree, tree_job, tree_json
from jobctl.render.usage import usage_table

__all__ = [
    "BAR_WIDTH",
    "PAYLOAD_WIDTH",
    "STATUSES",
    "artifact_lines",
    "as_dict",
    "as_json",
    "count",
    "credentials_table",
    "dead_events_table",
    "definitions_table",
    "failed_jobs_table",
    "hold_fields",
    "hold_name",
    "is_terminal",
    "job_detail",
    "job_tree",
    "jobs_table",
    "payload_summary",
    "progress_line",
    "queues_table",
    "rate_limits_table",
    "schedule_detail",
    "schedule_state",
    "schedules_table",
    "status_change",
    "status_name",
    "status_value",
    "table",
    "tree_job",
    "tree_json",
    "usage_table",
    "when",
    "workers_table",
]
