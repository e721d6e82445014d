"""Faults the chaos harness injects into a worker process from its environment; unset
(always, outside tests/chaos) they do nothing.

    JOBS_CHAOS_KILL_AFTER_STEP   the share (0..1) of recorded steps (worker_service.steps)
                                 after which the worker SIGKILLs itself: a crash right
                                 after a paid provider call returned, the failure
                                 checkpoints exist for
    JOBS_CHAOS_KILL_AFTER_EFFECT the share (0..1) of durable steps (ctx.step) whose
                                 function returned after which the worker SIGKILLs itself,
                                 before the step is recorded: the crash between a side
                                 effect and its record that ctx.step_key exists for
    JOBS_CHAOS_SEED              seeds the draw, so a run repeats
"""

from __future__ import annotations

import logging
import os
import random
import signal
from functools import cache

log = logging.getLogger(__name__)

KILL_AFTER_STEP = "JOBS_CHAOS_KILL_AFTER_STEP"
KILL_AFTER_EFFECT = "JOBS_CHAOS_KILL_AFTER_EFFECT"
# Logged (and flushed by the logging handler) just before the kill: the harness counts it.
KILL_LOG = "fault: SIGKILL after a recorded step"
EFFECT_KILL_LOG = "fault: SIGKILL after a side effect, before its record"


@cache
def _kill_draw(variable: str) -> tuple[float, random.Random]:
    share = float(os.environ.get(variable) or 0)
    seed = os.environ.get("JOBS_CHAOS_SEED", "0") + str(os.getpid()) + variable
    return share, random.Random(seed)


def _maybe_kill(variable: str, message: str) -> None:
    share, draw = _kill_draw(variable)
    if share > 0 and draw.random() < share:
        log.warning(message)
        os.kill(os.getpid(), signal.SIGKILL)


def step_recorded() -> None:
    """Called once a step's response is recorded: the chaos fault may kill the process."""
    _maybe_kill(KILL_AFTER_STEP, KILL_LOG)


def effect_made() -> None:
    """Called once a durable step's function returned, before its record: the chaos fault
    may kill the process."""
    _maybe_kill(KILL_AFTER_EFFECT, EFFECT_KILL_LOG)
