"""Retention (seed 003 §6): finished jobs are deleted a per-definition time after they
finished (the job type's ``retention_s``, else JOBS_JOB_RETENTION_S; 0 keeps them), with
their events, artifacts, snapshot, usage and dead outbox rows. Their usage survives as
daily aggregates per user and model (``usage_daily``, kept JOBS_USAGE_RETENTION_S; 0
keeps them), so billing outlives the jobs. Quota counters of past days are pruned.

Every replica runs the loop: each batch is one short statement that skips rows another
replica holds, so replicas share the work and nothing waits on a long lock. A parent is
deleted only once its children are gone (children/parent, in docs/architecture.md).
"""

from __future__ import annotations

import logging

from job_service import metrics
from job_service.domain.declared_types import JobTypes
from job_service.ports.retention import RetentionStore

log = logging.getLogger(__name__)

# One round deletes at most this many batches per job type, then yields to the interval:
# a backlog is worked off over rounds without one replica looping forever.
MAX_BATCHES_PER_ROUND = 50


class Retention:
    def __init__(
        self,
        registry: JobTypes,
        store: RetentionStore,
        *,
        job_retention_s: float,
        usage_retention_s: float,
        batch: int,
    ) -> None:
        self._registry = registry
        self._store = store
        self._job_retention_s = job_retention_s
        self._usage_retention_s = usage_retention_s
        self._batch = batch

    def policies(self) -> dict[str, float]:
        """Each registered job type's retention in seconds (types that keep jobs forever
        left out). Jobs of a type no longer registered are kept."""
        policies = {}
        for definition in self._registry:
            retention = (
                self._job_retention_s if definition.retention_s is None else definition.retention_s
            )
            if retention > 0:
                policies[definition.job_type] = retention
        return policies

    async def run_round(self) -> int:
        """One round: every type's expired jobs (up to MAX_BATCHES_PER_ROUND batches
        each), past quota counters and, with a usage retention, old aggregates. Returns
        the jobs deleted."""
        deleted = 0
        for job_type, retention_s in sorted(self.policies().items()):
            for _ in range(MAX_BATCHES_PER_ROUND):
                done = await self._store.delete_finished(job_type, retention_s, self._batch)
                deleted += done
                metrics.jobs_deleted(job_type, done)
                if done < self._batch:
                    break
        for _ in range(MAX_BATCHES_PER_ROUND):
            if await self._store.prune_quota_counters(self._batch) < self._batch:
                break
        if self._usage_retention_s > 0:
            for _ in range(MAX_BATCHES_PER_ROUND):
                pruned = await self._store.prune_usage_daily(self._usage_retention_s, self._batch)
                if pruned < self._batch:
                    break
        return deleted
