"""Durable steps of one attempt (issue 45, ADR 0013): any side effect job code runs as
``await ctx.step(name, fn, *args)`` happens once per job, whatever crashes and retries
come between.

    recorded earlier at this position?
        same name:     return its recorded result (or raise its recorded job error);
                       ``fn`` is not called
        another name:  the job's code asks for its steps in another order than when they
                       were recorded: the attempt fails NONDETERMINISTIC (never retried)
        no:            call ``fn`` (``ctx.step_key`` is the step's idempotency key, the
                       same on every attempt: pass it to the system the effect is made in,
                       so that a crash between the effect and its record is deduplicated
                       there), record its JSON result before the job goes on, return it

A position is the step's ordinal: the how-manieth ``ctx.step`` of the run. The value
returned is the result as recorded (through JSON), so a first run and a replay see the
same value. A job error ``fn`` raises (``ExecutionError``) is recorded and raised again on
replay; any other exception is not recorded: the next attempt calls ``fn`` again, with the
same key. Results are the job's data: never logged here.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from shared.durable_steps import MAX_ERROR_MESSAGE_CHARS, STEP_NAME, StepResult
from shared.errors import ErrorClass, ErrorCode, ExecutionError, LeaseLost, classify
from worker_service import fault_hooks
from worker_service.domain.errors import is_transient, means_lease_lost
from worker_service.domain.model import LockedJob
from worker_service.ports import ExecutorApi

log = logging.getLogger(__name__)

# Recording a step's outcome retries transient failures this long at most (or the lease
# TTL, if shorter); then the attempt fails (retried) rather than go on unrecorded.
RECORD_WINDOW_S = 10.0
RECORD_CALL_TIMEOUT_S = 5.0
RECORD_BACKOFF_START_S = 0.05
RECORD_BACKOFF_MAX_S = 1.0


def step_key(job_id: str, ordinal: int, name: str) -> str:
    """The idempotency key of a job's step: the same on every attempt of the job."""
    return f"{job_id}/{ordinal}/{name}"


class DurableSteps:
    """The durable steps of one attempt: the outcomes earlier attempts recorded, returned
    in place of running their steps, and the recording of the steps this attempt runs."""

    def __init__(
        self,
        job: LockedJob,
        executor: ExecutorApi | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._job = job
        self._executor = executor
        self._clock = clock
        self._recorded = {r.ordinal: r for r in job.step_results}
        self._next = 0
        # the idempotency key of the step whose function runs now (None between steps)
        self.key: str | None = None
        # whether the lease has run out by the local clock (Attempt.watch_lease)
        self.lease_expired: Callable[[], bool] = lambda: False

    async def run(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        if not STEP_NAME.fullmatch(name):
            raise ValueError(f"a step's name is 1..64 of a-z, 0-9 and _ (got {name!r})")
        if self.key is not None:
            raise RuntimeError("a step cannot run inside another one (or two at once)")
        ordinal = self._next
        self._next += 1
        recorded = self._recorded.get(ordinal)
        if recorded is not None:
            return self._replayed(recorded, name)
        if self.lease_expired():
            # a process paused past its lease (SIGSTOP, a long GC) resumes here: another
            # attempt may have made and recorded this step meanwhile. Checked right before
            # the call, with no await between: the effect of a stale attempt is left only
            # to a pause that lands between this check and the call itself.
            raise LeaseLost("the lease ran out by this worker's clock: the step is not run")
        self.key = step_key(self._job.job_id, ordinal, name)
        try:
            value = fn(*args)
            if inspect.isawaitable(value):
                value = await value
        except ExecutionError as error:
            if classify(error.code) is ErrorClass.SUSPENDED:
                raise  # a wait not over yet: the step runs again when the job wakes
            detail = error.detail[:MAX_ERROR_MESSAGE_CHARS]
            failed = StepResult(ordinal, name, error_code=error.code, error_message=detail)
            await self._record(failed)
            raise
        finally:
            self.key = None
        fault_hooks.effect_made(name)  # the chaos harness's crash between effect and record
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ExecutionError(
                ErrorCode.INTERNAL_ERROR, f"step {name} returned a value JSON cannot hold: {exc}"
            ) from None
        stored = await self._record(StepResult(ordinal, name, result_json=text))
        return self._replayed(stored, name) if stored is not None else json.loads(text)

    def _replayed(self, recorded: StepResult, name: str) -> Any:
        if recorded.name != name:
            raise ExecutionError(
                ErrorCode.NONDETERMINISTIC,
                f"step {recorded.ordinal} is {name!r} in this run, but {recorded.name!r} "
                "was recorded there: steps must be asked for in the same order on every run",
            )
        log.info(
            "job %s attempt %d: step %d (%s) returns what attempt %d recorded",
            self._job.job_id,
            self._job.attempt,
            recorded.ordinal,
            name,
            recorded.attempt,
        )
        if recorded.failed:
            raise ExecutionError(
                recorded.error_code or ErrorCode.INTERNAL_ERROR, recorded.error_message
            )
        return recorded.value()

    async def _record(self, step: StepResult) -> StepResult | None:
        """Records ``step`` before the attempt goes on: None when this call recorded it,
        else the outcome recorded at its ordinal earlier (which stands). Raises
        ``LeaseLost`` for a lease no longer held; an error that outlasts the window fails
        the attempt."""
        executor = self._executor
        if executor is None:
            raise ExecutionError(ErrorCode.INTERNAL_ERROR, "this worker cannot record steps")
        job = self._job
        window = min(RECORD_WINDOW_S, job.lease_ttl_s) if job.lease_ttl_s > 0 else RECORD_WINDOW_S
        deadline = self._clock() + window
        backoff = RECORD_BACKOFF_START_S
        while True:
            try:
                recorded, stored = await executor.record_step_result(
                    job.job_id, job.lease_token, step, timeout_s=RECORD_CALL_TIMEOUT_S
                )
            except Exception as exc:
                if means_lease_lost(exc) or not is_transient(exc):
                    raise
                if self._clock() + backoff >= deadline:
                    raise
            else:
                if recorded:
                    return None
                if stored is not None:
                    return stored
                # stored by a call of ours that timed out, not visible to this one yet
                if self._clock() + backoff >= deadline:
                    raise ExecutionError(
                        ErrorCode.INTERNAL_ERROR, f"step {step.ordinal}'s record did not show"
                    )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RECORD_BACKOFF_MAX_S)
