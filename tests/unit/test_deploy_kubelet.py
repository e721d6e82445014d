"""The kubelet and compose rules of the deployment emulator (tests/support/deploy/kubelet.py,
probes.py, proxy.py): probe timings and their defaults, what a run of failures does to each
kind of probe, and which pods a Service sends connections to. No process is started: the
probe's action is a function here."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.support.deploy.kubelet import Container, Pod
from tests.support.deploy.probes import ProbeTiming, healthcheck_argv, seconds
from tests.support.deploy.proxy import ServiceProxy, service_links

Action = Callable[[float], Awaitable[str | None]]


def pod(tmp_path: Path, name: str = "api-0", **labels: str) -> Pod:
    container = Container("api", [], {}, tmp_path)
    return Pod(name, "127.0.0.2", labels, container, grace_s=1.0, log_dir=tmp_path)


def answers(*results: str | None, then: Callable[[], None] = lambda: None) -> Action:
    """A probe action answering ``results`` in turn (calling ``then`` with the last one),
    then failing."""
    queue = list(results)

    async def act(_timeout: float) -> str | None:
        if not queue:
            return "no more answers"
        if len(queue) == 1:
            then()
        return queue.pop(0)

    return act


FAST = ProbeTiming(
    initial_delay=0, period=0.001, timeout=1, failure_threshold=3, success_threshold=1
)


def test_a_probe_takes_kubernetes_defaults_for_what_it_leaves_out() -> None:
    assert ProbeTiming.of({"grpc": {"port": 50051}}) == ProbeTiming(0, 10, 1, 3, 1)
    given = {"initialDelaySeconds": 5, "periodSeconds": 2, "timeoutSeconds": 3}
    assert ProbeTiming.of(given | {"failureThreshold": 6}) == ProbeTiming(5, 2, 3, 6, 1)


def test_a_healthcheck_first_runs_one_interval_after_start_with_dockers_defaults() -> None:
    assert ProbeTiming.of_healthcheck({"test": "true"}) == ProbeTiming(30, 30, 30, 3, 1)
    check = {"test": "true", "interval": "2s", "timeout": "500ms", "retries": 5}
    assert ProbeTiming.of_healthcheck(check) == ProbeTiming(2, 2, 0.5, 5, 1)


@pytest.mark.parametrize(
    ("duration", "expected"),
    [("2s", 2.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0), (3, 3.0), (1.5, 1.5)],
)
def test_compose_durations_in_seconds(duration: str | float, expected: float) -> None:
    assert seconds(duration) == expected


def test_a_duration_with_an_unknown_unit_is_refused() -> None:
    with pytest.raises(AssertionError):
        seconds("2d")


def test_healthcheck_tests_run_as_compose_runs_them() -> None:
    assert healthcheck_argv("pg_isready -q") == ["/bin/sh", "-c", "pg_isready -q"]
    assert healthcheck_argv(["CMD-SHELL", "exit 0"]) == ["/bin/sh", "-c", "exit 0"]
    assert healthcheck_argv(["CMD", "nats", "ping"]) == ["nats", "ping"]


async def test_liveness_condemns_the_pod_after_failure_threshold_failures_in_a_row(
    tmp_path: Path,
) -> None:
    subject = pod(tmp_path)
    subject.started.set()

    # two failures, a success (the count starts again), then three failures
    await subject._probe_loop("livenessProbe", FAST, answers("down", "down", None, "a", "b"))

    assert subject.verdict is not None
    assert subject.verdict.startswith("livenessProbe failed 3 times in a row")
    assert "the kubelet kills it" in subject.verdict
    assert len(subject.probe_failures) == 5


async def test_readiness_takes_the_pod_out_and_back_without_condemning_it(tmp_path: Path) -> None:
    subject = pod(tmp_path)
    subject.started.set()

    def stop() -> None:
        subject.terminating = True

    await subject._probe_loop("readinessProbe", FAST, answers(None, then=stop))
    assert subject.ready

    subject.terminating = False
    await subject._probe_loop("readinessProbe", FAST, answers(None, "a", "b", "c", then=stop))
    assert not subject.ready
    assert subject.verdict is None


async def test_liveness_and_readiness_wait_for_the_startup_probe(tmp_path: Path) -> None:
    subject = pod(tmp_path)
    calls: list[str] = []

    async def live(_timeout: float) -> str | None:
        calls.append("liveness")
        subject.terminating = True
        return None

    liveness = asyncio.ensure_future(subject._probe_loop("livenessProbe", FAST, live))
    await subject._probe_loop("startupProbe", FAST, answers("starting", None))
    assert subject.started.is_set()
    await asyncio.wait_for(liveness, timeout=5)

    assert calls == ["liveness"]


async def test_the_first_probe_runs_no_earlier_than_its_initial_delay(tmp_path: Path) -> None:
    subject = pod(tmp_path)
    subject.started.set()
    loop = asyncio.get_running_loop()
    subject._started_at = loop.time()
    first: list[float] = []

    async def act(_timeout: float) -> str | None:
        first.append(loop.time() - subject._started_at)
        subject.terminating = True
        return None

    delayed = ProbeTiming(0.05, 0.001, 1, 3, 1)
    await subject._probe_loop("readinessProbe", delayed, act)

    assert first[0] >= 0.05


async def test_an_unhealthy_container_is_unhealthy_only_once_it_was_healthy(
    tmp_path: Path,
) -> None:
    subject = pod(tmp_path)

    def stop() -> None:
        subject.terminating = True

    # healthy, then three failures: compose marks it unhealthy again, nothing is killed
    await subject._probe_loop("healthcheck", FAST, answers(None, "a", "b", "c", then=stop))
    assert not subject.healthy.is_set() and subject.verdict is None

    # never healthy: failing from the start condemns it
    never = pod(tmp_path)
    await never._probe_loop("healthcheck", FAST, answers("a", "b", "c"))
    assert never.verdict == "healthcheck failed 3 times in a row (c): unhealthy"


def proxy(tmp_path: Path, pods: list[Pod], **spec: object) -> ServiceProxy:
    service = {
        "metadata": {"name": "job-service"},
        "spec": {"selector": {"app": "api"}, "ports": [{"port": 50051, "name": "grpc"}]} | spec,
    }
    return ServiceProxy(service, lambda: pods)


def test_a_service_sends_connections_to_ready_matching_pods_not_terminating(
    tmp_path: Path,
) -> None:
    ready, unready, leaving, other = (pod(tmp_path, f"p{i}", app="api") for i in range(4))
    ready.ready, leaving.ready, leaving.terminating = True, True, True
    other.labels, other.ready = {"app": "worker"}, True
    pods = [ready, unready, leaving, other]

    assert proxy(tmp_path, pods).endpoints() == [ready]
    assert proxy(tmp_path, pods, publishNotReadyAddresses=True).endpoints() == [ready, unready]


def test_service_links_name_every_port_as_the_kubelet_does_and_skip_headless_services(
    tmp_path: Path,
) -> None:
    normal = proxy(tmp_path, [])
    normal.local_ports = {50051: 41000}
    headless = proxy(tmp_path, [], clusterIP="None")
    headless.name = "job-service-headless"

    assert service_links([normal, headless]) == {
        "JOB_SERVICE_SERVICE_HOST": "127.0.0.1",
        "JOB_SERVICE_SERVICE_PORT": "41000",
        "JOB_SERVICE_PORT": "tcp://127.0.0.1:41000",
        "JOB_SERVICE_SERVICE_PORT_GRPC": "41000",
        "JOB_SERVICE_PORT_50051_TCP": "tcp://127.0.0.1:41000",
        "JOB_SERVICE_PORT_50051_TCP_PROTO": "tcp",
        "JOB_SERVICE_PORT_50051_TCP_PORT": "41000",
        "JOB_SERVICE_PORT_50051_TCP_ADDR": "127.0.0.1",
    }
