"""Fakes for the worker's ports (no sockets), a test job type, and ``eventually``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from shared.constants import Queue
from shared.dependencies import DependencyOutput
from shared.errors import CredentialUnavailable, ExecutionError
from shared.registry import ArtifactDraft, ExecutionContext, JobDefinition, JobResult
from worker_service.domain.model import (
    HeartbeatReply,
    LockedJob,
    LockOutcome,
    LockResult,
    ResultSubmission,
    Signal,
    Succeeded,
    UserKey,
)
from worker_service.ports import MAX_BATCH

QUEUE = Queue.INTERACTIVE.value


async def eventually(
    predicate: Callable[[], bool], *, within_s: float = 5.0, what: str = "condition"
) -> None:
    """Wait until ``predicate()`` holds, failing after ``within_s`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.002)


# --- a job type that does what its input says --------------------------------------------


class ProbeInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: str = "ok"  # ok | sleep | hang | error | boom | self_cancel | bad_output
    sleep_s: float = 0.0
    code: str = ""


class ProbeOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: int
    label: str


@dataclass
class ProbeLog:
    """What the probe job did, for assertions."""

    started: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)


def probe_definition(log: ProbeLog, *, timeout_s: float = 30.0) -> JobDefinition:
    async def execute(job_input: ProbeInput, ctx: ExecutionContext) -> JobResult:
        log.started.append(ctx.job_id)
        try:
            if job_input.mode == "hang":
                await asyncio.Event().wait()
            if job_input.mode == "sleep":
                await asyncio.sleep(job_input.sleep_s)
        except asyncio.CancelledError:
            log.cancelled.append(ctx.job_id)
            raise
        if job_input.mode == "error":
            raise ExecutionError(job_input.code, "the probe failed on purpose")
        if job_input.mode == "boom":
            raise RuntimeError("kaput")
        if job_input.mode == "self_cancel":
            raise asyncio.CancelledError
        log.finished.append(ctx.job_id)
        if job_input.mode == "bad_output":
            return JobResult(output=ProbeOutput.model_construct(value="many", label="x"))
        ctx.report_progress(0.5)
        return JobResult(
            output=ProbeOutput(value=ctx.attempt, label="résumé"),
            artifacts=[
                ArtifactDraft("probe", f"probe_{ctx.job_id}", {"n": 1, "tags": ("a", "b")}, 2)
            ],
        )

    return JobDefinition(
        job_type="probe",
        label="Probe",
        domain="testing",
        version="1",
        queue=QUEUE,
        input_model=ProbeInput,
        output_model=ProbeOutput,
        execute=execute,
        timeout_s=timeout_s,
        concurrency=4,
    )


def locked(
    job_id: str = "job-1",
    *,
    attempt: int = 1,
    heartbeat_ms: int = 1000,
    ttl_ms: int = 5000,
    job_type: str = "probe",
    **job_input: Any,
) -> LockedJob:
    return LockedJob(
        job_id=job_id,
        job_type=job_type,
        lease_token=f"token-{job_id}-{attempt}",
        attempt=attempt,
        input=job_input,
        lease_ttl_ms=ttl_ms,
        heartbeat_interval_ms=heartbeat_ms,
    )


def submission(job_id: str) -> ResultSubmission:
    output = {"value": 1}
    return ResultSubmission(job_id, f"token-{job_id}", Succeeded(output, f"hash-{job_id}"))


# --- the executor API --------------------------------------------------------------------


@dataclass
class FakeExecutor:
    """Scripted answers per job id; records every call."""

    # job id -> what its LockJobs item answers, in order (the last one repeats); an
    # Exception is that item's failure.
    locks: dict[str, list[LockResult | Exception]] = field(default_factory=dict)
    # Raised by the next LockJobs calls, in order: the whole call fails.
    lock_errors: list[Exception] = field(default_factory=list)
    # Called per heartbeat with the call number (1-based); returns a reply or raises.
    on_heartbeat: Callable[[int], HeartbeatReply] = lambda n: HeartbeatReply(False)
    # Raised by the next submit calls (SubmitResults or SubmitFailure), in order: the whole
    # call fails.
    submit_errors: list[Exception] = field(default_factory=list)
    # job id -> the errors its next SubmitResults items are refused with, in order.
    refusals: dict[str, list[Exception]] = field(default_factory=dict)
    # When given, SubmitResults calls wait for it before answering.
    results_gate: asyncio.Event | None = None
    lock_calls: list[tuple[str, str]] = field(default_factory=list)
    lock_batches: list[list[str]] = field(default_factory=list)
    heartbeats: list[tuple[str, str, float]] = field(default_factory=list)
    result_batches: list[list[str]] = field(default_factory=list)
    result_timeouts: list[float] = field(default_factory=list)
    results_in_flight: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    submit_calls: int = 0
    # job id -> what its ResolveCredential calls answer, in order (the last one repeats).
    credentials: dict[str, list[UserKey | Exception]] = field(default_factory=dict)
    resolve_calls: list[tuple[str, str]] = field(default_factory=list)
    usage_reports: list[tuple[str, str, list[Any]]] = field(default_factory=list)
    # RecordStep calls, and what they answer in order (an attempt number or an error)
    recorded_steps: list[tuple[str, str, str, Any, Any]] = field(default_factory=list)
    step_answers: list[int | Exception] = field(default_factory=list)
    # RecordStepResult calls, and what they answer in order (default: recorded)
    step_results: list[tuple[str, str, Any]] = field(default_factory=list)
    step_result_answers: list[tuple[bool, Any] | Exception] = field(default_factory=list)
    # job id -> the signals FetchSignals finds for it (append to send one)
    signals: dict[str, list[Signal]] = field(default_factory=dict)
    signal_fetches: list[tuple[str, int]] = field(default_factory=list)
    # job id -> its dependencies' results in id order, as FetchDependencyResults pages them
    dependencies: dict[str, list[DependencyOutput]] = field(default_factory=dict)
    # Raised by the next FetchDependencyResults calls, in order.
    dependency_errors: list[Exception] = field(default_factory=list)
    # (job id, lease token, after_job_id, page_size) per FetchDependencyResults call
    dependency_fetches: list[tuple[str, str, str, int]] = field(default_factory=list)
    # Lock on submit: the jobs the next SubmitResults calls that ask for some are granted,
    # taken in order up to what each asks for; and what each such call asked for.
    grants_on_submit: list[LockedJob] = field(default_factory=list)
    wanted: list[dict[str, int]] = field(default_factory=list)

    def lock_as(self, job: LockedJob) -> None:
        self.locks[job.job_id] = [LockResult(LockOutcome.LOCKED, job=job)]

    @property
    def submitted(self) -> int:
        return len(self.results) + len(self.failures)

    async def lock_jobs(
        self,
        job_ids: Sequence[str],
        worker_id: str,
        *,
        timeout_s: float,
        queue: str = "",
        runnable: Sequence[str] = (),
    ) -> list[LockResult | Exception]:
        assert len(job_ids) <= MAX_BATCH
        self.lock_batches.append(list(job_ids))
        if self.lock_errors:
            raise self.lock_errors.pop(0)
        answers: list[LockResult | Exception] = []
        for job_id in job_ids:
            self.lock_calls.append((job_id, worker_id))
            script = self.locks.get(job_id) or [LockResult(LockOutcome.UNAVAILABLE)]
            answers.append(script.pop(0) if len(script) > 1 else script[0])
        return answers

    async def heartbeat(
        self, job_id: str, lease_token: str, progress: float, *, timeout_s: float
    ) -> HeartbeatReply:
        self.heartbeats.append((job_id, lease_token, progress))
        return self.on_heartbeat(len(self.heartbeats))

    async def submit_results(
        self, submissions: Sequence[ResultSubmission], *, timeout_s: float
    ) -> list[str | Exception]:
        assert len(submissions) <= MAX_BATCH
        self.result_batches.append([s.job_id for s in submissions])
        self.result_timeouts.append(timeout_s)
        self.results_in_flight += 1
        try:
            if self.results_gate is not None:
                await self.results_gate.wait()
            self._maybe_fail()
        finally:
            self.results_in_flight -= 1
        answers: list[str | Exception] = []
        for s in submissions:
            refusals = self.refusals.get(s.job_id)
            if refusals:
                answers.append(refusals.pop(0))
                continue
            self.results.append(
                {
                    "job_id": s.job_id,
                    "lease_token": s.lease_token,
                    "output": s.result.output,
                    "output_hash": s.result.output_hash,
                    "artifacts": list(s.result.artifacts),
                }
            )
            answers.append("SUCCEEDED")
        return answers

    async def submit_results_and_lock(
        self,
        submissions: Sequence[ResultSubmission],
        *,
        timeout_s: float,
        wanted: Mapping[str, int],
        worker_id: str,
        runnable: Sequence[str] = (),
    ) -> tuple[list[str | Exception], list[LockedJob]]:
        self.wanted.append(dict(wanted))
        answers = await self.submit_results(submissions, timeout_s=timeout_s)
        count = sum(wanted.values())
        granted, self.grants_on_submit = (
            self.grants_on_submit[:count],
            self.grants_on_submit[count:],
        )
        return answers, granted

    async def submit_failure(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        *,
        timeout_s: float,
        usage: Sequence[Any] = (),
        retry_after_s: float | None = None,
        signals_seen: int = 0,
    ) -> str:
        self._maybe_fail()
        self.failures.append(
            {
                "job_id": job_id,
                "lease_token": lease_token,
                "error_code": error_code,
                "error_message": error_message,
            }
        )
        return "CANCELLED" if error_code == "CANCELLED" else "RETRYING"

    async def report_usage(
        self, job_id: str, lease_token: str, usage: Sequence[Any], *, timeout_s: float
    ) -> int:
        self.usage_reports.append((job_id, lease_token, list(usage)))
        return len(usage)

    async def record_step(
        self,
        job_id: str,
        lease_token: str,
        step: str,
        response: Any,
        usage: Any,
        *,
        timeout_s: float,
    ) -> int:
        self.recorded_steps.append((job_id, lease_token, step, response, usage))
        answer = self.step_answers.pop(0) if self.step_answers else 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def record_step_result(
        self, job_id: str, lease_token: str, step: Any, *, timeout_s: float
    ) -> tuple[bool, Any]:
        self.step_results.append((job_id, lease_token, step))
        answer = self.step_result_answers.pop(0) if self.step_result_answers else (True, None)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def resolve_credential(
        self, job_id: str, lease_token: str, *, timeout_s: float
    ) -> UserKey:
        self.resolve_calls.append((job_id, lease_token))
        script = self.credentials.get(job_id) or [CredentialUnavailable("no user key")]
        answer = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def fetch_signals(
        self, job_id: str, lease_token: str, after_seq: int, *, timeout_s: float
    ) -> tuple[list[Signal], bool]:
        self.signal_fetches.append((job_id, after_seq))
        return [s for s in self.signals.get(job_id, []) if s.seq > after_seq], False

    async def fetch_dependency_results(
        self, job_id: str, lease_token: str, after_job_id: str, page_size: int, *, timeout_s: float
    ) -> tuple[list[DependencyOutput], bool]:
        self.dependency_fetches.append((job_id, lease_token, after_job_id, page_size))
        if self.dependency_errors:
            raise self.dependency_errors.pop(0)
        rest = [d for d in self.dependencies.get(job_id, []) if d.job_id > after_job_id]
        return rest[:page_size], len(rest) > page_size

    def _maybe_fail(self) -> None:
        self.submit_calls += 1
        if self.submit_errors:
            raise self.submit_errors.pop(0)


# --- the dispatch stream -----------------------------------------------------------------


@dataclass
class FakeDelivery:
    data: bytes
    acks: int = 0
    naks: list[float | None] = field(default_factory=list)

    @classmethod
    def of(cls, job_id: str, attempt: int = 1) -> FakeDelivery:
        return cls(json.dumps({"job_id": job_id, "attempt": attempt}).encode())

    @property
    def settled(self) -> bool:
        return self.acks + len(self.naks) > 0

    async def ack(self) -> None:
        self.acks += 1

    async def nak(self, delay: float | None = None) -> None:
        self.naks.append(delay)


class FakeSource:
    """Per-queue message queues; ``fetch`` behaves like a JetStream pull."""

    def __init__(self) -> None:
        self.queues: dict[str, asyncio.Queue[FakeDelivery]] = {}
        self.batches: list[int] = []
        self.fail_with: list[Exception] = []

    def put(self, delivery: FakeDelivery, queue: str = QUEUE) -> FakeDelivery:
        self.queues.setdefault(queue, asyncio.Queue()).put_nowait(delivery)
        return delivery

    async def fetch(self, queue: str, batch: int, wait_s: float) -> Sequence[FakeDelivery]:
        self.batches.append(batch)
        if self.fail_with:
            raise self.fail_with.pop(0)
        pending = self.queues.setdefault(queue, asyncio.Queue())
        try:
            first = await asyncio.wait_for(pending.get(), wait_s)
        except TimeoutError:
            return []
        taken = [first]
        while len(taken) < batch and not pending.empty():
            taken.append(pending.get_nowait())
        return taken
