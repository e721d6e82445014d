"""Fakes of the leases: the store (``LeaseStore`` with its ``AttemptEnding``) and the use
case (``usecases.leases.Leases``) as a push of grants hands grants back through it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

from job_service.domain.attempts import (
    AttemptEnd,
    AttemptFacts,
    EndedAttempt,
    FailureOutcome,
    HeartbeatAck,
    LeaseState,
    LockedAttempt,
)
from job_service.domain.lifecycle import LEASED, JobStatus
from shared.ai.provider import UsageRecord
from shared.errors import LeaseLost

LEASE_TTL = timedelta(seconds=30)
RETRIED = FailureOutcome(JobStatus.RETRYING)


class FakeLeaseStore:
    """``LeaseStore``, and the ``AttemptEnding`` its ``ending()`` opens (the store itself:
    an end is written at once, nothing is rolled back). ``jobs``: by id, (status, lease
    token, attempt), each of type ``job_type`` with ``max_attempts``; ``outputs``: the
    output hash of a job's committed result. It keeps no clock and no worker per job:
    every leased attempt has expired when the reaper asks, and every RUNNING one is held
    by whichever worker is asked about; ``past_deadline`` names the attempts that ran past
    their timeout and the grace. Records the transactions opened, the ends written (job,
    end, reaped), the usage stored ((job, attempt) per call) and the heartbeats."""

    def __init__(self, job_type: str = "probe", max_attempts: int = 3) -> None:
        self.job_type = job_type
        self.max_attempts = max_attempts
        self.jobs: dict[str, tuple[JobStatus, str, int]] = {}
        self.outputs: dict[str, str] = {}
        self.past_deadline: set[str] = set()
        self.transactions = 0
        self.ended: list[tuple[str, AttemptEnd, bool]] = []
        self.usage: list[tuple[str, int]] = []
        self.heartbeats: list[tuple[str, float]] = []

    def _locked(self, job_id: str) -> LockedAttempt:
        status, token, attempt = self.jobs[job_id]
        facts = AttemptFacts(job_id, self.job_type, status, attempt, self.max_attempts)
        return LockedAttempt(facts, token, past_deadline=job_id in self.past_deadline)

    def _leased(self, job_id: str, lease_token: str) -> bool:
        if job_id not in self.jobs:
            return False
        status, token, _ = self.jobs[job_id]
        return status in LEASED and token == lease_token

    # --- LeaseStore ----------------------------------------------------------------------

    async def heartbeat(self, job_id: str, lease_token: str, progress: float) -> HeartbeatAck:
        if not self._leased(job_id, lease_token):
            raise LeaseLost("the lease on this job is no longer held")
        self.heartbeats.append((job_id, progress))
        cancel = self.jobs[job_id][0] is JobStatus.CANCEL_REQUESTED
        return HeartbeatAck(datetime.now(UTC) + LEASE_TTL, cancel_requested=cancel)

    @asynccontextmanager
    async def ending(self) -> AsyncIterator[FakeLeaseStore]:
        self.transactions += 1
        yield self

    async def lease_state(self, job_id: str) -> LeaseState | None:
        if job_id not in self.jobs:
            return None
        status, token, _ = self.jobs[job_id]
        return LeaseState(status, token, self.outputs.get(job_id))

    async def report_usage(
        self, job_id: str, lease_token: str, usage: Sequence[UsageRecord]
    ) -> tuple[int, int]:
        if job_id not in self.jobs or self.jobs[job_id][1] != lease_token:
            raise LeaseLost("no attempt of this job holds this lease token")
        attempt = self.jobs[job_id][2]
        self.usage += [(job_id, attempt)] * len(usage)
        return attempt, len(usage)

    # --- AttemptEnding -------------------------------------------------------------------

    async def attempt(self, job_id: str, lease_token: str) -> LockedAttempt | None:
        return self._locked(job_id) if self._leased(job_id, lease_token) else None

    async def expired(self, limit: int) -> list[LockedAttempt]:
        leased = [j for j, (status, _, _) in self.jobs.items() if status in LEASED]
        return [self._locked(j) for j in leased[:limit]]

    async def of_worker(self, worker_id: str, limit: int) -> list[LockedAttempt]:
        running = [j for j, (status, _, _) in self.jobs.items() if status is JobStatus.RUNNING]
        return [self._locked(j) for j in running[:limit]]

    async def store_usage(self, attempt: LockedAttempt, usage: Sequence[UsageRecord]) -> None:
        self.usage += [(attempt.facts.job_id, attempt.facts.attempt)] * len(usage)

    async def end(
        self, attempt: LockedAttempt, end: AttemptEnd, message: str, *, reaped: bool = False
    ) -> EndedAttempt:
        job_id = attempt.facts.job_id
        self.ended.append((job_id, end, reaped))
        self.jobs[job_id] = (end.status, attempt.lease_token, attempt.facts.attempt)
        due = datetime.now(UTC) + timedelta(seconds=end.delay_s)
        return EndedAttempt(end.status, due if end.status is JobStatus.RETRYING else None)


class FakeLeases:
    """``Leases.submit_failure`` answering ``outcome``; records each failure reported (job,
    error code)."""

    def __init__(self, outcome: FailureOutcome = RETRIED) -> None:
        self.outcome = outcome
        self.handed_back: list[tuple[str, str]] = []

    async def submit_failure(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        usage: Sequence[UsageRecord] = (),
        retry_after_s: float = 0.0,
        signals_seen: int = 0,
    ) -> FailureOutcome:
        self.handed_back.append((job_id, error_code))
        return self.outcome
