"""Writes deploy/grafana/durable-jobs.json, the Grafana dashboard of the job engine, from
the panel list below (one place to edit; the JSON is committed for import as it is).

python scripts/grafana_dashboard.py [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "durable-jobs.json"
DS = {"type": "prometheus", "uid": "${datasource}"}
JOB_TYPE = 'job_type=~"$job_type"'

# (title, unit, [(expr, legend)], description)
ROWS: list[tuple[str, list[tuple[str, str, list[tuple[str, str]], str]]]] = [
    (
        "Jobs",
        [
            (
                "Jobs by status (waiting and running)",
                "short",
                [("sum by (status) (max by (queue, status) (jobs_queue_depth))", "{{status}}")],
                "Unfinished jobs from the database, by status.",
            ),
            (
                "Throughput: created and finished per second",
                "ops",
                [
                    (f"sum(rate(jobs_created_total{{{JOB_TYPE}}}[$__rate_interval]))", "created"),
                    (
                        f"sum by (outcome) (rate(jobs_finished_total{{{JOB_TYPE}}}"
                        "[$__rate_interval]))",
                        "{{outcome}}",
                    ),
                ],
                "Creates (idempotent repeats not counted) and terminal transitions.",
            ),
            (
                "Pick-up latency (due to locked)",
                "s",
                [
                    (
                        f"histogram_quantile({q}, sum by (le) (rate("
                        f"jobs_pickup_latency_seconds_bucket{{{JOB_TYPE}}}[$__rate_interval])))",
                        f"p{int(q * 100)}",
                    )
                    for q in (0.5, 0.95, 0.99)
                ],
                "From a job being due (created, or its retry's time) to a worker's lock.",
            ),
            (
                "Run duration on workers",
                "s",
                [
                    (
                        f"histogram_quantile({q}, sum by (le, job_type) (rate("
                        f"jobs_run_duration_seconds_bucket{{{JOB_TYPE}}}[$__rate_interval])))",
                        f"p{int(q * 100)} {{{{job_type}}}}",
                    )
                    for q in (0.5, 0.95)
                ],
                "Lock to outcome, per attempt.",
            ),
        ],
    ),
    (
        "Retries and failures",
        [
            (
                "Retries by error class",
                "ops",
                [
                    (
                        f"sum by (error_class) (rate(jobs_retries_total{{{JOB_TYPE}}}"
                        "[$__rate_interval]))",
                        "{{error_class}}",
                    )
                ],
                "Failed attempts scheduled for a retry.",
            ),
            (
                "Attempt outcomes by error class",
                "ops",
                [
                    (
                        "sum by (outcome) (rate(jobs_worker_attempts_total"
                        f'{{{JOB_TYPE}, outcome!="succeeded"}}[$__rate_interval]))',
                        "{{outcome}}",
                    )
                ],
                "Attempts that did not succeed, by error class (lease_lost: another worker "
                "owns the job).",
            ),
            (
                "Lease expiries and stale submits",
                "ops",
                [
                    ("sum(rate(jobs_lease_expiries_total[$__rate_interval]))", "lease expiries"),
                    (
                        "sum by (rpc) (rate(jobs_stale_submits_total[$__rate_interval]))",
                        "stale {{rpc}}",
                    ),
                ],
                "The reaper ending attempts of silent workers; refused late results.",
            ),
        ],
    ),
    (
        "Outbox and NATS",
        [
            (
                "Outbox backlog",
                "short",
                [("max by (status) (jobs_outbox_rows)", "{{status}}")],
                "Rows waiting to be published (pending, processing) and dead-lettered.",
            ),
            (
                "Oldest due outbox row",
                "s",
                [("max(jobs_outbox_oldest_due_age_seconds)", "age")],
                "Grows when NATS is unreachable; JobsOutboxStuck fires past 60 s.",
            ),
            (
                "Publish lag and failures",
                "s",
                [
                    (
                        "histogram_quantile(0.99, sum by (le) (rate("
                        "jobs_outbox_publish_lag_seconds_bucket[$__rate_interval])))",
                        "p99 lag",
                    ),
                    (
                        "sum(rate(jobs_outbox_publish_failures_total[$__rate_interval]))",
                        "failures/s",
                    ),
                ],
                "Due to acknowledged by JetStream.",
            ),
        ],
    ),
    (
        "Models",
        [
            (
                "Provider latency",
                "s",
                [
                    (
                        "histogram_quantile(0.95, sum by (le, provider, model) (rate("
                        "jobs_provider_request_duration_seconds_bucket[$__rate_interval])))",
                        "p95 {{provider}}/{{model}}",
                    )
                ],
                "Per HTTP request to a model provider, retries included.",
            ),
            (
                "Tokens by model",
                "short",
                [
                    (
                        "sum by (model, kind) (rate(jobs_provider_tokens_total[$__rate_interval]))",
                        "{{model}} {{kind}}",
                    )
                ],
                "Tokens per second.",
            ),
            (
                "Cost by model (USD per hour)",
                "currencyUSD",
                [
                    (
                        "sum by (model) (rate(jobs_provider_cost_usd_total[$__rate_interval]))"
                        " * 3600",
                        "{{model}}",
                    )
                ],
                "From the price table (JOBS_MODEL_PRICES).",
            ),
        ],
    ),
    (
        "Scheduling and rate limits",
        [
            (
                "Rate-limit factor by tier",
                "percentunit",
                [("max by (tier) (jobs_rate_limit_factor)", "{{tier}}")],
                "The share of a tier's configured rate in force (1 = full; halved by each "
                "429 from the provider).",
            ),
            (
                "Rate-limit buckets",
                "short",
                [
                    ("max by (tier) (jobs_rate_limit_requests_available)", "requests {{tier}}"),
                    ("max by (tier) (jobs_rate_limit_tokens_available)", "tokens {{tier}}"),
                ],
                "What each tier's bucket holds now.",
            ),
            (
                "Jobs held back",
                "short",
                [
                    ("max by (tier) (jobs_rate_limit_waiting)", "rate-limited {{tier}}"),
                    ("max(jobs_waiting_without_worker)", "no worker runs their version"),
                ],
                "Due jobs waiting for a rate-limited tier, or for a worker of their "
                "definition's version.",
            ),
            (
                "429s and unused work tokens",
                "short",
                [
                    ("max by (tier) (jobs_rate_limit_throttled)", "429s {{tier}}"),
                    (
                        "sum by (outcome) (rate(jobs_work_tokens_unused_total[$__rate_interval]))",
                        "tokens {{outcome}}/s",
                    ),
                ],
                "Provider 429s per tier (all time) and dispatch messages a claim could not use.",
            ),
        ],
    ),
    (
        "Services",
        [
            (
                "RPC rate by method and code",
                "reqps",
                [
                    (
                        "sum by (grpc_method, grpc_code) (rate("
                        "jobs_grpc_server_handled_total[$__rate_interval]))",
                        "{{grpc_method}} {{grpc_code}}",
                    )
                ],
                "Every RPC job_service answered.",
            ),
            (
                "RPC latency p99 by method",
                "s",
                [
                    (
                        "histogram_quantile(0.99, sum by (le, grpc_method) (rate("
                        "jobs_grpc_server_handling_seconds_bucket[$__rate_interval])))",
                        "{{grpc_method}}",
                    )
                ],
                "Unary RPCs (WatchJob streams are not timed).",
            ),
            (
                "Worker slots in use",
                "short",
                [
                    ("sum by (queue) (jobs_worker_slots_in_use)", "in use {{queue}}"),
                    ("sum by (queue) (jobs_worker_slots)", "slots {{queue}}"),
                ],
                "All workers' executor slots per queue.",
            ),
            (
                "Versions running",
                "short",
                [("count by (service, version) (jobs_build_info)", "{{service}} {{version}}")],
                "Processes per service and version (a rollout shows two).",
            ),
        ],
    ),
    (
        "Schedules",
        [
            (
                "Schedule slots",
                "short",
                [
                    (
                        "sum by (outcome) (rate(jobs_schedule_runs_total[$__rate_interval]))",
                        "{{outcome}}/s",
                    )
                ],
                "Slots handled: fired, skipped (missed, overlap), refused, triggered.",
            ),
            (
                "Fire lag",
                "s",
                [
                    (
                        "histogram_quantile(0.99, sum by (le) (rate("
                        "jobs_schedule_fire_lag_seconds_bucket[$__rate_interval])))",
                        "p99",
                    )
                ],
                "A slot's time to its job committed.",
            ),
        ],
    ),
]


def dashboard() -> dict[str, object]:
    panels: list[dict[str, object]] = []
    y = 0
    next_id = 1
    for row_title, row_panels in ROWS:
        panels.append(
            {
                "type": "row",
                "id": next_id,
                "title": row_title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id += 1
        y += 1
        width = 24 // len(row_panels)
        for i, (title, unit, targets, description) in enumerate(row_panels):
            panels.append(
                {
                    "type": "timeseries",
                    "id": next_id,
                    "title": title,
                    "description": description,
                    "datasource": DS,
                    "gridPos": {"h": 8, "w": width, "x": i * width, "y": y},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                    "targets": [
                        {"refId": chr(ord("A") + n), "datasource": DS, "expr": e, "legendFormat": f}
                        for n, (e, f) in enumerate(targets)
                    ],
                }
            )
            next_id += 1
        y += 8
    return {
        "uid": "durable-jobs",
        "title": "Durable jobs",
        "description": "The job engine: jobs, retries, outbox, models, services.",
        "tags": ["durable-jobs"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                },
                {
                    "name": "job_type",
                    "type": "query",
                    "datasource": DS,
                    "query": "label_values(jobs_created_total, job_type)",
                    "includeAll": True,
                    "multi": True,
                    "allValue": ".*",
                    "current": {"text": "All", "value": "$__all"},
                    "refresh": 2,
                },
            ]
        },
        "panels": panels,
    }


def main() -> int:
    text = json.dumps(dashboard(), indent=2) + "\n"
    if "--check" in sys.argv:
        if OUT.read_text() != text:
            print(f"{OUT} is stale: run python scripts/grafana_dashboard.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
