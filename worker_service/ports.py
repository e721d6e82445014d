"""What the worker needs from the outside world, as Protocols the adapters satisfy.

Errors: the executor API raises ``shared.errors.JobsError`` subclasses when the job service
refused a call on purpose (``LeaseLost`` above all), ``ExecutorUnreachable`` on transport
failures and ``ExecutorCallFailed`` otherwise; a dispatch source raises
``DispatchUnavailable`` (see ``worker_service.domain.errors``). A batch call that went
through answers each item on its own: an item's refusal is returned in its place, as one of
those same errors, and never fails the other items.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from shared.ai.provider import UsageRecord
from shared.ai.steps import StepResponse
from shared.dependencies import DependencyOutput
from shared.durable_steps import StepResult
from worker_service.domain.model import (
    CallPermit,
    HeartbeatReply,
    LockedJob,
    LockResult,
    ResultSubmission,
    Signal,
    UserKey,
)

# The job service takes at most this many items in one LockJobs or SubmitResults call.
MAX_BATCH = 256


class ExecutorApi(Protocol):
    """The job service's ExecutorService, one call per RPC. ``timeout_s`` bounds each call."""

    async def lock_jobs(
        self,
        job_ids: Sequence[str],
        worker_id: str,
        *,
        timeout_s: float,
        queue: str = "",
        runnable: Sequence[str] = (),
    ) -> Sequence[LockResult | Exception]:
        """One LockJobs call for at most ``MAX_BATCH`` dispatches: per dispatch, in order,
        its LockResult or the error its own lock failed with. With ``queue``, the
        dispatches are work tokens of that queue and the job service picks the jobs (a
        LOCKED answer may be another job than the message named), granting only jobs of
        the ``runnable`` definitions ("job_type@version")."""
        ...

    async def heartbeat(
        self, job_id: str, lease_token: str, progress: float, *, timeout_s: float
    ) -> HeartbeatReply: ...

    async def submit_results(
        self, submissions: Sequence[ResultSubmission], *, timeout_s: float
    ) -> Sequence[str | Exception]:
        """SubmitResults for at most ``MAX_BATCH`` results (one call, unless too large for
        one message): per submission, in order, the job's resulting status name
        ("SUCCEEDED", or "CANCELLED" when a cancel won the race) or the error it was refused
        with, which for the items of a failed part of several is that part's failure."""
        ...

    async def submit_results_and_lock(
        self,
        submissions: Sequence[ResultSubmission],
        *,
        timeout_s: float,
        wanted: Mapping[str, int],
        worker_id: str,
        runnable: Sequence[str] = (),
    ) -> tuple[Sequence[str | Exception], Sequence[LockedJob]]:
        """``submit_results``, asking for up to ``wanted[queue]`` jobs of each queue to be
        granted to ``worker_id`` with the answer (lock on submit): the answers and the jobs
        granted (each an ordinary lease). A call that must go in parts asks for none."""
        ...

    async def submit_failure(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        *,
        timeout_s: float,
        usage: Sequence[UsageRecord] = (),
        retry_after_s: float | None = None,
        signals_seen: int = 0,
    ) -> str:
        """The job's resulting status name: "RETRYING", "FAILED" or "CANCELLED". ``usage``
        is stored with the failure; ``retry_after_s`` delays a retry at least that long;
        ``signals_seen``: a signal wait's newest seen signal seq (SUSPENDED_SIGNAL)."""
        ...

    async def report_usage(
        self, job_id: str, lease_token: str, usage: Sequence[UsageRecord], *, timeout_s: float
    ) -> int:
        """Records provider calls of the attempt ``lease_token`` named, whether or not it
        still holds the lease (every call is billed); the rows stored now (a call stored
        already is skipped). ``LeaseLost`` when the token names no attempt of the job."""
        ...

    async def record_step(
        self,
        job_id: str,
        lease_token: str,
        step: str,
        response: StepResponse,
        usage: UsageRecord,
        *,
        timeout_s: float,
    ) -> int:
        """RecordStep: the provider call's response as the job's step ``step``, with the
        call's usage, while ``lease_token`` holds the lease (else ``LeaseLost``); the
        attempt number it was recorded under."""
        ...

    async def record_step_result(
        self, job_id: str, lease_token: str, step: StepResult, *, timeout_s: float
    ) -> tuple[bool, StepResult | None]:
        """RecordStepResult: a durable step's outcome at its ordinal, while ``lease_token``
        holds the lease (else ``LeaseLost``): (True, None) when this call recorded it,
        (False, the outcome stored there already, or None when it is not visible yet)."""
        ...

    async def resolve_credential(
        self, job_id: str, lease_token: str, *, timeout_s: float
    ) -> UserKey:
        """The job owner's key, while ``lease_token`` is the job's current lease (else
        ``LeaseLost``); ``CredentialNotFound`` / ``CredentialUnavailable`` when the job has
        no usable user key."""
        ...

    async def acquire_call_permit(
        self, job_id: str, lease_token: str, tier: str, reserved_slot: str, *, timeout_s: float
    ) -> CallPermit:
        """AcquireCallPermit: may a provider call for ``tier`` be made now (else after how
        long to ask again, with a slot reserved for it or not; ``reserved_slot``: the one
        an earlier answer reserved, now due), while ``lease_token`` is the job's lease
        (else ``LeaseLost``)."""
        ...

    async def report_rate_limited(
        self, job_id: str, lease_token: str, tier: str, retry_after_s: float, *, timeout_s: float
    ) -> None:
        """ReportRateLimited: a call for ``tier`` got a 429 with this Retry-After."""
        ...

    async def fetch_signals(
        self, job_id: str, lease_token: str, after_seq: int, *, timeout_s: float
    ) -> tuple[Sequence[Signal], bool]:
        """The job's signals after ``after_seq`` in send order, and whether there are more,
        while ``lease_token`` is the job's current lease (else ``LeaseLost``)."""
        ...

    async def fetch_dependency_results(
        self, job_id: str, lease_token: str, after_job_id: str, page_size: int, *, timeout_s: float
    ) -> tuple[Sequence[DependencyOutput], bool]:
        """The results of the job's dependencies with an id after ``after_job_id`` ("":
        from the first), in id order, at most ``page_size``, and whether there are more,
        while ``lease_token`` is the job's current lease (else ``LeaseLost``)."""
        ...


class SlotReports(Protocol):
    """The worker's free slots, reported on its session, and the grants pushed for them
    (``worker_service.grants_ahead``)."""

    definitions: list[str]
    # set whenever the free slots may have changed
    changed: asyncio.Event

    def session_opened(self) -> None: ...

    def report(self) -> tuple[dict[str, int], int]:
        """Free slots per queue, and the pushed grants this session has taken."""
        ...

    def drifted(self) -> bool:
        """Whether the job service's view of the free slots, since the last report, is
        worth correcting before the next regular one."""
        ...

    def pushed(self, jobs: Sequence[LockedJob]) -> None: ...


class SessionApi(Protocol):
    """The job service's WorkerSession stream: the worker's liveness signal."""

    async def hold_session(
        self,
        worker_id: str,
        incarnation: str,
        goodbye: asyncio.Event,
        opened: Callable[[str], None],
        slots: SlotReports | None = None,
    ) -> None:
        """Opens a session of this process (``incarnation``), calls ``opened(session_id)``
        once registered, keeps it alive
        until ``goodbye`` is set, then says goodbye and returns once the job service
        answered (or after a short timeout). Raises ``ExecutorUnreachable`` (or another
        error) when the stream ends otherwise: the caller opens a new one at once. With
        ``slots``, the session reports them and runs the grants pushed for them."""
        ...


class ResultSink(Protocol):
    """Where the pipeline hands a successful attempt's result (the result batcher)."""

    async def submit(self, submission: ResultSubmission, *, timeout_s: float) -> str:
        """The job's resulting status name; raises as a single SubmitResult call would."""
        ...


class Delivery(Protocol):
    """One dispatch message as delivered; settled exactly once by ack or nak.
    (``nats.aio.msg.Msg`` satisfies it as is.)"""

    @property
    def data(self) -> bytes: ...

    async def ack(self) -> None: ...

    async def nak(self, delay: float | None = None) -> None: ...


class DispatchSource(Protocol):
    """The per-queue dispatch streams this worker consumes."""

    async def fetch(self, queue: str, batch: int, wait_s: float) -> Sequence[Delivery]:
        """Up to ``batch`` messages, waiting at most ``wait_s`` seconds for the first;
        an empty sequence when none came."""
        ...
