"""One running attempt: the ``ExecutionContext`` job code sees, and the handle that stops it."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from shared.ai.prompts import RenderedPrompt
from shared.ai.provider import ModelTier, ProviderResponse, UsageRecord
from shared.dependencies import DependencyOutput
from shared.errors import ErrorCode, ExecutionError
from worker_service import metrics
from worker_service.credentials import CredentialResolver
from worker_service.dependencies import PAGE_SIZE, DependencyResults
from worker_service.domain.errors import means_lease_lost
from worker_service.domain.model import CancelCause, LockedJob, Signal
from worker_service.durable_steps import DurableSteps
from worker_service.signals import AttemptSignals
from worker_service.waits import Waits

if TYPE_CHECKING:
    from worker_service.gateway import ModelGateway
    from worker_service.ports import ExecutorApi
    from worker_service.steps import Checkpoints

NO_PROGRESS = -1.0
FETCH_SIGNALS_TIMEOUT_S = 5.0
FETCH_DEPENDENCIES_TIMEOUT_S = 10.0
T = TypeVar("T")


class Attempt:
    """Created per locked job. ``cancel`` stops the execution task at once (asyncio
    cancellation reaches the awaiting provider call) and records why."""

    __slots__ = (
        "_api_key",
        "_checkpoints",
        "_confirmed",
        "_credentials",
        "_dependencies",
        "_durable",
        "_executor",
        "_gateway",
        "_progress",
        "_resolved",
        "_signals",
        "_streams_to",
        "_task",
        "_waits",
        "beat_now",
        "cause",
        "job",
        "usage",
    )

    def __init__(
        self,
        job: LockedJob,
        *,
        credentials: CredentialResolver,
        gateway: ModelGateway | None = None,
        checkpoints: Checkpoints | None = None,
        executor: ExecutorApi | None = None,
        relays_partial_output: bool = False,
    ) -> None:
        """``executor``: where signals and dependency results are fetched from (None: job
        code asking for either fails the attempt). ``relays_partial_output``: the provider
        calls stream their text to the job's watchers (never for a type that redacts its
        output: ``shared.redaction``)."""
        self.job = job
        self.cause: CancelCause | None = None
        # One record per provider call of this attempt, submitted with its outcome.
        self.usage: list[UsageRecord] = []
        self._gateway = gateway
        self._streams_to = (job.job_id, job.attempt) if relays_partial_output else None
        # None: steps are not checkpointed (each named step calls the provider)
        self._checkpoints = checkpoints
        self._task: asyncio.Task[object] | None = None
        self._progress: float | None = None
        self._credentials = credentials
        self._api_key: str | None = None
        self._resolved = False
        self._executor = executor
        # created when job code first asks for a signal: attempts that never do cost nothing
        self._signals: AttemptSignals | None = None
        self._dependencies: DependencyResults | None = None
        self._durable = DurableSteps(job, executor)
        self._waits = Waits(self._durable, self._inbox)
        # None: the lease is not in doubt; unset: no provider call until a heartbeat answers
        self._confirmed: asyncio.Event | None = None
        # set by the attempt's heartbeat: beat now rather than at the next interval
        self.beat_now: Callable[[], None] | None = None

    # --- ExecutionContext ---------------------------------------------------------------

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def user_id(self) -> str:
        return self.job.user_id

    @property
    def prompt(self) -> tuple[str, str]:
        return self.job.prompt_key, self.job.prompt_version

    async def generate(
        self, tier: ModelTier, prompt: RenderedPrompt, *, step: str = ""
    ) -> ProviderResponse:
        if self._gateway is None:
            raise ExecutionError(ErrorCode.INTERNAL_ERROR, "this worker has no model gateway")
        checkpoints = self._checkpoints if step else None
        if checkpoints is not None and (reused := checkpoints.reuse(step)) is not None:
            response, usage = reused
            self.usage.append(usage)
            return response
        if self._confirmed is not None:
            await self._confirmed.wait()  # a lost lease cancels this wait with the attempt
        # the owner's own key (fetched under this lease) or None: the tier's platform key
        api_key = await self.api_key()
        try:
            response = await self._gateway.generate(
                tier,
                prompt,
                self.usage,
                api_key=api_key,
                job=self._streams_to,
                lease=(self.job_id, self.job.lease_token),
            )
        except Exception as exc:
            if means_lease_lost(exc):  # no permit for a lost lease
                self.cancel(CancelCause.LEASE_LOST)
            raise
        if checkpoints is not None:
            try:
                await checkpoints.record(step, response, self.usage[-1])
            except Exception as exc:
                if means_lease_lost(exc):
                    self.cancel(CancelCause.LEASE_LOST)
                raise
        return response

    def report_progress(self, fraction: float) -> None:
        """Keep the latest progress (0..1); the next heartbeat carries it."""
        if math.isfinite(fraction):
            self._progress = min(1.0, max(0.0, fraction))

    async def api_key(self) -> str | None:
        """The key to call the provider with (None: the platform's); fetched once per
        attempt. A lost lease stops the attempt, which then reports nothing."""
        if not self._resolved:
            try:
                self._api_key = await self._credentials.resolve(self.job)
            except Exception as exc:
                if means_lease_lost(exc):
                    self.cancel(CancelCause.LEASE_LOST)
                raise
            self._resolved = True
        return self._api_key

    async def signal(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        """The payload of the next signal named ``name`` (send order; each once per
        attempt), waiting up to ``timeout`` seconds (None: as long as the attempt may run).
        Raises TimeoutError when none came."""
        return await self._lease_guarded(self._inbox().wait(name, timeout))

    async def poll_signal(self, name: str) -> dict[str, Any] | None:
        """The payload of the next signal named ``name`` if one has arrived, else None."""
        return await self._lease_guarded(self._inbox().poll(name))

    async def dependency_results(self) -> list[DependencyOutput]:
        """How the jobs this one waited for ended, in job id order; [] without a call for
        a job that waited for none."""
        if self.job.dependency_count <= 0:
            return []
        return await self._lease_guarded(self._dependency_results().all())

    async def step(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Runs ``fn(*args)`` as the job's next durable step, once per job
        (``worker_service.durable_steps``)."""
        if self._confirmed is not None:
            await self._confirmed.wait()  # no side effect while the lease is in doubt
        return await self._lease_guarded(self._durable.run(name, fn, args))

    async def sleep(self, seconds: float) -> None:
        """A durable sleep: the attempt ends and the job runs again ``seconds`` from the
        first run's call (``worker_service.waits``)."""
        if not seconds >= 0:
            raise ValueError(f"a sleep lasts 0 seconds or more (got {seconds!r})")
        await self.sleep_until(time.time() + seconds)

    async def sleep_until(self, when: datetime | float) -> None:
        """A durable sleep until ``when`` (an aware datetime, or epoch seconds)."""
        if isinstance(when, datetime):
            if when.tzinfo is None:
                raise ValueError("sleep_until needs an aware datetime (with its time zone)")
            when = when.timestamp()
        await self._lease_guarded(self._waits.sleep_until(when))

    async def wait_for_signal(self, name: str, timeout: float) -> dict[str, Any] | None:
        """A durable wait for the next signal named ``name``: its payload, or None after
        ``timeout`` seconds (``worker_service.waits``)."""
        return await self._lease_guarded(self._waits.wait_for_signal(name, timeout))

    def watch_lease(self, expired: Callable[[], bool]) -> None:
        """``expired``: whether the lease has run out by this worker's clock (a process
        paused past it): then no durable step calls its function."""
        self._durable.lease_expired = expired

    @property
    def step_key(self) -> str:
        key = self._durable.key
        if key is None:
            raise RuntimeError("ctx.step_key is the key of the step running now: there is none")
        return key

    # --- control ------------------------------------------------------------------------

    def announce_signals(self, seq: int) -> None:
        """The job has signals up to ``seq`` (a notice or a heartbeat said so)."""
        if self._signals is not None and seq > 0:
            self._signals.announce(seq)

    def take_progress(self) -> float:
        """Progress reported since the last heartbeat, or NO_PROGRESS."""
        progress, self._progress = self._progress, None
        return NO_PROGRESS if progress is None else progress

    def restore_progress(self, progress: float) -> None:
        """Put back progress whose heartbeat failed, unless newer progress arrived."""
        if progress >= 0 and self._progress is None:
            self._progress = progress

    def doubt_lease(self) -> None:
        """The worker's session came back after a cut: the job service may have ended this
        lease meanwhile (its reconnect grace) and run the job again elsewhere. No provider
        call until the heartbeat, sent at once, says whether the lease is still ours."""
        if self._confirmed is None:
            self._confirmed = asyncio.Event()
        self._confirmed.clear()
        if self.beat_now is not None:
            self.beat_now()

    @property
    def lease_in_doubt(self) -> bool:
        return self._confirmed is not None and not self._confirmed.is_set()

    def lease_confirmed(self) -> None:
        if self._confirmed is not None:
            self._confirmed.set()

    def bind(self, task: asyncio.Task[object]) -> None:
        self._task = task
        if self.cause is not None:
            task.cancel()

    def cancel(self, cause: CancelCause) -> bool:
        """Stop the attempt; True when a running execution was cancelled.

        The first cause wins, except that a lost lease overrides any other: once another
        worker owns the job, this one must report nothing at all."""
        if self.cause is None or cause is CancelCause.LEASE_LOST:
            self.cause = cause
        if self._task is not None and not self._task.done():
            self._task.cancel()
            return True
        return False

    def _inbox(self) -> AttemptSignals:
        if self._signals is None:
            executor = self._executor
            if executor is None:
                raise ExecutionError(ErrorCode.INTERNAL_ERROR, "this worker cannot fetch signals")
            job = self.job

            async def fetch(after_seq: int) -> tuple[Sequence[Signal], bool]:
                return await executor.fetch_signals(
                    job.job_id, job.lease_token, after_seq, timeout_s=FETCH_SIGNALS_TIMEOUT_S
                )

            def delivered(signal: Signal, arrived_late: bool) -> None:
                latency = time.time() - signal.sent_at.timestamp() if arrived_late else None
                metrics.signal_delivered(job.job_type, latency)

            self._signals = AttemptSignals(fetch, delivered=delivered)
        return self._signals

    def _dependency_results(self) -> DependencyResults:
        if self._dependencies is None:
            executor = self._executor
            if executor is None:
                raise ExecutionError(
                    ErrorCode.INTERNAL_ERROR, "this worker cannot fetch dependency results"
                )
            job = self.job

            async def fetch_page(after_job_id: str) -> tuple[Sequence[DependencyOutput], bool]:
                return await executor.fetch_dependency_results(
                    job.job_id,
                    job.lease_token,
                    after_job_id,
                    PAGE_SIZE,
                    timeout_s=FETCH_DEPENDENCIES_TIMEOUT_S,
                )

            self._dependencies = DependencyResults(fetch_page, job.dependency_count)
        return self._dependencies

    async def _lease_guarded(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except Exception as exc:
            if means_lease_lost(exc):
                self.cancel(CancelCause.LEASE_LOST)
            raise
