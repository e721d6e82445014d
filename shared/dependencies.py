"""Dependencies between jobs as job code sees them: what a failed dependency does to the
job waiting for it, and a dependency's result as the waiting job reads it. Re-exported by
``shared.registry``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["DependencyOutput", "DependencyPolicy"]


class DependencyPolicy(StrEnum):
    """What a dependency that ends failed or cancelled does to the job waiting for it."""

    RUN = "run"  # counts as done: the job runs once every dependency has ended
    FAIL = "fail"  # the job fails at once (DEPENDENCY_FAILED), without running
    CANCEL = "cancel"  # the job is cancelled at once (DEPENDENCY_CANCELLED)


@dataclass(frozen=True)
class DependencyOutput:
    """One dependency of a running job as it ended: its stored output when it succeeded
    (redacted fields as GetJob shows them), its error code otherwise."""

    job_id: str
    job_type: str
    status: str  # "succeeded", "failed" or "cancelled"
    output: dict[str, Any] | None
    error_code: str | None = None
    target_type: str | None = None
    target_id: str | None = None
