"""The deployment files, checked with what runs here (no Docker engine, no cluster): they
parse, every command names a module that exists, every JOBS_* variable they set is a
setting the service reads, health checks and probes are where they must be, grace periods
cover the services' own. The monitoring and KEDA: test_deployment_monitoring.py; the
NetworkPolicies: test_deployment_network.py; TLS: test_deployment_tls.py."""

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
from shared.registry import MODULES_ENV
from tests.support.certs import make_certs
from tests.support.deploy.image import dockerfile_images
from tests.support.docs import section
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
# a worker also reads its model tiers (worker_service.model_router) and the modules of its
# job types (shared.registry)
WORKER_ENV = env_names(WorkerSettings) | env_names(ModelSettings) | {MODULES_ENV}
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
        target = "worker" if name == "worker_service" else "job-service"
        assert service["build"] == {"context": ".", "target": target}
        assert service["image"] == f"durable-jobs-{target}:local"
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
        and all(c["image"].startswith("durable-jobs-") for c in containers(m))
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


def peer_name(workload: dict[str, Any]) -> str:
    """A workload's name; the migration Job's (it carries the release) is `migrate`."""
    return "migrate" if workload["kind"] == "Job" else str(workload["metadata"]["name"])


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "only matchLabels is understood here"
    matched: bool = selector.get("matchLabels", {}).items() <= labels.items()
    return matched


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
    engine = {i for i in images if i.startswith("durable-jobs-")}
    assert engine == {"durable-jobs-job-service:0.1.0", "durable-jobs-worker:0.1.0"}
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    overrides = {o["name"]: o["newTag"] for o in kustomization["images"]}
    assert {f"{name}:{tag}" for name, tag in overrides.items()} == engine  # one release tag
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
    # the client library once, the project once per image
    assert [options for options, _ in local] == ["--no-deps --no-build-isolation"] * 3


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


def test_job_types_ship_with_the_workers_never_with_job_service(
    compose: dict[str, Any], manifests: list[dict[str, Any]]
) -> None:
    """Job types belong to the workers (docs/adr/0010): the job-service image (job_service,
    migrations, console) copies no `jobtypes` and sets no JOBS_JOB_TYPE_MODULES; the worker
    image has them; only workers are given JOBS_JOB_TYPE_MODULES."""
    images = dockerfile_images(ROOT / "Dockerfile")
    assert "jobtypes" not in images["job-service"].packages
    assert "jobtypes" in images["worker"].packages
    for image in images.values():
        assert MODULES_ENV not in image.env
    assert images["job-service"].cmd[:3] == ["python", "-m", "job_service"]
    assert images["worker"].cmd == ["python", "-m", "worker_service"]
    given = {
        name for name, service in compose.items() if MODULES_ENV in service.get("environment", {})
    }
    assert given == {"worker_service"}
    for workload in engine_workloads(manifests):
        for container in containers(workload):
            names = {e["name"] for e in container.get("env", [])}
            is_worker = module_of(container["command"]) == "worker_service"
            assert (MODULES_ENV in names) == is_worker, workload["metadata"]["name"]
            expected = "durable-jobs-worker" if is_worker else "durable-jobs-job-service"
            assert container["image"].partition(":")[0] == expected
    config = by_kind(manifests, "ConfigMap", "jobs-config")
    assert MODULES_ENV not in config["data"]  # shared by every pod
