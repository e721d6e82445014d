"""docker compose: its variable substitution, env files, and docker-compose.yml as local
processes started in ``depends_on`` order."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.support.deploy import Obj
from tests.support.deploy.image import Image, ImageSites
from tests.support.deploy.kubelet import Container, Pod
from tests.support.deploy.network import (
    Network,
    address_with,
    localise,
    rewrite_hosts,
    rewrite_paths,
)
from tests.support.deploy.probes import seconds
from tests.support.wait import eventually

_VARIABLE = re.compile(r"\$\$|\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def compose_interpolate(value: Any, env: Mapping[str, str], errors: list[str]) -> Any:
    """Compose's variable substitution (``${X}``, ``${X:-d}``, ``${X-d}``, ``${X:?e}``,
    ``${X?e}``, ``$X``, ``$$``) over every string of ``value``; a required variable that
    is unset is added to ``errors``."""
    if isinstance(value, dict):
        return {k: compose_interpolate(v, env, errors) for k, v in value.items()}
    if isinstance(value, list):
        return [compose_interpolate(v, env, errors) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group(2):
            return env.get(match.group(2), "")
        expression = match.group(1)
        parts = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])(.*))?$", expression, re.S)
        assert parts, f"bad substitution ${{{expression}}}"
        name, operator, argument = parts.group(1), parts.group(2), parts.group(3) or ""
        present = name in env and (env[name] != "" or not (operator or "").startswith(":"))
        if present:
            return env[name]
        if operator in (":-", "-"):
            return argument
        if operator in (":?", "?"):
            errors.append(f"{name}: {argument}")
        return ""

    return _VARIABLE.sub(substitute, value)


def parse_env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.lstrip().startswith("#")}


class Compose:
    """docker-compose.yml as local processes: each container at its own address, a
    service's name resolving to its (first) container; ``postgres`` stands for the
    PostgreSQL server the test started at ``postgres_address``."""

    def __init__(
        self,
        path: Path,
        shell_env: Mapping[str, str],
        images: dict[str, Image],
        root: Path,
        network: Network,
        postgres_address: str,
    ) -> None:
        loaded = yaml.safe_load(path.read_text())
        self.errors: list[str] = []
        env_files = {p.name: parse_env_file(p) for p in path.parent.glob(".env")}
        self.shell_env = {**env_files.get(".env", {}), **shell_env}
        self.services: dict[str, Obj] = compose_interpolate(
            loaded["services"], self.shell_env, self.errors
        )
        self.project_dir = path.parent
        self.images = images
        self.root = root
        self.postgres_address = postgres_address
        self.addresses = {
            name: [network.address() for _ in range(_replicas(service))]
            for name, service in self.services.items()
        }
        self.containers: dict[str, list[Pod]] = {}
        (root / "logs").mkdir(parents=True, exist_ok=True)
        self.site = ImageSites(root / "image-site")

    def hosts(self) -> dict[str, Callable[[int], str]]:
        hosts: dict[str, Callable[[int], str]] = {
            name: address_with(addresses[0]) for name, addresses in self.addresses.items()
        }
        hosts["postgres"] = lambda _port: self.postgres_address
        return hosts

    def is_postgres(self, name: str) -> bool:
        return str(self.services[name].get("image", "")).startswith("postgres:")

    def new_containers(self, name: str) -> list[Pod]:
        service = self.services[name]
        pods = []
        for index, address in enumerate(self.addresses[name], start=1):
            container_name = f"{name}-{index}"
            local_dir = self.root / "containers" / container_name
            mounts = self._volumes(service, local_dir)
            env = {
                "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                "HOSTNAME": container_name,
                "HOME": str(local_dir / "home"),
            }
            image = self.image_of(service)
            if image is not None:
                env |= image.env
            for env_file in _as_list(service.get("env_file")):
                env |= parse_env_file(self.project_dir / env_file)
            env |= self._environment(service)
            argv, env = localise(
                self._argv(name, service), env, mounts, address, {}, self.hosts(), self.site(image)
            )
            healthcheck = dict(service["healthcheck"]) if "healthcheck" in service else None
            if healthcheck:
                # the check runs inside the container: its loopback is the container's address
                healthcheck["test"] = [
                    re.sub(r"\b(127\.0\.0\.1|localhost)\b", address, part)
                    for part in _as_list(healthcheck["test"])
                ]
            one_shot = service.get("restart") == "no"
            if self.is_postgres(name):
                argv = []  # the test's PostgreSQL server is this container
                host, port = self.postgres_address.split(":")
                env |= {"PGHOST": host, "PGPORT": port}
            pods.append(
                Pod(
                    container_name,
                    address,
                    {},
                    Container(
                        container_name,
                        argv,
                        env,
                        local_dir / "root" / (image.workdir if image else "/").lstrip("/"),
                        healthcheck=healthcheck,
                    ),
                    seconds(service.get("stop_grace_period", "10s")),
                    self.root / "logs",
                )
            )
            pods[-1].one_shot = one_shot
        self.containers[name] = pods
        return pods

    def image_of(self, service: Obj) -> Image | None:
        """The image a service's ``build`` makes (its ``target``, else the last stage);
        None for a service run from a published image."""
        build = service.get("build")
        if build is None:
            return None
        target = build.get("target", "") if isinstance(build, dict) else ""
        assert target in self.images, f"build target {target!r}: no such Dockerfile stage"
        return self.images[target]

    def _environment(self, service: Obj) -> dict[str, str]:
        environment = service.get("environment", {})
        if isinstance(environment, list):
            environment = dict(
                (item.split("=", 1) if "=" in item else (item, None)) for item in environment
            )
        return {
            k: str(v) if v is not None else self.shell_env[k]
            for k, v in environment.items()
            if v is not None or k in self.shell_env
        }

    def _argv(self, name: str, service: Obj) -> list[str]:
        image = str(service.get("image", ""))
        built = self.image_of(service)
        if built is not None:
            entrypoint, cmd = built.entrypoint, built.cmd
        elif image.startswith("nats:"):
            entrypoint, cmd = ["nats-server"], []
        elif self.is_postgres(name):
            return []
        else:
            raise AssertionError(f"compose service {name}: image {image} has no local stand-in")
        if "entrypoint" in service:
            entrypoint, cmd = _as_list(service["entrypoint"]), []
        if "command" in service:
            cmd = _as_list(service["command"])
        return [*entrypoint, *cmd]

    def _volumes(self, service: Obj, local_dir: Path) -> dict[str, Path]:
        mounts: dict[str, Path] = {}
        copied: list[Path] = []
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith((".", "/")):
                origin = (self.project_dir / source).resolve()
                assert origin.exists(), f"compose bind mount {source} does not exist"
                local = local_dir / "binds" / origin.name
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(origin.read_bytes())
                copied.append(local)
            else:
                local = self.root / "volumes" / source
                local.mkdir(parents=True, exist_ok=True)
            mounts[target] = local
        for path in copied:
            path.write_text(rewrite_hosts(rewrite_paths(path.read_text(), mounts), self.hosts()))
        return mounts


def _replicas(service: Obj) -> int:
    return int(service.get("deploy", {}).get("replicas", 1))


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


async def compose_up(compose: Compose, timeout: float) -> None:
    """``docker compose up``: each service starts once its ``depends_on`` conditions hold
    (service_started, service_healthy, service_completed_successfully); returns when every
    service has started and every health check passed. Fails as compose does: a dependency
    unhealthy or exiting with a failure."""
    started = {name: asyncio.Event() for name in compose.services}

    def done(name: str, condition: str) -> bool:
        pods = compose.containers.get(name, [])
        if condition != "service_completed_successfully":
            for pod in pods:
                pod.check()
        if condition == "service_healthy":
            return bool(pods) and all(p.healthy.is_set() for p in pods)
        if condition == "service_completed_successfully":
            codes = [p.exit_code for p in pods]
            if any(code not in (None, 0) for code in codes):
                raise AssertionError(
                    f"dependency {name} exited with {codes}:\n{pods[0].log_tail()}"
                )
            return bool(pods) and all(code == 0 for code in codes)
        return started[name].is_set()

    async def service(name: str) -> None:
        depends = compose.services[name].get("depends_on", {})
        if isinstance(depends, list):
            depends = {d: {"condition": "service_started"} for d in depends}
        for dependency, rule in depends.items():
            assert dependency in compose.services, f"{name} depends on unknown {dependency}"
            await started[dependency].wait()
            condition = rule.get("condition", "service_started")
            await eventually(
                functools.partial(done, dependency, condition),
                timeout=timeout,
                interval=0.1,
                message=f"{name} waits for {dependency} ({condition})",
            )
        for pod in compose.new_containers(name):
            pod.start()
        started[name].set()
        if "healthcheck" in compose.services[name]:
            await eventually(
                lambda: done(name, "service_healthy"),
                timeout=timeout,
                interval=0.1,
                message=f"{name} healthy",
            )

    await asyncio.gather(*(service(name) for name in compose.services))
