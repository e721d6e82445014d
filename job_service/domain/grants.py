"""What a claim hands a worker: a lease on one attempt of a job (with its input and the
steps earlier attempts recorded), a refusal, and a queue claim's unused tokens' answer.
No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.ai.steps import RecordedStep
from shared.credentials import CredentialMode
from shared.durable_steps import StepResult


@dataclass(frozen=True)
class LockGrant:
    """A lease on one attempt of a job."""

    job_id: str
    job_type: str
    lease_token: str
    attempt: int
    lease_expires_at: datetime
    input: dict[str, Any]
    user_id: str = ""
    prompt_key: str = ""
    prompt_version: str = ""
    # USER: the worker fetches the key with ResolveCredential under this lease
    credential_mode: CredentialMode = CredentialMode.PLATFORM
    credential_id: str | None = None
    # Earlier attempts recorded steps (RecordStep, RecordStepResult) for this one to reuse:
    # whether the grant saw any, and (attached by the claims use case) the steps.
    has_steps: bool = False
    recorded_steps: tuple[RecordedStep, ...] = ()
    # ... and the outcomes of its durable steps (RecordStepResult), by ordinal
    step_results: tuple[StepResult, ...] = ()
    # How many jobs it depended on (their results: FetchDependencyResults).
    dependency_count: int = 0
    # The version of its job type the job was created for ("": not read)
    definition_version: str = ""


@dataclass(frozen=True)
class LockRefusal:
    """LockJob found nothing to lock; ``retry_after`` is set when the job is simply not
    due yet."""

    retry_after: datetime | None = None


@dataclass(frozen=True)
class QueueClaim:
    """What a claim on a queue granted, and what to answer for the tokens it did not use:
    hand them back at ``retry_after`` (something held back may be eligible then), or drop
    them (None)."""

    grants: list[LockGrant]
    retry_after: datetime | None = None
