"""Dependencies between jobs: the resolver that counts the ended dependencies the database
marked (a job whose last dependency ended becomes due; one whose dependency failed under a
policy that ends it ends), and the results a leased dependent reads. Attaching a new job's
dependencies is part of creating it (``new_jobs.py``); an operator's re-run re-arms
the jobs waiting for the job it re-runs (``admin.py``). ADR 0008."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from job_service import metrics
from job_service.domain.checks import require_uuid
from job_service.domain.envelopes import OUTPUT
from job_service.ports.outbox import Waker
from job_service.usecases.sealing import Sealer
from shared.dependencies import DependencyOutput
from shared.errors import FieldViolation, InvalidInput, LeaseLost

# Ended edges one resolver round counts; a full round runs again at once.
RESOLVE_BATCH = 500
# How often each replica counts ended dependencies: the latency from a join's last
# dependency ending to the join being due.
RESOLVE_INTERVAL_S = 0.2
# FetchDependencyResults' page: at most this many results (0 asks for this many).
RESULTS_PAGE = 100


class DependencyStore(Protocol):
    async def count(self, limit: int) -> dict[str, int]: ...

    async def results(
        self, job_id: str, lease_token: str, after_job_id: str, limit: int
    ) -> tuple[list[DependencyOutput], bool] | None: ...

    async def ended_by(self, job_id: str) -> list[str]: ...

    async def owner(self, job_id: str) -> str | None: ...


class DependencyResolver:
    """Each replica's round over the ended edges the database marked (SKIP LOCKED)."""

    def __init__(self, store: DependencyStore, outbox: Waker) -> None:
        self._store = store
        self._outbox = outbox

    async def resolve(self) -> int:
        """One round: how many ended edges it counted."""
        counts = await self._store.count(RESOLVE_BATCH)
        if counts["dispatched"] or counts["ended"]:
            self._outbox.wake()  # their dispatch rows and domain events are due now
        metrics.dependencies_resolved(due=counts["due"], ended=counts["ended"])
        return counts["counted"]


class DependencyResults:
    """FetchDependencyResults: the results of a leased job's dependencies, a page at a
    time, for the holder of its current lease."""

    def __init__(self, store: DependencyStore, sealer: Sealer | None = None) -> None:
        """``sealer``: opens the outputs (sealed at rest; None: as stored)."""
        self._store = store
        self._sealer = sealer or Sealer(None, None)

    async def fetch(
        self, job_id: str, lease_token: str, after_job_id: str, page_size: int
    ) -> tuple[Sequence[DependencyOutput], bool]:
        require_uuid("job_id", job_id)
        require_uuid("lease_token", lease_token)
        if after_job_id:
            require_uuid("after_job_id", after_job_id)
        if not 0 <= page_size <= RESULTS_PAGE:
            raise InvalidInput(
                "page_size is out of range",
                [FieldViolation("page_size", f"0..{RESULTS_PAGE} (0: {RESULTS_PAGE})")],
            )
        fetched = await self._store.results(
            job_id, lease_token, after_job_id, page_size or RESULTS_PAGE
        )
        if fetched is None:
            metrics.stale_submit("FetchDependencyResults")
            raise LeaseLost("the lease on this job is no longer held")
        outputs, more = fetched
        if self._sealer.enabled and outputs:
            # a job's dependencies are its own user's jobs
            user = await self._store.owner(job_id) or ""
            outputs = [
                replace(o, output=await self._sealer.open(user, o.job_id, OUTPUT, o.output))
                for o in outputs
            ]
        return outputs, more
