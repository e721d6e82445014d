"""How the deployment emulator resolves a container's environment (tests/support/deploy/
cluster.py, compose.py, network.py): Kubernetes' env, envFrom, valueFrom and ``$(VAR)``,
every reference that does not resolve reported with its workload and container; compose's
variable substitution; the rewrites pointing names and paths at their local stand-ins."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.deploy.cluster import Cluster, k8s_expand, quantity
from tests.support.deploy.compose import compose_interpolate, parse_env_file
from tests.support.deploy.image import Image, dockerfile_images, engine_image, image_site
from tests.support.deploy.network import Network, rewrite_hosts, rewrite_paths

# the Dockerfile's stage "api", which containers of durable-jobs-api:<tag> run
IMAGE = Image({"FROM_IMAGE": "1"}, "/app", ["python", "-m"], ["job_service"], "api")


def deployment(env: list[dict[str, Any]], **container: Any) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "jobs"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "api"}},
                "spec": {
                    "containers": [
                        {"name": "api", "image": "durable-jobs-api:1", "env": env} | container
                    ]
                },
            }
        },
    }


CONFIG = {"kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"LEVEL": "info"}}
SECRETS = {"tokens": {"client": "s3cret"}}


def resolve(tmp_path: Path, workload: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    cluster = Cluster([workload, CONFIG], SECRETS, {"api": IMAGE}, tmp_path, Network())
    pod = cluster.new_pod(workload, name="api-1")
    return pod.container.env, cluster.missing


def test_values_sources_and_expansion_resolve_as_the_kubelet_resolves_them(
    tmp_path: Path,
) -> None:
    env, missing = resolve(
        tmp_path,
        deployment(
            [
                {
                    "name": "LEVEL_COPY",
                    "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LEVEL"}},
                },
                {
                    "name": "TOKEN",
                    "valueFrom": {"secretKeyRef": {"name": "tokens", "key": "client"}},
                },
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "WHERE", "value": "$(POD) in $(NAMESPACE_UNSET)"},
            ],
            envFrom=[{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
        ),
    )

    assert missing == []
    assert env["LEVEL_COPY"] == "info" and env["CFG_LEVEL"] == "info"
    assert env["TOKEN"] == "s3cret"
    assert env["POD"] == "api-1" and env["HOSTNAME"] == "api-1"
    # $(VAR) expands what is defined before it; an unknown one stays as written
    assert env["WHERE"] == "api-1 in $(NAMESPACE_UNSET)"
    # the image's ENV reaches its own containers
    assert env["FROM_IMAGE"] == "1"


def test_every_reference_that_does_not_resolve_is_reported_with_where_it_is(
    tmp_path: Path,
) -> None:
    _, missing = resolve(
        tmp_path,
        deployment(
            [
                {"name": "A", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}},
                {"name": "B", "valueFrom": {"secretKeyRef": {"name": "tokens", "key": "nope"}}},
                {
                    "name": "C",
                    "valueFrom": {"configMapKeyRef": {"name": "x", "key": "k", "optional": True}},
                },
            ],
            envFrom=[{"secretRef": {"name": "gone"}}],
            args=["--token=$(UNSET)"],
        ),
    )

    where = "Deployment/api container api"
    assert missing == [
        f"{where}: envFrom gone does not exist",
        f"{where}: A from Secret absent, which does not exist",
        f"{where}: B from Secret tokens, which has no key nope",
        f"{where}: $(UNSET) in its arguments is not set",
    ]


def test_the_image_entrypoint_runs_this_interpreter_bound_to_the_pods_address(
    tmp_path: Path,
) -> None:
    cluster = Cluster([deployment([])], SECRETS, {"api": IMAGE}, tmp_path, Network())
    pod = cluster.new_pod(deployment([]), name="api-1")

    assert pod.container.argv == [sys.executable, "-m", "job_service"]
    assert pod.container.env["PYTHONPATH"] == str(cluster.site(IMAGE))
    # settings that bind every interface by default bind the pod's own address instead
    bound = {v for k, v in pod.container.env.items() if k.startswith("JOBS_")}
    assert bound == {pod.address}


def test_k8s_expand_and_memory_quantities() -> None:
    assert k8s_expand("$(A)-$(B)", {"A": "1"}) == "1-$(B)"
    assert [quantity(q) for q in ("512Mi", "1Gi", "1G", "128974848", None)] == [
        512 * 2**20,
        2**30,
        10**9,
        128974848,
        None,
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${SET}/$SET/$$SET", "yes/yes/$SET"),
        ("${EMPTY:-default}|${EMPTY-default}", "default|"),
        ("${UNSET:-default}|${UNSET-default}", "default|default"),
        ("${UNSET}", ""),
    ],
)
def test_compose_substitutes_variables_as_compose_does(text: str, expected: str) -> None:
    errors: list[str] = []

    assert compose_interpolate({"k": [text]}, {"SET": "yes", "EMPTY": ""}, errors) == {
        "k": [expected]
    }
    assert errors == []


def test_a_required_compose_variable_unset_is_an_error() -> None:
    errors: list[str] = []

    compose_interpolate("${TOKEN:?set TOKEN}|${OTHER?needed}", {"OTHER": ""}, errors)

    assert errors == ["TOKEN: set TOKEN"]


def test_env_files_skip_comments_and_keep_everything_after_the_first_equals(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env").write_text("# a comment=no\nA = 1\nURL=postgres://u:p@h/db?x=y\n\n")

    assert parse_env_file(tmp_path / ".env") == {"A": "1", "URL": "postgres://u:p@h/db?x=y"}


def test_longer_host_names_are_rewritten_first_and_paths_in_one_pass() -> None:
    hosts = {"job-service": lambda p: f"127.0.0.1:{p + 1}", "job-service-headless": lambda p: "X"}

    assert (
        rewrite_hosts("job-service-headless:50051,job-service:50051", hosts) == "X,127.0.0.1:50052"
    )
    mounts = {"/tmp": Path("/tmp/pods/a/tmp"), "/data": Path("/tmp/pods/a/data")}
    assert rewrite_paths("/data/x:/tmp/y:/tmpfs", mounts) == (
        "/tmp/pods/a/data/x:/tmp/pods/a/tmp/y:/tmpfs"
    )


def test_each_dockerfile_stage_is_an_image_refusing_the_packages_it_does_not_copy(
    tmp_path: Path,
) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "FROM python:3.11-slim AS base\n"
        "ENV A=1 \\\n    B=2\n"
        "WORKDIR /app\n"
        "COPY shared ./shared\n"
        "FROM base AS job-service\n"
        'CMD ["python", "-m", "job_service", "serve"]\n'
        "FROM base AS worker\n"
        "COPY jobtypes ./jobtypes\n"
        'CMD ["python", "-m", "worker_service"]\n'
    )
    images = dockerfile_images(dockerfile)

    assert images["job-service"].env == {"A": "1", "B": "2"}
    assert images["worker"].workdir == "/app"
    assert images["job-service"].packages == {"shared"}
    assert images["worker"].packages == {"shared", "jobtypes"}
    assert images[""] == images["worker"]  # a build without --target
    assert engine_image(images, "durable-jobs-worker:0.1.0") == images["worker"]
    assert engine_image(images, "nats:2.15.1-alpine") is None
    with pytest.raises(AssertionError, match="no target 'console'"):
        engine_image(images, "durable-jobs-console:0.1.0")
    refused = (
        image_site(tmp_path / "site", images["job-service"]) / "sitecustomize.py"
    ).read_text()
    assert "'jobtypes'" in refused and "'shared'" not in refused
    worker = (
        image_site(tmp_path / "worker-site", images["worker"]) / "sitecustomize.py"
    ).read_text()
    assert "'jobtypes'" not in worker
