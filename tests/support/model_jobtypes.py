"""Job types of the model-based test (tests/e2e/test_model_based.py), added to both
services through JOBS_JOB_TYPE_MODULES:

- ``model_keyed``: the synthetic job on the background queue with a concurrency key per
  user, at most ``KEYED_LIMIT`` running at once (a queue of its own, so that pausing one
  queue leaves the other running);
- ``model_versioned``: the synthetic job whose definition version a process takes from
  MODEL_TEST_VERSION (2.0.0 by default): the test's workers load 1.0.0, so no worker may
  ever be granted one of these jobs.
"""

from __future__ import annotations

import dataclasses
import os

from jobtypes.synthetic import DEFINITION as SYNTHETIC
from shared.constants import Queue

KEYED_LIMIT = 2
KEYED = dataclasses.replace(
    SYNTHETIC,
    job_type="model_keyed",
    queue=Queue.BACKGROUND,
    concurrency_key="user",
    concurrency_limit=KEYED_LIMIT,
)
VERSIONED = dataclasses.replace(
    SYNTHETIC, job_type="model_versioned", version=os.environ.get("MODEL_TEST_VERSION", "2.0.0")
)
DEFINITIONS = [KEYED, VERSIONED]
