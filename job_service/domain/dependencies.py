"""Dependencies between jobs (fan-in): what a job may wait for, how a request names it, and
how a waiting job is told apart. Pure: no I/O.

A dependent job is stored CREATED, due at ``UNTIL_DEPENDENCIES_END`` (a time no due check
ever reaches, so the claim, the reconciler and the queue gauges leave it alone without a
condition of their own); the dependency resolver makes it due now once its last
dependency has ended, or ends it when a dependency failed under a policy that says so
(``outcome``, which the resolver's statement embeds rendered in SQL).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from job_service.domain.checks import is_uuid
from job_service.domain.holds import Hold, HoldReason
from shared.dependencies import DependencyPolicy
from shared.errors import FieldViolation, InvalidInput

# A join may wait for this many jobs (CreateJob's depends_on, a result's join).
MAX_DEPENDENCIES = 10_000
# The due time of a job that waits for its dependencies: never reached.
UNTIL_DEPENDENCIES_END = datetime(9999, 12, 31, tzinfo=UTC)
# How many of a job's dependencies and dependents one read of it shows.
SHOWN_EDGES = 1000


@dataclass(frozen=True)
class Dependencies:
    """What a new job waits for: distinct job ids (canonical form), and its policy."""

    job_ids: tuple[str, ...] = ()
    policy: DependencyPolicy = DependencyPolicy.FAIL

    def __bool__(self) -> bool:
        return bool(self.job_ids)


NONE = Dependencies()


def require_dependencies(
    job_ids: list[str] | tuple[str, ...], policy: DependencyPolicy | None, *, scheduled: bool
) -> Dependencies:
    """CreateJob's ``depends_on`` and ``dependency_policy``, checked: at most
    MAX_DEPENDENCIES job ids, each a uuid, none twice, not with a run time (``scheduled``),
    a policy only with dependencies. Each bad id is named by its index."""
    if not job_ids:
        if policy is not None:
            raise InvalidInput(
                "a dependency policy needs dependencies",
                [FieldViolation("dependency_policy", "only with depends_on")],
            )
        return NONE
    if scheduled:
        raise InvalidInput(
            "a job runs when its dependencies end, not at a time",
            [FieldViolation("depends_on", "not with run_at or delay")],
        )
    if len(job_ids) > MAX_DEPENDENCIES:
        raise InvalidInput(
            "too many dependencies",
            [FieldViolation("depends_on", f"at most {MAX_DEPENDENCIES} job ids")],
        )
    seen: set[str] = set()
    violations = []
    for i, job_id in enumerate(job_ids):
        if not is_uuid(job_id):
            violations.append(FieldViolation(f"depends_on[{i}]", "a job id (a uuid)"))
            continue
        canonical = str(uuid.UUID(job_id))
        if canonical in seen:
            violations.append(FieldViolation(f"depends_on[{i}]", "named twice"))
        seen.add(canonical)
    if violations:
        raise InvalidInput("bad dependencies", violations[:100])
    return Dependencies(tuple(sorted(seen)), policy or DependencyPolicy.FAIL)


def waiting_hold(pending: int, total: int) -> Hold:
    """The hold of a job that waits for ``pending`` of its ``total`` dependencies; with none
    pending, for the resolver to count their ends (it is made due then), which a job due at
    UNTIL_DEPENDENCIES_END still waits for: no run time (issue 43, the model's join_hold)."""
    if not pending:
        return Hold(
            HoldReason.WAITING_FOR_DEPENDENCIES,
            detail=f"its {total} dependencies have ended; made due when they are counted",
        )
    return Hold(
        HoldReason.WAITING_FOR_DEPENDENCIES,
        detail=f"waits for {pending} of its {total} dependencies to end",
    )


class Outcome(Enum):
    """What the dependency resolver does with a waiting job: make it due, or end it with
    its policy's status (failed, or cancelled)."""

    RUN = "run"
    FAIL = "fail"
    CANCEL = "cancel"


def outcome(
    policy: DependencyPolicy, failed: bool, left: int, *, waiting: bool = True
) -> Outcome | None:
    """The resolver's decision for a job whose newly counted edges include a failed or
    cancelled dependency (``failed``), with ``left`` edges still to count after them; None:
    it waits on (or, not ``waiting`` any more, is left as it is). A broken dependency ends
    the job unless its policy is "run"; else the job runs once nothing is left to count."""
    if not waiting:
        return None
    if failed and policy is not DependencyPolicy.RUN:
        return Outcome.CANCEL if policy is DependencyPolicy.CANCEL else Outcome.FAIL
    return Outcome.RUN if left == 0 else None
