"""What the sync and async clients share: their settings, requests, the retry policy,
watch bookkeeping."""

from __future__ import annotations

import random as _random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import grpc
from google.protobuf import struct_pb2

from durable_jobs_client._pb.jobs.v1 import job_pb2
from durable_jobs_client._pb.jobs.v1 import job_service_pb2 as pb
from durable_jobs_client.config import ClientConfig
from durable_jobs_client.errors import (
    JobsError,
    QuotaExceeded,
    TooManyJobs,
    Unavailable,
    error_from_status,
)
from durable_jobs_client.statuses import TERMINAL

DEFAULT_TIMEOUT = 30.0
# CANCELLED as an answer (not this process cancelling its own call, which raises
# asyncio.CancelledError): a replica shutting down ended the call when its grace ran out,
# as in a rolling deploy. Like UNAVAILABLE, nobody knows whether it acted.
RETRIED_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.CANCELLED}
)


@dataclass(frozen=True)
class RetryPolicy:
    """UNAVAILABLE, RESOURCE_EXHAUSTED and CANCELLED (a replica that stopped mid-call) are
    retried, up to ``attempts`` calls in all:
    after the server's RetryInfo delay when it gives one (if not longer than
    ``max_wait`` seconds: a quota that resets at midnight is raised at once), else after
    an exponential backoff spread at random over ``jitter`` of its length (0.5: from 0.75
    to 1.25 times it, the same on average), so that the clients a restarting service
    turned away do not all come back at once."""

    attempts: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    max_wait: float = 30.0
    jitter: float = 0.5
    random: Callable[[], float] = field(default=_random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter is a share from 0 to 1, not {self.jitter}")

    def delay(self, error: JobsError, attempt: int, replay_safe: bool = True) -> float | None:
        """Seconds to wait before call ``attempt + 1``, or None to raise ``error``. A call
        that is not ``replay_safe`` (it would act twice: RetryJob, PutCredential) is retried
        only when the service refused it before acting (RESOURCE_EXHAUSTED): after
        UNAVAILABLE or CANCELLED nobody knows whether it acted."""
        if attempt >= self.attempts or error.code not in RETRIED_CODES:
            return None
        if not replay_safe and error.code != grpc.StatusCode.RESOURCE_EXHAUSTED:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_wait else None
        if isinstance(error, TooManyJobs | QuotaExceeded):
            return None
        if isinstance(error, Unavailable) or error.code in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.CANCELLED,
        ):
            backoff = min(self.max_backoff, self.initial_backoff * 2.0 ** (attempt - 1))
            return backoff * (1.0 + self.jitter * (self.random() - 0.5))
        return None


class ClientBase:
    """The settings of a client, blocking or asyncio, and the requests both make."""

    def __init__(
        self,
        target: str | None,
        *,
        user_id: str,
        token: str | None,
        ca_file: str | None,
        client_cert_file: str | None,
        client_key_file: str | None,
        timeout: float,
        retry: RetryPolicy | None,
        shared_channel: bool,
    ) -> None:
        self.config = ClientConfig.resolve(
            target, token, ca_file, client_cert_file, client_key_file
        )
        self.user_id = user_id
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._metadata = self.config.metadata()
        # A channel the caller gave stays open when this client closes: it is the caller's.
        self._owns_channel = not shared_channel

    def _request(
        self, job_type: str, input: Mapping[str, Any], user_id: str | None, **options: Any
    ) -> pb.CreateJobRequest:
        return create_request(user_id or self.user_id, job_type, input, **options)

    def _watch_request(
        self, job_id: str, user_id: str | None, partial_output: bool
    ) -> pb.WatchJobRequest:
        return pb.WatchJobRequest(
            job_id=job_id,
            user_id=user_id or self.user_id,
            include_partial_output=partial_output,
        )

    def _usage_user(self, user_id: str | None) -> str:
        return self.user_id if user_id is None else user_id


def result_of(result: pb.CreateJobResult) -> pb.CreateJobResponse | JobsError:
    """One item of a CreateJobs answer: the created job, or the error refusing it."""
    if result.HasField("error"):
        return error_from_status(result.error)
    response: pb.CreateJobResponse = result.response
    return response


def struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(dict(values))
    return message


_POLICIES = {
    "run": job_pb2.DEPENDENCY_POLICY_RUN,
    "fail": job_pb2.DEPENDENCY_POLICY_FAIL,
    "cancel": job_pb2.DEPENDENCY_POLICY_CANCEL,
}


def create_request(
    user_id: str,
    job_type: str,
    input: Mapping[str, Any],
    *,
    idempotency_key: str | None = None,
    priority: int | None = None,
    run_at: datetime | None = None,
    delay: timedelta | None = None,
    deadline: datetime | None = None,
    target_type: str = "",
    target_id: str = "",
    prompt_version: str = "",
    output_schema_version: str = "",
    credential_id: str = "",
    depends_on: Sequence[str] = (),
    dependency_policy: str = "",
) -> pb.CreateJobRequest:
    """A CreateJobRequest; without an idempotency key one is made here, so that a retried
    create can never make two jobs. ``credential_id``: run on the user's own stored provider
    key (CredentialService) instead of the platform's. ``deadline``: the job ends
    DEADLINE_EXCEEDED if not finished by then, whatever its retries and waits.
    ``depends_on``: ids of the user's jobs this one waits for; ``dependency_policy``
    ("run", "fail" — the server's default — or "cancel"): what a failed or cancelled one
    does to it."""
    request = pb.CreateJobRequest(
        user_id=user_id,
        job_type=job_type,
        input=struct(input),
        idempotency_key=idempotency_key or f"client-{uuid.uuid4()}",
        target_type=target_type,
        target_id=target_id,
        prompt_version=prompt_version,
        output_schema_version=output_schema_version,
    )
    if credential_id:
        request.credential_mode = job_pb2.CREDENTIAL_MODE_USER
        request.credential_id = credential_id
    if priority is not None:
        request.priority = priority
    if run_at is not None:
        request.run_at.FromDatetime(run_at)
    if delay is not None:
        request.delay.FromTimedelta(delay)
    if deadline is not None:
        request.deadline.FromDatetime(deadline)
    request.depends_on.extend(depends_on)
    if dependency_policy:
        if dependency_policy not in _POLICIES:
            raise ValueError(f"dependency_policy is one of {', '.join(_POLICIES)}")
        request.dependency_policy = _POLICIES[dependency_policy]
    return request


def with_key(request: pb.CreateJobRequest) -> pb.CreateJobRequest:
    """The request, given an idempotency key when it has none."""
    if request.idempotency_key:
        return request
    keyed = pb.CreateJobRequest()
    keyed.CopyFrom(request)
    keyed.idempotency_key = f"client-{uuid.uuid4()}"
    return keyed


def signal_request(
    user_id: str,
    job_id: str,
    name: str,
    payload: Mapping[str, Any] | None,
    idempotency_key: str | None,
) -> pb.SendSignalRequest:
    """A SendSignalRequest; without an idempotency key one is made here, so that a retried
    send can never store two signals."""
    request = pb.SendSignalRequest(
        job_id=job_id,
        user_id=user_id,
        name=name,
        idempotency_key=idempotency_key or f"client-{uuid.uuid4()}",
    )
    if payload is not None:
        request.payload.CopyFrom(struct(payload))
    return request


@dataclass(frozen=True)
class Partial:
    """A piece of a running attempt's model output (``watch(..., partial_output=True)``):
    ``text`` generated since the previous piece of the same provider call (``attempt``,
    ``call``), numbered ``seq`` 1, 2, 3 ...; ``offset`` characters of that call's text came
    before it. Best effort: a gap in ``seq`` means pieces were missed (a slow watcher, a
    reconnect) and are never sent again; the job's output once it succeeded is the truth."""

    text: str
    seq: int
    attempt: int
    call: int
    offset: int

    @classmethod
    def of(cls, piece: pb.PartialOutput) -> Partial:
        return cls(piece.text, piece.seq, piece.attempt, piece.call, piece.offset)


class WatchState:
    """What a watch has shown: a reconnect's first answer (the current state again) is not
    shown twice, no partial piece is shown twice, and nothing follows a terminal state."""

    def __init__(self) -> None:
        self._last: tuple[Any, ...] | None = None
        self._pieces: dict[tuple[int, int], int] = {}
        self.done = False

    def shown(self, answer: pb.WatchJobResponse) -> job_pb2.Job | Partial | None:
        """What of ``answer`` to show: its job state or partial piece, or None."""
        if answer.HasField("partial"):
            piece = answer.partial
            call = (piece.attempt, piece.call)
            if self.done or piece.seq <= self._pieces.get(call, 0):
                return None
            self._pieces[call] = piece.seq
            return Partial.of(piece)
        return answer.job if self.fresh(answer.job) else None

    def fresh(self, job: job_pb2.Job) -> bool:
        seen = (job.status, job.progress, job.attempt_count, job.updated_at.ToNanoseconds())
        if self.done or seen == self._last:
            return False
        self._last = seen
        self.done = job.status in TERMINAL
        return True
