"""The claim policy: which of a queue's waiting jobs a claim grants a worker, in what order.
Pure: the claims use case runs it over what the claims adapter reads.

Every waiting job has a place in line, ``sched_key`` (epoch seconds; lower runs first),
fixed when it becomes waiting (``place_in_line``):

    sched_key = max(due - priority * step,  last key of its fairness key at its priority + quantum)

- ``due`` is now, or the time a delayed job (``run_at``/``delay``) or a retry becomes due;
- one priority level is worth ``step`` seconds of waiting (JOBS_SCHED_PRIORITY_STEP_S), so a
  job is overtaken only by work created less than (priority difference x step) after it:
  waiting ages it, and nothing starves;
- a fairness key (the user, or an input field) with a backlog takes one place per
  ``quantum`` seconds (JOBS_SCHED_FAIR_QUANTUM_S): a user who submits 5,000 jobs lines
  them up 5,000 quanta deep, and another user's job created meanwhile takes its place at
  now, ahead of that backlog's tail.

A claim walks a queue in line order (an index scan, ``FOR UPDATE SKIP LOCKED``) and grants
the first candidates that the limits allow (``admit``, then ``within_rate``): concurrency
keys and the queue's limit (counted under an advisory lock per key, so replicas cannot both
fill the last slot) and the fleet-wide rate limit of the job's model tier (a token bucket
row per tier; ``rate_limits.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from job_service.domain.grants import LockGrant

DEFAULT_PRIORITY_STEP_S = 10.0
DEFAULT_FAIR_QUANTUM_S = 0.05
# Candidates read per token: spares for the ones the limits hold back.
CANDIDATE_SLACK = 2
# A token left unused while grantable jobs still wait (locked by a concurrent claim) comes
# back this soon.
CONTENDED_RECHECK_S = 0.05
# A token held back only until a worker for its version turns up is handed back this long.
VERSION_RECHECK_S = 1.0


def place_in_line(
    due: float,
    priority: int,
    backlog_last: float | None,
    *,
    step: float = DEFAULT_PRIORITY_STEP_S,
    quantum: float = DEFAULT_FAIR_QUANTUM_S,
) -> float:
    """A new waiting job's ``sched_key``: its due time (epoch seconds) moved ahead by its
    priority, and never ahead of one quantum after ``backlog_last``, the last place of the
    due waiting jobs of its queue, fairness key and priority (None: there are none).
    The SQL rendering is ``adapters/postgres/vocabulary/line.py``'s ``place_in_line``."""
    ahead = due - priority * step
    return ahead if backlog_last is None else max(ahead, backlog_last + quantum)


def queue_key(queue: str) -> str:
    """The concurrency key a queue's limit is counted under."""
    return f"queue:{queue}"


def definition_id(job_type: str, version: str) -> str:
    """How a worker names a definition it runs: ``job_type@version``."""
    return f"{job_type}@{version}"


@dataclass(frozen=True)
class ClaimCandidate:
    """A waiting job a claim may grant, in line order."""

    job_id: str
    concurrency_key: str | None = None
    concurrency_limit: int = 0
    # The model tier, when it has a rate limit.
    rate_key: str | None = None


class Granted(NamedTuple):
    """A job a claim granted, and how long it had been due."""

    grant: LockGrant
    waited_s: float


class WaitingLeft(NamedTuple):
    """What still waits in a queue after a claim left tokens unused: due jobs the worker
    could be granted (``mine``: rows a concurrent claim holds), and due jobs of
    definitions it does not run (``others``)."""

    mine: bool
    others: bool


def keys_to_count(candidates: Iterable[ClaimCandidate], queue: str, queue_limit: int) -> list[str]:
    """The concurrency keys a claim of ``candidates`` must count (and lock), sorted."""
    keys = {c.concurrency_key for c in candidates if c.concurrency_key}
    if queue_limit:
        keys.add(queue_key(queue))
    return sorted(keys)


def admit(
    candidates: Sequence[ClaimCandidate],
    want: int,
    running: Mapping[str, int],
    queue: str,
    queue_limit: int,
) -> list[ClaimCandidate]:
    """Up to ``want`` candidates, in line order, such that no concurrency key (nor the
    queue) runs more than its limit: ``running`` counts what already runs per key."""
    counts = Counter(running)
    qkey = queue_key(queue)
    admitted: list[ClaimCandidate] = []
    for candidate in candidates:
        if len(admitted) == want:
            break
        if queue_limit and counts[qkey] >= queue_limit:
            break
        key = candidate.concurrency_key
        if key and counts[key] >= candidate.concurrency_limit:
            continue
        if key:
            counts[key] += 1
        counts[qkey] += 1
        admitted.append(candidate)
    return admitted


def rate_demand(admitted: Iterable[ClaimCandidate]) -> dict[str, int]:
    """How many grants each rate-limited tier is asked for, by tier (sorted)."""
    demand = Counter(c.rate_key for c in admitted if c.rate_key)
    return {key: demand[key] for key in sorted(demand)}


def within_rate(
    admitted: Sequence[ClaimCandidate], granted: Mapping[str, int]
) -> list[ClaimCandidate]:
    """The admitted candidates the rate limits allow: per tier, the first ``granted``."""
    left = dict(granted)
    kept = []
    for candidate in admitted:
        if candidate.rate_key:
            if left.get(candidate.rate_key, 0) <= 0:
                continue
            left[candidate.rate_key] -= 1
        kept.append(candidate)
    return kept
