"""TLS and NATS users in deploy/k8s, checked statically (tests/deploy runs them): every
client of job_service and of NATS checks the server against the CA of the Secret the
server's certificate comes from, every NATS client signs in as a user nats.conf knows with
the password the server is given, no client mounts a private key, and the certificates the
docs' Deployment section makes name every host the clients and the routes dial (and are
made as written by the local openssl)."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.support.deploy.docs_commands import certificate_names
from tests.support.docs import section
from tests.unit.test_deployment import (
    by_kind,
    containers,
    env_of,
    manifests,
    pod_workloads,
)
from tests.unit.test_deployment_monitoring import rules_of

__all__ = ["manifests"]  # the fixture, shared with test_deployment.py

Manifests = list[dict[str, Any]]


def mounted(workload: dict[str, Any], container: dict[str, Any], path: str) -> tuple[str, str]:
    """(Secret, key) of the file ``path`` in ``container`` (AssertionError: not a Secret's)."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        prefix = mount["mountPath"].rstrip("/") + "/"
        if not path.startswith(prefix):
            continue
        secret = volumes[mount["name"]].get("secret")
        assert secret, f"{path}: volume {mount['name']} is not a Secret"
        file = path.removeprefix(prefix)
        items = {i["path"]: i["key"] for i in secret.get("items", [])}
        assert not items or file in items, f"{path}: the Secret's items do not give {file}"
        return secret["secretName"], items.get(file, file)
    raise AssertionError(f"{container['name']}: {path} is on no mounted volume")


def clients(manifests: Manifests, variable: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, container) of every container whose environment sets ``variable``."""
    return [
        (workload, container)
        for workload in pod_workloads(manifests)
        for container in containers(workload)
        if variable in env_of(container, manifests)
    ]


def nats_server(manifests: Manifests) -> tuple[dict[str, Any], dict[str, Any], str]:
    statefulset = by_kind(manifests, "StatefulSet", "nats")
    [server] = [c for c in containers(statefulset) if c["name"] == "nats"]
    return statefulset, server, by_kind(manifests, "ConfigMap", "nats-config")["data"]["nats.conf"]


def host_of(address: str) -> str:
    found = re.match(r"^(?:dns:///|[a-z]+://)?([a-z0-9.-]+):\d+", address)
    assert found, address
    return found.group(1)


def test_every_grpc_client_checks_job_service_against_its_certificates_ca(
    manifests: Manifests,
) -> None:
    deployment = by_kind(manifests, "Deployment", "job-service")
    [server] = containers(deployment)
    env = env_of(server, manifests)
    cert_secret, cert_key = mounted(deployment, server, env["JOBS_TLS_CERT_FILE"])
    assert (cert_key, mounted(deployment, server, env["JOBS_TLS_KEY_FILE"])) == (
        "tls.crt",
        (cert_secret, "tls.key"),
    )
    found = clients(manifests, "JOBS_JOB_SERVICE_TARGET")
    assert {w["metadata"]["name"] for w, _ in found} == {"worker-service", "console"}
    for workload, container in found:
        ca = env_of(container, manifests).get("JOBS_TLS_CA_FILE")
        assert ca, f"{workload['metadata']['name']}: no JOBS_TLS_CA_FILE"
        assert mounted(workload, container, ca) == (cert_secret, "ca.crt")


def test_every_nats_client_checks_the_server_and_signs_in_as_a_user_it_knows(
    manifests: Manifests,
) -> None:
    statefulset, server, conf = nats_server(manifests)
    cert = re.search(r"^\s*cert_file:\s*(\S+)", conf, re.M)
    assert cert and re.search(r"^\s*tls\s*\{", conf, re.M), "nats.conf serves no TLS"
    tls_secret, _ = mounted(statefulset, server, cert.group(1))
    # user → the Secret and key of the variable nats.conf reads its password from
    users = dict(re.findall(r"\{\s*user:\s*([\w-]+),\s*password:\s*\$(\w+)\s*\}", conf))
    server_env = {e["name"]: e.get("valueFrom", {}) for e in server["env"]}
    passwords = {
        user: (server_env[var]["secretKeyRef"]["name"], server_env[var]["secretKeyRef"]["key"])
        for user, var in users.items()
    }
    found = clients(manifests, "JOBS_NATS_URL")
    assert {w["metadata"]["name"] for w, _ in found} == {"job-service", "worker-service"}
    signed_in = set()
    for workload, container in found:
        env = env_of(container, manifests)
        name = workload["metadata"]["name"]
        assert env["JOBS_NATS_URL"].startswith("tls://"), name
        assert mounted(workload, container, env["JOBS_NATS_TLS_CA_FILE"]) == (tls_secret, "ca.crt")
        user = env["JOBS_NATS_USER"]
        assert user in passwords, f"{name}: NATS has no user {user}"
        assert mounted(workload, container, env["JOBS_NATS_PASSWORD_FILE"]) == passwords[user]
        signed_in.add(user)
    assert signed_in == set(passwords), "one user per service"


def test_no_client_mounts_a_servers_private_key(manifests: Manifests) -> None:
    """The servers' keys stay in the servers' pods: clients get the CA (Secret items)."""
    servers = {("job-service", "job-service"), ("nats", "nats")}
    for workload in pod_workloads(manifests):
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
        for container in containers(workload):
            if (workload["metadata"]["name"], container["name"]) in servers:
                continue
            for mount in container.get("volumeMounts", []):
                secret = volumes[mount["name"]].get("secret", {})
                if secret.get("secretName") in ("jobs-grpc-tls", "jobs-nats-tls"):
                    keys = [i["key"] for i in secret.get("items", [{"key": "everything"}])]
                    assert keys == ["ca.crt"], (workload["metadata"]["name"], mount["name"])


def test_the_docs_certificates_name_every_host_their_clients_dial(manifests: Manifests) -> None:
    names = {out: dns for out, (_, dns) in certificate_names(section("Deployment")).items()}
    assert set(names) == {"grpc.crt", "nats.crt"}
    dialled = {
        "grpc.crt": {
            host_of(env_of(c, manifests)["JOBS_JOB_SERVICE_TARGET"])
            for _, c in clients(manifests, "JOBS_JOB_SERVICE_TARGET")
        },
        "nats.crt": {
            host_of(env_of(c, manifests)["JOBS_NATS_URL"])
            for _, c in clients(manifests, "JOBS_NATS_URL")
        },
    }
    # the liveness check's name (it dials the pod's loopback) and the NATS routes
    [job_service] = containers(by_kind(manifests, "Deployment", "job-service"))
    dialled["grpc.crt"] |= set(
        re.findall(r'ssl_target_name_override", "([^"]+)"', str(job_service["livenessProbe"]))
    )
    dialled["nats.crt"] |= set(re.findall(r"nats://([a-z0-9.-]+):6222", nats_server(manifests)[2]))
    assert len(dialled["nats.crt"]) == 4 and len(dialled["grpc.crt"]) == 2, dialled
    for cert, hosts in dialled.items():
        for host in hosts:
            assert any(fnmatch.fnmatchcase(host, name) for name in names[cert]), (cert, host)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl here")
def test_the_docs_openssl_commands_make_leaf_certificates_the_ca_signed(tmp_path: Path) -> None:
    docs = section("Deployment")
    joined = re.sub(r"\\\n\s*", " ", docs)
    commands = [
        line.strip() for line in joined.splitlines() if line.strip().startswith("openssl req")
    ]
    assert len(commands) == 3
    for command in commands:
        done = subprocess.run(
            command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{command}\n{done.stderr}"
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    for out, (key_file, dns) in certificate_names(docs).items():
        assert (tmp_path / key_file).is_file()
        cert = x509.load_pem_x509_certificate((tmp_path / out).read_bytes())
        cert.verify_directly_issued_by(ca)
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.DNSName) == dns


# What each exporter exports, and what must be set for it (read in their sources:
# prometheus-nats-exporter v0.20.1 collector/healthz.go and jsz.go, whose metrics need
# -healthz and -jsz; postgres_exporter v0.20.1: pg_up always, the stat_database and
# settings collectors on by default).
EXPORTED = {
    "gnatsd_healthz_status": ("natsio/prometheus-nats-exporter", "-healthz"),
    "jetstream_stream_total_messages": ("natsio/prometheus-nats-exporter", "-jsz=streams"),
    "pg_up": ("quay.io/prometheuscommunity/postgres-exporter", None),
    "pg_stat_database_numbackends": ("quay.io/prometheuscommunity/postgres-exporter", None),
    "pg_settings_max_connections": ("quay.io/prometheuscommunity/postgres-exporter", None),
}


def test_the_deployed_exporters_export_what_the_dependency_alerts_read(
    manifests: Manifests,
) -> None:
    read = {
        name
        for rule in rules_of("dependency-alerts.yaml")
        for name in re.findall(r"\b((?:gnatsd|jetstream|pg)_[a-z_]+)\b", rule["expr"])
    }
    assert read == set(EXPORTED)
    deployed = {
        c["image"].partition(":")[0]: c for w in pod_workloads(manifests) for c in containers(w)
    }
    for metric in read:
        image, flag = EXPORTED[metric]
        assert image in deployed, f"{metric}: {image} is not deployed"
        if flag:
            assert flag in deployed[image].get("args", []), f"{metric}: {image} lacks {flag}"
