"""Checkpointed provider calls of one attempt (issue 19, ADR 0007).

Job code names its provider calls as steps (``ctx.generate(tier, prompt, step="evaluate")``).
A step's response is recorded through the job service (``RecordStep``, fenced by the
lease, with the call's usage row) before the attempt goes on, so a later attempt of the
job — after a crash, a lost lease, a refused result, a timeout while parsing — receives it
with its lease and reuses it instead of paying for the call again:

    step recorded earlier?   yes: answer from the record, once; usage row marked reused
                                  (no call, no tokens, no cost)
                             no:  call the provider, record the response, go on
    the same step again      (a repair call after the response failed validation) calls
                             the provider and records the new response in its place

A response is the job's data: it is never logged here (its repr hides it).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from shared.ai.provider import ProviderResponse, UsageRecord
from shared.ai.steps import StepResponse
from worker_service import fault_hooks, metrics
from worker_service.domain.errors import is_transient, means_lease_lost
from worker_service.domain.model import LockedJob
from worker_service.ports import ExecutorApi

log = logging.getLogger(__name__)

# Recording a step retries transient failures this long at most (or the lease TTL, if
# shorter); then the attempt goes on without the checkpoint.
RECORD_WINDOW_S = 10.0
RECORD_CALL_TIMEOUT_S = 5.0
RECORD_BACKOFF_START_S = 0.05
RECORD_BACKOFF_MAX_S = 1.0


class Checkpoints:
    """The steps of one attempt: the records earlier attempts left, each reusable once,
    and the recording of the calls this attempt makes."""

    def __init__(
        self,
        job: LockedJob,
        executor: ExecutorApi,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._job = job
        self._executor = executor
        self._clock = clock
        self._recorded = {s.step: s for s in job.recorded_steps}

    def reuse(self, step: str) -> tuple[ProviderResponse, UsageRecord] | None:
        """The response an earlier attempt recorded for ``step`` and the usage record of
        its reuse (no call: no tokens, no cost, marked reused), or None. A record answers
        once: the same step asked again (its response failed validation: a repair) calls
        the provider."""
        found = self._recorded.pop(step, None)
        if found is None:
            return None
        job = self._job
        log.info(
            "job %s attempt %d: step %s reuses the response attempt %d recorded",
            job.job_id,
            job.attempt,
            step,
            found.attempt,
        )
        metrics.step(job.job_type, "reused")
        usage = UsageRecord(
            provider=found.response.provider or "unknown",
            model=found.response.model,
            credential_mode=job.credential_mode.value,
            call_id=str(uuid.uuid4()),
            reused=True,
        )
        return found.response.replayed(), usage

    async def record(self, step: str, response: ProviderResponse, usage: UsageRecord) -> None:
        """Records the call's response as ``step`` before the attempt goes on. Raises
        ``LeaseLost`` when the job service refused it for the lease (the attempt is not
        this worker's any more); any other failure leaves the step unrecorded (logged,
        counted) and the attempt goes on: its usage still travels with its outcome."""
        job = self._job
        recorded = StepResponse.of(response, usage.provider)
        window = min(RECORD_WINDOW_S, job.lease_ttl_s) if job.lease_ttl_s > 0 else RECORD_WINDOW_S
        deadline = self._clock() + window
        backoff = RECORD_BACKOFF_START_S
        while True:
            try:
                await self._executor.record_step(
                    job.job_id,
                    job.lease_token,
                    step,
                    recorded,
                    usage,
                    timeout_s=RECORD_CALL_TIMEOUT_S,
                )
                break
            except Exception as exc:
                if means_lease_lost(exc):
                    raise
                if not is_transient(exc) or self._clock() + backoff >= deadline:
                    log.warning(
                        "job %s attempt %d: step %s could not be recorded (%s); a later "
                        "attempt would call the provider again",
                        job.job_id,
                        job.attempt,
                        step,
                        type(exc).__name__,
                    )
                    metrics.step(job.job_type, "unrecorded")
                    return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RECORD_BACKOFF_MAX_S)
        metrics.step(job.job_type, "recorded")
        fault_hooks.step_recorded()
