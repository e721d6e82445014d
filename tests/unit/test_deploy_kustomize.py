"""The kustomize subset of the deployment emulator (tests/support/deploy/kustomize.py): the
keys it applies as ``kustomize build`` does, and the ones it refuses rather than ignore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.deploy.kustomize import find, kustomize_build

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobs"}}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "api"},
    "spec": {"selector": {"app": "api"}, "ports": [{"port": 50051}]},
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "api"},
    "spec": {
        "selector": {"matchLabels": {"app": "api"}},
        "template": {
            "metadata": {"labels": {"app": "api"}},
            "spec": {
                "initContainers": [{"name": "migrate", "image": "durable-jobs:latest"}],
                "containers": [
                    {"name": "api", "image": "durable-jobs:latest"},
                    {"name": "nats", "image": "nats:2.10"},
                ],
            },
        },
    },
}


def build(tmp_path: Path, **kustomization: object) -> list[dict[str, Any]]:
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all([NAMESPACE, SERVICE, DEPLOYMENT]))
    given: dict[str, object] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
    }
    given |= {"resources": ["objects.yaml"], **kustomization}
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(given))
    return kustomize_build(tmp_path)


def test_the_namespace_goes_on_every_namespaced_object_only(tmp_path: Path) -> None:
    objects = build(tmp_path, namespace="jobs")

    [namespace] = find(objects, "Namespace")
    assert "namespace" not in namespace["metadata"]
    assert {o["metadata"]["namespace"] for o in objects if o["kind"] != "Namespace"} == {"jobs"}


def test_labels_reach_selectors_and_templates_only_when_asked(tmp_path: Path) -> None:
    objects = build(
        tmp_path,
        labels=[
            {"pairs": {"part-of": "jobs"}, "includeSelectors": True},
            {"pairs": {"tier": "backend"}, "includeTemplates": True},
            {"pairs": {"owner": "ops"}},
        ],
    )

    [service], [deployment] = find(objects, "Service"), find(objects, "Deployment", "api")
    every = {"part-of": "jobs", "tier": "backend", "owner": "ops"}
    assert service["metadata"]["labels"] == every == deployment["metadata"]["labels"]
    assert service["spec"]["selector"] == {"app": "api", "part-of": "jobs"}
    assert deployment["spec"]["selector"]["matchLabels"] == {"app": "api", "part-of": "jobs"}
    template = deployment["spec"]["template"]["metadata"]["labels"]
    assert template == {"app": "api", "part-of": "jobs", "tier": "backend"}


def test_images_are_renamed_retagged_or_pinned_by_digest_in_every_container(
    tmp_path: Path,
) -> None:
    objects = build(
        tmp_path,
        images=[
            {"name": "durable-jobs", "newName": "registry.example/jobs", "newTag": "1.2.3"},
            {"name": "nats", "digest": "sha256:abc"},
        ],
    )

    spec = find(objects, "Deployment")[0]["spec"]["template"]["spec"]
    assert [c["image"] for c in spec["initContainers"] + spec["containers"]] == [
        "registry.example/jobs:1.2.3",
        "registry.example/jobs:1.2.3",
        "nats@sha256:abc",
    ]


def test_a_key_the_subset_does_not_know_is_refused_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"lacks: \['patches'\]"):
        build(tmp_path, patches=[{"path": "patch.yaml"}])


def test_a_listed_resource_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"missing\.yaml, which does not exist"):
        build(tmp_path, resources=["objects.yaml", "missing.yaml"])
