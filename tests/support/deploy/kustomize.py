"""``kustomize build``, for the keys deploy/k8s uses, and finding rendered objects."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml

from tests.support.deploy import Obj

# --------------------------------------------------------------------------- rendering

# What ``kustomize build`` does with the keys kustomization.yaml may hold; any other key
# fails the test until this subset learns it (a silently ignored key renders a different
# deployment than kubectl would).
KUSTOMIZE_KEYS = {"apiVersion", "kind", "namespace", "resources", "images", "labels"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume"}


def kustomize_build(directory: Path) -> list[Obj]:
    """``kustomize build directory`` for the keys in KUSTOMIZE_KEYS."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - KUSTOMIZE_KEYS
    assert not unknown, f"kustomization.yaml uses keys this renderer lacks: {sorted(unknown)}"
    objects: list[Obj] = []
    for resource in kustomization.get("resources", []):
        path = directory / resource
        assert path.is_file(), f"kustomization.yaml lists {resource}, which does not exist"
        objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    namespace = kustomization.get("namespace")
    for obj in objects:
        if namespace and obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = namespace
        for entry in kustomization.get("labels", []):
            _add_labels(obj, entry)
        for container in _pod_containers(obj):
            container["image"] = _kustomize_image(container["image"], kustomization)
    return objects


def _add_labels(obj: Obj, entry: Obj) -> None:
    pairs = entry["pairs"]
    obj["metadata"].setdefault("labels", {}).update(pairs)
    spec = obj.get("spec", {})
    if entry.get("includeSelectors"):
        if obj["kind"] == "Service":
            spec.setdefault("selector", {}).update(pairs)
        elif "selector" in spec:
            spec["selector"].setdefault("matchLabels", {}).update(pairs)
    if (entry.get("includeSelectors") or entry.get("includeTemplates")) and "template" in spec:
        spec["template"].setdefault("metadata", {}).setdefault("labels", {}).update(pairs)


def _pod_containers(obj: Obj) -> list[Obj]:
    template = obj.get("spec", {}).get("template", {}).get("spec", {})
    return [*template.get("initContainers", []), *template.get("containers", [])]


def _kustomize_image(image: str, kustomization: Obj) -> str:
    name, _, tag = image.partition(":")
    for override in kustomization.get("images", []):
        if override["name"] == name:
            name = override.get("newName", name)
            tag = override.get("newTag", tag)
            if "digest" in override:
                return f"{name}@{override['digest']}"
    return f"{name}:{tag}" if tag else name


def find(objects: Iterable[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
