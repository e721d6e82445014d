"""Faults the chaos harness injects into a job_service replica from its environment; unset
(always, outside tests/chaos) they do nothing.

    JOBS_CHAOS_KILL_BEFORE_PUSH   the replica SIGKILLs itself right after it committed
                                  grants for a waiting worker and before it sent them down
                                  the worker's session (ADR 0009): the leases exist, and no
                                  worker knows it holds them. "1": at its first such grant;
                                  "on-sigusr1": at the first one after it got SIGUSR1 (the
                                  harness picks the moment, and the replica its workers'
                                  sessions are on)
"""

from __future__ import annotations

import logging
import os
import signal
from types import FrameType

log = logging.getLogger(__name__)

KILL_BEFORE_PUSH = "JOBS_CHAOS_KILL_BEFORE_PUSH"
ARMED_BY_SIGNAL = "on-sigusr1"
# Logged just before the kill: the harness looks for it.
KILL_LOG = "fault: SIGKILL between a pushed grant's commit and its sending"

_armed = False


def install() -> None:
    """Arms the faults the environment asks for (at start-up, in the main thread)."""
    global _armed
    mode = os.environ.get(KILL_BEFORE_PUSH, "")
    _armed = mode == "1"
    if mode == ARMED_BY_SIGNAL:
        signal.signal(signal.SIGUSR1, _arm)


def _arm(signum: int, frame: FrameType | None) -> None:
    global _armed
    _armed = True


def grants_committed() -> None:
    """Called once grants for a waiting worker are committed, before they are sent."""
    if _armed:
        log.warning(KILL_LOG)
        os.kill(os.getpid(), signal.SIGKILL)
