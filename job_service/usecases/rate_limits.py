"""Rate-limit reservations at an attempt's end: a grant reserved an estimate of the tokens
its attempt would use; once the attempt's outcome is committed, the reservation is settled
with the tokens really used, and a provider's 429 backs the tier off.

Both are best effort, after the commit: a failure here is logged, never the caller's (an
unsettled reservation only keeps its estimate, and the tier's budget refills anyway).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from job_service.ports.rate_limits import RateLimitStore
from shared.ai.provider import UsageRecord
from shared.errors import ErrorCode

log = logging.getLogger(__name__)


class RateReservations:
    def __init__(self, rates: RateLimitStore) -> None:
        self._rates = rates

    async def attempt_ended(
        self,
        job_id: str,
        usage: Sequence[UsageRecord],
        error_code: str = "",
        retry_after_s: float = 0.0,
    ) -> None:
        """An attempt ended with this usage: its tier's reservation is settled, and a 429
        (with the provider's Retry-After) backs the tier off."""
        await self.attempts_ended([(job_id, usage)])
        if error_code == ErrorCode.PROVIDER_RATE_LIMITED:
            try:
                await self._rates.throttled(job_id, retry_after_s)
            except Exception:
                log.warning(
                    "job %s: the 429 could not be applied to its tier", job_id, exc_info=True
                )

    async def attempts_ended(self, ended: Sequence[tuple[str, Sequence[UsageRecord]]]) -> None:
        """Settles the ended attempts' token reservations."""
        used = [
            (job_id, sum(u.input_tokens + u.output_tokens for u in usage))
            for job_id, usage in ended
        ]
        try:
            await self._rates.settle(used)
        except Exception:
            log.warning("settling %d token reservations failed", len(used), exc_info=True)
