"""Job types the scheduler tests add to both services (JOBS_JOB_TYPE_MODULES): the
synthetic job with a concurrency key per user (at most 2 running per user), and the
synthetic job on the cheap model tier (``metered``: held to the tier's rate limit when
JOBS_RATE_LIMITS sets one; it never calls a provider, the limit is on grants)."""

from __future__ import annotations

import dataclasses

from jobtypes.synthetic import DEFINITION as SYNTHETIC
from shared.ai.provider import ModelTier

KEYED = dataclasses.replace(
    SYNTHETIC, job_type="keyed", concurrency_key="user", concurrency_limit=2
)
METERED = dataclasses.replace(SYNTHETIC, job_type="metered", model_tier=ModelTier.CHEAP)
DEFINITIONS = [KEYED, METERED]
