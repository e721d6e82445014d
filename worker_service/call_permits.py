"""Rate limits at the call, the worker's side (ADR 0002): right before each provider call
the worker asks the job service for a permit for the tier it calls — a slot now, or one
reserved a moment ahead, which it confirms when due — waits as long as it is told, and
makes the call within the permit's validity; a 429 is reported for the tier that got it at
once, so that no other worker's call reaches the provider during its
Retry-After. Tiers without a limit are answered ``unlimited`` and not asked about again
for a while."""

from __future__ import annotations

import asyncio
import logging
import time

from shared.errors import ErrorCode, ExecutionError
from worker_service import metrics
from worker_service.domain.errors import ExecutorUnreachable
from worker_service.domain.model import CallPermit
from worker_service.ports import ExecutorApi

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 5.0
# Ask again at least this often while waiting (a block may end early for another reason).
MAX_WAIT_S = 2.0
# Transport failures: ask again after this long, doubling up to MAX_WAIT_S.
UNREACHABLE_WAIT_S = 0.1
# The longest Retry-After reported (the job service's bound).
MAX_RETRY_AFTER_S = 3600.0


class CallPermits:
    def __init__(self, executor: ExecutorApi) -> None:
        self._executor = executor
        self._unlimited_until: dict[str, float] = {}  # tier -> monotonic time to ask again

    async def acquire(self, tier: str, job_id: str, lease_token: str) -> None:
        """Returns when a call for ``tier`` may be made now; waits for a permit as long as
        the job service says (cancelling the attempt cancels the wait). LeaseLost when the
        attempt lost its lease."""
        backoff = UNREACHABLE_WAIT_S
        started = time.monotonic()
        reserved = ""  # the slot held for this call, once one is
        while True:
            if self._unlimited_until.get(tier, 0.0) > time.monotonic():
                return
            asked = time.monotonic()
            try:
                permit = await self._executor.acquire_call_permit(
                    job_id, lease_token, tier, reserved, timeout_s=RPC_TIMEOUT_S
                )
            except ExecutorUnreachable:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_WAIT_S)
                continue
            if permit.unlimited:
                self._unlimited_until[tier] = time.monotonic() + permit.valid_for_s
                return
            if permit.granted:
                if await _in_time(permit, asked):
                    metrics.call_permit_waited(tier, time.monotonic() - started)
                    return
                # arrived too late to keep the provider's view within the limit: spent
                metrics.call_permit_late(tier)
                reserved = ""
                continue
            reserved = permit.reserved_slot
            # a reserved slot is waited for exactly (it is confirmed a moment before it)
            await asyncio.sleep(
                permit.retry_after_s if reserved else min(permit.retry_after_s, MAX_WAIT_S)
            )

    async def rate_limited(
        self, tier: str, job_id: str, lease_token: str, error: ExecutionError
    ) -> None:
        """A call for ``tier`` got a 429: the tier is blocked fleet-wide for its
        Retry-After. Best effort: the attempt's failure follows either way."""
        if error.code != ErrorCode.PROVIDER_RATE_LIMITED:
            return
        retry_after_s = min(max(error.retry_after_s or 0.0, 0.0), MAX_RETRY_AFTER_S)
        try:
            await self._executor.report_rate_limited(
                job_id, lease_token, tier, retry_after_s, timeout_s=RPC_TIMEOUT_S
            )
        except Exception:
            log.warning("job %s: the 429 of tier %s could not be reported", job_id, tier)


async def _in_time(permit: CallPermit, asked: float) -> bool:
    """Waits for a granted permit's slot; whether the call can still start within its
    slack (by the wall clock, against the slot's time on the database's clock; without a
    slot time, within the slack of asking)."""
    if permit.slot_at is None:
        return time.monotonic() - asked <= permit.valid_for_s
    ahead = permit.slot_at - time.time()
    if ahead > 0:
        await asyncio.sleep(ahead)
    return time.time() <= permit.slot_at + permit.valid_for_s
