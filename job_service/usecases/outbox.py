"""The outbox, in one place: the dispatcher that moves committed rows to NATS JetStream,
the reconciler that dispatches again what NATS lost, the pruner, and dead letters.

Every write that must reach NATS (a job's dispatch, a terminal status's domain event) is
an outbox row committed in the same transaction as the job; the row templates, claims and
dedupe keys are the postgres outbox adapter's.

The dispatcher is one loop per replica: take a batch, publish it pipelined with the dedupe
key as ``Nats-Msg-Id``, mark what was acked published and the rest for a later try (dead
after ``max_attempts``). A batch is, first, the rows this replica's own hot statements
(CreateJob, CreateJobs, SubmitResults) wrote already claimed for it and handed over once
committed (``hand_over``): no claim statement and no wait for one. Then the rows it claims
(``SKIP LOCKED``): when woken by this replica's other writes, at a retry's due time, and
otherwise by a poll, which also picks up rows written by other replicas and claims left
stale by a crashed one.

Dead rows have one owner, the reconciler: a waiting job whose dispatch row died is
dispatched again after ``JOBS_RECONCILE_AFTER_S`` like any stranded job. An operator's
redrive (AdminService.RedriveDeadLetters) is the manual lever for the same rows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Sequence

from job_service import metrics
from job_service.domain.outbox import OutboxMessage
from job_service.ports.outbox import BatchPublisher, GrantPush, OutboxStore, Waker
from shared.errors import FieldViolation, InvalidInput

log = logging.getLogger(__name__)

ERROR_BACKOFF_S = 1.0
OUTAGE_BACKOFF_S = 1.0
REDISPATCH_BATCH = 500
PRUNE_BATCH = 1000
MAX_REDRIVE_IDS = 1000


class OutboxDispatcher:
    def __init__(
        self,
        store: OutboxStore,
        publisher: BatchPublisher,
        *,
        owner: str,
        batch_size: int,
        poll_interval_s: float,
        claim_ttl_s: float,
        max_attempts: int,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._owner = owner
        self._batch_size = batch_size
        self._poll_interval_s = poll_interval_s
        self._claim_ttl_s = claim_ttl_s
        self._max_attempts = max_attempts
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self._timers: set[asyncio.TimerHandle] = set()
        # Rows handed over, claimed for this replica and committed, not yet published.
        self._handed: deque[OutboxMessage] = deque()
        # Rows may be due in the table: the next batch claims (the first one always does).
        self._claim_due = True
        self._push: GrantPush | None = None

    @property
    def owner(self) -> str:
        return self._owner

    def push_grants_with(self, push: GrantPush | None) -> None:
        """Offer every batch's dispatch messages to ``push`` first (pushed grants, ADR
        0009): the messages its grants used are marked published without being sent.
        None: publish them all."""
        self._push = push

    def hand_over(self, messages: Sequence[OutboxMessage]) -> None:
        """Rows written claimed for this dispatcher (``owner``), committed: they are
        published with the next batch."""
        if messages:
            self._handed.extend(messages)
            self._wakeup.set()

    def wake(self, after_s: float = 0.0) -> None:
        """Rows are (or will be, after ``after_s``) due in the table: claim them."""
        if after_s <= 0:
            self._due()
            return
        loop = asyncio.get_running_loop()
        self._timers = {t for t in self._timers if t.when() > loop.time()}
        self._timers.add(loop.call_later(after_s, self._due))

    def _due(self) -> None:
        self._claim_due = True
        self._wakeup.set()

    async def run(self) -> None:
        # Pipelined: a batch's rows are marked while the next batch is claimed and published,
        # so a row committed during the marking waits for one statement less. At most one
        # marking is in flight, and it ends before the next one starts or the loop ends.
        # Safe: a claimed row stays ``processing`` under this owner until marked, so no
        # later claim can take it; a marking lost to a crash leaves it to the stale-claim
        # takeover, whose republish NATS deduplicates by Nats-Msg-Id.
        settling: asyncio.Task[None] | None = None
        try:
            while not self._stopping.is_set():
                try:
                    batch = await self._claim_and_publish()
                    if settling is not None:
                        await _settled(settling)
                        settling = None
                    if batch is not None:
                        settling = asyncio.create_task(self._settle(*batch), name="outbox-settle")
                except Exception:
                    log.exception("outbox dispatch failed; retrying")
                    if settling is not None:
                        await _settled(settling)
                        settling = None
                    await self._wait(ERROR_BACKOFF_S)
                    continue
                if not self._handed and not self._claim_due:
                    # drained: sleep until woken or the next poll
                    await self._wait(self._poll_interval_s)
        finally:
            if settling is not None:
                await _settled(settling)
            await self._release_handed()

    async def dispatch_once(self) -> int:
        """Claims, publishes and settles one batch; returns how many rows it handled."""
        self._claim_due = True
        batch = await self._claim_and_publish()
        if batch is None:
            return 0
        await self._settle(*batch)
        return len(batch[0])

    async def _claim_and_publish(
        self,
    ) -> tuple[list[OutboxMessage], list[str | None], float] | None:
        """Takes a batch (the rows handed over, then claimed ones when due) and publishes
        it: the rows, per row None or the error, and when the publishing started
        (monotonic); None when nothing was due."""
        self._wakeup.clear()
        batch = [self._handed.popleft() for _ in range(min(len(self._handed), self._batch_size))]
        room = self._batch_size - len(batch)
        if room and self._claim_due:
            self._claim_due = False
            try:
                claimed = await self._store.claim(self._owner, room, self._claim_ttl_s)
            except Exception:
                self._handed.extendleft(reversed(batch))  # published with the next try
                self._claim_due = True
                raise
            self._claim_due = len(claimed) == room  # a full claim: more may be due
            batch += claimed
        if not batch:
            return None
        started = time.monotonic()
        used = await self._pushed(batch)
        to_send = [m for m in batch if m.id not in used] if used else batch
        sent = iter(await self._publisher.publish_batch(to_send) if to_send else [])
        return batch, [None if m.id in used else next(sent) for m in batch], started

    async def _pushed(self, batch: list[OutboxMessage]) -> set[int]:
        """The ids of the dispatch messages grants pushed to waiting workers used. A failure
        pushes nothing more: the batch's other messages are published as usual."""
        if self._push is None:
            return set()
        try:
            return await self._push(batch)
        except Exception:
            log.exception("outbox: pushing grants failed; publishing the dispatch messages")
            return set()

    async def _settle(
        self, batch: list[OutboxMessage], errors: list[str | None], started: float
    ) -> None:
        """Marks what was acked published and the rest for a later try (dead after
        ``max_attempts``)."""
        published = [m for m, error in zip(batch, errors, strict=True) if error is None]
        failed = [(m.id, e) for m, e in zip(batch, errors, strict=True) if e is not None]
        await self._store.mark_published(self._owner, [m.id for m in published])
        took = time.monotonic() - started
        metrics.outbox_published([m.due_for_s + took for m in published])
        metrics.outbox_failed(len(failed))
        if failed and not self._publisher.connected:
            # An outage is not the rows' fault: they wait for NATS without spending tries,
            # so a long outage dead-letters nothing.
            log.warning("outbox: NATS unreachable; %d rows wait for it", len(failed))
            await self._store.release(self._owner, [i for i, _ in failed], OUTAGE_BACKOFF_S)
            await self._wait(OUTAGE_BACKOFF_S)
        elif failed:
            log.warning("outbox: %d of %d publishes failed", len(failed), len(batch))
            await self._store.mark_failed(self._owner, failed, self._max_attempts)

    async def _wait(self, seconds: float) -> None:
        """Until woken, or ``seconds`` have passed (then rows may be due in the table)."""
        try:
            await asyncio.wait_for(self._wakeup.wait(), seconds)
        except TimeoutError:
            self._claim_due = True

    async def _release_handed(self) -> None:
        """Rows handed over but not published when the loop ends go back to the table, for
        any replica to claim at once rather than after the stale-claim time."""
        ids, self._handed = [m.id for m in self._handed], deque()
        if ids:
            try:
                await self._store.release(self._owner, ids, 0.0)
            except Exception:
                log.exception(
                    "outbox: releasing %d handed rows failed; their claim goes stale", len(ids)
                )

    def stop(self) -> None:
        self._stopping.set()
        self._wakeup.set()
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()


async def _settled(settling: asyncio.Task[None]) -> None:
    """Waits for a batch's marking; its failure is logged, not raised: the rows stay claimed
    and the stale-claim takeover publishes them again (deduplicated by NATS)."""
    try:
        await settling
    except Exception:
        log.exception("outbox: marking a published batch failed; its claim will go stale")


class OutboxUpkeep:
    """The outbox's rounds besides dispatching: the reconciler, the pruner and redrive."""

    def __init__(self, store: OutboxStore, dispatcher: Waker) -> None:
        self._store = store
        self._dispatcher = dispatcher

    async def redispatch_stranded(self, after_s: float) -> int:
        """The dispatch reconciler's round: waiting jobs whose dispatch left the outbox
        ``after_s`` seconds ago (published, or dead) and that no worker has locked since get
        a new one. NATS may lose a message (a store lost, a stream recreated); the
        database decides."""
        count = await self._store.redispatch_stranded(after_s, REDISPATCH_BATCH)
        if count:
            log.warning("re-dispatching %d jobs whose dispatch message was not acted on", count)
            self._dispatcher.wake()
        return count

    async def prune(self, retention_s: float) -> int:
        """The pruner's round: rows published longer than ``retention_s`` ago."""
        return await self._store.prune(retention_s, PRUNE_BATCH)

    async def redrive(self, event_ids: Sequence[int]) -> int:
        """Dead outbox events (these, or every one when empty) back to pending."""
        if len(event_ids) > MAX_REDRIVE_IDS or any(i <= 0 for i in event_ids):
            raise InvalidInput(
                "event_ids are malformed",
                [FieldViolation("event_ids", f"at most {MAX_REDRIVE_IDS} positive ids")],
            )
        count = await self._store.redrive(list(event_ids) or None)
        if count:
            self._dispatcher.wake()
            log.info("redrove %d dead outbox events", count)
        return count
