"""Faults the chaos harness injects into a job_service replica from its environment; unset
(always, outside tests/chaos) they do nothing.

    JOBS_CHAOS_KILL_BEFORE_PUSH   "1": the replica SIGKILLs itself right after it committed
                                  grants for a waiting worker and before it sent them down
                                  the worker's session (ADR 0009): the leases exist, and no
                                  worker knows it holds them
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)

KILL_BEFORE_PUSH = "JOBS_CHAOS_KILL_BEFORE_PUSH"
# Logged just before the kill: the harness looks for it.
KILL_LOG = "fault: SIGKILL between a pushed grant's commit and its sending"


def grants_committed() -> None:
    """Called once grants for a waiting worker are committed, before they are sent."""
    if os.environ.get(KILL_BEFORE_PUSH) == "1":
        log.warning(KILL_LOG)
        os.kill(os.getpid(), signal.SIGKILL)
