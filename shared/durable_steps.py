"""Durable steps, as both services see them (issue 45, ADR 0013): job code runs any side
effect as a named step (``await ctx.step("send_email", send, draft)``); once its outcome is
recorded (ExecutorService RecordStepResult, fenced by the lease), every later attempt of the
job returns that outcome instead of running the step again. Steps are numbered in the order
the job's code asks for them (the ordinal): an attempt that asks, at some position, for
another step than the one recorded there has changed its order, and the job fails
NONDETERMINISTIC.

An outcome is the job's data, protected like its output: never logged (the repr below
hides it), sealed at rest, deleted with the job.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from shared.ai.steps import STEP_NAME as STEP_NAME

# Steps per job: an ordinal is 0..MAX_ORDINAL.
MAX_ORDINAL = 9_999
# A result's JSON text, and an error's message, are at most this long.
MAX_RESULT_CHARS = 1_000_000
MAX_ERROR_MESSAGE_CHARS = 10_000
# A durable sleep or signal wait (ctx.sleep, ctx.wait_for_signal) lasts at most this: the
# worker bounds the wake time it records, the job service the delay it schedules.
MAX_SUSPENSION_S = 366 * 86_400.0
# A job type's default deadline (JobTypeSpec.deadline_seconds) is at most this long.
MAX_DEADLINE_S = 366 * 86_400.0
ERROR_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")


@dataclass(frozen=True)
class StepResult:
    """How one durable step of a job ended: ``result_json`` (the JSON text of the value its
    function returned) or ``error_code`` with ``error_message`` (the job error it raised)."""

    ordinal: int
    name: str
    result_json: str | None = field(default=None, repr=False)
    error_code: str | None = None
    error_message: str = field(default="", repr=False)
    # the attempt that completed it (0: not recorded yet)
    attempt: int = 0

    @property
    def failed(self) -> bool:
        return self.result_json is None

    def value(self) -> Any:
        """The recorded result as the job code's function returned it (through JSON)."""
        assert self.result_json is not None
        return json.loads(self.result_json)
