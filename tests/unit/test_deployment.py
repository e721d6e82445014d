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
from shared.constants import DISPATCH_STREAM, Queue, dispatch_consumer
from worker_service.model_router import ModelSettings
from worker_service.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"


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
    for name in ("postgres", "nats", "job_service"):
        assert compose[name]["healthcheck"]["test"], name
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


def containers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    return result


def env_of(container: dict[str, Any], manifests: list[dict[str, Any]]) -> dict[str, Any]:
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    for source in container.get("envFrom", []):
        env.update(by_kind(manifests, "ConfigMap", source["configMapRef"]["name"])["data"])
    return env


def test_k8s_workloads_run_existing_modules_with_settings_they_read(
    manifests: list[dict[str, Any]],
) -> None:
    workloads = [m for m in manifests if m["kind"] in ("Deployment", "Job")]
    assert len(workloads) == 4  # migrate, job-service, worker-service, console
    for workload in workloads:
        for container in containers(workload):
            assert container["image"].startswith("durable-jobs:")
            module = module_of(container["command"])
            unknown = set(env_of(container, manifests)) - settings_for(module)
            assert not unknown, f"{workload['metadata']['name']}: unknown variables {unknown}"


def test_k8s_job_service_is_probed_over_grpc_health_and_served(
    manifests: list[dict[str, Any]],
) -> None:
    deployment = by_kind(manifests, "Deployment", "job-service")
    [container] = containers(deployment)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = env_of(container, manifests)
    assert int(env["JOBS_GRPC_PORT"]) == ports["grpc"]
    assert int(env["JOBS_METRICS_PORT"]) == ports["metrics"]
    assert env["JOBS_GRPC_HOST"] == "0.0.0.0"
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == ports["grpc"]
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
    assert env["JOBS_JOB_SERVICE_TARGET"] == "job-service:50051"
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    needed = float(pre_stop[1]) + float(env["JOBS_WORKER_SHUTDOWN_GRACE_S"]) + 10
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= needed


def test_keda_scales_workers_on_the_consumers_they_use(
    manifests: list[dict[str, Any]],
) -> None:
    scaled = by_kind(manifests, "ScaledObject", "worker-service")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    by_kind(manifests, "Deployment", scaled["spec"]["scaleTargetRef"]["name"])
    triggers = scaled["spec"]["triggers"]
    assert {t["type"] for t in triggers} == {"nats-jetstream"}
    assert {t["metadata"]["stream"] for t in triggers} == {DISPATCH_STREAM}
    assert sorted(t["metadata"]["consumer"] for t in triggers) == sorted(
        dispatch_consumer(q) for q in Queue
    )


def test_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(listed) == on_disk
