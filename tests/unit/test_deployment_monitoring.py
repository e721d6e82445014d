"""The deployment's monitoring, checked with what runs here: the PrometheusRules carry
exactly the rule files, every metrics port is scraped once, every dependency alert has a
runbook and promtool cases that fail when the rule is turned around, and KEDA scales each
queue on the engine's own gauges, counting the eligible backlog once per replica set."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.constants import Queue
from tests.unit.test_deployment import (
    ROOT,
    by_kind,
    containers,
    manifests,
    peer_name,
    pod_workloads,
    selects,
)
from tests.unit.test_observability_files import (
    RANGE_FUNCTIONS,
    aggregations_around,
    exported,
    metric_names,
    replicated,
)

__all__ = ["manifests"]  # the fixture, shared with test_deployment.py

# --- Prometheus: the operator's monitors and rules -------------------------------------

PROMETHEUS = ROOT / "deploy" / "prometheus"
# The rule files and the PrometheusRule that carries each (prometheusrule.yaml).
RULE_FILES = {"alerts.yaml": "durable-jobs", "dependency-alerts.yaml": "durable-jobs-dependencies"}
# Where Prometheus runs (kube-prometheus-stack's default): the NetworkPolicies let it scrape
# from there, and KEDA asks it there.
PROMETHEUS_NAMESPACE = "monitoring"


def rule_groups(name: str) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load((PROMETHEUS / name).read_text())["groups"]
    return groups


def rules_of(name: str) -> list[dict[str, Any]]:
    return [rule for group in rule_groups(name) for rule in group["rules"]]


def test_the_prometheus_rules_carry_exactly_the_rule_files(
    manifests: list[dict[str, Any]],
) -> None:
    """prometheusrule.yaml is a copy: each PrometheusRule's groups are its rule file's, so
    that Prometheus Operator users get the alerts promtool tests, no more and no fewer."""
    objects = [m for m in manifests if m["kind"] == "PrometheusRule"]
    assert {m["metadata"]["name"] for m in objects} == set(RULE_FILES.values())
    for file, name in RULE_FILES.items():
        rule = by_kind(manifests, "PrometheusRule", name)
        assert rule["apiVersion"] == "monitoring.coreos.com/v1"
        assert rule["spec"]["groups"] == rule_groups(file), (
            f"PrometheusRule {name} differs from deploy/prometheus/{file}: copy its groups"
        )
    alerts = [r["alert"] for file in RULE_FILES for r in rules_of(file)]
    assert len(alerts) == len(set(alerts))


def scraped_ports(manifests: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(workload, container port name) of every pod port a ServiceMonitor or PodMonitor
    scrapes."""
    found = set()
    for workload in pod_workloads(manifests):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        ports = {p["name"] for c in containers(workload) for p in c.get("ports", [])}
        for monitor in manifests:
            if monitor["kind"] == "PodMonitor" and selects(monitor["spec"]["selector"], labels):
                for endpoint in monitor["spec"]["podMetricsEndpoints"]:
                    assert endpoint["port"] in ports, (monitor["metadata"]["name"], endpoint)
                    found.add((peer_name(workload), endpoint["port"]))
            if monitor["kind"] != "ServiceMonitor":
                continue
            for service in manifests:
                if service["kind"] != "Service" or not (
                    monitor["spec"]["selector"]["matchLabels"].items()
                    <= service["metadata"]["labels"].items()
                    and service["spec"]["selector"].items() <= labels.items()
                ):
                    continue
                by_name = {p["name"]: p["targetPort"] for p in service["spec"]["ports"]}
                for endpoint in monitor["spec"]["endpoints"]:
                    if endpoint["port"] in by_name:
                        assert by_name[endpoint["port"]] in ports
                        found.add((peer_name(workload), by_name[endpoint["port"]]))
    return found


def test_every_metrics_port_is_scraped_once(manifests: list[dict[str, Any]]) -> None:
    """job_service through its Service, the workers (no Service) through their pods; the
    ports are the ones the services serve /metrics on."""
    monitors = [m for m in manifests if m["kind"] in ("ServiceMonitor", "PodMonitor")]
    assert {m["apiVersion"] for m in monitors} == {"monitoring.coreos.com/v1"}
    metrics_ports = {
        (w["metadata"]["name"], p["name"])
        for w in pod_workloads(manifests)
        for c in containers(w)
        for p in c.get("ports", [])
        if p["name"] == "metrics"
    }
    assert metrics_ports == {
        ("job-service", "metrics"),
        ("worker-service", "metrics"),
        ("nats", "metrics"),  # its exporter, beside each server
        ("postgres-exporter", "metrics"),
    }
    assert scraped_ports(manifests) == metrics_ports
    # the ServiceMonitor's selector also matches the headless Service, which has no
    # metrics port: each replica is scraped once
    [monitor] = [m for m in monitors if m["kind"] == "ServiceMonitor"]
    selected = [
        s
        for s in manifests
        if s["kind"] == "Service"
        and monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
        and any(p["name"] == "metrics" for p in s["spec"]["ports"])
    ]
    assert len(selected) == 1


def test_the_dependency_alerts_have_runbooks_and_name_their_exporter() -> None:
    """alerts.yaml's runbooks are `## <alert>` sections (tests/unit/test_runbooks.py); the
    exporter alerts' are `### <alert>` under one section, and each says what it needs."""
    runbooks = (ROOT / "docs" / "runbooks.md").read_text()
    headings = set(re.findall(r"^### (\S+)$", runbooks, re.M))
    for rule in rules_of("dependency-alerts.yaml"):
        name = rule["alert"]
        assert rule["annotations"]["runbook_url"] == f"docs/runbooks.md#{name.lower()}"
        assert name in headings, name
        assert re.search(r"Needs (prometheus-nats-exporter|postgres_exporter)\b", str(rule))
        # exporter metrics only: the engine's own belong in alerts.yaml
        assert "jobs_" not in rule["expr"], name


# Every rule added with the NATS and PostgreSQL alerts: promtool tests make each fire in one
# case and stay quiet in another (alerts_test.yaml).
TESTED_RULES = {"JobsDatabaseUnavailable"} | {
    rule["alert"] for rule in rules_of("dependency-alerts.yaml")
}


def test_every_dependency_rule_has_a_firing_and_a_quiet_promtool_case() -> None:
    tests = yaml.safe_load((PROMETHEUS / "alerts_test.yaml").read_text())
    assert set(tests["rule_files"]) == set(RULE_FILES)
    cases = [case for test in tests["tests"] for case in test.get("alert_rule_test", [])]
    firing = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert not TESTED_RULES - firing, sorted(TESTED_RULES - firing)
    assert not TESTED_RULES - quiet, sorted(TESTED_RULES - quiet)


def _promtool() -> str:
    import shutil

    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed (make lint-deploy installs it)")
    return found


def _promtool_test(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_promtool(), "test", "rules", "alerts_test.yaml"],
        cwd=directory,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("alert", sorted(TESTED_RULES))
@pytest.mark.parametrize("turned", ["as written", "never fires", "always fires"])
def test_the_promtool_cases_fail_a_rule_turned_around(
    alert: str, turned: str, tmp_path: Path
) -> None:
    """A test that passes whatever the rule says proves nothing: with the rule made to
    never fire, its firing case fails; made to always fire, its quiet case does. (Only the
    alert's own cases run: promtool's full run is `make lint-deploy`'s.)"""
    tests = yaml.safe_load((PROMETHEUS / "alerts_test.yaml").read_text())
    for test in tests["tests"]:
        test["alert_rule_test"] = [
            case for case in test.get("alert_rule_test", []) if case["alertname"] == alert
        ]
        test.pop("promql_expr_test", None)
    tests["tests"] = [test for test in tests["tests"] if test["alert_rule_test"]]
    (tmp_path / "alerts_test.yaml").write_text(yaml.safe_dump(tests))
    operator = {"as written": None, "never fires": "unless", "always fires": "or"}[turned]
    for file in RULE_FILES:
        loaded = yaml.safe_load((PROMETHEUS / file).read_text())
        for group in loaded["groups"]:
            for rule in group["rules"]:
                if rule["alert"] == alert and operator:
                    rule["expr"] = f"({rule['expr']}) {operator} on() vector(1)"
        (tmp_path / file).write_text(yaml.safe_dump(loaded))
    checked = _promtool_test(tmp_path)
    if operator is None:  # the cases themselves pass, so a failure below is the rule's
        assert checked.returncode == 0, checked.stdout + checked.stderr
    else:
        assert checked.returncode != 0, f"{alert}: its tests pass when it {turned}"


# --- KEDA: the eligible backlog ---------------------------------------------------------


def keda_queries(manifests: list[dict[str, Any]]) -> dict[str, str]:
    """The query of each trigger, by the queue it scales for."""
    scaled = by_kind(manifests, "ScaledObject", "worker-service")
    found = {}
    for trigger in scaled["spec"]["triggers"]:
        assert trigger["type"] == "prometheus", trigger["type"]
        query = trigger["metadata"]["query"]
        [queue] = re.findall(r'jobs_queue_eligible\{queue="([^"]+)"', query)
        found[queue] = query
    return found


def test_keda_scales_each_queue_on_the_engines_own_gauges(
    manifests: list[dict[str, Any]],
) -> None:
    """Not on the consumers' lag (it counts rate-limited and paused work): on
    jobs_queue_eligible and the gauges of held work, which every replica reports alike and
    the query takes with max."""
    scaled = by_kind(manifests, "ScaledObject", "worker-service")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert by_kind(manifests, "Deployment", scaled["spec"]["scaleTargetRef"]["name"])
    assert 1 <= scaled["spec"]["minReplicaCount"] < scaled["spec"]["maxReplicaCount"]
    assert scaled["spec"]["cooldownPeriod"] >= 60
    queries = keda_queries(manifests)
    assert sorted(queries) == sorted(Queue)
    known, gauges = exported(), replicated()
    for queue, query in queries.items():
        used = metric_names(query)
        assert used <= known, sorted(used - known)
        assert {"jobs_queue_eligible", "jobs_rate_limit_waiting"} <= used
        assert not any(name.startswith(("nats", "jetstream")) for name in used)
        for name in used & gauges:
            for match in re.finditer(rf"\b{name}\b", query):
                outer = [f for f in aggregations_around(query, match.start()) if f]
                first = next((f for f in outer if f not in RANGE_FUNCTIONS), None)
                assert first == "max", f"{queue}: {name} is not taken with max first"
        # the same query for every queue but the queue's name
        assert query.replace(queue, "Q") == next(iter(queries.values())).replace(
            next(iter(queries)), "Q"
        )
    for trigger in scaled["spec"]["triggers"]:
        server = trigger["metadata"]["serverAddress"]
        assert re.fullmatch(rf"http://[\w-]+\.{PROMETHEUS_NAMESPACE}\.svc:9090", server), server
        assert float(trigger["metadata"]["threshold"]) > 0


def test_keda_counts_the_eligible_backlog_once_per_replica_set(
    manifests: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The queries evaluated by promtool on two job_service replicas' gauges: a tier whose
    bucket is empty holds its due jobs back (shared out over the queues by their backlog);
    a tier with budget holds none; and without any rate-limited tier every eligible job is
    eligible."""
    queries = keda_queries(manifests)
    interactive, background = queries["ai-interactive"], queries["ai-background"]

    def series(name: str, labels: str, value: int, replicas: tuple[str, ...]) -> list[Any]:
        return [
            {"series": f'{name}{{instance="{r}",{labels}}}', "values": f"{value}x5"}
            for r in replicas
        ]

    both = ("job-service-0", "job-service-1")
    rate_limited = [
        *series("jobs_queue_eligible", 'queue="ai-interactive"', 30, both),
        *series("jobs_queue_eligible", 'queue="ai-background"', 90, both),
        *series("jobs_rate_limit_waiting", 'tier="primary"', 50, both),
        *series("jobs_rate_limit_requests_available", 'tier="primary"', 0, both),
        *series("jobs_rate_limit_waiting", 'tier="cheap"', 40, both),
        *series("jobs_rate_limit_requests_available", 'tier="cheap"', 5, both),
        *series("jobs_waiting_without_worker", 'x="y"', 10, both),
    ]
    unlimited = [
        *series("jobs_queue_eligible", 'queue="ai-interactive"', 30, both),
        *series("jobs_queue_eligible", 'queue="ai-background"', 0, both),
    ]
    # held: 50 (primary's bucket is empty) + 10 without a worker = 60 of 120 eligible
    expected = [
        (rate_limited, interactive, 15),
        (rate_limited, background, 45),
        (unlimited, interactive, 30),
        (unlimited, background, 0),
    ]
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {
                        "expr": query,
                        "eval_time": "2m",
                        "exp_samples": [{"labels": "{}", "value": v}],
                    }
                ],
            }
            for inputs, query, v in expected
        ],
    }
    (tmp_path / "alerts_test.yaml").write_text(yaml.safe_dump(tests))
    checked = _promtool_test(tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
