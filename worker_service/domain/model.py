"""Values exchanged with the job service and the dispatch stream, independent of the wire."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from shared.ai.provider import UsageRecord
from shared.ai.steps import RecordedStep
from shared.credentials import CredentialMode
from shared.durable_steps import StepResult
from shared.errors import ExecutionError
from shared.registry import ArtifactDraft, ChildJobDraft

# Used when the job service leaves the heartbeat interval unset.
DEFAULT_HEARTBEAT_INTERVAL_S = 1.0
# A NOT_DUE job is offered again no sooner than this.
MIN_NAK_DELAY_S = 0.05


class LockOutcome(StrEnum):
    LOCKED = "LOCKED"
    NOT_DUE = "NOT_DUE"
    UNAVAILABLE = "UNAVAILABLE"


@dataclass(frozen=True, slots=True)
class LockedJob:
    """What one attempt needs: the job, its input snapshot and the lease it runs under."""

    job_id: str
    job_type: str
    lease_token: str
    attempt: int
    input: dict[str, Any]
    lease_ttl_ms: int
    heartbeat_interval_ms: int
    # The job's owner; a projection's child jobs belong to it too.
    user_id: str = ""
    # The prompt template the job was created with (AI job types).
    prompt_key: str = ""
    prompt_version: str = ""
    # USER: the attempt fetches the owner's key with ResolveCredential (worker_service.credentials)
    credential_mode: CredentialMode = CredentialMode.PLATFORM
    credential_id: str = ""
    # The steps earlier attempts recorded (worker_service.steps): reused, not called again.
    recorded_steps: tuple[RecordedStep, ...] = ()
    # The outcomes of the durable steps earlier attempts completed, by ordinal
    # (worker_service.durable_steps): returned, not run again.
    step_results: tuple[StepResult, ...] = ()
    # How many jobs this one waited for (worker_service.dependencies): 0 spares the fetch.
    dependency_count: int = 0

    @property
    def lease_ttl_s(self) -> float:
        return self.lease_ttl_ms / 1000

    @property
    def heartbeat_interval_s(self) -> float:
        """The job service's cadence; kept to a third of the TTL at most, so that a
        misconfigured interval cannot let every lease lapse between two beats."""
        interval = (
            self.heartbeat_interval_ms / 1000
            if self.heartbeat_interval_ms > 0
            else DEFAULT_HEARTBEAT_INTERVAL_S
        )
        if self.lease_ttl_ms > 0:
            interval = min(interval, self.lease_ttl_s / 3)
        return interval


@dataclass(frozen=True, slots=True)
class LockResult:
    outcome: LockOutcome
    job: LockedJob | None = None
    # Set when NOT_DUE: when the job becomes eligible, in seconds since the epoch.
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class UserKey:
    """A job owner's provider key, as ResolveCredential returns it. Its repr hides the key."""

    api_key: str = field(repr=False)
    provider: str
    credential_id: str


@dataclass(frozen=True, slots=True)
class HeartbeatReply:
    cancel_requested: bool
    # the seq of the job's latest signal (0: none); an attempt behind it fetches the rest
    latest_signal_seq: int = 0


def nak_delay(retry_after: float | None, now: float) -> float:
    """How long JetStream should hold a NOT_DUE dispatch before offering it again."""
    if retry_after is None:
        return MIN_NAK_DELAY_S
    return max(MIN_NAK_DELAY_S, retry_after - now)


@dataclass(slots=True)
class Lease:
    """The worker's conservative view of its lease, on the local monotonic clock.

    The job service extends the lease to (its now + ttl) when it handles a heartbeat, which
    is never earlier than (our send time + ttl): so this deadline never outlives the real one.
    """

    token: str
    ttl_s: float
    deadline: float

    @classmethod
    def granted(cls, job: LockedJob, now: float) -> Lease:
        return cls(token=job.lease_token, ttl_s=job.lease_ttl_s, deadline=now + job.lease_ttl_s)

    def extend(self, sent_at: float) -> None:
        self.deadline = max(self.deadline, sent_at + self.ttl_s)

    def expired(self, now: float) -> bool:
        return self.ttl_s > 0 and now >= self.deadline


@dataclass(frozen=True, slots=True)
class CallPermit:
    """AcquireCallPermit's answer: call now (``granted``, within ``valid_for_s`` of asking),
    or ask again after ``retry_after_s`` (passing ``reserved_slot`` back when set);
    ``unlimited``: no permit needed for ``valid_for_s``."""

    granted: bool
    retry_after_s: float
    valid_for_s: float
    unlimited: bool
    reserved_slot: str = ""
    slot_at: float | None = None  # the slot's wall-clock time (epoch seconds)


class CancelCause(StrEnum):
    """Why the worker stopped a running attempt."""

    CANCEL_REQUESTED = "cancel_requested"  # the job's owner cancelled it
    LEASE_LOST = "lease_lost"  # another worker owns the job now: report nothing
    SHUTDOWN = "shutdown"  # this worker is draining: hand the job back


@dataclass(frozen=True, slots=True)
class Succeeded:
    output: dict[str, Any]
    output_hash: str
    artifacts: list[ArtifactDraft] = field(default_factory=list)
    children: list[ChildJobDraft] = field(default_factory=list)
    usage: tuple[UsageRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class Failed:
    code: str
    # Internal detail for operators; never logged by the worker.
    message: str = ""
    usage: tuple[UsageRecord, ...] = ()
    # A provider's Retry-After, in seconds (a suspension's: until its wake time).
    retry_after_s: float | None = None
    # A signal wait's suspension: the newest signal seq the attempt had fetched.
    signals_seen: int = 0


@dataclass
class SignalWait(ExecutionError):
    """Job code waits for a signal that has not come (``ctx.wait_for_signal``): the attempt
    ends SUSPENDED_SIGNAL, to run again at the wait's timeout or at the signal;
    ``signals_seen`` is the newest signal seq it had fetched."""

    signals_seen: int = 0


Outcome = Succeeded | Failed


@dataclass(frozen=True, slots=True)
class ResultSubmission:
    """One successful attempt's result, as one item of SubmitResults carries it."""

    job_id: str
    lease_token: str
    result: Succeeded
    # the job's queue: a result frees a slot of it (lock on submit asks for its next job)
    queue: str = ""


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A dispatch message: "job X may be worked on". A hint, never a decision."""

    job_id: str
    attempt: int = 0


def parse_dispatch(data: bytes) -> Dispatch:
    """The dispatch a message carries; ValueError when it is not one."""
    body = _json_object(data)
    job_id = body.get("job_id")
    attempt = body.get("attempt", 0)
    if not isinstance(job_id, str) or not job_id:
        raise ValueError("dispatch message without a job_id")
    if not isinstance(attempt, int) or isinstance(attempt, bool):
        raise ValueError("dispatch message with a non-integer attempt")
    return Dispatch(job_id=job_id, attempt=attempt)


def parse_cancel(data: bytes) -> str:
    """The job id a cancel message names; ValueError when it names none."""
    job_id = _json_object(data).get("job_id")
    if not isinstance(job_id, str) or not job_id:
        raise ValueError("cancel message without a job_id")
    return job_id


def parse_signal_notice(data: bytes) -> tuple[str, int]:
    """(job id, latest seq) a signal notice names; ValueError when malformed."""
    body = _json_object(data)
    job_id, seq = body.get("job_id"), body.get("seq")
    if not isinstance(job_id, str) or not job_id:
        raise ValueError("signal notice without a job_id")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError("signal notice without a seq")
    return job_id, seq


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    return body


@dataclass(frozen=True, order=True)
class Signal:
    """A signal sent to the job (JobService.SendSignal) as job code receives it: its
    payload, ordered by seq (the job's send order)."""

    seq: int
    name: str = field(compare=False)
    payload: dict[str, Any] = field(compare=False)
    sent_at: datetime = field(compare=False)
