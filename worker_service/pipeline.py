"""One attempt of a locked job, end to end: execute under the definition's timeout and a
heartbeat, validate and hash the output, submit the outcome. The job service decides what
the outcome means (retry, failure, cancellation); the pipeline only reports it."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from shared import logs, redaction, tracing
from shared.ai.provider import UsageRecord
from shared.errors import ErrorCode, classify
from shared.registry import JobDefinition
from worker_service import metrics, stage_times
from worker_service.attempt import Attempt
from worker_service.credentials import CredentialResolver
from worker_service.domain.errors import is_transient, means_lease_lost
from worker_service.domain.model import (
    CancelCause,
    Failed,
    Lease,
    LockedJob,
    Outcome,
    ResultSubmission,
    Succeeded,
)
from worker_service.domain.outcomes import failure_for, failure_for_cause, succeeded, timed_out
from worker_service.gateway import ModelGateway
from worker_service.heartbeat import Heartbeat
from worker_service.ports import ExecutorApi, ResultSink
from worker_service.steps import Checkpoints

log = logging.getLogger(__name__)


def _outcome_label(outcome: Outcome | None) -> str:
    """A bounded label: succeeded, the error class of a failure, or lease_lost."""
    if outcome is None:
        return "lease_lost"
    if isinstance(outcome, Succeeded):
        return "succeeded"
    return classify(outcome.code).value


T = TypeVar("T")

SUBMIT_CALL_TIMEOUT_S = 10.0
MIN_CALL_TIMEOUT_S = 1.0
# Submits retry transient failures until the lease runs out, but for this long at least.
MIN_SUBMIT_WINDOW_S = 2.0
SUBMIT_BACKOFF_START_S = 0.05
SUBMIT_BACKOFF_MAX_S = 1.0
# A cancel that arrives before its job's lock answer (the two race) is kept this long.
EARLY_CANCEL_TTL_S = 10.0
EARLY_CANCEL_MAX = 4096


class Pipeline:
    """Runs attempts and keeps the ones executing addressable by job id for cancellation.
    Results go to ``results`` (the batcher); failures and heartbeats straight to ``executor``."""

    def __init__(
        self,
        executor: ExecutorApi,
        results: ResultSink,
        lookup: Callable[[str], JobDefinition],
        *,
        worker_id: str = "",
        clock: Callable[[], float] = time.monotonic,
        gateway: ModelGateway | None = None,
    ) -> None:
        self._executor = executor
        self._gateway = gateway
        self._credentials = CredentialResolver(executor)
        self._results = results
        self._lookup = lookup
        self._worker_id = worker_id
        self._clock = clock
        self._running: dict[str, Attempt] = {}
        self._early_cancels: dict[str, float] = {}
        self._closing = False

    @property
    def running(self) -> int:
        """Attempts executing right now (submits in progress not counted)."""
        return len(self._running)

    def cancel(self, job_id: str, cause: CancelCause = CancelCause.CANCEL_REQUESTED) -> bool:
        """Stop the job's attempt if it runs here; True when one was stopped."""
        attempt = self._running.get(job_id)
        if attempt is not None:
            return attempt.cancel(cause)
        if cause is CancelCause.CANCEL_REQUESTED:
            self._remember_cancel(job_id)
        return False

    def signal(self, job_id: str, seq: int) -> bool:
        """The job has signals up to ``seq``: its attempt fetches them if it runs here
        (an attempt that starts later fetches them when its job code first asks)."""
        attempt = self._running.get(job_id)
        if attempt is None:
            return False
        attempt.announce_signals(seq)
        return True

    def doubt_leases(self) -> None:
        """The worker's session came back after a cut: every running attempt checks its
        lease at once and makes no provider call until it knows (a lease ended meanwhile
        stops its attempt: the job runs again elsewhere)."""
        for attempt in list(self._running.values()):
            attempt.doubt_lease()

    def shutdown(self) -> int:
        """Stop every executing attempt so it is handed back, and refuse new ones."""
        self._closing = True
        attempts = list(self._running.values())
        for attempt in attempts:
            attempt.cancel(CancelCause.SHUTDOWN)
        return len(attempts)

    async def run(self, job: LockedJob) -> None:
        """Execute one attempt and report its outcome. Never raises for job failures."""
        with logs.job_context(job.job_id, job.attempt):
            stage_times.mark((job.job_id,), "started")
            started = self._clock()
            lease = Lease.granted(job, started)
            outcome: Outcome | None
            usage: tuple[UsageRecord, ...] = ()
            if self._closing:
                outcome = failure_for_cause(CancelCause.SHUTDOWN)
            else:
                with tracing.span("execute", attributes={"jobs.attempt": job.attempt}):
                    outcome, usage = await self._execute(job, lease)
            metrics.attempt_ended(job.job_type, _outcome_label(outcome), self._clock() - started)
            if outcome is None:
                # the lease is lost: another worker owns the job, so the outcome is not
                # ours to report; the provider calls made were billed all the same
                await self._report_usage(job, lease, usage)
                return
            rpc = "SubmitResult" if isinstance(outcome, Succeeded) else "SubmitFailure"
            with tracing.span(rpc, kind=tracing.CLIENT):
                await self._submit(job, lease, outcome)

    # --- execution ----------------------------------------------------------------------

    async def _execute(
        self, job: LockedJob, lease: Lease
    ) -> tuple[Outcome | None, tuple[UsageRecord, ...]]:
        """The outcome (None: the lease was lost) and the attempt's provider calls."""
        definition = self._definition(job)
        attempt = Attempt(
            job,
            credentials=self._credentials,
            gateway=self._gateway,
            checkpoints=self._checkpoints(job, definition),
            executor=self._executor,
            relays_partial_output=redaction.relays_partial_output(definition),
        )
        clock = self._clock
        attempt.watch_lease(lambda: lease.expired(clock()))
        self._running[job.job_id] = attempt
        early = self._early_cancels.pop(job.job_id, None)
        if early is not None and early > self._clock():
            attempt.cancel(CancelCause.CANCEL_REQUESTED)
        task = asyncio.create_task(self._attempt(job, attempt), name=f"job-{job.job_id}")
        attempt.bind(task)
        outcome: Outcome | None
        try:
            async with Heartbeat(self._executor, attempt, lease, clock=self._clock):
                outcome = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we are being cancelled ourselves, not just the job
            if attempt.cause is None:  # job code let a CancelledError of its own escape
                outcome = Failed(ErrorCode.INTERNAL_ERROR, "CancelledError: raised by the job")
            else:
                outcome = failure_for_cause(attempt.cause)
        finally:
            if self._running.get(job.job_id) is attempt:
                del self._running[job.job_id]
        usage = tuple(attempt.usage)
        if attempt.cause is CancelCause.LEASE_LOST or outcome is None:
            return None, usage
        if usage:  # the attempt's provider calls travel with its outcome
            outcome = dataclasses.replace(outcome, usage=usage)
        return outcome, usage

    def _definition(self, job: LockedJob) -> JobDefinition | None:
        try:
            return self._lookup(job.job_type)
        except Exception:
            return None  # an unknown job type fails in _attempt

    def _checkpoints(self, job: LockedJob, definition: JobDefinition | None) -> Checkpoints | None:
        """The attempt's step checkpoints; none for a job type whose output is redacted:
        its responses carry the redacted fields, which must never be stored (ADR 0007)."""
        if not redaction.records_steps(definition):
            return None
        return Checkpoints(job, self._executor, clock=self._clock)

    async def _attempt(self, job: LockedJob, attempt: Attempt) -> Outcome:
        try:
            definition = self._lookup(job.job_type)
            job_input = definition.input_model.model_validate(job.input)
            deadline = asyncio.timeout(definition.timeout_s)
            try:
                async with deadline:
                    result = await definition.execute(job_input, attempt)
            except TimeoutError:
                if deadline.expired():
                    return timed_out(definition.timeout_s)
                raise
            return succeeded(definition, result)
        except Exception as exc:
            return failure_for(exc)

    def _remember_cancel(self, job_id: str) -> None:
        now = self._clock()
        if len(self._early_cancels) >= EARLY_CANCEL_MAX:
            self._early_cancels = {j: t for j, t in self._early_cancels.items() if t > now}
            while len(self._early_cancels) >= EARLY_CANCEL_MAX:
                del self._early_cancels[next(iter(self._early_cancels))]
        self._early_cancels[job_id] = now + EARLY_CANCEL_TTL_S

    # --- submission ---------------------------------------------------------------------

    async def _submit(self, job: LockedJob, lease: Lease, outcome: Outcome) -> None:
        deadline = max(lease.deadline, self._clock() + MIN_SUBMIT_WINDOW_S)
        if isinstance(outcome, Succeeded):
            refusal = await self._submit_result(job, lease, outcome, deadline)
            if refusal is None:
                return
            outcome = refusal
        await self._submit_failure(job, lease, outcome, deadline)

    async def _submit_result(
        self, job: LockedJob, lease: Lease, result: Succeeded, deadline: float
    ) -> Failed | None:
        """Submit the result; a Failed to report instead when the job service refused it
        outright (so the job does not wait for its lease to run out)."""
        sink = self._results
        definition = self._definition(job)
        queue = definition.queue if definition is not None else ""
        submission = ResultSubmission(job.job_id, lease.token, result, queue)
        try:
            status = await self._retrying(
                deadline, lambda timeout: sink.submit(submission, timeout_s=timeout)
            )
        except Exception as exc:
            if self._refused(job, "SubmitResults", exc):
                return Failed(
                    ErrorCode.INTERNAL_ERROR,
                    f"the job service refused the result: {type(exc).__name__}: {exc}",
                    usage=result.usage,
                )
            await self._report_usage(job, lease, result.usage)
            return None
        log.debug("job %s attempt %d: result submitted -> %s", job.job_id, job.attempt, status)
        return None

    async def _submit_failure(
        self, job: LockedJob, lease: Lease, failure: Failed, deadline: float
    ) -> None:
        ex = self._executor
        try:
            status = await self._retrying(
                deadline,
                lambda timeout: ex.submit_failure(
                    job.job_id,
                    lease.token,
                    failure.code,
                    failure.message,
                    timeout_s=timeout,
                    usage=failure.usage,
                    retry_after_s=failure.retry_after_s,
                    signals_seen=failure.signals_seen,
                ),
            )
        except Exception as exc:
            if not self._refused(job, "SubmitFailure", exc):
                await self._report_usage(job, lease, failure.usage)
            return
        log.info(
            "job %s attempt %d on %s ended %s; the job is %s",
            job.job_id,
            job.attempt,
            self._worker_id,
            failure.code,
            status.lower(),
        )

    async def _report_usage(
        self, job: LockedJob, lease: Lease, usage: tuple[UsageRecord, ...]
    ) -> None:
        """Usage is a fact, not a result: the provider calls of an attempt whose outcome
        could not be committed (a lost lease, a submit that never got through) are reported
        on their own, named by the attempt's lease token. Each call's id makes a repeat
        harmless; what cannot be reported stays marked unknown by the job service."""
        if not usage:
            return
        ex = self._executor
        deadline = self._clock() + MIN_SUBMIT_WINDOW_S
        try:
            stored = await self._retrying(
                deadline,
                lambda timeout: ex.report_usage(job.job_id, lease.token, usage, timeout_s=timeout),
            )
        except Exception as exc:
            log.warning(
                "job %s attempt %d: %d provider calls could not be reported (%s)",
                job.job_id,
                job.attempt,
                len(usage),
                type(exc).__name__,
            )
            return
        metrics.usage_reported_late(stored)
        log.info(
            "job %s attempt %d: reported %d provider calls of an uncommitted attempt",
            job.job_id,
            job.attempt,
            stored,
        )

    async def _retrying(self, deadline: float, call: Callable[[float], Awaitable[T]]) -> T:
        """``call`` (given its timeout) until it answers, retrying transient failures until
        ``deadline``. A try gets half the time left: a replica that hangs (frozen, cut off)
        costs one try, and the next — which the channel sends to another replica — still
        fits in the lease (chaos, seed 9989: a job's four attempts each spent their whole
        lease on one SubmitResults to a frozen replica, and the job failed LEASE_EXPIRED)."""
        backoff = SUBMIT_BACKOFF_START_S
        while True:
            remaining = deadline - self._clock()
            try:
                return await call(
                    min(SUBMIT_CALL_TIMEOUT_S, max(remaining / 2, MIN_CALL_TIMEOUT_S))
                )
            except Exception as exc:
                if not is_transient(exc) or self._clock() + backoff >= deadline:
                    raise
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, SUBMIT_BACKOFF_MAX_S)

    def _refused(self, job: LockedJob, rpc: str, exc: Exception) -> bool:
        """Log a failed submit; True when the job service refused it outright (neither a
        lost lease nor an outage)."""
        if means_lease_lost(exc):
            log.info(
                "job %s attempt %d: %s refused, the lease is lost; dropping the outcome",
                job.job_id,
                job.attempt,
                rpc,
            )
            return False
        if is_transient(exc):
            log.warning(
                "job %s attempt %d: %s kept failing (%s) until the lease ran out; the job "
                "service will settle the job",
                job.job_id,
                job.attempt,
                rpc,
                type(exc).__name__,
            )
            return False
        log.error(
            "job %s attempt %d: %s failed (%s)", job.job_id, job.attempt, rpc, type(exc).__name__
        )
        return True
