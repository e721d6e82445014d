"""The outbox, in one place: the dispatcher that moves committed rows to NATS JetStream,
the reconciler that dispatches again what NATS lost, the pruner, and dead letters.

Every write that must reach NATS (a job's dispatch, a terminal status's domain event) is
an outbox row committed in the same transaction as the job; the row templates, claims and
dedupe keys are the postgres outbox adapter's.

The dispatcher is one loop per replica: take a batch, offer it to the grant push (ADR
0009: grants to workers waiting on this replica, the rows they use marked in the grants'
own statements), then publish the rest pipelined with the dedupe key as ``Nats-Msg-Id``
and mark what was acked published and the rest for a later try (dead after
``max_attempts``), in tasks of their own: no push waits for an earlier batch's acks or
marks, and a backlog publishes several batches at once. A batch is, first, the rows this replica's
own hot statements (CreateJob, CreateJobs, SubmitResults) wrote already claimed for it and
handed over once committed (``hand_over``): no claim statement and no wait for one. Then
the rows it claims (``SKIP LOCKED``): when woken by this replica's other writes, at a
retry's due time, and otherwise by a poll, which also picks up rows written by other
replicas and claims left stale by a crashed one.

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
# Batches published and marked at once: with JetStream fsyncing every write (deployed),
# one batch's acks take about a flush, and the next batches need not wait for it.
PUBLISHING = 4


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
        publishing: int = PUBLISHING,
    ) -> None:
        """``publishing``: batches published (and marked) at once, at most."""
        self._store = store
        self._publisher = publisher
        self._owner = owner
        self._batch_size = batch_size
        self._poll_interval_s = poll_interval_s
        self._claim_ttl_s = claim_ttl_s
        self._max_attempts = max_attempts
        self._publishing = max(1, publishing)
        self._wakeup = asyncio.Event()
        self._stopping = asyncio.Event()
        self._timers: set[asyncio.TimerHandle] = set()
        # Rows handed over, claimed for this replica and committed, not yet published.
        self._handed: deque[OutboxMessage] = deque()
        # Rows taken, offered to the push and not used by it: to publish.
        self._unsent: deque[OutboxMessage] = deque()
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
        # Pushes wait for nothing: a batch's pushed grants commit (their rows marked by the
        # grants' own statements) before the next batch is taken, and its other rows join
        # the rows to publish, which tasks of their own publish and mark: one batch at a
        # time while they come slowly (the rows that come meanwhile make the next batch, as
        # large as the load), more at once (up to ``publishing``) when a full batch waits.
        # So a row handed over now is pushed without waiting for earlier batches' JetStream
        # acks or marks. Safe: a claimed row stays ``processing`` under this owner until
        # marked, so no later claim can take it; a marking lost to a crash leaves it to the
        # stale-claim takeover, whose republish NATS deduplicates by Nats-Msg-Id.
        publishing: set[asyncio.Task[None]] = set()
        try:
            while not self._stopping.is_set():
                if publishing and len(self._unsent) >= self._batch_size * self._publishing:
                    # publishing is behind: take nothing more until a batch is out
                    await asyncio.wait(publishing, return_when=asyncio.FIRST_COMPLETED)
                try:
                    batch = await self._take()
                    if batch:
                        self._unsent.extend(await self._push_first(batch))
                except Exception:
                    log.exception("outbox dispatch failed; retrying")
                    await self._wait(ERROR_BACKOFF_S)
                    continue
                self._start_publishing(publishing)
                if not self._handed and not self._claim_due:
                    # drained: sleep until woken (a batch published, too) or the next poll
                    await self._wait(self._poll_interval_s)
        finally:
            if publishing:
                await asyncio.wait(publishing)
            self._handed.extend(self._unsent)  # not published: back to the table
            self._unsent.clear()
            await self._release_handed()

    def _start_publishing(self, publishing: set[asyncio.Task[None]]) -> None:
        """Publishes the rows waiting for it in batches: one while none is in flight, and
        another beside those in flight only for a full batch."""
        while (
            self._unsent
            and len(publishing) < self._publishing
            and (not publishing or len(self._unsent) >= self._batch_size)
        ):
            rows = [self._unsent.popleft() for _ in range(min(len(self._unsent), self._batch_size))]
            task = asyncio.create_task(self._publish(rows), name="outbox-publish")
            publishing.add(task)
            task.add_done_callback(lambda done: self._published(publishing, done))

    def _published(self, publishing: set[asyncio.Task[None]], task: asyncio.Task[None]) -> None:
        publishing.discard(task)
        self._wakeup.set()  # the rows waiting may go now

    async def dispatch_once(self) -> int:
        """Claims, pushes, publishes and settles one batch; returns how many rows it
        handled."""
        self._claim_due = True
        batch = await self._take()
        if not batch:
            return 0
        rest = await self._push_first(batch)
        if rest:
            await self._publish(rest, log_failure=False)
        return len(batch)

    async def _take(self) -> list[OutboxMessage]:
        """The next batch: the rows handed over, then claimed ones when due (empty: none)."""
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
        return batch

    async def _push_first(self, batch: list[OutboxMessage]) -> list[OutboxMessage]:
        """Offers the batch to the grant push; the rows left to publish (those its grants
        used were marked published by the grants' statements)."""
        started = time.monotonic()
        used = await self._pushed(batch)
        if not used:
            return batch
        took = time.monotonic() - started
        metrics.outbox_published([m.due_for_s + took for m in batch if m.id in used])
        return [m for m in batch if m.id not in used]

    async def _pushed(self, batch: list[OutboxMessage]) -> set[int]:
        """The ids of the dispatch messages grants pushed to waiting workers used. A failure
        pushes nothing more: the batch's other messages are published as usual."""
        if self._push is None:
            return set()
        try:
            return await self._push(batch, self._owner)
        except Exception:
            log.exception("outbox: pushing grants failed; publishing the dispatch messages")
            return set()

    async def _publish(self, batch: list[OutboxMessage], *, log_failure: bool = True) -> None:
        """Publishes the batch pipelined and settles it. A failure is logged, not raised
        (``log_failure``): the rows stay claimed and the stale-claim takeover publishes
        them again (deduplicated by NATS)."""
        try:
            started = time.monotonic()
            await self._settle(batch, await self._publisher.publish_batch(batch), started)
        except Exception:
            if not log_failure:
                raise
            log.exception("outbox: publishing or marking a batch failed; its claim will go stale")
            await self._wait(ERROR_BACKOFF_S)

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
