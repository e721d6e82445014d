"""Faults the chaos harness injects into a worker process from its environment; unset
(always, outside tests/chaos) they do nothing.

    JOBS_CHAOS_KILL_AFTER_STEP   the share (0..1) of recorded steps (worker_service.steps)
                                 after which the worker SIGKILLs itself: a crash right
                                 after a paid provider call returned, the failure
                                 checkpoints exist for
    JOBS_CHAOS_KILL_AFTER_EFFECT the names (comma-separated) of the durable steps
                                 (ctx.step) after whose function the worker SIGKILLs itself,
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
def _kill_draw() -> tuple[float, random.Random]:
    share = float(os.environ.get(KILL_AFTER_STEP) or 0)
    seed = os.environ.get("JOBS_CHAOS_SEED", "0") + str(os.getpid())
    return share, random.Random(seed)


def step_recorded() -> None:
    """Called once a step's response is recorded: the chaos fault may kill the process."""
    share, draw = _kill_draw()
    if share > 0 and draw.random() < share:
        _kill(KILL_LOG)


def effect_made(step: str) -> None:
    """Called once the function of the durable step ``step`` returned, before its record:
    the chaos fault kills the process after the steps it names."""
    if step in _effect_steps():
        _kill(EFFECT_KILL_LOG)


@cache
def _effect_steps() -> frozenset[str]:
    return frozenset(filter(None, os.environ.get(KILL_AFTER_EFFECT, "").split(",")))


def _kill(message: str) -> None:
    log.warning(message)
    os.kill(os.getpid(), signal.SIGKILL)
