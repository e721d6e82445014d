"""Rows written before encryption sealed in the background (issue 44): every replica with a
KEK runs this loop; a round seals up to BACKFILL_BATCH plaintext payloads of each table
(job inputs with their hashes keyed, outputs, artifacts, step checkpoints, signal payloads,
schedules' template inputs, internal error messages), each by a compare-and-set, so
replicas sharing the work, or a writer changing a row meanwhile, never lose a value. Reads
never wait for it: ``Sealer.open`` passes a plaintext value through.
``jobs_plaintext_payloads_left`` counts what is left per table (once all are 0 the loop
stops looking: nothing writes plaintext while a KEK is configured),
``jobs_payloads_backfilled_total`` what it sealed."""

from __future__ import annotations

import logging

from job_service import sealing_metrics as metrics
from job_service.ports.backfill import BackfillStore
from job_service.usecases.sealing import Sealer

log = logging.getLogger(__name__)

BACKFILL_BATCH = 200
BACKFILL_INTERVAL_S = 30.0


class PlaintextBackfill:
    def __init__(self, store: BackfillStore, sealer: Sealer, batch: int = BACKFILL_BATCH) -> None:
        self._store = store
        self._sealer = sealer
        self._batch = batch
        self._done = False

    async def seal_round(self) -> int:
        """One round: up to ``batch`` rows of each table sealed; how many (the most of any
        one table, so that a full batch anywhere runs the next round at once)."""
        if self._done or not self._sealer.enabled:
            return 0
        most, left = 0, 0
        for table in self._store.tables:
            sealed = 0
            for row in await self._store.plain(table, self._batch):
                value = await self._sealer.seal(row.user_id, row.bound_to, row.field, row.value)
                content_hash = request_hash = ""
                if row.content_hash:
                    content_hash = await self._sealer.keyed_hash(row.user_id, row.content_hash)
                    request_hash = await self._sealer.keyed_hash(row.user_id, row.request_hash)
                if await self._store.seal(row, value, content_hash, request_hash):
                    sealed += 1
            metrics.PAYLOADS_BACKFILLED.labels(table).inc(sealed)
            remaining = await self._store.count_plain(table)
            metrics.PLAINTEXT_PAYLOADS_LEFT.labels(table).set(remaining)
            most, left = max(most, sealed), left + remaining
        self._done = left == 0
        if self._done:
            log.info("every payload written before encryption is sealed")
        return most
