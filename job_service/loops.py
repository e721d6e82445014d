"""The background loops of job_service, and the supervisor that runs them.

Every replica runs every loop: the outbox dispatcher, the schedule firing and the
housekeeping rounds below. ``SKIP LOCKED`` and compare-and-set keep the replicas off each
other's rows, and expiry is judged by the database clock, never by this process's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Protocol

import asyncpg

from job_service.adapters.postgres.gauges import GaugeRepository
from job_service.adapters.postgres.outbox import OutboxRepository
from job_service.adapters.postgres.retention import RetentionRepository
from job_service.periodic import Periodic
from job_service.settings import JobServiceSettings
from job_service.usecases.gauges import DatabaseGauges
from job_service.usecases.job_types import DeclaredJobTypes
from job_service.usecases.jobs import SNAPSHOT_CLEAN_BATCH, Jobs
from job_service.usecases.leases import REAP_BATCH, Leases
from job_service.usecases.outbox import PRUNE_BATCH, REDISPATCH_BATCH, OutboxUpkeep
from job_service.usecases.queues import Queues
from job_service.usecases.retention import Retention
from job_service.usecases.schedules import PRUNE_BATCH as SCHEDULE_PRUNE_BATCH
from job_service.usecases.schedules import Schedules
from job_service.usecases.watch import WatchHub
from shared.constants import Queue

log = logging.getLogger(__name__)

# Stands for "no interval": the round never runs again at once.
_NEVER_FULL = 1 << 30


class Loop(Protocol):
    """A background loop: ``run()`` until ``stop()`` (which only asks)."""

    async def run(self) -> None: ...

    def stop(self) -> None: ...


class Supervisor:
    """Runs named loops as tasks. A loop never ends on its own: one that does (failed or
    returned) sets ``stopped``, which stops the whole service."""

    def __init__(self, loops: Sequence[tuple[str, Loop]], stopped: asyncio.Event) -> None:
        self._loops = loops
        self._stopped = stopped
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        for name, loop in self._loops:
            task = asyncio.create_task(loop.run(), name=f"job_service {name}")
            task.add_done_callback(self._on_exit)
            self._tasks.append(task)

    async def stop(self, grace_s: float) -> None:
        """Ask every loop to stop, in order; cancel those still running after ``grace_s``."""
        self._stopped.set()  # the loops that end now were told to
        for _, loop in self._loops:
            loop.stop()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=grace_s)
            for task in self._tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks.clear()

    def _on_exit(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and not self._stopped.is_set():
            log.error("background loop %s ended: %r; stopping", task.get_name(), task.exception())
            self._stopped.set()


def housekeeping(
    s: JobServiceSettings,
    declared: DeclaredJobTypes,
    pool: asyncpg.Pool,
    *,
    leases: Leases,
    outbox: OutboxUpkeep,
    jobs: Jobs,
    watches: WatchHub,
    queues: Queues,
    schedules: Schedules,
) -> list[tuple[str, Loop]]:
    """The rounds done every so often (at once again while a round's batch was full)."""
    retention = Retention(
        declared.types,
        RetentionRepository(pool),
        job_retention_s=s.job_retention_s,
        usage_retention_s=s.usage_retention_s,
        batch=s.retention_batch,
    )
    gauges = DatabaseGauges(
        GaugeRepository(pool), OutboxRepository(pool), [queue.value for queue in Queue]
    )
    rounds = [
        Periodic(
            "lease reaper",
            leases.reap_expired_leases,
            interval_s=s.reaper_interval_s,
            batch=REAP_BATCH,
        ),
        Periodic(
            "dispatch reconciler",
            lambda: outbox.redispatch_stranded(s.reconcile_after_s),
            interval_s=s.reconcile_interval_s,
            batch=REDISPATCH_BATCH,
        ),
        Periodic(
            "outbox pruner",
            lambda: outbox.prune(s.outbox_retention_s),
            interval_s=s.outbox_prune_interval_s,
            batch=PRUNE_BATCH,
        ),
        Periodic(
            "snapshot cleaner",
            jobs.delete_expired_snapshots,
            interval_s=s.snapshot_clean_interval_s,
            batch=SNAPSHOT_CLEAN_BATCH,
        ),
        Periodic(
            "retention",
            retention.run_round,
            interval_s=s.retention_interval_s,
            batch=_NEVER_FULL,  # a round works off up to its cap itself
        ),
        Periodic(
            "watch poller",
            watches.poll,
            interval_s=s.watch_poll_interval_s,
            batch=_NEVER_FULL,
        ),
        Periodic(
            "scheduler gauges",
            queues.refresh_gauges,
            interval_s=s.metrics_collect_interval_s,
            batch=1,
        ),
        Periodic(
            "schedule runs pruner",
            schedules.prune_runs,
            interval_s=s.retention_interval_s,
            batch=SCHEDULE_PRUNE_BATCH,
        ),
        Periodic(
            "job type refresher",  # what other replicas were declared
            declared.load,
            interval_s=s.job_types_refresh_interval_s,
            batch=_NEVER_FULL,
        ),
        Periodic(
            "metrics collector",
            gauges.refresh,
            interval_s=s.metrics_collect_interval_s,
            batch=1,
        ),
    ]
    return [(periodic.name, periodic) for periodic in rounds]
