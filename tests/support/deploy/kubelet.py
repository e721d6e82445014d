"""A container as a local process, with a kubelet's probes (or compose's health check)
driven at the timings it declares."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from devstack.embedded import port_is_free
from tests.support.deploy import Obj
from tests.support.deploy.network import local_argv
from tests.support.deploy.probes import (
    ProbeTiming,
    grpc_health,
    healthcheck_argv,
    http_ok,
    tcp_open,
)
from tests.support.wait import eventually


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
            action = self._exec_action(healthcheck_argv(check["test"]))
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
