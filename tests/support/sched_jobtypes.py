"""Job types the scheduler tests add to both services (JOBS_JOB_TYPE_MODULES): the
synthetic job with a concurrency key per user (at most 2 running per user), and the
synthetic job on the cheap model tier (``metered``: held to the tier's rate limit when
JOBS_RATE_LIMITS sets one; it never calls a provider, the limit is on grants), and
``versioned``, whose definition version a process takes from SCHED_TEST_VERSION (2.0.0 by
default): an "old" worker started with 1.0.0 stands for one a rolling deploy has not
replaced yet."""

from __future__ import annotations

import dataclasses
import os

from jobtypes.synthetic import DEFINITION as SYNTHETIC
from shared.ai.provider import ModelTier

KEYED = dataclasses.replace(
    SYNTHETIC, job_type="keyed", concurrency_key="user", concurrency_limit=2
)
METERED = dataclasses.replace(SYNTHETIC, job_type="metered", model_tier=ModelTier.CHEAP)
VERSIONED = dataclasses.replace(
    SYNTHETIC, job_type="versioned", version=os.environ.get("SCHED_TEST_VERSION", "2.0.0")
)
DEFINITIONS = [KEYED, METERED, VERSIONED]
