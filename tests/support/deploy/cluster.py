"""The rendered objects as a namespace: Services as local proxies, pods as processes, every
reference (Secret, ConfigMap, key, volume, variable) resolved or reported missing."""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.support.deploy import Obj
from tests.support.deploy.image import Image, ImageSites, engine_image
from tests.support.deploy.kubelet import Container, Pod
from tests.support.deploy.kustomize import find
from tests.support.deploy.network import (
    Network,
    address_with,
    localise,
    rewrite_hosts,
    rewrite_paths,
)
from tests.support.deploy.proxy import ServiceProxy, service_links

# Images with no local stand-in (no binary here, no Docker): their containers' references
# (env, envFrom, Secrets, ConfigMaps, volumes) are resolved like any other's, and they are
# not started. Keep it to what cannot run: everything else runs.
NOT_RUN_LOCALLY = {
    "natsio/prometheus-nats-exporter",  # beside each NATS server (nats.yaml)
    "quay.io/prometheuscommunity/postgres-exporter",  # postgres-exporter.yaml
}


def runs_locally(container: Obj) -> bool:
    return str(container["image"]).partition(":")[0] not in NOT_RUN_LOCALLY


_K8S_VARIABLE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def k8s_expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` in command, args and env values (unknown ones stay)."""
    return _K8S_VARIABLE.sub(lambda m: env.get(m.group(1), m.group(0)), text)


class Cluster:
    """The rendered objects as a namespace: Services as local proxies, pods as processes.
    ``missing`` collects every reference that does not resolve (a Secret, a key, a
    ConfigMap), each naming the workload and container that needs it."""

    def __init__(
        self,
        objects: list[Obj],
        secrets: Mapping[str, Mapping[str, str]],
        images: dict[str, Image],
        root: Path,
        network: Network,
    ) -> None:
        self.objects = objects
        self.secrets = secrets
        self.images = images
        self.root = root
        self.network = network
        self.pods: list[Pod] = []
        self.missing: list[str] = []
        self.proxies = {
            s["metadata"]["name"]: ServiceProxy(s, lambda: self.pods)
            for s in find(objects, "Service")
        }
        # StatefulSet pods have stable names and addresses (<pod>.<serviceName>)
        self._stable: dict[str, str] = {
            f"{s['metadata']['name']}-{i}": network.address()
            for s in find(objects, "StatefulSet")
            for i in range(s["spec"].get("replicas", 1))
        }
        (root / "logs").mkdir(parents=True, exist_ok=True)
        self.site = ImageSites(root / "image-site")

    async def start(self) -> None:
        for proxy in self.proxies.values():
            await proxy.start()

    async def close(self) -> None:
        for pod in self.pods:
            pod.kill()
        for proxy in self.proxies.values():
            await proxy.close()

    def service(self, name: str) -> ServiceProxy:
        return self.proxies[name]

    def hosts(self) -> dict[str, Callable[[int], str]]:
        namespace = self.objects[0]["metadata"].get("namespace", "default")
        hosts: dict[str, Callable[[int], str]] = {}
        for name, proxy in self.proxies.items():
            for alias in _dns_names(name, namespace):
                hosts[alias] = proxy.address
        for statefulset in find(self.objects, "StatefulSet"):
            service = statefulset["spec"]["serviceName"]
            for pod, address in self._stable.items():
                if pod.startswith(statefulset["metadata"]["name"] + "-"):
                    for alias in _dns_names(f"{pod}.{service}", namespace):
                        hosts[alias] = address_with(address)
        return hosts

    def new_pod(self, workload: Obj, name: str | None = None) -> Pod:
        """A pod of ``workload`` (not started): its container resolved, volumes written."""
        kind, workload_name = workload["kind"], workload["metadata"]["name"]
        if name is None:
            name = f"{workload_name}-{secrets.token_hex(4)}-{secrets.token_hex(2)}"
        address = self._stable.get(name) or self.network.address()
        template = workload["spec"]["template"]
        spec = template["spec"]
        assert not spec.get("initContainers"), f"{kind}/{workload_name}: init containers"
        pod_dir = self.root / "pods" / name
        for other in spec["containers"]:
            if not runs_locally(other):
                self._environment(workload, other, name, address, pod_dir / other["name"])
        [container] = [c for c in spec["containers"] if runs_locally(c)]
        where = f"{kind}/{workload_name} container {container['name']}"
        mounts, env = self._environment(workload, container, name, address, pod_dir)
        argv = self._argv(container, env, where)
        ports = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
        image = engine_image(self.images, container["image"])
        argv, env = self._localise(argv, env, mounts, address, ports, image)
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
        probes = {
            k: self._local_probe(container[k], mounts, address)
            for k in ("startupProbe", "readinessProbe", "livenessProbe")
            if k in container
        }
        local = Container(
            container["name"],
            argv,
            env,
            pod_dir / "root" / (image.workdir if image else "/").lstrip("/"),
            ports,
            probes,
            pre_stop,
            memory_limit=quantity(container.get("resources", {}).get("limits", {}).get("memory")),
        )
        grace = float(spec.get("terminationGracePeriodSeconds", 30))
        pod = Pod(
            name, address, template["metadata"].get("labels", {}), local, grace, self.root / "logs"
        )
        self.pods.append(pod)
        return pod

    def resolve(self, workload: Obj) -> None:
        """Resolve every reference of a workload none of whose containers runs here
        (NOT_RUN_LOCALLY): what does not resolve goes to ``missing``."""
        spec = workload["spec"]["template"]["spec"]
        assert not any(runs_locally(c) for c in spec["containers"]), workload["metadata"]
        name = f"{workload['metadata']['name']}-not-run"
        for container in spec["containers"]:
            pod_dir = self.root / "pods" / name / container["name"]
            self._environment(workload, container, name, "127.0.0.1", pod_dir)

    def _environment(
        self, workload: Obj, container: Obj, name: str, address: str, pod_dir: Path
    ) -> tuple[dict[str, Path], dict[str, str]]:
        """The container's mounts (files written) and environment, as the kubelet gives
        them; a reference that does not resolve is added to ``missing``."""
        spec = workload["spec"]["template"]["spec"]
        where = f"{workload['kind']}/{workload['metadata']['name']} container {container['name']}"
        mounts = self._volumes(workload, container, pod_dir, where)
        fields = {
            "metadata.name": name,
            "metadata.namespace": workload["metadata"].get("namespace", "default"),
            "status.podIP": address,
        }
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "HOSTNAME": name,
            # the image's user has no home (useradd --no-create-home): nothing is there
            "HOME": str(pod_dir / "home"),
        }
        image = engine_image(self.images, container["image"])
        env |= image.env if image else {}
        if spec.get("enableServiceLinks", True):
            env |= service_links(self.proxies.values())
        env |= self._env_from(container, where)
        for variable in container.get("env", []):
            value = self._env_value(variable, fields, env, where)
            if value is not None:
                env[variable["name"]] = value
        for part in [*container.get("command", []), *container.get("args", [])]:
            unknown = sorted(set(_K8S_VARIABLE.findall(part)) - env.keys())
            if unknown:
                self.missing.append(f"{where}: $({unknown[0]}) in its arguments is not set")
        return mounts, env

    def _local_probe(self, probe: Obj, mounts: Mapping[str, Path], address: str) -> Obj:
        """An exec probe runs in the pod: its paths are the mounts' local directories, its
        loopback (127.0.0.1, localhost) the pod's address, Service names the proxies."""
        if "exec" not in probe:
            return probe
        command = [
            re.sub(
                r"\b(127\.0\.0\.1|localhost)\b",
                address,
                rewrite_hosts(rewrite_paths(part, mounts), self.hosts()),
            )
            for part in probe["exec"]["command"]
        ]
        return {**probe, "exec": {"command": command}}

    def _argv(self, container: Obj, env: Mapping[str, str], where: str) -> list[str]:
        image = container["image"]
        engine = engine_image(self.images, image)
        if engine is not None:
            entrypoint, cmd = engine.entrypoint, engine.cmd
        elif image.startswith("nats:"):
            # the nats image's entrypoint runs nats-server with arguments starting with "-"
            entrypoint, cmd = ["nats-server"], []
        else:
            raise AssertionError(f"{where}: image {image} has no local stand-in")
        if "command" in container:
            entrypoint, cmd = container["command"], []
        if "args" in container:
            cmd = container["args"]
        return [k8s_expand(a, env) for a in [*entrypoint, *cmd]]

    def _env_from(self, container: Obj, where: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            prefix = source.get("prefix", "")
            if "configMapRef" in source:
                ref = source["configMapRef"]
                data: Mapping[str, str] | None = self._config_map(ref["name"])
            else:
                ref, data = source["secretRef"], self.secrets.get(source["secretRef"]["name"])
            if data is None:
                if not ref.get("optional"):
                    self.missing.append(f"{where}: envFrom {ref['name']} does not exist")
                continue
            env |= {prefix + k: v for k, v in data.items()}
        return env

    def _env_value(
        self, variable: Obj, fields: Mapping[str, str], env: Mapping[str, str], where: str
    ) -> str | None:
        if "value" in variable:
            return k8s_expand(str(variable["value"]), env)
        source = variable["valueFrom"]
        if "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            assert path in fields, f"{where}: fieldRef {path} is not emulated"
            return fields[path]
        if "secretKeyRef" in source:
            ref, data = source["secretKeyRef"], self.secrets.get(source["secretKeyRef"]["name"])
            kind = "Secret"
        else:
            ref, data = (
                source["configMapKeyRef"],
                self._config_map(source["configMapKeyRef"]["name"]),
            )
            kind = "ConfigMap"
        if data is None or ref["key"] not in data:
            if not ref.get("optional"):
                what = "does not exist" if data is None else f"has no key {ref['key']}"
                self.missing.append(
                    f"{where}: {variable['name']} from {kind} {ref['name']}, which {what}"
                )
            return None
        return data[ref["key"]]

    def _config_map(self, name: str) -> dict[str, str] | None:
        found = find(self.objects, "ConfigMap", name)
        return dict(found[0].get("data", {})) if found else None

    def _volumes(self, workload: Obj, container: Obj, pod_dir: Path, where: str) -> dict[str, Path]:
        spec = workload["spec"]["template"]["spec"]
        claims = {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates", [])}
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        written: list[Path] = []
        mounts: dict[str, Path] = {}
        for mount in container.get("volumeMounts", []):
            local = pod_dir / "volumes" / mount["name"]
            local.mkdir(parents=True, exist_ok=True)
            volume = volumes.get(mount["name"])
            if volume is None:
                assert mount["name"] in claims, f"{where}: no volume {mount['name']}"
            elif "configMap" in volume or "secret" in volume:
                written += self._project(volume, local, where)
            else:
                assert "emptyDir" in volume, f"{where}: volume {volume} is not emulated"
            mounts[mount["mountPath"]] = local / mount.get("subPath", "")
        for path in written:
            # a config file that names another mount (a store directory) names its local one
            path.write_text(rewrite_hosts(rewrite_paths(path.read_text(), mounts), self.hosts()))
        return mounts

    def _project(self, volume: Obj, local: Path, where: str) -> list[Path]:
        data: Mapping[str, str] | None
        if "configMap" in volume:
            ref, data = volume["configMap"], self._config_map(volume["configMap"]["name"])
        else:
            ref, data = volume["secret"], self.secrets.get(volume["secret"]["secretName"])
        if data is None:
            if not ref.get("optional"):
                self.missing.append(f"{where}: volume {volume['name']}: {ref} does not exist")
            return []
        items = ref.get("items") or [{"key": k, "path": k} for k in data]
        files = []
        for item in items:
            if item["key"] not in data:
                self.missing.append(f"{where}: volume {volume['name']} has no key {item['key']}")
                continue
            path = local / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(data[item["key"]])
            files.append(path)
        return files

    def _localise(
        self,
        argv: list[str],
        env: dict[str, str],
        mounts: Mapping[str, Path],
        address: str,
        ports: Mapping[str, int],
        image: Image | None,
    ) -> tuple[list[str], dict[str, str]]:
        return localise(argv, env, mounts, address, ports, self.hosts(), self.site(image))


def quantity(text: str | None) -> int | None:
    """A Kubernetes memory quantity (``512Mi``, ``1Gi``, ``1G``, ``128974848``) in bytes."""
    if text is None:
        return None
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6}
    units |= {"G": 10**9, "T": 10**12, "": 1}
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]i|[kMGT]|)", str(text))
    assert found, f"memory quantity {text!r}"
    return int(float(found.group(1)) * units[found.group(2)])


def _dns_names(name: str, namespace: str) -> list[str]:
    return [
        name,
        f"{name}.{namespace}",
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.cluster.local",
    ]
