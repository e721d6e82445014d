"""The alert rules and the Grafana dashboard in deploy/ name only metrics the services
export: every metric name in their PromQL expressions is one that job_service or
worker_service registers (with the sample suffixes Prometheus adds), so that a renamed
metric cannot leave an alert silently evaluating nothing.

promtool checks the rules' syntax (`make lint-deploy`); this test needs no promtool.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

# every module that registers metrics, as the two services import them
import job_service.adapters.grpc.rpc_metrics
import job_service.metrics
import shared.metrics
import worker_service.metrics
from tests.support.docs import section

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "durable-jobs.json"

assert job_service.metrics and worker_service.metrics and shared.metrics
assert job_service.adapters.grpc.rpc_metrics

KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset", "inf", "nan",
}  # fmt: skip
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> set[str]:
    """Every sample name the services' metrics produce."""
    names: set[str] = set()
    for family in REGISTRY.collect():
        if not family.name.startswith("jobs_"):
            continue
        for suffix in SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not functions, keywords, labels)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery durations
    # label lists of by/without/on/ignoring/group_*
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", text):
        name = match.group(1)
        if name.lower() not in KEYWORDS and not re.fullmatch(r"\d+\w*", name):
            names.add(name)
    return names


def alert_exprs() -> list[tuple[str, str]]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [(rule["alert"], rule["expr"]) for group in groups for rule in group["rules"]]


def dashboard_exprs() -> list[tuple[str, str]]:
    board: dict[str, Any] = json.loads(DASHBOARD.read_text())
    found = [
        (str(panel["title"]), str(target["expr"]))
        for panel in board["panels"]
        for target in panel.get("targets", [])
    ]
    for variable in board["templating"]["list"]:
        query = variable.get("query", "")
        if query.startswith("label_values("):
            found.append((variable["name"], query[len("label_values(") :].split(",")[0]))
    return found


def test_the_parser_finds_metric_names_and_nothing_else() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, grpc_method) (rate(jobs_a_bucket{x=~"a|b"}[5m])))'
        " / on() sum(jobs_b_total offset 5m) > 0.05 and absent(jobs_c)"
    )
    assert metric_names(expr) == {"jobs_a_bucket", "jobs_b_total", "jobs_c"}


@pytest.mark.parametrize(
    ("source", "exprs"), [("alerts", alert_exprs), ("dashboard", dashboard_exprs)]
)
def test_every_metric_the_alerts_and_dashboard_use_exists(source: str, exprs: Any) -> None:
    known = exported()
    assert {"jobs_grpc_server_handled_total", "jobs_build_info", "jobs_worker_slots"} <= known
    pairs = exprs()
    assert pairs, source
    missing = {
        (where, name) for where, expr in pairs for name in metric_names(expr) if name not in known
    }
    assert not missing, f"{source} uses metrics no service exports: {sorted(missing)}"


def test_the_alerts_cover_what_an_operator_is_paged_for() -> None:
    used = {name for _, expr in alert_exprs() for name in metric_names(expr)}
    assert {
        "jobs_outbox_oldest_due_age_seconds",  # stuck outbox
        "jobs_queue_depth",  # growing backlog
        "jobs_lease_expiries_total",
        "jobs_grpc_server_handled_total",  # error ratio
        "jobs_outbox_rows",  # dead letters
        "jobs_worker_slots",  # no workers
    } <= used


def test_the_dashboard_json_is_what_its_generator_writes() -> None:
    checked = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "grafana_dashboard.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


# Functions over one series' samples: they keep the replica apart, the aggregation above
# them decides.
RANGE_FUNCTIONS = {
    "rate", "irate", "increase", "delta", "idelta", "deriv", "changes", "resets",
    "avg_over_time", "min_over_time", "max_over_time", "last_over_time", "predict_linear",
    "clamp_min", "clamp_max", "abs",
}  # fmt: skip


def replicated() -> set[str]:
    return {gauge.describe()[0].name for gauge in job_service.metrics.REPLICATED_GAUGES}


def aggregations_around(expr: str, at: int) -> list[str]:
    """The functions and aggregation operators enclosing position ``at``, innermost first
    (a ``by (...)``/``without (...)`` clause skipped)."""
    found, depth = [], 0
    for i in range(at - 1, -1, -1):
        if expr[i] == ")":
            depth += 1
        elif expr[i] == "(":
            if depth:
                depth -= 1
                continue
            head = expr[:i].rstrip()
            clause = re.search(r"\b(by|without)\s*\([^()]*\)\s*$", head)
            if clause:
                head = head[: clause.start()].rstrip()
            word = re.search(r"([a-z_]+)\s*$", head)
            found.append(word.group(1) if word else "")
    return found


def test_the_aggregation_finder() -> None:
    expr = 'sum by (status) (max by (queue, status) (deriv(jobs_queue_depth{a="b"}[5m])))'
    assert aggregations_around(expr, expr.index("jobs_")) == ["deriv", "max", "sum"]


@pytest.mark.parametrize(
    ("source", "exprs"), [("alerts", alert_exprs), ("dashboard", dashboard_exprs)]
)
def test_replicated_gauges_are_taken_once_not_summed_over_replicas(source: str, exprs: Any) -> None:
    """The documented rule (section "Metrics (Prometheus)"): a gauge every replica reports
    from the database is aggregated with max across replicas first (a sum counts it once per
    replica: the default two replicas doubled the backlog on the dashboard and in
    JobsBacklogGrowing)."""
    names = replicated()
    wrong = []
    for where, expr in exprs():
        for name in names:
            for match in re.finditer(rf"\b{name}\b", expr):
                outer = [f for f in aggregations_around(expr, match.start()) if f]
                first = next((f for f in outer if f not in RANGE_FUNCTIONS), None)
                if first != "max":
                    wrong.append((where, expr))
    assert not wrong, f"{source}: replicated gauges not taken with max first: {wrong}"


def test_the_docs_mark_exactly_the_replicated_gauges() -> None:
    """The metrics table (section "Metrics (Prometheus)", in the README or a docs page)
    marks "(database)" exactly the gauges every replica reports."""
    table = section("Metrics (Prometheus)")
    rows = re.findall(r"^\| (`jobs_[^|]*) \|.*\(database\) \|$", table, re.M)
    marked = {name for row in rows for name in re.findall(r"`(jobs_\w+)`", row)}
    assert marked == replicated()
