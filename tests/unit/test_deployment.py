"""The deployment files, checked with what runs here (no Docker engine, no cluster): they
parse, every command names a module that exists, every JOBS_* variable they set is a
setting the service reads, health checks and probes are where they must be, grace periods
cover the services' own, and KEDA watches the stream and consumers the workers use."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from console.settings import ConsoleSettings
from devstack.embedded import nats_server_binary
from job_service.settings import JobServiceSettings
from shared.constants import Queue
from tests.support.certs import make_certs
from tests.support.docs import section
from tests.unit.test_observability_files import (
    RANGE_FUNCTIONS,
    aggregations_around,
    exported,
    metric_names,
    replicated,
)
from worker_service.model_router import ModelSettings
from worker_service.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
# the Kubernetes version the manifests are validated against (Makefile: K8S_VERSION)
K8S_VERSION = "1.34.0"
# kinds kubernetes-validate has no schema for (the Makefile leaves their files out)
CUSTOM_RESOURCES = ("ScaledObject", "ServiceMonitor", "PodMonitor", "PrometheusRule")


def env_names(settings: type[Any]) -> set[str]:
    return {f"JOBS_{name.upper()}" for name in settings.model_fields}


JOB_SERVICE_ENV = env_names(JobServiceSettings)
# a worker also reads its model tiers (worker_service.model_router)
WORKER_ENV = env_names(WorkerSettings) | env_names(ModelSettings)
CONSOLE_ENV = env_names(ConsoleSettings)


def module_of(command: list[str]) -> str:
    assert command[:2] == ["python", "-m"], command
    module = command[2]
    assert importlib.util.find_spec(module) is not None, f"no module {module}"
    return module


def settings_for(module: str) -> set[str]:
    return {"job_service": JOB_SERVICE_ENV, "worker_service": WORKER_ENV, "console": CONSOLE_ENV}[
        module
    ]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded["services"]


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    return [
        doc
        for path in sorted(K8S.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") != "Kustomization"
    ]


def by_kind(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


def test_compose_services_run_existing_modules_with_settings_they_read(
    compose: dict[str, Any],
) -> None:
    assert {"postgres", "nats", "migrate", "job_service", "worker_service"} <= compose.keys()
    for name in ("migrate", "job_service", "worker_service", "console"):
        service = compose[name]
        assert service["image"] == "durable-jobs:local" and service["build"] == "."
        module = module_of(service["command"])
        unknown = set(service["environment"]) - settings_for(module)
        assert not unknown, f"{name} sets variables no setting reads: {unknown}"
        for dependency in service.get("depends_on", {}):
            assert dependency in compose
    # the worker never gets the database
    assert "JOBS_DATABASE_URL" not in compose["worker_service"]["environment"]
    assert compose["worker_service"]["deploy"]["replicas"] >= 2
    assert compose["job_service"]["depends_on"]["migrate"] == {
        "condition": "service_completed_successfully"
    }


def test_compose_health_checks_gate_start_up(compose: dict[str, Any]) -> None:
    for name in ("postgres", "nats", "job_service", "worker_service"):
        assert compose[name]["healthcheck"]["test"], name
    assert "/readyz" in " ".join(compose["worker_service"]["healthcheck"]["test"])
    for name in ("migrate", "job_service"):
        assert compose[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert compose["worker_service"]["depends_on"]["job_service"]["condition"] == (
        "service_healthy"
    )


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)s", duration)
    assert match, duration
    return float(match.group(1))


def test_compose_stop_grace_covers_the_services_own(compose: dict[str, Any]) -> None:
    service = compose["job_service"]
    env = service["environment"]
    own = float(env["JOBS_SHUTDOWN_DELAY_S"]) + float(env["JOBS_SHUTDOWN_GRACE_S"])
    assert _seconds(service["stop_grace_period"]) > own
    worker = compose["worker_service"]
    grace = float(worker["environment"]["JOBS_WORKER_SHUTDOWN_GRACE_S"])
    assert _seconds(worker["stop_grace_period"]) > grace


def test_nats_config_is_valid_with_jetstream_fsync_always(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    nats = compose["nats"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in nats["volumes"] if v.startswith("./")}
    config_path = nats["command"][nats["command"].index("-c") + 1]
    source = ROOT / mounted[config_path]
    text = source.read_text()
    assert re.search(r"^\s*sync_interval:\s*always\s*$", text, re.M)
    assert re.search(r"^\s*jetstream\s*\{", text, re.M)
    # nats-server itself validates the file (with a store directory that exists here)
    local = tmp_path / "nats.conf"
    local.write_text(text.replace("/data", str(tmp_path / "store")))
    checked = subprocess.run(
        [str(nats_server_binary()), "-c", str(local), "-t"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr + checked.stdout


def test_dockerfile_copies_every_package_it_installs() -> None:
    text = (ROOT / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (\S+) \./", text, re.M)
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    installed = {p.rstrip("*") for p in packages["packages"]["find"]["include"]}
    assert installed <= set(copied)
    for source in copied:
        assert (ROOT / source).exists(), source
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M)
    assert cmd is not None
    module_of(yaml.safe_load(cmd.group(1)))


def test_the_image_installs_the_client_library_with_dependencies_from_the_lock() -> None:
    """jobctl imports durable_jobs_client: the image installs it, and pip may not resolve
    anything there (its dependencies come pinned and hashed from requirements.lock)."""
    text = (ROOT / "Dockerfile").read_text()
    assert "COPY client ./client" in text
    assert re.search(r"^RUN pip install --no-deps --no-build-isolation \./client\b", text, re.M)
    lock = (ROOT / "requirements.lock").read_text()
    pinned = dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+) \\$", lock, re.M))
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]
    for requirement in client["dependencies"]:
        assert _requirement_name(requirement) in pinned, requirement


def containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    return result


def env_of(container: dict[str, Any], manifests: list[dict[str, Any]]) -> dict[str, Any]:
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    for source in container.get("envFrom", []):
        env.update(by_kind(manifests, "ConfigMap", source["configMapRef"]["name"])["data"])
    return env


def engine_workloads(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Deployments and Jobs of the engine's image (not the exporters')."""
    return [
        m
        for m in manifests
        if m["kind"] in ("Deployment", "Job")
        and all(c["image"].startswith("durable-jobs:") for c in containers(m))
    ]


def test_k8s_workloads_run_existing_modules_with_settings_they_read(
    manifests: list[dict[str, Any]],
) -> None:
    workloads = engine_workloads(manifests)
    assert len(workloads) == 4  # migrate, job-service, worker-service, console
    for workload in workloads:
        for container in containers(workload):
            module = module_of(container["command"])
            unknown = set(env_of(container, manifests)) - settings_for(module)
            assert not unknown, f"{workload['metadata']['name']}: unknown variables {unknown}"


def test_k8s_job_service_is_probed_as_a_kubelet_can_over_tls_and_served(
    manifests: list[dict[str, Any]],
) -> None:
    """The kubelet's grpc probe speaks plaintext, and the port serves TLS only: start-up
    and readiness open the port, liveness asks the gRPC health service over TLS from
    inside the pod (tests/deploy runs that command as the kubelet would)."""
    deployment = by_kind(manifests, "Deployment", "job-service")
    [container] = containers(deployment)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = env_of(container, manifests)
    assert int(env["JOBS_GRPC_PORT"]) == ports["grpc"]
    assert int(env["JOBS_METRICS_PORT"]) == ports["metrics"]
    assert env["JOBS_GRPC_HOST"] == "0.0.0.0"
    assert env["JOBS_TLS_CERT_FILE"] and env["JOBS_TLS_KEY_FILE"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert "grpc" not in container[probe], f"{probe}: the kubelet's grpc probe has no TLS"
    for probe in ("startupProbe", "readinessProbe"):
        assert container[probe]["tcpSocket"]["port"] in ("grpc", ports["grpc"])
    command = container["livenessProbe"]["exec"]["command"]
    assert command[:2] == ["python", "-c"]
    check = command[2]
    assert f'"127.0.0.1:{ports["grpc"]}"' in check
    assert "grpc.secure_channel" in check and "HealthStub" in check
    [ca] = re.findall(r'open\("([^"]+)"', check)
    assert ca.rsplit("/", 1)[0] == env["JOBS_TLS_CERT_FILE"].rsplit("/", 1)[0]
    assert container["livenessProbe"]["timeoutSeconds"] >= 5  # an interpreter starts
    own = float(env["JOBS_SHUTDOWN_DELAY_S"]) + float(env["JOBS_SHUTDOWN_GRACE_S"])
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > own

    service = by_kind(manifests, "Service", "job-service")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports.keys()


def test_k8s_worker_grace_covers_its_drain(manifests: list[dict[str, Any]]) -> None:
    deployment = by_kind(manifests, "Deployment", "worker-service")
    [container] = containers(deployment)
    env = env_of(container, manifests)
    assert "JOBS_DATABASE_URL" not in env
    # every replica through the headless Service, calls balanced by the client
    assert env["JOBS_JOB_SERVICE_TARGET"] == "dns:///job-service-headless:50051"
    headless = by_kind(manifests, "Service", "job-service-headless")
    assert headless["spec"]["clusterIP"] == "None"
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    needed = float(pre_stop[1]) + float(env["JOBS_WORKER_SHUTDOWN_GRACE_S"]) + 10
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= needed


def test_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(listed) == on_disk


def pod_workloads(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] in ("Deployment", "StatefulSet", "Job")]


def test_k8s_pods_run_non_root_on_a_read_only_root_without_capabilities(
    manifests: list[dict[str, Any]],
) -> None:
    workloads = pod_workloads(manifests)
    # migrate, job-service, worker-service, console, nats, postgres-exporter
    assert len(workloads) == 6
    for workload in workloads:
        name = workload["metadata"]["name"]
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] > 0, name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        assert pod["automountServiceAccountToken"] is False, name
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            assert "add" not in context["capabilities"], name
            assert container["resources"]["limits"]["memory"], name
            # secrets only by reference (or as a mounted Secret's file), never a value
            for env in container.get("env", []):
                if env["name"].endswith("_FILE"):
                    continue  # tests/unit/test_deployment_tls.py: each is a Secret's file
                if any(word in env["name"] for word in ("TOKEN", "KEY", "PASSWORD", "URL")):
                    assert "value" not in env or not env["value"] or "://" in env["value"], env


def test_k8s_images_are_pinned_and_nats_is_the_version_the_tests_run(
    manifests: list[dict[str, Any]], compose: dict[str, Any]
) -> None:
    images = [c["image"] for w in pod_workloads(manifests) for c in containers(w)]
    for image in images:
        _, _, tag = image.partition(":")
        assert tag and tag != "latest" and re.fullmatch(r"[\w.-]+", tag), image
    assert len({i for i in images if i.startswith("durable-jobs:")}) == 1
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    [override] = kustomization["images"]
    assert f"durable-jobs:{override['newTag']}" in images
    # one NATS version everywhere: the StatefulSet, compose, and the binary tests run
    [nats_image] = [i for i in images if i.startswith("nats:")]
    assert compose["nats"]["image"] == nats_image
    version = subprocess.run(
        [str(nats_server_binary()), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert f"v{nats_image.split(':')[1].removesuffix('-alpine')}" in version, version
    for name in ("postgres", "nats"):
        assert re.search(r":\d+\.\d+", compose[name]["image"]), compose[name]["image"]


def test_k8s_every_workload_has_a_disruption_budget_and_spreads(
    manifests: list[dict[str, Any]],
) -> None:
    budgets = [m for m in manifests if m["kind"] == "PodDisruptionBudget"]
    for workload in pod_workloads(manifests):
        if workload["kind"] == "Job":
            continue
        name = workload["metadata"]["name"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        covering = [
            b for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
        ]
        assert len(covering) == 1, name
        if workload["spec"].get("replicas", 2) == 1:
            continue  # one replica on purpose (an exporter): nothing to spread
        spread = workload["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert {c["topologyKey"] for c in spread} == {
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone",
        }, name
        for constraint in spread:
            assert constraint["labelSelector"]["matchLabels"].items() <= labels.items(), name


@pytest.mark.parametrize("name", ["job-service", "worker-service"])
def test_k8s_liveness_waits_for_start_up(manifests: list[dict[str, Any]], name: str) -> None:
    """A startup probe longer than the process's own start-up timeout holds liveness off:
    without it, liveness could kill a pod still waiting for PostgreSQL or NATS."""
    [container] = containers(by_kind(manifests, "Deployment", name))
    startup = container["startupProbe"]
    allowed = float(env_of(container, manifests)["JOBS_STARTUP_TIMEOUT_S"])
    assert startup["periodSeconds"] * startup["failureThreshold"] > allowed
    # on the port liveness checks (what opens once start-up is over)
    assert probed_port(startup, container) == probed_port(container["livenessProbe"], container)


def probed_port(probe: dict[str, Any], container: dict[str, Any]) -> int:
    """The container port a probe checks (an exec probe: the local address it dials)."""
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    if "exec" in probe:
        [port] = re.findall(r"127\.0\.0\.1:(\d+)", " ".join(probe["exec"]["command"]))
        return int(port)
    [kind] = [k for k in ("grpc", "httpGet", "tcpSocket") if k in probe]
    port = probe[kind]["port"]
    return int(ports.get(port, port))


def test_the_docs_name_every_secret_the_manifests_need(
    manifests: list[dict[str, Any]],
) -> None:
    """A Secret a pod cannot start without, and the docs' Deployment section (in the README
    or a docs page) does not say to create, is a deployment that never starts (the
    console's `jobs-console` was one)."""
    needed = {
        ref["name"]
        for workload in pod_workloads(manifests)
        for container in containers(workload)
        for variable in container.get("env", [])
        for ref in [variable.get("valueFrom", {}).get("secretKeyRef")]
        if ref and not ref.get("optional")
    }
    needed |= {
        volume["secret"]["secretName"]
        for workload in pod_workloads(manifests)
        for volume in workload["spec"]["template"]["spec"].get("volumes", [])
        if "secret" in volume and not volume["secret"].get("optional")
    }
    assert {"jobs-grpc-tls", "jobs-nats-tls", "jobs-nats-auth"} <= needed
    deployment = section("Deployment")
    namespace = yaml.safe_load((K8S / "kustomization.yaml").read_text())["namespace"]
    missing = [
        name
        for name in needed
        if f"kubectl -n {namespace} create secret generic {name} " not in deployment
    ]
    assert not missing, f"the docs' Deployment section does not create {missing}"


def test_k8s_scaled_workloads_leave_the_replica_count_to_keda(
    manifests: list[dict[str, Any]],
) -> None:
    scaled = by_kind(manifests, "ScaledObject", "worker-service")
    target = by_kind(manifests, "Deployment", scaled["spec"]["scaleTargetRef"]["name"])
    assert "replicas" not in target["spec"]


def test_k8s_worker_is_probed_on_its_health_endpoints(manifests: list[dict[str, Any]]) -> None:
    [container] = containers(by_kind(manifests, "Deployment", "worker-service"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = env_of(container, manifests)
    assert int(env["JOBS_WORKER_METRICS_PORT"]) == ports["metrics"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_k8s_migrations_run_as_a_job_per_release(manifests: list[dict[str, Any]]) -> None:
    [job] = [m for m in manifests if m["kind"] == "Job"]
    [container] = containers(job)
    assert container["command"][-1] == "migrate"
    tag = container["image"].split(":")[1]
    assert job["metadata"]["name"].endswith(tag.replace(".", "-"))


def test_k8s_nats_cluster_config_is_valid_and_matches_the_stream_replicas(
    manifests: list[dict[str, Any]], tmp_path: Path
) -> None:
    text = by_kind(manifests, "ConfigMap", "nats-config")["data"]["nats.conf"]
    assert re.search(r"^\s*sync_interval:\s*always\s*$", text, re.M)
    statefulset = by_kind(manifests, "StatefulSet", "nats")
    routes = re.findall(r"nats://(nats-\d+)\.nats-headless:6222", text)
    assert len(routes) == statefulset["spec"]["replicas"] == 3
    [service] = containers(by_kind(manifests, "Deployment", "job-service"))
    assert env_of(service, manifests)["JOBS_NATS_STREAM_REPLICAS"] == "3"
    # the mounted certificate files and the passwords' variables, as the pod has them
    certs = make_certs(tmp_path / "certs")
    tls = tmp_path / "nats-tls"
    tls.mkdir()
    for key, made in (("tls.crt", certs.server_cert), ("tls.key", certs.server_key)):
        (tls / key).write_bytes(made.read_bytes())
    (tls / "ca.crt").write_bytes(certs.ca.read_bytes())
    local = tmp_path / "nats.conf"
    local.write_text(
        text.replace("/data", str(tmp_path / "store")).replace("/etc/nats-tls", str(tls))
    )
    [server] = [c for c in containers(statefulset) if c["name"] == "nats"]
    passwords = {e["name"]: "x" for e in server["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    checked = subprocess.run(
        [str(nats_server_binary()), "-c", str(local), "-t"],
        capture_output=True,
        text=True,
        env={"SERVER_NAME": "nats-0", **passwords},
    )
    assert checked.returncode == 0, checked.stderr + checked.stdout


def test_k8s_manifests_validate_against_the_kubernetes_schemas() -> None:
    """The same check as `make lint-deploy`: every object against the OpenAPI schema of
    its kind (kubernetes-validate ships them), unknown fields refused. The custom resources
    (KEDA's ScaledObject, the Prometheus Operator's monitors and rules) have no schema
    there: the tests of the KEDA trigger, the monitors and the rules check them."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc["kind"] in ("Kustomization", *CUSTOM_RESOURCES):
                continue
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_schema_validation_catches_a_misspelt_field() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    bad = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "x"},
        "spec": {"minAvailabel": 1},
    }
    with pytest.raises(kubernetes_validate.utils.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def _requirement_name(requirement: str) -> str:
    name = re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]
    return name.lower().replace("_", "-")


def test_the_image_installs_exactly_the_lock_file_without_the_embedded_servers() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --require-hashes --no-deps -r requirements.lock" in dockerfile
    lock = (ROOT / "requirements.lock").read_text()
    pinned = dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+) \\$", lock, re.M))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # every runtime dependency is pinned, with hashes; the embedded servers are not there
    for requirement in project["dependencies"]:
        assert _requirement_name(requirement) in pinned, requirement
    assert lock.count("--hash=sha256:") >= len(pinned)
    for requirement in project["optional-dependencies"]["embedded"]:
        assert _requirement_name(requirement) not in pinned, requirement
    assert "--find-links" not in lock and "--index-url" not in lock
    # the build backend too: a local build fetches nothing (no build isolation)
    for source in ("pyproject.toml", "client/pyproject.toml"):
        for requirement in tomllib.loads((ROOT / source).read_text())["build-system"]["requires"]:
            assert _requirement_name(requirement) in pinned, (source, requirement)
    local = re.findall(r"^RUN pip install (.*?) (\.|\./client) ", dockerfile, re.M)
    assert [options for options, _ in local] == ["--no-deps --no-build-isolation"] * 2


def test_lint_deploy_skips_exactly_the_files_of_custom_resources() -> None:
    """kubernetes-validate refuses kinds it has no schema for: the Makefile leaves their
    files out, and only theirs (a Deployment there would never be validated)."""
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(r"\$\(filter-out ([^,]+),\$\(wildcard deploy/k8s/\*\.yaml\)\)", makefile)
    assert match, "lint-deploy no longer filters deploy/k8s/*.yaml"
    skipped = {Path(name).name for name in match.group(1).split()}
    custom = {
        path.name
        for path in K8S.glob("*.yaml")
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc["kind"] in CUSTOM_RESOURCES
    }
    assert custom and all(
        doc["kind"] in CUSTOM_RESOURCES
        for name in custom
        for doc in yaml.safe_load_all((K8S / name).read_text())
        if doc
    )
    assert skipped == custom | {"kustomization.yaml"}


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
            if monitor["kind"] == "PodMonitor" and _selects(monitor["spec"]["selector"], labels):
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


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "only matchLabels is understood here"
    matched: bool = selector.get("matchLabels", {}).items() <= labels.items()
    return matched


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
            namespace_ok = _selects(
                peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.namespace}
            )
        else:
            namespace_ok = other.namespace == NAMESPACE
        if namespace_ok and _selects(peer.get("podSelector", {}), other.labels):
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
            and _selects(p["spec"]["podSelector"], pod.labels)
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


def peer_name(workload: dict[str, Any]) -> str:
    """A workload's name; the migration Job's (it carries the release) is `migrate`."""
    return "migrate" if workload["kind"] == "Job" else str(workload["metadata"]["name"])


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
            if p["spec"]["podSelector"] and _selects(p["spec"]["podSelector"], labels)
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
