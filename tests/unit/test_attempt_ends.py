"""How an attempt ends, decided in the domain and the use cases, against fake stores: a
pending cancel wins, a repeated report is answered again, a refused result is a repeat, a
cancel that won or a lost lease, and every end settles its rate reservation once."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from job_service.domain.attempts import (
    AttemptEnd,
    AttemptFacts,
    LeaseState,
    Refusal,
    Submission,
    attempt_end,
    refusal,
    repeated_failure,
)
from job_service.domain.lifecycle import JobStatus
from job_service.domain.outbox import OutboxMessage
from job_service.domain.retry import Outcome, RetryDecision
from job_service.usecases.leases import Leases
from job_service.usecases.rate_limits import RateReservations
from job_service.usecases.results import Results
from job_service.usecases.sessions import END_BATCH, WorkerSessions, replaces_another_process
from shared.ai.provider import UsageRecord
from shared.constants import Queue
from shared.errors import ErrorCode, LeaseLost
from shared.output_hash import output_hash
from shared.registry import JobDefinition
from tests.support.declared import job_types_of
from tests.support.fakes import (
    FakeDispatcher,
    FakeLeaseStore,
    FakeRateLimitStore,
    FakeResultStore,
    FakeSessionStore,
)

TOKEN = "00000000-0000-4000-8000-00000000000a"
OTHER = "00000000-0000-4000-8000-00000000000b"
JOB = "00000000-0000-4000-8000-000000000001"
EVENT = OutboxMessage(1, "jobs.events", "k", {}, 1)
USAGE = [UsageRecord("openai", "gpt", "platform", input_tokens=7, output_tokens=3)]


class _Model(BaseModel):
    pass


# three attempts, no retry on a lease that ran out (the definition's defaults)
PROBE = JobDefinition("probe", "Probe", "testing", "1", Queue.BACKGROUND, _Model, _Model, print)
REGISTRY = job_types_of([PROBE])


def facts(status: JobStatus, attempt: int = 1, job_id: str = JOB) -> AttemptFacts:
    return AttemptFacts(job_id, "probe", status, attempt, 3)


def never(facts: AttemptFacts, code: str) -> RetryDecision:
    raise AssertionError("a pending cancel is not a retry decision")


def test_a_pending_cancel_wins_over_the_failure() -> None:
    end = attempt_end(facts(JobStatus.CANCEL_REQUESTED), ErrorCode.LEASE_EXPIRED, never)
    assert end == AttemptEnd(JobStatus.CANCELLED, ErrorCode.CANCELLED)


def test_a_running_attempt_ends_as_the_retry_decision_says() -> None:
    retry = RetryDecision(Outcome.RETRY, delay_s=2.0, refund_attempt=True)
    end = attempt_end(facts(JobStatus.RUNNING), "PROVIDER_TIMEOUT", lambda f, c: retry)
    assert end == AttemptEnd(JobStatus.RETRYING, "PROVIDER_TIMEOUT", 2.0, True)
    fail = attempt_end(facts(JobStatus.RUNNING), "X", lambda f, c: RetryDecision(Outcome.FAIL))
    assert fail.status is JobStatus.FAILED


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (LeaseState(JobStatus.FAILED, TOKEN, None), JobStatus.FAILED),
        (LeaseState(JobStatus.RETRYING, TOKEN, None), JobStatus.RETRYING),
        (LeaseState(JobStatus.FAILED, OTHER, None), None),
        (LeaseState(JobStatus.SUCCEEDED, TOKEN, "h"), None),
        (LeaseState(JobStatus.RUNNING, TOKEN, None), None),
        (None, None),
    ],
)
def test_a_repeated_failure_report_is_answered_with_what_it_led_to(
    state: LeaseState | None, expected: JobStatus | None
) -> None:
    assert repeated_failure(state, TOKEN) is expected


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (LeaseState(JobStatus.SUCCEEDED, TOKEN, "h"), Refusal.REPEAT),
        (LeaseState(JobStatus.SUCCEEDED, TOKEN, "other output"), Refusal.LEASE_LOST),
        (LeaseState(JobStatus.CANCEL_REQUESTED, TOKEN, None), Refusal.CANCEL_WON),
        (LeaseState(JobStatus.CANCEL_REQUESTED, OTHER, None), Refusal.LEASE_LOST),
        (LeaseState(JobStatus.RETRYING, TOKEN, None), Refusal.LEASE_LOST),
        (None, Refusal.LEASE_LOST),
    ],
)
def test_what_a_refused_result_means(state: LeaseState | None, expected: Refusal) -> None:
    assert refusal(state, TOKEN, "h") is expected


def use_cases() -> tuple[FakeLeaseStore, FakeRateLimitStore, FakeDispatcher, Leases]:
    store, rates, dispatcher = FakeLeaseStore("probe"), FakeRateLimitStore(), FakeDispatcher()
    return store, rates, dispatcher, Leases(REGISTRY, store, dispatcher, RateReservations(rates))


async def test_a_failure_ends_the_attempt_with_its_usage_and_settles_its_reservation() -> None:
    store, rates, dispatcher, leases = use_cases()
    store.jobs[JOB] = (JobStatus.RUNNING, TOKEN, 1)
    code = ErrorCode.PROVIDER_RATE_LIMITED
    outcome = await leases.submit_failure(JOB, TOKEN, code, "429", USAGE, retry_after_s=30)
    assert outcome.status is JobStatus.RETRYING
    [(_, end, reaped)] = store.ended
    assert end.delay_s >= 30 and not reaped  # no sooner than the provider's Retry-After
    assert store.usage == [(JOB, 1)] and store.transactions == 1
    # the 429 blocked its call's tier when the worker reported it (ReportRateLimited): the
    # failure settles the reservation and delays the retry, and backs no tier off again
    # (a RateLimitStore cannot: CallPermitStore.throttle does, which Leases does not hold)
    assert rates.settled == [[(JOB, 10)]]
    assert dispatcher.wakes and dispatcher.wakes[0] >= 30


async def test_a_failure_of_a_job_whose_cancel_is_pending_ends_it_cancelled() -> None:
    store, _, _, leases = use_cases()
    store.jobs[JOB] = (JobStatus.CANCEL_REQUESTED, TOKEN, 1)
    outcome = await leases.submit_failure(JOB, TOKEN, "PROVIDER_TIMEOUT", "")
    assert outcome.status is JobStatus.CANCELLED
    assert store.ended[0][1].code == ErrorCode.CANCELLED


async def test_a_repeated_failure_is_answered_again_and_a_stale_one_refused() -> None:
    store, rates, _, leases = use_cases()
    store.jobs[JOB] = (JobStatus.FAILED, TOKEN, 3)
    again = await leases.submit_failure(JOB, TOKEN, "X", "", USAGE)
    assert again.status is JobStatus.FAILED and not store.ended and not store.usage
    with pytest.raises(LeaseLost):
        await leases.submit_failure(JOB, OTHER, "X", "", USAGE)
    assert len(rates.settled) == 1  # the stale report settles nothing


async def test_the_reaper_ends_expired_attempts_in_one_transaction() -> None:
    store, _, dispatcher, leases = use_cases()
    others = [f"00000000-0000-4000-8000-00000000010{n}" for n in range(3)]
    for job_id, status in zip(
        others, [JobStatus.RUNNING, JobStatus.CANCEL_REQUESTED, JobStatus.RUNNING], strict=True
    ):
        store.jobs[job_id] = (status, TOKEN, 3)
    assert await leases.reap_expired_leases() == 3
    assert store.transactions == 1 and all(reaped for _, _, reaped in store.ended)
    assert [end.status for _, end, _ in store.ended] == [
        JobStatus.FAILED,
        JobStatus.CANCELLED,
        JobStatus.FAILED,
    ]
    assert len(dispatcher.wakes) == 3


async def test_the_reaper_ends_an_attempt_past_its_deadline_as_a_timeout() -> None:
    store, _, _, leases = use_cases()
    silent, hung = (f"00000000-0000-4000-8000-00000000020{n}" for n in range(2))
    store.jobs[silent] = store.jobs[hung] = (JobStatus.RUNNING, TOKEN, 1)
    store.past_deadline.add(hung)

    assert await leases.reap_expired_leases() == 2

    codes = {job_id: end.code for job_id, end, _ in store.ended}
    assert codes == {silent: ErrorCode.LEASE_EXPIRED, hung: ErrorCode.TIMEOUT}


async def test_a_refused_result_is_a_repeat_a_cancel_that_won_or_a_lost_lease() -> None:
    store, rates, dispatcher, leases = use_cases()
    ids = [f"00000000-0000-4000-8000-00000000020{n}" for n in range(4)]
    store.jobs[ids[1]] = (JobStatus.SUCCEEDED, TOKEN, 1)  # committed before: a repeat
    store.outputs[ids[1]] = output_hash({})
    store.jobs[ids[2]] = (JobStatus.CANCEL_REQUESTED, TOKEN, 1)
    store.jobs[ids[3]] = (JobStatus.RUNNING, OTHER, 2)
    committing = FakeResultStore(dict.fromkeys(ids, "probe"), {ids[0]}, [EVENT])
    results = Results(REGISTRY, committing, leases, dispatcher, RateReservations(rates))
    submitted = [Submission(i, TOKEN, {}, output_hash({}), [], usage=USAGE) for i in ids]
    answers = await results.submit_results(submitted)
    assert answers[:3] == [JobStatus.SUCCEEDED, JobStatus.SUCCEEDED, JobStatus.CANCELLED]
    assert isinstance(answers[3], LeaseLost)
    assert [(j, end.code) for j, end, _ in store.ended] == [(ids[2], ErrorCode.CANCELLED)]
    assert store.usage == [(ids[2], 1)]  # the cancelled attempt's calls are kept
    assert [m.id for m in dispatcher.handed] == [1]
    assert rates.settled == [[(i, 10) for i in ids[:3]]]


def worker_sessions(
    store: FakeLeaseStore, leases: Leases, reconnect_grace_s: float | None = None
) -> WorkerSessions:
    return WorkerSessions(
        FakeSessionStore(store),
        leases,
        instance_id="r",
        grace_s=0.0,
        ping_interval_s=1.0,
        reconnect_grace_s=reconnect_grace_s,
    )


async def test_a_disconnected_workers_leases_end_in_one_transaction_of_rounds() -> None:
    store, _, dispatcher, leases = use_cases()
    for n in range(END_BATCH + 1):
        store.jobs[f"job-{n}"] = (JobStatus.RUNNING, TOKEN, 1)
    sessions = worker_sessions(store, leases)
    sessions.ended(await sessions.open("worker-1"))  # an older worker: no incarnation
    await sessions.close()
    assert store.transactions == 2 and len(store.ended) == END_BATCH + 1
    assert {end.code for _, end, _ in store.ended} == {ErrorCode.WORKER_DISCONNECTED}
    assert len(dispatcher.wakes) == END_BATCH + 1


async def test_a_new_process_under_the_same_worker_id_ends_the_previous_ones_leases() -> None:
    store, _, dispatcher, leases = use_cases()
    store.jobs[JOB] = (JobStatus.RUNNING, TOKEN, 1)
    sessions = worker_sessions(store, leases)
    await sessions.open("worker-1", "process-a")
    assert store.ended == []  # the first process known: nothing to end

    await sessions.open("worker-1", "process-b")  # the container restarted

    assert [(j, end.code) for j, end, _ in store.ended] == [(JOB, ErrorCode.WORKER_DISCONNECTED)]
    assert len(dispatcher.wakes) == 1


async def test_an_interrupted_process_that_reconnects_keeps_its_leases() -> None:
    store, _, _, leases = use_cases()
    store.jobs[JOB] = (JobStatus.RUNNING, TOKEN, 1)
    sessions = worker_sessions(store, leases)
    sessions.ended(await sessions.open("worker-1", "process-a"))
    await sessions.close()  # its disconnect decided: nothing, however long it stays away
    await sessions.open("worker-1", "process-a")
    assert store.ended == []


async def test_with_a_reconnect_grace_a_process_not_back_within_it_loses_its_leases() -> None:
    store, _, _, leases = use_cases()
    store.jobs[JOB] = (JobStatus.RUNNING, TOKEN, 1)
    sessions = worker_sessions(store, leases, reconnect_grace_s=0.01)
    sessions.ended(await sessions.open("worker-1", "process-a"))
    await sessions.close()
    assert [(j, end.code) for j, end, _ in store.ended] == [(JOB, ErrorCode.WORKER_DISCONNECTED)]


async def test_with_a_reconnect_grace_a_process_back_within_it_keeps_its_leases() -> None:
    store, _, _, leases = use_cases()
    store.jobs[JOB] = (JobStatus.RUNNING, TOKEN, 1)
    sessions = worker_sessions(store, leases, reconnect_grace_s=0.2)
    sessions.ended(await sessions.open("worker-1", "process-a"))
    await sessions.open("worker-1", "process-a")  # back before the grace ran out
    await sessions.close()
    assert store.ended == []


@pytest.mark.parametrize(
    ("incarnation", "previous", "replaced"),
    [
        ("b", "a", True),
        ("a", "a", False),
        ("a", None, False),  # no session known, or an older worker's: no proof
        ("", "a", False),  # an older worker names no process
        ("", None, False),
    ],
)
def test_which_session_replaces_another_process(
    incarnation: str, previous: str | None, replaced: bool
) -> None:
    assert replaces_another_process(incarnation, previous) is replaced
