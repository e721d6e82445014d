"""A fake of the claims use case (``usecases.claims.Claims``) as a push of grants calls it."""

from __future__ import annotations

from datetime import UTC, datetime

from job_service.domain.grants import LockGrant, QueueClaim
from job_service.domain.outbox import DispatchMark


def grant(n: int) -> LockGrant:
    """The ``n``-th grant a fake claim makes: job ``job-<n>``, lease ``token-<n>``."""
    return LockGrant(f"job-{n}", "synthetic", f"token-{n}", 1, datetime.now(UTC), {})


class FakeClaims:
    """``Claims.claim_queue`` granting up to ``eligible`` jobs in all (``grant(0)``,
    ``grant(1)``, ...), whatever the queue; records each claim (queue, want, worker)."""

    def __init__(self, eligible: int) -> None:
        self.eligible = eligible
        self.claims: list[tuple[str, int, str]] = []
        self.marks: list[DispatchMark | None] = []  # the dispatch rows each claim marks
        self._next = 0

    async def claim_queue(
        self,
        queue: str,
        want: int,
        worker_id: str,
        definitions: list[str] | None,
        *,
        tokens: bool = True,
        due_for_s: float = 0.0,
        mark: DispatchMark | None = None,
    ) -> QueueClaim:
        self.claims.append((queue, want, worker_id))
        self.marks.append(mark)
        n = min(want, self.eligible)
        self.eligible -= n
        grants = [grant(self._next + i) for i in range(n)]
        self._next += n
        return QueueClaim(grants)
