"""A worker whose session comes back after a cut (issue 43): the job service may have ended
its leases meanwhile (the reconnect grace) and run their jobs elsewhere. Every running
attempt heartbeats at once, makes no provider call until the answer, and stops when its
lease is gone, counted in jobs_worker_reruns_after_reconnect_total; an attempt whose lease
is still its own goes on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from prometheus_client import REGISTRY

from shared.ai.provider import ModelTier
from shared.errors import LeaseLost
from worker_service.adapters.fake_provider import FakeProvider
from worker_service.attempt import Attempt
from worker_service.credentials import CredentialResolver
from worker_service.domain.errors import ExecutorUnreachable
from worker_service.domain.model import CancelCause, HeartbeatReply, Lease
from worker_service.gateway import ModelGateway
from worker_service.heartbeat import Heartbeat
from worker_service.model_router import ModelRouter, PriceTable, Route
from worker_service.pipeline import Pipeline
from worker_service.results import ResultBatcher
from worker_service.session import WorkerSession

from .fakes import FakeExecutor, ProbeLog, eventually, locked, probe_definition
from .test_worker_steps import PROMPT

# no heartbeat falls due during a test: every beat seen is one the reconnect asked for
SLOW_BEAT_MS = 600_000


def reruns(job_type: str) -> float:
    value = REGISTRY.get_sample_value(
        "jobs_worker_reruns_after_reconnect_total", {"job_type": job_type}
    )
    return value or 0.0


def lost(n: int) -> HeartbeatReply:
    raise LeaseLost("lease lost")


@pytest.fixture
async def pipeline(executor: FakeExecutor, probe: ProbeLog) -> AsyncIterator[Pipeline]:
    async with ResultBatcher(executor) as batcher:
        yield Pipeline(
            executor, batcher, {"probe": probe_definition(probe)}.__getitem__, worker_id="w"
        )


async def test_attempts_whose_leases_ended_while_cut_off_stop_when_the_session_is_back(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.on_heartbeat = lost
    before = reruns("probe")
    runs = [
        asyncio.create_task(pipeline.run(locked(f"j{n}", heartbeat_ms=SLOW_BEAT_MS, mode="hang")))
        for n in range(3)
    ]
    await eventually(lambda: pipeline.running == 3, what="three attempts running")

    pipeline.doubt_leases()

    await asyncio.wait_for(asyncio.gather(*runs), 5)
    assert sorted(h[0] for h in executor.heartbeats) == ["j0", "j1", "j2"]
    assert executor.submit_calls == 0  # another worker owns them now
    assert reruns("probe") == before + 3


async def test_an_attempt_whose_lease_is_still_its_own_goes_on(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    before = reruns("probe")
    run = asyncio.create_task(pipeline.run(locked("j1", heartbeat_ms=SLOW_BEAT_MS, mode="hang")))
    await eventually(lambda: pipeline.running == 1, what="the attempt running")

    pipeline.doubt_leases()

    await eventually(lambda: len(executor.heartbeats) == 1, what="a heartbeat at once")
    await asyncio.sleep(0)  # the answer handled: the attempt still runs
    assert not run.done() and pipeline.running == 1
    assert reruns("probe") == before
    assert pipeline.cancel("j1") is True
    await asyncio.wait_for(run, 5)


def attempt_with(provider: FakeProvider, executor: FakeExecutor) -> Attempt:
    router = ModelRouter(
        {tier: Route(provider, f"fake-{tier.value}") for tier in ModelTier},
        PriceTable({"fake-primary": (1.0, 1.0)}),
    )
    job = locked(heartbeat_ms=SLOW_BEAT_MS)
    return Attempt(job, credentials=CredentialResolver(executor), gateway=ModelGateway(router))


async def test_no_provider_call_goes_out_until_the_heartbeat_answers() -> None:
    answered = asyncio.Event()
    executor = FakeExecutor()
    provider = FakeProvider()
    attempt = attempt_with(provider, executor)

    async def heartbeat(*args: object, **kwargs: object) -> HeartbeatReply:
        await answered.wait()
        raise LeaseLost("lease lost")

    executor.heartbeat = heartbeat  # type: ignore[method-assign]
    job = attempt.job
    async with Heartbeat(executor, attempt, Lease.granted(job, asyncio.get_running_loop().time())):
        task = asyncio.create_task(attempt.generate(ModelTier.PRIMARY, PROMPT))
        attempt.bind(task)
        attempt.doubt_lease()
        await asyncio.sleep(0.05)  # the call would have gone out by now
        assert provider.calls == 0 and not task.done()
        answered.set()
        await asyncio.wait({task}, timeout=5)
    assert task.cancelled() and attempt.cause is CancelCause.LEASE_LOST
    assert provider.calls == 0


class CutOnce:
    """A session that is cut once after opening, then holds until the goodbye."""

    def __init__(self) -> None:
        self.opened = 0

    async def hold_session(
        self,
        worker_id: str,
        incarnation: str,
        goodbye: asyncio.Event,
        opened: Callable[[str], None],
        slots: object = None,
    ) -> None:
        self.opened += 1
        opened(f"s{self.opened}")
        if self.opened == 1:
            raise ExecutorUnreachable("cut")
        await goodbye.wait()


async def test_the_session_says_when_it_is_back_after_a_cut_not_when_it_first_opens() -> None:
    reopened: list[str | None] = []
    session = WorkerSession(CutOnce(), "w", reopened=lambda: reopened.append(session.session_id))
    async with session:
        await eventually(lambda: session.session_id == "s2", what="the second session")
    assert reopened == ["s2"]
