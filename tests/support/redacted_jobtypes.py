"""A job type with output redaction, for the chaos run's redaction rule
(tests/chaos/provider_checks.py): the feynman evaluation (an AI job on the fake provider,
with its projection and review-card child) whose ``summary`` is never to be stored nor
returned (``output_redaction``)."""

from __future__ import annotations

import dataclasses

from jobtypes.feynman_evaluation import DEFINITION as FEYNMAN

REDACTED_FEYNMAN = dataclasses.replace(
    FEYNMAN,
    job_type="redacted_feynman",
    output_redaction=frozenset({"summary"}),
    redaction_version="2",
)
DEFINITIONS = [REDACTED_FEYNMAN]
