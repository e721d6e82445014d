"""Job types of the model-based test (tests/faults/test_model_based.py), added to both
services through JOBS_JOB_TYPE_MODULES:

- ``model_keyed``: the synthetic job on the background queue with a concurrency key per
  user, at most ``KEYED_LIMIT`` running at once (a queue of its own, so that pausing one
  queue leaves the other running);
- ``model_versioned``: the synthetic job whose definition version a process takes from
  MODEL_TEST_VERSION (2.0.0 by default): the test's workers load 1.0.0, so no worker may
  ever be granted one of these jobs;
- ``model_timed``: the synthetic job with a timeout of ``TIMED_TIMEOUT_S``, retried after a
  timeout: an executor that holds one and keeps heartbeating must lose it to the job
  service's reaper within the timeout and its grace;
- ``model_redacted``: the synthetic job whose ``data`` output field is redacted: never
  stored nor returned, RecordStep refused, copies in artifacts scrubbed.

The last two take their version from MODEL_TEST_VERSION too: only the test's foreign
executor runs them (at 2.0.0), so that they wait for it rather than for the workers.
"""

from __future__ import annotations

import dataclasses
import os

from jobtypes.synthetic import DEFINITION as SYNTHETIC
from shared.constants import Queue
from shared.registry import AbortStrategy

KEYED_LIMIT = 2
KEYED = dataclasses.replace(
    SYNTHETIC,
    job_type="model_keyed",
    queue=Queue.BACKGROUND,
    concurrency_key="user",
    concurrency_limit=KEYED_LIMIT,
)
VERSION = os.environ.get("MODEL_TEST_VERSION", "2.0.0")
VERSIONED = dataclasses.replace(SYNTHETIC, job_type="model_versioned", version=VERSION)
TIMED_TIMEOUT_S = 1.0
TIMED = dataclasses.replace(
    SYNTHETIC,
    job_type="model_timed",
    version=VERSION,
    timeout_s=TIMED_TIMEOUT_S,
    abort_strategy=AbortStrategy.RETRY,
)
REDACTED_FIELD = "data"
REDACTED = dataclasses.replace(
    SYNTHETIC,
    job_type="model_redacted",
    version=VERSION,
    output_redaction=frozenset({REDACTED_FIELD}),
)
DEFINITIONS = [KEYED, VERSIONED, TIMED, REDACTED]
