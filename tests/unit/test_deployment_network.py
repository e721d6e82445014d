"""The deployment's NetworkPolicies, checked by evaluating them: the namespace denies what
no policy allows, every port is allowed from where it is used and from nowhere else, and
the pods reach what lies outside the namespace."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.unit.test_deployment import (
    K8S,
    by_kind,
    containers,
    env_of,
    manifests,
    peer_name,
    pod_workloads,
    selects,
)
from tests.unit.test_deployment_monitoring import PROMETHEUS_NAMESPACE, scraped_ports

__all__ = ["manifests"]  # the fixture, shared with test_deployment.py

# --- NetworkPolicy ----------------------------------------------------------------------

NAMESPACE = yaml.safe_load((K8S / "kustomization.yaml").read_text())["namespace"]


class Peer:
    """A pod (its namespace and labels, its ports by name) or, with no namespace, an
    address outside the cluster."""

    def __init__(
        self,
        namespace: str | None,
        labels: dict[str, str] | None = None,
        ports: dict[str, int] | None = None,
    ) -> None:
        self.namespace, self.labels, self.ports = namespace, labels or {}, ports or {}

    def __repr__(self) -> str:
        return f"Peer({self.namespace}, {self.labels})"


def _matches(peers: list[dict[str, Any]] | None, other: Peer) -> bool:
    """Whether a rule's from/to admits ``other`` (no from/to: everyone)."""
    if peers is None:
        return True
    for peer in peers:
        if "ipBlock" in peer:
            if other.namespace is None:
                return True
            continue
        if other.namespace is None:
            continue
        if "namespaceSelector" in peer:
            namespace_ok = selects(
                peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.namespace}
            )
        else:
            namespace_ok = other.namespace == NAMESPACE
        if namespace_ok and selects(peer.get("podSelector", {}), other.labels):
            return True
    return False


def _port_ok(
    ports: list[dict[str, Any]] | None, number: int, name: str | None, protocol: str
) -> bool:
    if ports is None:
        return True
    return any(p["port"] in (number, name) and p.get("protocol", "TCP") == protocol for p in ports)


def allowed(
    policies: list[dict[str, Any]],
    source: Peer,
    destination: Peer,
    port: int | str,
    protocol: str = "TCP",
) -> bool:
    """Kubernetes' rule: a connection needs the source's egress (when a policy isolates its
    egress) and the destination's ingress (likewise) to allow it, each by any one rule of
    any policy that selects the pod."""
    if isinstance(port, str):
        name: str | None = port
        number = destination.ports[port]
    else:
        name = next((n for n, p in destination.ports.items() if p == port), None)
        number = port

    def side(pod: Peer, kind: str, other: Peer) -> bool:
        if pod.namespace != NAMESPACE:
            return True  # not ours to judge
        isolating = [
            p
            for p in policies
            if kind.capitalize() in p["spec"]["policyTypes"]
            and selects(p["spec"]["podSelector"], pod.labels)
        ]
        if not isolating:
            return True
        peers_key = "from" if kind == "ingress" else "to"
        return any(
            _matches(rule.get(peers_key), other)
            and _port_ok(rule.get("ports"), number, name, protocol)
            for policy in isolating
            for rule in policy["spec"].get(kind, [])
        )

    return side(source, "egress", destination) and side(destination, "ingress", source)


def peers(manifests: list[dict[str, Any]]) -> dict[str, Peer]:
    """Every workload's pods as a peer, by peer_name."""
    return {
        peer_name(w): Peer(
            NAMESPACE,
            w["spec"]["template"]["metadata"]["labels"],
            {p["name"]: p["containerPort"] for c in containers(w) for p in c.get("ports", [])},
        )
        for w in pod_workloads(manifests)
    }


def connections(manifests: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(client workload, server workload, server's port name) for every address a
    workload's configuration names: a Service's host and port, resolved to the pods it
    selects and the container port it targets."""
    services = {s["metadata"]["name"]: s for s in manifests if s["kind"] == "Service"}
    workloads = {peer_name(w): w for w in pod_workloads(manifests)}
    found = set()
    for client in workloads.values():
        for container in containers(client):
            for value in env_of(container, manifests).values():
                match = re.match(r"^(?:dns:///|[a-z]+://)?([a-z0-9-]+):(\d+)", str(value or ""))
                if not match or match.group(1) not in services:
                    continue
                service = services[match.group(1)]
                [target] = [
                    p["targetPort"]
                    for p in service["spec"]["ports"]
                    if p["port"] == int(match.group(2))
                ]
                for server in workloads.values():
                    labels = server["spec"]["template"]["metadata"]["labels"]
                    if service["spec"]["selector"].items() <= labels.items():
                        found.add((peer_name(client), peer_name(server), target))
    return found


def network_policies(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == "NetworkPolicy"]


def test_the_namespace_denies_what_no_policy_allows_and_every_pod_has_its_own(
    manifests: list[dict[str, Any]],
) -> None:
    policies = network_policies(manifests)
    deny = by_kind(manifests, "NetworkPolicy", "default-deny")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    for workload in pod_workloads(manifests):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        own = [
            p
            for p in policies
            if p["spec"]["podSelector"] and selects(p["spec"]["podSelector"], labels)
        ]
        assert len(own) == 1, workload["metadata"]["name"]


# Ports used from outside the manifests: the API's clients (any namespace, e.g. an ingress
# controller's) and the console's users (through the ingress controller).
OUTSIDE = Peer("ingress-nginx", {"app.kubernetes.io/name": "ingress-nginx"})
USED_FROM_OUTSIDE = {("job-service", "grpc"), ("console", "http")}
# Ports only the kubelet's probes use (from the node: not subject to the policies).
PROBES_ONLY = {("nats", "monitor")}


def test_every_port_is_allowed_from_where_it_is_used(manifests: list[dict[str, Any]]) -> None:
    """Each address a workload's configuration names (JOBS_JOB_SERVICE_TARGET,
    JOBS_NATS_URL, JOBS_CONSOLE_METRICS_URL, ...), each port Prometheus scrapes, the
    NATS routes and the public ports: the client's egress and the server's ingress allow
    it. Every port a container exposes is among them."""
    policies, pods = network_policies(manifests), peers(manifests)
    prometheus = Peer(PROMETHEUS_NAMESPACE, {"app.kubernetes.io/name": "prometheus"})
    uses: list[tuple[Peer, str, str]] = [
        (pods[client], server, port) for client, server, port in connections(manifests)
    ]
    uses += [(prometheus, server, port) for server, port in scraped_ports(manifests)]
    uses += [(OUTSIDE, server, port) for server, port in USED_FROM_OUTSIDE]
    uses += [(pods["nats"], "nats", "cluster")]  # the routes between the servers
    used = {(server, port) for _, server, port in uses}
    assert {
        ("job-service", "grpc"),
        ("job-service", "metrics"),
        ("nats", "client"),
    } <= {(s, p) for c, s, p in uses if c.namespace == NAMESPACE}
    exposed = {(name, port) for name, pod in pods.items() for port in pod.ports}
    assert exposed - PROBES_ONLY <= used, sorted(exposed - PROBES_ONLY - used)
    for client, server, port in uses:
        assert allowed(policies, client, pods[server], port), (client, server, port)


def test_the_policies_keep_out_what_is_not_used(manifests: list[dict[str, Any]]) -> None:
    """The same judge refuses: NATS from another namespace, job_service's metrics from a
    pod that is not Prometheus or the console, the workers' metrics from the engine's own
    pods, PostgreSQL from a worker (it never gets the database), and anything to the
    migration Job."""
    policies, pods = network_policies(manifests), peers(manifests)
    stranger = Peer("default", {"app": "curious"})
    outside_db = Peer(None, ports={"postgres": 5432})
    assert not allowed(policies, stranger, pods["nats"], "client")
    assert not allowed(policies, stranger, pods["job-service"], "metrics")
    assert not allowed(policies, pods["console"], pods["worker-service"], "metrics")
    assert not allowed(policies, pods["worker-service"], outside_db, 5432)
    assert not allowed(policies, pods["console"], pods["nats"], 4222)  # egress: no NATS
    assert not allowed(policies, pods["job-service"], Peer(None), 443)
    assert not any(
        allowed(policies, pods[name], pods["migrate"], 8080)
        for name in ("job-service", "worker-service", "console")
    )
    # and the judge itself lets a selected pod through an allowing rule only
    assert allowed(policies, pods["job-service"], pods["nats"], "client")


def test_the_pods_reach_what_lies_outside_the_namespace(manifests: list[dict[str, Any]]) -> None:
    """DNS for every pod; PostgreSQL (outside the cluster) for job_service and the
    migrations; the model providers' HTTPS for the workers."""
    policies, pods = network_policies(manifests), peers(manifests)
    outside = Peer(None)
    dns = Peer("kube-system", {"k8s-app": "kube-dns"}, {"dns": 53})
    for name, pod in pods.items():
        for protocol in ("UDP", "TCP"):
            assert allowed(policies, pod, dns, 53, protocol), (name, protocol)
    for name in ("job-service", "migrate"):
        assert allowed(policies, pods[name], outside, 5432), name
    assert allowed(policies, pods["worker-service"], outside, 443)
    # every workload that reads the database URL may reach PostgreSQL
    readers = {
        peer_name(w)
        for w in pod_workloads(manifests)
        for c in containers(w)
        if any(e["name"] == "JOBS_DATABASE_URL" for e in c.get("env", []))
    }
    assert readers == {"job-service", "migrate"}
