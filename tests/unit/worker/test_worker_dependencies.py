"""An attempt's dependency results: no call for a job without dependencies, every page
fetched once under the attempt's lease, a lost lease stopping the attempt, and the wire
translations (FetchDependencyResults, LockedJob.dependency_count, a join child)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest
from pydantic import BaseModel, ConfigDict

from shared.constants import Queue
from shared.dependencies import DependencyOutput, DependencyPolicy
from shared.errors import LeaseLost, PlatformUnavailable
from shared.pb.jobs.v1 import executor_service_pb2 as pb
from shared.pb.jobs.v1 import job_pb2
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.registry import ChildJobDraft, ExecutionContext, JobDefinition, JobResult
from shared.rpc_errors import status_for
from worker_service.attempt import Attempt
from worker_service.credentials import CredentialResolver
from worker_service.dependencies import PAGE_SIZE, DependencyResults
from worker_service.domain.errors import ExecutorCallFailed, ExecutorUnreachable
from worker_service.domain.model import (
    CancelCause,
    LockedJob,
    LockResult,
    ResultSubmission,
    Succeeded,
)
from worker_service.domain.outcomes import succeeded
from worker_service.pipeline import Pipeline
from worker_service.results import ResultBatcher

from .fakes import FakeExecutor, locked
from .test_worker_grpc_adapter import client_answering, rpc_error


def done(n: int, status: str = "succeeded") -> DependencyOutput:
    output = {"n": n} if status == "succeeded" else None
    code = None if status == "succeeded" else "JOB_REJECTED"
    return DependencyOutput(f"dep-{n:04d}", "synthetic", status, output, code)


def waiting_for(count: int, job_id: str = "join") -> LockedJob:
    return dataclasses.replace(locked(job_id), dependency_count=count)


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


def attempt_of(job: LockedJob, executor: FakeExecutor) -> Attempt:
    return Attempt(job, credentials=CredentialResolver(executor), executor=executor)


# --- the attempt ---------------------------------------------------------------------------


async def test_a_job_without_dependencies_gets_none_without_a_call(
    executor: FakeExecutor,
) -> None:
    assert await attempt_of(locked("j"), executor).dependency_results() == []
    assert executor.dependency_fetches == []


async def test_every_page_is_fetched_under_the_lease_once_per_attempt(
    executor: FakeExecutor,
) -> None:
    results = [done(n) for n in range(PAGE_SIZE * 2 + 5)]
    executor.dependencies["join"] = results
    attempt = attempt_of(waiting_for(len(results)), executor)

    first = await attempt.dependency_results()
    first.clear()  # job code's own copy
    again = await attempt.dependency_results()

    assert again == results
    assert executor.dependency_fetches == [
        ("join", "token-join-1", "", PAGE_SIZE),
        ("join", "token-join-1", results[PAGE_SIZE - 1].job_id, PAGE_SIZE),
        ("join", "token-join-1", results[2 * PAGE_SIZE - 1].job_id, PAGE_SIZE),
    ]


async def test_a_lost_lease_stops_the_attempt(executor: FakeExecutor) -> None:
    executor.dependency_errors.append(LeaseLost("another worker has it"))
    attempt = attempt_of(waiting_for(2), executor)

    with pytest.raises(LeaseLost):
        await attempt.dependency_results()

    assert attempt.cause is CancelCause.LEASE_LOST


async def test_transport_hiccups_are_retried_a_few_times(executor: FakeExecutor) -> None:
    executor.dependencies["join"] = [done(1)]
    executor.dependency_errors += [ExecutorUnreachable("blip"), PlatformUnavailable("db")]

    assert await attempt_of(waiting_for(1), executor).dependency_results() == [done(1)]
    assert len(executor.dependency_fetches) == 3


async def test_a_page_that_does_not_move_on_is_a_failed_call() -> None:
    async def stuck(after: str) -> tuple[list[DependencyOutput], bool]:
        return [], True

    with pytest.raises(ExecutorCallFailed):
        await DependencyResults(stuck, 3).all()


# --- through the pipeline ------------------------------------------------------------------


class Nothing(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Seen(BaseModel):
    statuses: list[str]


async def _count_statuses(_: Nothing, ctx: ExecutionContext) -> JobResult:
    return JobResult(Seen(statuses=[d.status for d in await ctx.dependency_results()]))


JOIN = JobDefinition(
    job_type="join",
    label="join",
    domain="testing",
    version="1",
    queue=Queue.INTERACTIVE,
    input_model=Nothing,
    output_model=Seen,
    execute=_count_statuses,
)


@pytest.fixture
async def pipeline(executor: FakeExecutor) -> AsyncIterator[Pipeline]:
    async with ResultBatcher(executor) as results:
        yield Pipeline(executor, results, {"join": JOIN}.__getitem__)


async def test_a_join_reads_how_its_dependencies_ended(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.dependencies["join"] = [done(1), done(2, "failed"), done(3, "cancelled")]

    await pipeline.run(dataclasses.replace(waiting_for(3), job_type="join"))

    [result] = executor.results
    assert result["output"] == {"statuses": ["succeeded", "failed", "cancelled"]}


async def test_a_lease_lost_while_fetching_reports_nothing(
    pipeline: Pipeline, executor: FakeExecutor
) -> None:
    executor.dependency_errors.append(LeaseLost("another worker has it"))

    await pipeline.run(dataclasses.replace(waiting_for(3), job_type="join"))

    assert executor.results == [] and executor.failures == []


def test_a_joins_keys_and_policy_survive_the_results_normalisation() -> None:
    # the regression: succeeded() rebuilt each child draft from four of its fields, so a
    # join reached the job service without its keys, as a child that waits for nothing
    join = ChildJobDraft(
        "study_plan", {"n": 1}, "kbr:p:plan", depends_on_keys=("kbr:p:item:0",),
        dependency_policy=DependencyPolicy.RUN,
    )  # fmt: skip

    [sent] = succeeded(JOIN, JobResult(Seen(statuses=[]), children=[join])).children

    assert sent == join


# --- the gRPC adapter ------------------------------------------------------------------------


async def test_fetch_dependency_results_sends_the_lease_and_converts_each_result() -> None:
    client, stub = client_answering(
        pb.FetchDependencyResultsResponse(
            results=[
                pb.DependencyResult(
                    job_id="a",
                    job_type="feynman_evaluation",
                    status=job_pb2.JOB_STATUS_SUCCEEDED,
                    output=struct_from_dict({"score": 80, "weaknesses": ["x"]}),
                    target_type="knowledge_item",
                    target_id="ki-1",
                ),
                pb.DependencyResult(
                    job_id="b",
                    job_type="feynman_evaluation",
                    status=job_pb2.JOB_STATUS_FAILED,
                    error_code="PROVIDER_UNAVAILABLE",
                ),
            ],
            more=True,
        )
    )

    results, more = await client.fetch_dependency_results("j", "t", "0", 100, timeout_s=2)

    assert more is True
    assert results == [
        DependencyOutput(
            "a", "feynman_evaluation", "succeeded", {"score": 80, "weaknesses": ["x"]},
            None, "knowledge_item", "ki-1",
        ),
        DependencyOutput("b", "feynman_evaluation", "failed", None, "PROVIDER_UNAVAILABLE"),
    ]  # fmt: skip
    assert isinstance(results[0].output["score"], int)  # type: ignore[index]
    [(rpc, request, timeout)] = stub.requests
    assert (rpc, timeout) == ("FetchDependencyResults", 2)
    assert (request.job_id, request.lease_token, request.after_job_id, request.page_size) == (
        "j", "t", "0", 100,
    )  # fmt: skip


async def test_fetch_dependency_results_refused_for_a_lost_lease_is_lease_lost() -> None:
    status = status_for(LeaseLost("stale"), "jobs.v1.ExecutorService")  # type: ignore[arg-type]
    client, _ = client_answering(
        rpc_error(status.code, status.trailing_metadata, details=status.details)
    )

    with pytest.raises(LeaseLost):
        await client.fetch_dependency_results("j", "t", "", 100, timeout_s=2)


async def test_a_locked_job_carries_its_dependency_count() -> None:
    client, _ = client_answering(
        pb.LockJobsResponse(
            responses=[
                pb.LockJobResponse(
                    outcome=pb.LOCK_OUTCOME_LOCKED,
                    job=pb.LockedJob(job_id="j", lease_token="t", dependency_count=7),
                )
            ]
        )
    )

    [answer] = await client.lock_jobs(["j"], "w", timeout_s=3)

    assert isinstance(answer, LockResult) and answer.job is not None
    assert answer.job.dependency_count == 7


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (DependencyPolicy.RUN, job_pb2.DEPENDENCY_POLICY_RUN),
        (DependencyPolicy.FAIL, job_pb2.DEPENDENCY_POLICY_FAIL),
        (DependencyPolicy.CANCEL, job_pb2.DEPENDENCY_POLICY_CANCEL),
    ],
)
async def test_a_join_child_names_its_siblings_and_policy(
    policy: DependencyPolicy, expected: int
) -> None:
    client, stub = client_answering(
        pb.SubmitResultsResponse(outcomes=[pb.SubmitResultOutcome(status=6)])
    )
    item = ChildJobDraft("feynman_evaluation", {"k": 1}, "kbr:p:item:1")
    join = ChildJobDraft(
        "study_plan", {"n": 1}, "kbr:p:plan", depends_on_keys=(item.idempotency_key,),
        dependency_policy=policy,
    )  # fmt: skip

    await client.submit_results(
        [ResultSubmission("p", "t", Succeeded({}, "h", children=[item, join]))], timeout_s=1
    )

    [(_, request, _)] = stub.requests
    sent_item, sent_join = request.requests[0].child_jobs
    assert list(sent_item.depends_on_keys) == []
    assert sent_item.dependency_policy == job_pb2.DEPENDENCY_POLICY_UNSPECIFIED
    assert list(sent_join.depends_on_keys) == ["kbr:p:item:1"]
    assert sent_join.dependency_policy == expected
    assert dict_from_struct(sent_join.input) == {"n": 1}
