"""Job types the scheduler tests add to both services (JOBS_JOB_TYPE_MODULES): the
synthetic job with a concurrency key per user (at most 2 running per user)."""

from __future__ import annotations

import dataclasses

from jobtypes.synthetic import DEFINITION as SYNTHETIC

KEYED = dataclasses.replace(
    SYNTHETIC, job_type="keyed", concurrency_key="user", concurrency_limit=2
)
DEFINITIONS = [KEYED]
