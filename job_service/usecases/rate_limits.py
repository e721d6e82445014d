"""Rate-limit reservations at an attempt's end: a grant reserved an estimate of the tokens
its attempt would use; once the attempt's outcome is committed, the reservation is settled
with the tokens really used. (A provider's 429 backs its tier off when the call gets it:
``call_permits.py``.)

Best effort, after the commit: a failure here is logged, never the caller's (an unsettled
reservation only keeps its estimate, and the tier's budget refills anyway).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from job_service.ports.rate_limits import RateLimitStore
from shared.ai.provider import UsageRecord

log = logging.getLogger(__name__)


class RateReservations:
    def __init__(self, rates: RateLimitStore) -> None:
        self._rates = rates

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
