"""The workload: a mix of job kinds created at a steady rate by a client that tolerates
failures honestly.

A create is retried with the *same* idempotency key until the service answers, so a job
counts as acknowledged only once a replica said so; a create never acknowledged is not
counted as lost (the checker still looks for it). Cancels are retried the same way.

A job kind is one entry of ``KINDS``: its job type, how to draw its input, whether and when
the client cancels it, the statuses it may end in, and how many child jobs a succeeded one
has (``feynman`` is the parent/child kind: its projection creates one review-card job).

The scheduler's policies are exercised too: ``keyed`` jobs run under a concurrency key per
user (at most 2 at once; two users share them, so that the limit bites), ``metered`` jobs
and feynman's children on the cheap tier, held to its fleet-wide rate limit
(profiles.rate_limits, sized to the profile's create rate); a share of every kind is
delayed (``run_at`` a few seconds ahead) and a share has a priority other than its type's
default.

Fan-in (``tests/chaos/joins.py``): a side load of joins, each created with ``depends_on``
the jobs of a group created just before it in one CreateJobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from shared.grpc_client import aio_channel
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import admin_service_pb2_grpc, job_pb2, job_service_pb2_grpc
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import DependencyPolicy
from shared.rpc_errors import error_from_rpc, error_from_status
from tests.chaos import agents, signals
from tests.support.processes import client_config

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 3.0
BATCH_ITEM_TIMEOUT_S = 0.02
RETRY_START_S = 0.1
RETRY_MAX_S = 1.0
# A create or cancel is given up (never acknowledged) after this long.
GIVE_UP_S = 60.0
# Fast reconnects: a restarted replica is back within a second or two.
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
# Refusals that mean the call reached the service and it decided: not worth repeating.
FINAL_REASONS = {"JOB_NOT_CANCELLABLE", "JOB_ALREADY_CANCELLED", "JOB_NOT_FOUND"}
# Scheduling drawn per created job, whatever its kind: delayed (run_at this far ahead) ...
DELAYED_SHARE = 0.15
DELAY_S = (0.5, 4.0)
# ... and a priority other than the type's default (one level: StackSettings.priority_step_s
# of waiting; the widest gap, 4 levels, stays inside the recovery bounds' slack)
PRIORITISED_SHARE = 0.25
PRIORITIES = (-2, -1, 1, 2)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class JobKind:
    name: str
    weight: int
    job_type: str
    draw_input: Callable[[random.Random], dict[str, Any]]
    # the statuses a job of this kind may end in
    ends: frozenset[str]
    # when set, the client cancels the job this many seconds (drawn) after its create
    cancel_after: Callable[[random.Random], float] | None = None
    # child jobs a succeeded job of this kind has (its projection creates them)
    children: int = 0
    # when set, the users its jobs belong to (a concurrency key per user: few, so it bites)
    users: tuple[str, ...] = ()
    # when set, once the parent succeeded the client cancels its child and an admin retries
    # the child this many times at once (one live child per parent and type must hold)
    child_retries: int = 0
    # when set, run once the create is acknowledged (given the client's next stub): the
    # signal-waiting jobs send their signals (tests/chaos/signals.py)
    after_create: (
        Callable[
            [Callable[[], job_service_pb2_grpc.JobServiceStub], Submission, random.Random],
            Awaitable[None],
        ]
        | None
    ) = None


def _quick(r: random.Random) -> dict[str, Any]:
    return {"sleep_ms": r.randint(0, 50)}


def _feynman(r: random.Random) -> dict[str, Any]:
    item = r.randint(1, 10_000)
    return {
        "knowledge_item_id": f"ki-{item}",
        "knowledge_base_id": "kb-chaos",
        "title": f"Osmosis {item}",
        "content": "Water moves through a semi-permeable membrane towards higher solute "
        "concentration until the concentrations balance.",
        "explanation": r.choice(
            [
                "Water moves through a membrane.",
                "Water moves towards more solute through a membrane until it balances.",
                "Salt moves through the membrane.",
            ]
        ),
    }


KINDS: tuple[JobKind, ...] = (
    JobKind("quick", 40, "synthetic", _quick, frozenset({"succeeded", "failed"})),
    JobKind(
        "slow",
        15,
        "synthetic",
        lambda r: {"sleep_ms": r.randint(500, 3000)},
        frozenset({"succeeded", "failed"}),
    ),
    JobKind(
        "flaky",
        15,
        "synthetic",
        lambda r: {
            "fail": "retryable",
            "fail_times": r.randint(1, 2),
            "sleep_ms": r.randint(0, 200),
        },
        frozenset({"succeeded", "failed"}),
    ),
    JobKind(
        "fatal",
        10,
        "synthetic",
        lambda r: {"fail": "fatal", "sleep_ms": r.randint(0, 100)},
        frozenset({"failed"}),
    ),
    JobKind(
        "hang-cancelled",
        8,
        "synthetic",
        lambda r: {"fail": "hang"},
        frozenset({"cancelled"}),
        cancel_after=lambda r: r.uniform(0.3, 2.0),
    ),
    JobKind(
        "cancel-race",
        12,
        "synthetic",
        lambda r: {"sleep_ms": r.randint(100, 600)},
        frozenset({"succeeded", "cancelled", "failed"}),
        cancel_after=lambda r: r.uniform(0.0, 0.7),
    ),
    JobKind(
        "feynman",
        10,
        "feynman_evaluation",
        _feynman,
        frozenset({"succeeded", "failed"}),
        children=1,
    ),
    JobKind(
        "keyed",
        16,
        "keyed",
        lambda r: {"sleep_ms": r.randint(500, 2500)},
        frozenset({"succeeded", "failed"}),
        users=("chaos-keyed-0", "chaos-keyed-1"),
    ),
    JobKind("metered", 12, "metered", _quick, frozenset({"succeeded", "failed"})),
    JobKind(
        "feynman-child-retried",
        6,
        "feynman_evaluation",
        _feynman,
        frozenset({"succeeded", "failed"}),
        children=1,
        child_retries=3,
    ),
    JobKind(
        "redacted",
        4,
        "redacted_feynman",
        _feynman,
        frozenset({"succeeded", "failed"}),
        children=1,
    ),
    JobKind(
        "signalled",
        8,
        "synthetic",
        signals.draw_input,
        frozenset({"succeeded", "failed"}),
        after_create=signals.send_signals,
    ),
    JobKind(
        "agent",
        8,
        "agent",
        agents.draw_input,
        frozenset({"succeeded", "failed"}),
        after_create=agents.send_approval,
    ),
)
# how long the client waits for a parent (and its child) before it gives up retrying
CHILD_WAIT_S = 30.0
ENDED = (job_pb2.JOB_STATUS_SUCCEEDED, job_pb2.JOB_STATUS_FAILED, job_pb2.JOB_STATUS_CANCELLED)
# RetryJob refusals that are the service deciding (one live child per parent and type)
RETRY_REFUSALS = {"LIVE_CHILD_EXISTS", "LIVE_RETRY_EXISTS", "JOB_NOT_RETRYABLE"}
PROBE = JobKind("probe", 0, "synthetic", _quick, frozenset({"succeeded"}))
POLICIES = {
    DependencyPolicy.RUN: job_pb2.DEPENDENCY_POLICY_RUN,
    DependencyPolicy.FAIL: job_pb2.DEPENDENCY_POLICY_FAIL,
    DependencyPolicy.CANCEL: job_pb2.DEPENDENCY_POLICY_CANCEL,
}


@dataclass
class Submission:
    """One job the workload tried to create, and what the client learnt of it."""

    key: str
    user_id: str
    kind: JobKind
    job_id: str | None = None
    # harness clock (time.monotonic) of the acknowledgement
    acked_at: float | None = None
    create_calls: int = 0
    cancel_acked: bool | None = None
    errors: list[str] = field(default_factory=list)
    # the due time asked for (CreateJob run_at; None: now), in whole microseconds
    run_at: datetime | None = None
    # the priority asked for (None: the job type's default)
    priority: int | None = None
    # admin retries of the job's child: made, and refused (by reason)
    child_retries_made: int = 0
    child_retries_refused: dict[str, int] = field(default_factory=dict)
    # signals a replica acknowledged: name -> (payload value, wall-clock time)
    signals: dict[str, tuple[int, float]] = field(default_factory=dict)
    # a join: the acknowledged jobs it was created to wait for, and its policy
    depends_on: tuple[str, ...] = ()
    policy: DependencyPolicy | None = None


class ChaosClient:
    """CreateJob/CancelJob/GetJob against every replica, retried across them."""

    def __init__(self, targets: list[str]) -> None:
        self._channels = [aio_channel(client_config(t), CHANNEL_OPTIONS) for t in targets]
        self._stubs = [job_service_pb2_grpc.JobServiceStub(c) for c in self._channels]
        self._admins = [admin_service_pb2_grpc.AdminServiceStub(c) for c in self._channels]
        self._next = 0

    def _stub(self) -> job_service_pb2_grpc.JobServiceStub:
        self._next = (self._next + 1) % len(self._stubs)
        return self._stubs[self._next]

    def next_stub(self) -> job_service_pb2_grpc.JobServiceStub:
        """The next replica's JobService (the calls of a hook rotate like ours)."""
        return self._stub()

    async def create(self, sub: Submission, job_input: dict[str, Any]) -> bool:
        request = _create_request(sub, job_input)

        async def call(stub: job_service_pb2_grpc.JobServiceStub) -> None:
            response = await stub.CreateJob(request, timeout=CALL_TIMEOUT_S)
            sub.job_id = response.job.id
            sub.acked_at = time.monotonic()

        return await self._retrying(sub, call, "create")

    async def create_many(
        self, subs: Sequence[Submission], inputs: Sequence[dict[str, Any]]
    ) -> int:
        """One CreateJobs of them all, sent again (the same keys) for the items without an
        answer until each has one or GIVE_UP_S has passed; how many were acknowledged."""
        left = dict(zip((s.key for s in subs), zip(subs, inputs, strict=True), strict=True))
        deadline = time.monotonic() + GIVE_UP_S
        delay = RETRY_START_S
        while left:
            batch = list(left.values())
            request = jpb.CreateJobsRequest(requests=[_create_request(s, i) for s, i in batch])
            for sub, _ in batch:
                sub.create_calls += 1
            try:
                # a batch of 200 takes its replica longer than one job
                timeout = CALL_TIMEOUT_S + BATCH_ITEM_TIMEOUT_S * len(batch)
                response = await self._stub().CreateJobs(request, timeout=timeout)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise  # the workload is wrong, not the platform
                error = error_from_rpc(exc)
                reason = error.reason.value if error is not None else exc.code().name
                for sub, _ in batch:
                    sub.errors.append(f"create: {reason}")
            else:
                for (sub, _), result in zip(batch, response.results, strict=True):
                    if result.HasField("response"):
                        sub.job_id = result.response.job.id
                        sub.acked_at = time.monotonic()
                        del left[sub.key]
                        continue
                    if result.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]:
                        raise RuntimeError(f"create {sub.key} refused: {result.error.message}")
                    error = error_from_status(result.error)
                    sub.errors.append(f"create: {error.reason.value if error else result.error}")
            if not left or time.monotonic() + delay > deadline:
                break
            await asyncio.sleep(delay)  # backoff between tries of a failed call
            delay = min(delay * 2, RETRY_MAX_S)
        return len(subs) - len(left)

    async def cancel(self, sub: Submission) -> bool:
        assert sub.job_id is not None
        request = jpb.CancelJobRequest(job_id=sub.job_id, user_id=sub.user_id)

        async def call(stub: job_service_pb2_grpc.JobServiceStub) -> None:
            await stub.CancelJob(request, timeout=CALL_TIMEOUT_S)

        return await self._retrying(sub, call, "cancel")

    async def succeeded(self, job_id: str, user_id: str) -> bool:
        """Whether GetJob says the job succeeded (any failure: not yet)."""
        try:
            response = await self._stub().GetJob(
                jpb.GetJobRequest(job_id=job_id, user_id=user_id), timeout=CALL_TIMEOUT_S
            )
        except grpc.aio.AioRpcError:
            return False
        return bool(response.job.status == job_pb2.JOB_STATUS_SUCCEEDED)

    async def job(self, job_id: str, user_id: str) -> job_pb2.Job | None:
        """The job as GetJob shows it (None: no answer now)."""
        try:
            response = await self._stub().GetJob(
                jpb.GetJobRequest(job_id=job_id, user_id=user_id), timeout=CALL_TIMEOUT_S
            )
        except grpc.aio.AioRpcError:
            return None
        job: job_pb2.Job = response.job
        return job

    async def cancel_job(self, job_id: str, user_id: str) -> None:
        """One CancelJob; any refusal or failure is fine (the job may have finished)."""
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self._stub().CancelJob(
                jpb.CancelJobRequest(job_id=job_id, user_id=user_id), timeout=CALL_TIMEOUT_S
            )

    async def retry_job(self, job_id: str) -> str:
        """AdminService.RetryJob until the service decides: "made", or the reason it
        refused; "gave up" when it never answered. One idempotency key for the call and
        its replays: a replay after a lost answer finds the retry the first one made."""
        key = f"chaos-{uuid.uuid4()}"
        deadline = time.monotonic() + GIVE_UP_S
        delay = RETRY_START_S
        while True:
            self._next = (self._next + 1) % len(self._admins)
            try:
                await self._admins[self._next].RetryJob(
                    apb.RetryJobRequest(job_id=job_id, idempotency_key=key),
                    timeout=CALL_TIMEOUT_S,
                )
                return "made"
            except grpc.aio.AioRpcError as exc:
                error = error_from_rpc(exc)
                reason = error.reason.value if error is not None else exc.code().name
                if reason in RETRY_REFUSALS:
                    return reason
            if time.monotonic() + delay > deadline:
                return "gave up"
            await asyncio.sleep(delay)  # backoff between tries of a failed call
            delay = min(delay * 2, RETRY_MAX_S)

    async def _retrying(self, sub: Submission, call: Any, what: str) -> bool:
        deadline = time.monotonic() + GIVE_UP_S
        delay = RETRY_START_S
        while True:
            sub.create_calls += what == "create"
            try:
                await call(self._stub())
                return True
            except grpc.aio.AioRpcError as exc:
                error = error_from_rpc(exc)
                reason = error.reason.value if error is not None else exc.code().name
                if what == "cancel" and reason in FINAL_REASONS:
                    return True  # it answered: the job had already ended
                if exc.code() in (grpc.StatusCode.INVALID_ARGUMENT,):
                    raise  # the workload is wrong, not the platform
                sub.errors.append(f"{what}: {reason}")
            if time.monotonic() + delay > deadline:
                return False
            await asyncio.sleep(delay)  # backoff between tries of a failed call
            delay = min(delay * 2, RETRY_MAX_S)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()


def _create_request(sub: Submission, job_input: dict[str, Any]) -> jpb.CreateJobRequest:
    request = jpb.CreateJobRequest(
        user_id=sub.user_id,
        job_type=sub.kind.job_type,
        input=struct_from_dict(job_input),
        idempotency_key=sub.key,
        priority=sub.priority,
        depends_on=sub.depends_on,
    )
    if sub.policy is not None:
        request.dependency_policy = POLICIES[sub.policy]
    if sub.run_at is not None:
        micros = (sub.run_at - EPOCH) // timedelta(microseconds=1)
        request.run_at.CopyFrom(
            Timestamp(seconds=micros // 1_000_000, nanos=micros % 1_000_000 * 1000)
        )
    return request


# A load beside the steady creates (joins.py's), run with the workload until it stops.
SideLoad = Callable[["Workload"], Awaitable[None]]


class Workload:
    """Creates jobs at ``rate`` per second until stopped, and runs its side loads;
    remembers every job it tried."""

    def __init__(
        self,
        client: ChaosClient,
        rng: random.Random,
        rate: float,
        side_loads: Sequence[SideLoad] = (),
    ) -> None:
        self.client = client
        self.rng = rng
        self.rate = rate
        self.submissions: list[Submission] = []
        self._side_loads = side_loads
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()
        self._weights = [k.weight for k in KINDS]

    async def run(self) -> None:
        await asyncio.gather(self._steady(), *(load(self) for load in self._side_loads))

    async def stopped_within(self, seconds: float) -> bool:
        """Waits ``seconds`` or until the workload is stopped; whether it is."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
        return self._stop.is_set()

    def track(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Runs ``coro`` as one of the workload's calls: drained and abandoned with them."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _steady(self) -> None:
        n = 0
        started = time.monotonic()
        while not self._stop.is_set():
            kind = self.rng.choices(KINDS, self._weights)[0]
            delay = self.rng.uniform(*DELAY_S) if self.rng.random() < DELAYED_SHARE else None
            priority = (
                self.rng.choice(PRIORITIES) if self.rng.random() < PRIORITISED_SHARE else None
            )
            self.submit(kind, f"chaos-{n}", delay_s=delay, priority=priority)
            n += 1
            # the n-th create is due at started + n / rate (no drift from slow calls)
            pause = started + n / self.rate - time.monotonic()
            if pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), pause)

    def submit(
        self, kind: JobKind, key: str, *, delay_s: float | None = None, priority: int | None = None
    ) -> Submission:
        user = (
            self.rng.choice(kind.users) if kind.users else f"chaos-user-{len(self.submissions) % 7}"
        )
        sub = Submission(key=key, user_id=user, kind=kind, priority=priority)
        if delay_s is not None:
            # a datetime holds whole microseconds, as the database does: compared exactly
            sub.run_at = datetime.now(UTC) + timedelta(seconds=delay_s)
        self.submissions.append(sub)
        self.track(self._drive(sub), f"submit-{key}")
        return sub

    async def probe(self, key: str, timeout_s: float) -> float | None:
        """Seconds for a fresh job to be created and succeed, or None within timeout_s."""
        started = time.monotonic()
        sub = self.submit(PROBE, key)
        deadline = started + timeout_s
        while time.monotonic() < deadline:
            if sub.job_id is not None and await self.client.succeeded(sub.job_id, sub.user_id):
                return time.monotonic() - started
            await asyncio.sleep(0.1)  # poll interval, bounded by the deadline
        return None

    async def _drive(self, sub: Submission) -> None:
        if not await self.client.create(sub, sub.kind.draw_input(self.rng)):
            log.warning("create %s never acknowledged", sub.key)
            return
        await self.follow_up(sub)

    async def follow_up(self, sub: Submission) -> None:
        """What the client does once a job's create was acknowledged (its kind says)."""
        if sub.kind.after_create is not None:
            await sub.kind.after_create(self.client.next_stub, sub, self.rng)
        if sub.kind.cancel_after is not None:
            await asyncio.sleep(sub.kind.cancel_after(self.rng))  # the client's own pace
            sub.cancel_acked = await self.client.cancel(sub)
        if sub.kind.child_retries:
            await self._retry_child(sub)

    async def _retry_child(self, sub: Submission) -> None:
        """Once the parent succeeded: cancel its child (it may have finished: then the
        retries are refused), and have an admin retry it several times at once."""
        assert sub.job_id is not None
        deadline = time.monotonic() + CHILD_WAIT_S
        parent = None
        while time.monotonic() < deadline:
            parent = await self.client.job(sub.job_id, sub.user_id)
            if parent is not None and (
                parent.child_job_ids or parent.status == job_pb2.JOB_STATUS_FAILED
            ):
                break
            await asyncio.sleep(0.2)  # poll interval, bounded by the deadline
        if parent is None or not parent.child_job_ids:
            return
        child_id = parent.child_job_ids[0]
        await self.client.cancel_job(child_id, sub.user_id)
        while time.monotonic() < deadline:  # a running child ends cancelled once stopped
            child = await self.client.job(child_id, sub.user_id)
            if child is not None and child.status in ENDED:
                break
            await asyncio.sleep(0.2)  # poll interval, bounded by the deadline
        answers = await asyncio.gather(
            *(self.client.retry_job(child_id) for _ in range(sub.kind.child_retries))
        )
        for answer in answers:
            if answer == "made":
                sub.child_retries_made += 1
            else:
                sub.child_retries_refused[answer] = sub.child_retries_refused.get(answer, 0) + 1

    def stop(self) -> None:
        self._stop.set()

    async def abandon(self) -> None:
        """Cancel every create and cancel still in progress (the run is being torn down)."""
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def drain(self) -> None:
        """Wait for every create (and cancel) in progress to be answered or given up."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))
