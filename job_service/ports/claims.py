"""What the claims use case needs: one claim's statements on one connection (a claim
transaction), and a record of what each worker runs."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol

from job_service.domain.claims import ClaimCandidate, Granted, WaitingLeft
from job_service.domain.outbox import DispatchMark
from job_service.domain.rate_limits import BucketLevel, RateLimit


class ClaimTransaction(Protocol):
    """The statements of one claim, on one connection. Candidates come locked (``FOR
    UPDATE``) until the transaction ends; their ``rate_key`` is the job's model tier,
    whether or not the tier has a limit."""

    async def candidates(
        self,
        queue: str,
        definitions: Sequence[str] | None,
        limit: int,
        spent_tiers: Sequence[str],
        due_for_s: float = 0.0,
    ) -> list[ClaimCandidate]:
        """Up to ``limit`` of the queue's due waiting jobs in line order, of the
        ``definitions`` (None: any), not of a ``spent_tiers`` tier, whose concurrency key
        did not look full, and due for ``due_for_s`` at least; rows other claims hold are
        skipped."""
        ...

    async def named_candidates(
        self, job_ids: Sequence[str], definitions: Sequence[str] | None
    ) -> list[tuple[str, ClaimCandidate, bool]]:
        """(queue, candidate, runnable) of the named jobs that are due and waiting in a
        queue not paused, in id order (waiting for rows other claims hold); ``runnable``:
        the job is of one of the ``definitions`` (None: any)."""
        ...

    async def count_running(self, keys: Sequence[str], queues: Sequence[str]) -> dict[str, int]:
        """Locks each of ``keys`` (``queue_key``s among them) for the rest of the
        transaction, then counts what runs per key and per queue of ``queues`` (under its
        ``queue_key``): every claim that held these keys has committed by then."""
        ...

    async def reserve(
        self, limit: RateLimit, recovery_s: float, tokens: Sequence[int]
    ) -> BucketLevel | None:
        """Refills the tier's bucket and spends a request and ``tokens[i]`` for each of the
        leading grants that fit; None when the tier has no bucket row."""
        ...

    async def grant(
        self, chosen: Sequence[tuple[str, int]], worker_id: str, mark: DispatchMark | None = None
    ) -> list[Granted]:
        """Grants the chosen candidates, (job id, tokens it reserved; 0: none), in line
        order: each RUNNING with a fresh lease, its timeline event written; ``mark``: the
        dispatch rows the grants use, marked published in the same statement."""
        ...

    async def grant_unlimited(
        self,
        queue: str,
        definitions: Sequence[str] | None,
        want: int,
        worker_id: str,
        due_for_s: float = 0.0,
        mark: DispatchMark | None = None,
    ) -> list[Granted]:
        """``candidates`` and ``grant`` in one statement, for a queue where nothing can hold
        a job back."""
        ...

    async def not_due(self, job_ids: Sequence[str]) -> dict[str, datetime]:
        """When each of these waiting jobs that is not due yet becomes due."""
        ...

    async def rate_held(self, queue: str, spent_tiers: Sequence[str]) -> bool:
        """Do due jobs of these tiers wait in the queue (the scan passed them over)?"""
        ...

    async def waiting_left(self, queue: str, definitions: Sequence[str] | None) -> WaitingLeft:
        """What still waits in the queue, read without locks."""
        ...


class ClaimStore(Protocol):
    def transaction(self) -> AbstractAsyncContextManager[ClaimTransaction]:
        """A claim's statements in one transaction."""
        ...

    def connection(self) -> AbstractAsyncContextManager[ClaimTransaction]:
        """A claim's statements on one connection, each committed on its own (the one
        statement of ``grant_unlimited`` needs no more)."""
        ...

    async def record_worker(
        self, worker_id: str, job_types: Sequence[str], definitions: Sequence[str]
    ) -> None:
        """Remembers what the worker runs of ``job_types`` (one queue's): ``definitions``
        replace what it was recorded to run of those types, and its other types' stay (for
        holds and the no-worker gauge)."""
        ...
