"""The state machine of the model-based test (tests/faults/test_model_based.py, whose
docstring lists what it drives and checks): its budget, the rules that drive the public
API against the real stack, and the invariant that checks the reference model
(tests/support/model_reference.py) after every step."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
import uuid
from datetime import datetime
from functools import partial
from typing import Any

import grpc
from grpc_status import rpc_status
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from job_service.domain.lifecycle import JobStatus
from shared.constants import Queue
from shared.pb.jobs.v1 import admin_service_pb2 as apb
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pbconv import struct_from_dict
from tests.support.model_jobtypes import KEYED_LIMIT, REDACTED_FIELD, TIMED_TIMEOUT_S, VERSION
from tests.support.model_reference import (
    HOLDING,
    INPUTS,
    KEYS,
    REACHABLE,
    RERUNNABLE,
    SCHEMA_PINS,
    TARGETS,
    TIMES,
    WAITING,
    CreateSpec,
    check,
    expected_for_repeat,
    holding_by_user,
    live_retries,
    now,
    reasons_in,
    seconds,
    status_of,
)
from tests.support.model_stack import (
    REAPER_INTERVAL_S,
    SIGNAL_CAP,
    TIMEOUT_GRACE_S,
    ModelStack,
)
from tests.support.stack import result_request
from tests.support.wait import eventually

EXAMPLES = int(os.environ.get("JOBS_MODEL_TEST_EXAMPLES", "12"))
STEPS = int(os.environ.get("JOBS_MODEL_TEST_STEPS", "25"))
LONG = "JOBS_MODEL_TEST_EXAMPLES" in os.environ or "JOBS_MODEL_TEST_STEPS" in os.environ
# Worker kills per module run and per example (each costs a worker process start).
MAX_KILLS = 3 if not LONG else 1_000
# A bulk walk longer than this is looping over its own retries.
MAX_BULK_PAGES = 20
JOB_TYPES = ("synthetic", "model_keyed", "model_versioned", "model_timed", "model_redacted")
QUEUES = (Queue.INTERACTIVE.value, Queue.BACKGROUND.value)
FOREIGN = "model-foreign-executor"
# what create_again changes in a used key's request
CHANGES = ("nothing", "time", "priority", "input_index", "target", "schema_pin")
# What a foreign executor says it runs: model_versioned at the workers' version only, the
# two types no worker runs at the job service's.
FOREIGN_ONLY = ("model_timed", "model_redacted")
FOREIGN_RUNS = [
    "synthetic@1.0.0",
    "model_keyed@1.0.0",
    "model_versioned@1.0.0",
    *(f"{t}@{VERSION}" for t in FOREIGN_ONLY),
]
# a grant stamped this long after the pause was acknowledged was made past it
PAUSE_SLACK_S = 0.05
# A held attempt is ended within its timeout, the grace and a reaper period, plus this.
TIMEOUT_SLACK_S = 2.0
HOLD_HEARTBEAT_S = 0.3
# A hold is checked only for a job this far from its time (either side): near it, the
# hold may rightly say either.
DUE_MARGIN_S = 0.5


def _code(error: grpc.aio.AioRpcError) -> tuple[grpc.StatusCode, list[str]]:
    status = rpc_status.from_call(error)
    return error.code(), (reasons_in(status) if status is not None else [])


class APIModel(RuleBasedStateMachine):
    stack: ModelStack  # set by the test before the runner starts

    def __init__(self) -> None:
        super().__init__()
        run = uuid.uuid4().hex[:8]
        self.users = (f"alice-{run}", f"bob-{run}")
        self.base: datetime = now()
        # the first create of each (user, job_type, key): its spec and job
        self.keys: dict[tuple[str, str, str], tuple[CreateSpec, str]] = {}
        self.jobs: dict[str, job_pb2.Job] = {}  # last observation
        self.paused: dict[str, float] = {}  # queue -> when the pause was acknowledged
        self.foreign: dict[str, int] = {}  # job -> attempt a foreign executor was granted
        self.signals: dict[tuple[str, str], tuple[int, int]] = {}
        self.schedules: dict[str, str] = {}  # schedule -> owner
        self.signal_counts: dict[str, int] = {}  # job -> signals it took
        self.held: dict[str, tuple[int, float]] = {}  # job -> (attempt, monotonic lock time)
        self.holders: list[Any] = []  # the held jobs' heartbeat tasks (concurrent futures)
        self.secrets: dict[str, str] = {}  # job -> the redacted value a result carried
        self.killed = False  # a worker was killed in this example
        self.joins: dict[str, list[str]] = {}  # a join -> the jobs it waits for

    # --- plumbing

    def call(self, coroutine: Any) -> Any:
        return self.stack.call(coroutine)

    def rpc(self, method: Any, request: Any) -> Any:
        """One call, made on the stack's loop (gRPC's aio calls belong to their loop)."""

        async def run() -> Any:
            return await method(request)

        return self.call(run())

    def attempt(
        self, method: Any, request: Any
    ) -> tuple[Any, tuple[grpc.StatusCode, list[str]] | None]:
        """The answer, or the refusal's code and reasons."""

        async def run() -> Any:
            try:
                return await method(request), None
            except grpc.aio.AioRpcError as error:
                return None, _code(error)

        result: tuple[Any, tuple[grpc.StatusCode, list[str]] | None] = self.call(run())
        return result

    async def _listing(self) -> dict[str, job_pb2.Job]:
        """Every job of this run's users, as AdminService.ListJobs shows them."""
        found: dict[str, job_pb2.Job] = {}
        for user in self.users:
            token = ""
            while True:
                page = await self.stack.client.admin.ListJobs(
                    apb.AdminListJobsRequest(user_id=user, page_size=500, page_token=token)
                )
                found.update((job.id, job) for job in page.jobs)
                if not (token := page.next_page_token):
                    break
        return found

    def observe(self) -> dict[str, job_pb2.Job]:
        observed: dict[str, job_pb2.Job] = self.call(self._listing())
        return observed

    def pick(self, index: int) -> job_pb2.Job | None:
        """One of the run's jobs (None before the first). Rules draw an index rather than
        a choice among what the system showed, so that a replay draws the same data."""
        if not self.jobs:
            return None
        ids = sorted(self.jobs)
        return self.jobs[ids[index % len(ids)]]

    @initialize()
    def first_look(self) -> None:
        self.jobs = self.observe()

    # --- creating jobs

    specs = st.builds(
        CreateSpec,
        user_id=st.just(""),  # filled in with one of the run's users
        job_type=st.sampled_from(JOB_TYPES),
        input_index=st.integers(0, len(INPUTS) - 1),
        priority=st.none() | st.sampled_from([-5, 0, 5]),
        time=st.sampled_from(TIMES),
        target=st.sampled_from(TARGETS),
        schema_pin=st.sampled_from(SCHEMA_PINS),
        key=st.sampled_from(KEYS),
    )

    def _spec(self, spec: CreateSpec, user: int) -> CreateSpec:
        return dataclasses.replace(spec, user_id=self.users[user])

    def _judge(self, spec: CreateSpec, answer: jpb.CreateJobResponse | None, refusal: Any) -> None:
        """Checks a create's answer against the idempotency model, then records it."""
        first = self.keys.get(spec.identity()) if spec.key else None
        if first is None:
            assert refusal is None, f"a new create was refused: {refusal}"
            assert answer is not None and answer.created, "a new key's create made no job"
            assert answer.job.user_id == spec.user_id
            if spec.key:
                self.keys[spec.identity()] = (spec, answer.job.id)
            self.jobs.setdefault(answer.job.id, answer.job)
            return
        first_spec, first_job = first
        expected = expected_for_repeat(first_spec, spec)
        event(f"repeat key: {expected.name}, refused={refusal is not None}")
        if refusal is not None:
            code, reasons = refusal
            assert code is grpc.StatusCode.FAILED_PRECONDITION, refusal
            assert reasons == ["IDEMPOTENCY_KEY_REUSED"], refusal
            check(expected.name, expected.reused, f"{spec} refused after {first_spec}")
            return
        assert answer is not None
        same = answer.job.id == first_job and not answer.created
        check(
            expected.name,
            expected.same and same,
            f"{spec} answered job {answer.job.id} (created={answer.created}) after "
            f"{first_spec} made {first_job}: expected IDEMPOTENCY_KEY_REUSED",
        )
        assert answer.job.id == first_job, "a used key made another job"

    @rule(spec=specs, user=st.integers(0, 1))
    def create(self, spec: CreateSpec, user: int) -> None:
        spec = self._spec(spec, user)
        answer, refusal = self.attempt(self.stack.client.jobs.CreateJob, spec.request(self.base))
        self._judge(spec, answer, refusal)

    @rule(pick=st.integers(0, 10_000), change=st.sampled_from(CHANGES), spec=specs)
    def create_again(self, pick: int, change: str, spec: CreateSpec) -> None:
        """A used key again, with the same request or with one field changed."""
        if not self.keys:
            return
        first, _ = self.keys[sorted(self.keys)[pick % len(self.keys)]]
        again = (
            first
            if change == "nothing"
            else dataclasses.replace(first, **{change: getattr(spec, change)})
        )
        answer, refusal = self.attempt(self.stack.client.jobs.CreateJob, again.request(self.base))
        self._judge(again, answer, refusal)

    @rule(specs=st.lists(specs, min_size=1, max_size=4), user=st.integers(0, 1))
    def create_batch(self, specs: list[CreateSpec], user: int) -> None:
        batch = [self._spec(spec, user) for spec in specs]
        request = jpb.CreateJobsRequest(requests=[s.request(self.base) for s in batch])
        answer, refusal = self.attempt(self.stack.client.jobs.CreateJobs, request)
        assert refusal is None, refusal
        for spec, result in zip(batch, answer.results, strict=True):
            if result.HasField("error"):
                code = grpc.StatusCode.FAILED_PRECONDITION if result.error.code == 9 else None
                self._judge(spec, None, (code, reasons_in(result.error)))
            else:
                self._judge(spec, result.response, None)

    @rule(
        picks=st.lists(st.integers(0, 10_000), min_size=1, max_size=3),
        spec=specs,
        user=st.integers(0, 1),
    )
    def create_join(self, picks: list[int], spec: CreateSpec, user: int) -> None:
        """A job that waits for up to three of the user's jobs (issue 43: joins in the
        model); a refusal (a dependency already failed, ...) is no join."""
        mine = sorted(j for j, job in self.jobs.items() if job.user_id == self.users[user])
        if not mine:
            return
        deps = sorted({mine[p % len(mine)] for p in picks})
        plain = dataclasses.replace(spec, key="", time=None, target=None, schema_pin="")
        request = self._spec(plain, user).request(self.base)
        request.depends_on.extend(deps)
        answer, _ = self.attempt(self.stack.client.jobs.CreateJob, request)
        if answer is not None:
            self.joins[answer.job.id] = deps

    # --- acting on jobs: the owner, and another user who must not see them

    @rule(pick=st.integers(0, 10_000), as_owner=st.booleans())
    def cancel(self, pick: int, as_owner: bool) -> None:
        if (job := self.pick(pick)) is None:
            return
        user = job.user_id if as_owner else self._stranger(job.user_id)
        request = jpb.CancelJobRequest(job_id=job.id, user_id=user)
        _, refusal = self.attempt(self.stack.client.jobs.CancelJob, request)
        if not as_owner:
            check("ownership", refusal is not None and refusal[1] == ["JOB_NOT_FOUND"], "")
            return
        assert refusal is None or refusal[0] is grpc.StatusCode.FAILED_PRECONDITION, refusal

    @rule(
        pick=st.integers(0, 10_000),
        as_owner=st.booleans(),
        key=st.sampled_from(KEYS),
        value=st.integers(0, 1),
        times=st.integers(1, SIGNAL_CAP + 1),
    )
    def signal(self, pick: int, as_owner: bool, key: str, value: int, times: int) -> None:
        """``times`` signals to one job: the first with ``key``, the others with none."""
        if (job := self.pick(pick)) is None:
            return
        for n in range(times):
            self._signal(job, as_owner, key if n == 0 else "", value)

    def _signal(self, job: job_pb2.Job, as_owner: bool, key: str, value: int) -> None:
        user = job.user_id if as_owner else self._stranger(job.user_id)
        request = jpb.SendSignalRequest(
            job_id=job.id,
            user_id=user,
            name="go",
            payload=struct_from_dict({"v": value}),
            idempotency_key=key,
        )
        answer, refusal = self.attempt(self.stack.client.jobs.SendSignal, request)
        if not as_owner:
            check("ownership", refusal is not None and refusal[1] == ["JOB_NOT_FOUND"], "")
            return
        first = self.signals.get((job.id, key)) if key else None
        taken = self.signal_counts.get(job.id, 0)
        if refusal is not None:
            reasons = refusal[1]
            if reasons == ["IDEMPOTENCY_KEY_REUSED"]:
                assert first is not None and first[0] != value, (job.id, key, value, first)
            elif reasons == ["SIGNAL_LIMIT_REACHED"]:
                event("signal cap reached")
                check("signal_cap", taken >= SIGNAL_CAP, f"job {job.id} refused signal {taken + 1}")
                check("signal_cap", first is None, f"job {job.id}'s key {key} replayed: refused")
            else:
                assert reasons == ["JOB_FINISHED"], refusal
            return
        if first is None:
            assert answer.created
            check("signal_cap", taken < SIGNAL_CAP, f"job {job.id} took signal {taken + 1}")
            self.signal_counts[job.id] = taken = taken + 1
            if key:
                self.signals[(job.id, key)] = (value, answer.signal.seq)
        else:
            assert first[0] == value, f"signal key {key} reused with another payload: accepted"
            assert not answer.created and answer.signal.seq == first[1]
        got = self.rpc(
            self.stack.client.jobs.GetJob, jpb.GetJobRequest(job_id=job.id, user_id=user)
        ).job
        check("signal_cap", got.signals_total == taken, f"{got.signals_total} != {taken}")
        check("signal_cap", len(got.signals) == taken, f"{len(got.signals)} shown of {taken}")

    @rule(pick=st.integers(0, 10_000))
    def stranger_reads(self, pick: int) -> None:
        if (job := self.pick(pick)) is None:
            return
        request = jpb.GetJobRequest(job_id=job.id, user_id=self._stranger(job.user_id))
        _, refusal = self.attempt(self.stack.client.jobs.GetJob, request)
        check("ownership", refusal is not None and refusal[1] == ["JOB_NOT_FOUND"], job.id)

    def _stranger(self, owner: str) -> str:
        return self.users[1] if owner == self.users[0] else self.users[0]

    # --- retries

    @rule(pick=st.integers(0, 10_000), times=st.integers(1, 2))
    def retry(self, pick: int, times: int) -> None:
        """AdminService.RetryJob of a failed or cancelled job, once or twice in a row (an
        operator's double click, a client retrying its call)."""
        done = sorted(i for i, j in self.jobs.items() if status_of(j) in RERUNNABLE)
        if not done:
            return
        job_id = done[pick % len(done)]
        for _ in range(times):
            answer, refusal = self.attempt(
                self.stack.client.admin.RetryJob, apb.RetryJobRequest(job_id=job_id)
            )
            if refusal is not None:
                assert refusal[0] is grpc.StatusCode.FAILED_PRECONDITION, refusal
                continue
            event("RetryJob made a job")
            assert answer.job.retried_from_job_id == job_id
            assert answer.job.user_id == self.jobs[job_id].user_id
            self.jobs[answer.job.id] = answer.job
        self._check_lineage(self.observe())

    @rule(
        user=st.integers(0, 1), limit=st.integers(1, 3), by_type=st.booleans(), paced=st.booleans()
    )
    def retry_bulk(self, user: int, limit: int, by_type: bool, paced: bool) -> None:
        """AdminService.RetryJobs by filter, walked page by page to its end; ``paced``: as
        an operator clicking "next", the walk waits (up to a second) for the retries it
        made to finish before it asks for the next page."""
        selection = apb.JobSelection(user_id=self.users[user])
        if by_type:
            selection.job_type = "synthetic"
        admin = self.stack.client.admin

        async def finished(job_ids: list[str]) -> bool:
            for job_id in job_ids:
                job = (await admin.GetJob(apb.AdminGetJobRequest(job_id=job_id))).job
                if status_of(job) not in RERUNNABLE | {JobStatus.SUCCEEDED}:
                    return False
            return True

        async def walk() -> tuple[int, set[str], list[str]]:
            """(pages, jobs the walk made, a page's retries of those); it stops at the
            first such page: past it a walk may loop on its own retries."""
            token, made, pages = "", set[str](), 0
            while pages < MAX_BULK_PAGES:
                page = await admin.RetryJobs(
                    apb.RetryJobsRequest(selection=selection, limit=limit, page_token=token)
                )
                pages += 1
                if again := sorted({o.job_id for o in page.outcomes} & made):
                    return pages, made, again
                new = [o.new_job_id for o in page.outcomes if o.new_job_id]
                made |= set(new)
                if not (token := page.next_page_token):
                    break
                if paced and new:
                    with contextlib.suppress(AssertionError):
                        await eventually(partial(finished, new), timeout=1.0, interval=0.1)
            return pages, made, []

        pages, made, again = self.call(walk())
        event(f"RetryJobs walk: {pages} pages, {len(made)} made")
        check(
            "bulk_selection",
            not again,
            f"page {pages} of a RetryJobs walk (limit {limit}) retried jobs the walk itself"
            f" created: {again}",
        )
        check("bulk_selection", pages < MAX_BULK_PAGES, "RetryJobs walk never ends")
        self._check_lineage(self.observe())

    def _check_lineage(self, jobs: dict[str, job_pb2.Job]) -> None:
        for root, live in live_retries(jobs).items():
            check("retry_lineage", len(live) <= 1, f"job {root} has live retries {live}")

    # --- queues, schedules, executors, workers

    @rule(queue=st.sampled_from(QUEUES), pause=st.booleans())
    def pause_or_resume(self, queue: str, pause: bool) -> None:
        admin = self.stack.client.admin
        if pause:
            self.rpc(admin.PauseQueue, apb.PauseQueueRequest(queue=queue))
            self.paused.setdefault(queue, now().timestamp())
            listed = self.rpc(admin.ListQueues, apb.ListQueuesRequest())
            [info] = [q for q in listed.queues if q.name == queue]
            check("pause", info.paused, f"queue {queue} paused but listed as running")
            check("pause", info.eligible == 0, f"paused queue {queue}: {info.eligible} eligible")
        else:
            self.rpc(admin.ResumeQueue, apb.ResumeQueueRequest(queue=queue))
            self.paused.pop(queue, None)

    @rule(user=st.integers(0, 1), key=st.sampled_from(KEYS), paused=st.booleans())
    def schedule(self, user: int, key: str, paused: bool) -> None:
        owner = self.users[user]
        spec = spb.ScheduleSpec(
            cron="0 0 1 1 *",  # once a year: only TriggerSchedule fires it here
            job_template=spb.JobTemplate(
                job_type="synthetic", input=struct_from_dict({"sleep_ms": 100})
            ),
        )
        request = spb.CreateScheduleRequest(
            user_id=owner, spec=spec, idempotency_key=key, paused=paused
        )
        answer, refusal = self.attempt(self.stack.client.schedules.CreateSchedule, request)
        if refusal is not None:  # the same key with another pause state
            assert refusal[1] == ["IDEMPOTENCY_KEY_REUSED"], refusal
            return
        schedule_id = answer.schedule.id
        self.schedules[schedule_id] = owner
        stranger = self._stranger(owner)
        trigger = self.stack.client.schedules.TriggerSchedule
        _, refusal = self.attempt(
            trigger, spb.TriggerScheduleRequest(schedule_id=schedule_id, user_id=stranger)
        )
        check("ownership", refusal is not None and refusal[0] is grpc.StatusCode.NOT_FOUND, "")
        answer, refusal = self.attempt(
            trigger, spb.TriggerScheduleRequest(schedule_id=schedule_id, user_id=owner)
        )
        assert refusal is None, refusal
        assert answer.job.user_id == owner and answer.job.schedule_id == schedule_id
        self.jobs[answer.job.id] = answer.job

    @rule(
        pick=st.integers(0, 10_000),
        succeed=st.booleans(),
        fresh=st.sampled_from((None, None, *FOREIGN_ONLY)),
        user=st.integers(0, 1),
    )
    def foreign_lock(self, pick: int, succeed: bool, fresh: str | None, user: int) -> None:
        """An executor in another language takes a named job (LockJobs by id, declaring
        the versions it runs): one of the run's due jobs, or (``fresh``) a job of a type
        only it runs, created for the occasion. It ends the attempt at once, but a
        model_timed job it holds, heartbeating as a hung attempt's heartbeat task does,
        until the job service ends the attempt."""
        job: job_pb2.Job | None
        if fresh is not None:
            job = self._create_now(fresh, user)
        else:
            due = self._due()
            job = self.jobs[due[pick % len(due)]] if due else self.pick(pick)
        if job is None or (lock := self._lock_by_id(job.id)) is None:
            return
        executor = self.stack.client.executor
        self.foreign[job.id] = lock.job.attempt
        event(f"foreign lock granted, queue paused={job.queue in self.paused}")
        check(
            "pause_by_id",
            job.queue not in self.paused,
            f"LockJob by id granted {job.id} of paused queue {job.queue}",
        )
        check(
            "version_by_id",
            job.job_type != "model_versioned",
            f"LockJob by id granted {job.id}, pinned to a version {FOREIGN} does not run",
        )
        token = lock.job.lease_token
        if job.job_type == "model_timed":
            event("held a model_timed job past its timeout")
            self.held[job.id] = (lock.job.attempt, time.monotonic())
            heartbeats = self._heartbeat(job.id, token)
            self.holders.append(asyncio.run_coroutine_threadsafe(heartbeats, self.stack.loop))
            return
        if job.job_type == "model_redacted":
            event(f"redacted job locked, succeed={succeed}")
            self._record_step_refused(job.id, token)
        if succeed:
            data = ""
            if job.job_type == "model_redacted":
                data = self.secrets[job.id] = f"SECRET-{uuid.uuid4().hex}"
            # the artifact copies the output, as a projection may: it must be scrubbed
            output = {"attempt": 1, REDACTED_FIELD: data}
            self.rpc(executor.SubmitResult, result_request(job.id, token, output, output))
        else:
            self.rpc(
                executor.SubmitFailure,
                epb.SubmitFailureRequest(
                    job_id=job.id, lease_token=token, error_code="JOB_REJECTED"
                ),
            )

    def _create_now(self, job_type: str, user: int) -> job_pb2.Job:
        spec = CreateSpec(self.users[user], job_type, 0, None, None, None, "", "")
        job: job_pb2.Job = self.rpc(self.stack.client.jobs.CreateJob, spec.request(self.base)).job
        request = jpb.GetJobRequest(job_id=job.id, user_id=job.user_id)

        async def dispatched() -> job_pb2.Job | None:
            seen: job_pb2.Job = (await self.stack.client.jobs.GetJob(request)).job
            return seen if status_of(seen) is not JobStatus.CREATED else None

        with contextlib.suppress(AssertionError):  # still CREATED: LockJob says NOT_DUE
            job = self.call(eventually(dispatched, timeout=2.0, interval=0.05))
        self.jobs[job.id] = job
        return job

    def _due(self) -> list[str]:
        """The run's waiting jobs whose time has come, as last seen."""
        at = now().timestamp()
        return sorted(
            i
            for i, j in self.jobs.items()
            if status_of(j) in WAITING
            and (not j.HasField("next_run_at") or seconds(j.next_run_at) <= at)
        )

    def _lock_by_id(self, job_id: str) -> epb.LockJobResponse | None:
        answer = self.rpc(
            self.stack.client.executor.LockJobs,
            epb.LockJobsRequest(
                requests=[epb.LockJobRequest(job_id=job_id, worker_id=FOREIGN)],
                runnable_definitions=FOREIGN_RUNS,
            ),
        )
        [lock] = answer.responses
        return lock if lock.outcome == epb.LOCK_OUTCOME_LOCKED else None

    def _record_step_refused(self, job_id: str, token: str) -> None:
        """RecordStep of a redacting type's attempt: refused, whatever the caller is."""
        text = f'{{"{REDACTED_FIELD}": "SECRET-step"}}'
        request = epb.RecordStepRequest(
            job_id=job_id,
            lease_token=token,
            step="answer",
            response=epb.StepResponse(text=text, parsed_json=text, model="m", provider="openai"),
            usage=epb.ProviderUsage(
                provider="openai",
                model="m",
                credential_mode="platform",
                input_tokens=1,
                output_tokens=1,
                call_id=str(uuid.uuid4()),
            ),
        )
        _, refusal = self.attempt(self.stack.client.executor.RecordStep, request)
        check(
            "redaction",
            refusal is not None and refusal[0] is grpc.StatusCode.INVALID_ARGUMENT,
            f"RecordStep for redacting job {job_id}: {refusal or 'recorded'}",
        )

    async def _heartbeat(self, job_id: str, token: str) -> None:
        request = epb.HeartbeatRequest(job_id=job_id, lease_token=token, progress=0.5)
        while True:
            try:
                await self.stack.client.executor.Heartbeat(request)
            except grpc.aio.AioRpcError:
                return  # the lease is gone: what the timeout check waits for
            await asyncio.sleep(HOLD_HEARTBEAT_S)  # a heartbeat period, by design

    @rule(pick=st.integers(0, 10_000))
    def explain_hold(self, pick: int) -> None:
        """AdminService.GetJob of a waiting job: its hold names the first reason it waits."""
        waiting = sorted(i for i, j in self.jobs.items() if status_of(j) in WAITING)
        if not waiting:
            return
        job = self.rpc(
            self.stack.client.admin.GetJob,
            apb.AdminGetJobRequest(job_id=waiting[pick % len(waiting)]),
        ).job
        if status_of(job) not in WAITING:
            return
        reason = job_pb2.JobHold.Reason.Name(job.hold.reason).removeprefix("REASON_")
        due_in = (
            seconds(job.next_run_at) - now().timestamp() if job.HasField("next_run_at") else -1e9
        )
        if abs(due_in) < DUE_MARGIN_S:
            return
        if due_in > 0:
            expected = {"NOT_DUE"}
        elif job.queue in self.paused:
            expected = {"QUEUE_PAUSED"}
        elif job.job_type == "model_versioned" or job.job_type in FOREIGN_ONLY:
            expected = {"NO_WORKER_FOR_VERSION"}
        elif job.job_type == "model_keyed":
            expected = {"READY", "CONCURRENCY_KEY_FULL"}
        else:
            expected = {"READY"}
        name = "hold"
        if job.id in self.joins:  # until its last dependency succeeded
            expected |= {"WAITING_FOR_DEPENDENCIES"}
            name = "join_hold"
        event(f"hold {reason}")
        check(name, reason in expected, f"job {job.id} ({job.job_type}) held {reason}: {expected}")

    @rule(index=st.integers(0, 7))
    def kill_worker(self, index: int) -> None:
        if self.stack.kills >= MAX_KILLS or self.killed:
            return
        self.killed = True
        self.stack.kill_worker(index)

    @rule()
    def let_work_happen(self) -> None:
        """Waits (up to a second) until some job changed, so that workers get to act."""
        before = {i: (j.status, j.attempt_count) for i, j in self.jobs.items()}

        async def moved() -> bool:
            now_seen = await self._listing()
            return any((j.status, j.attempt_count) != before.get(i) for i, j in now_seen.items())

        async def wait() -> None:
            # nothing moved within the second: fine, the state is what it is
            with contextlib.suppress(AssertionError):
                await eventually(moved, timeout=1.0, interval=0.1)

        self.call(wait())

    # --- what must hold after every step

    @invariant()
    def what_the_api_promises(self) -> None:
        observed = self.observe()
        for job_id, job in observed.items():
            status = status_of(job)
            before = self.jobs.get(job_id)
            if before is not None:
                check(
                    "lifecycle",
                    status in REACHABLE[status_of(before)],
                    f"job {job_id} went from {status_of(before)} back to {status}",
                )
                check(
                    "lifecycle",
                    job.attempt_count >= before.attempt_count,
                    f"job {job_id}'s attempts went {before.attempt_count} -> {job.attempt_count}",
                )
            foreign = self.foreign.get(job_id) == job.attempt_count
            if (job.job_type == "model_versioned" or job.job_type in FOREIGN_ONLY) and not foreign:
                check(
                    "version",
                    job.attempt_count == 0,
                    f"job {job_id} at a version no worker runs was granted ({status})",
                )
            paused_at = self.paused.get(job.queue)
            if paused_at is not None and job.HasField("started_at") and not foreign:
                started = seconds(job.started_at)
                check(
                    "pause",
                    started <= paused_at + PAUSE_SLACK_S,
                    f"job {job_id} granted {started - paused_at:.3f}s after queue "
                    f"{job.queue} was paused",
                )
        for user, holding in holding_by_user(observed.values(), "model_keyed").items():
            check(
                "concurrency_key",
                holding <= KEYED_LIMIT,
                f"{holding} model_keyed jobs of {user} hold a slot (limit {KEYED_LIMIT})",
            )
        self._check_lineage(observed)
        self._check_timeouts(observed)
        self._check_secrets(observed)
        self._check_joins(observed)
        self.jobs = observed

    def _check_joins(self, observed: dict[str, job_pb2.Job]) -> None:
        """A join never starts before every job it waits for succeeded."""
        for join_id, deps in self.joins.items():
            join = observed.get(join_id)
            if join is None or join.attempt_count == 0:
                continue
            waiting = [
                d
                for d in deps
                if (dep := observed.get(d)) is not None
                and status_of(dep) is not JobStatus.SUCCEEDED
            ]
            check("joins", not waiting, f"join {join_id} started before {waiting} succeeded")

    def _check_timeouts(self, observed: dict[str, job_pb2.Job]) -> None:
        bound = TIMED_TIMEOUT_S + TIMEOUT_GRACE_S + REAPER_INTERVAL_S + TIMEOUT_SLACK_S
        for job_id, (attempt, locked_at) in list(self.held.items()):
            job = observed[job_id]
            ended = status_of(job) not in HOLDING or job.attempt_count != attempt
            if not ended:
                held_s = time.monotonic() - locked_at
                check(
                    "timeout",
                    held_s <= bound,
                    f"job {job_id}'s attempt {attempt} still held {held_s:.1f}s after its grant"
                    f" (timeout {TIMED_TIMEOUT_S}s + grace {TIMEOUT_GRACE_S}s)",
                )
                continue
            del self.held[job_id]
            full = self.rpc(self.stack.client.admin.GetJob, apb.AdminGetJobRequest(job_id=job_id))
            ends = [e for e in full.job.events if e.attempt == attempt and e.reason == "TIMEOUT"]
            cancelled = any(e.to_status == job_pb2.JOB_STATUS_CANCELLED for e in full.job.events)
            check(
                "timeout",
                bool(ends) or cancelled,
                f"job {job_id}'s held attempt ended: {full.job.events}",
            )

    def _settle_holds(self) -> None:
        """Waits until every attempt held in this example has ended (``_check_timeouts``
        fails once one is held past its bound), so that none ends the example unchecked."""
        while self.held:
            self._check_timeouts(self.observe())
            if self.held:
                time.sleep(HOLD_HEARTBEAT_S)  # polls; the bound is the deadline

    def _check_secrets(self, observed: dict[str, job_pb2.Job]) -> None:
        if not self.secrets:
            return
        shown = b"".join(job.SerializeToString() for job in observed.values())
        for job_id in self.secrets:
            owner = observed[job_id].user_id
            got = self.rpc(
                self.stack.client.jobs.GetJob, jpb.GetJobRequest(job_id=job_id, user_id=owner)
            )
            full = self.rpc(self.stack.client.admin.GetJob, apb.AdminGetJobRequest(job_id=job_id))
            shown += got.SerializeToString() + full.SerializeToString()
        for job_id, secret in self.secrets.items():
            check("redaction", secret.encode() not in shown, f"job {job_id}'s redacted value shown")

    def teardown(self) -> None:
        """Leaves the stack as the next run expects it: queues resumed, this run's jobs
        cancelled (so that they cost the next run nothing)."""
        self._settle_holds()
        for holder in self.holders:
            holder.cancel()
        admin = self.stack.client.admin
        for queue in list(self.paused):
            self.rpc(admin.ResumeQueue, apb.ResumeQueueRequest(queue=queue))
        for user in self.users:
            self.rpc(
                admin.CancelJobs,
                apb.CancelJobsRequest(selection=apb.JobSelection(user_id=user), limit=500),
            )
