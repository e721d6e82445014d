"""Telling the workers running jobs to stop them now (CancelJob, CancelJobs, a passed
deadline). Only a hint: a worker that misses the notice learns it from its next heartbeat,
which the job's new status refuses."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from job_service.ports.jobs import CancelNotifier

log = logging.getLogger(__name__)


async def tell_workers_to_stop(notifier: CancelNotifier, job_ids: Sequence[str]) -> None:
    """Sends each job's stop notice; one that cannot be sent is logged, never raised."""
    for job_id in job_ids:
        try:
            await notifier.notify_cancel(job_id)
        except Exception:  # the worker's next heartbeat carries the stop too
            log.warning("cancel notice for job %s not sent", job_id, exc_info=True)
