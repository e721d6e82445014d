"""The shipped example agent, ``approval_agent`` (``jobtypes/approval_agent.py``), on a worker
process over real PostgreSQL and NATS, against the fake message service
(``jobtypes/message_service.py``) that counts calls per idempotency key: the job drafts with
the (fake) model, is held waiting for its ``approve`` signal with nothing sent, and once
approved sends its draft under one key; declined or timed out, it sends nothing. A worker
SIGKILLed after the service applied the message and before the step was recorded costs a
second call with the same key, never a second message."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg
import pytest
from durable_jobs_client import AsyncJobsClient, JobStatus, to_python

from jobtypes.approval_agent import JOB_TYPE, SIGNAL
from jobtypes.message_service import MessageService
from shared.registry import Registry, default_registry
from tests.support.processes import WorkerProcess
from tests.support.stack import ALL_ROLES_TOKEN, running_job_service
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

# named as well as installed: the test runs the module of this checkout whatever the venv's
# entry points say (the registry loads a module once)
MODULES = "jobtypes.approval_agent"
REGISTRY: Registry = default_registry({"JOBS_JOB_TYPE_MODULES": MODULES})
SpawnWorker = Callable[..., WorkerProcess]
REQUEST = "Your study group meets on Thursday at 18:00 in room 4.\nBring your notes."


@pytest.fixture
async def target(database_url: str, nats_url: str) -> AsyncIterator[str]:
    async with running_job_service(database_url, nats_url, REGISTRY) as app:
        yield f"127.0.0.1:{app.port}"


@pytest.fixture
async def jobs(target: str) -> AsyncIterator[AsyncJobsClient]:
    async with AsyncJobsClient(target, user_id="user-1", token=ALL_ROLES_TOKEN) as client:
        yield client


@pytest.fixture
def kill_on_apply() -> list[WorkerProcess]:
    """Workers the message service SIGKILLs once it applied a message, before answering."""
    return []


@pytest.fixture
def service(kill_on_apply: list[WorkerProcess]) -> Iterator[MessageService]:
    def applied(key: str) -> None:
        for worker in kill_on_apply:
            worker.process.kill()

    with MessageService(on_apply=applied) as running:
        yield running


def worker(spawn_worker: SpawnWorker, service: MessageService, name: str) -> WorkerProcess:
    return spawn_worker(name, JOBS_JOB_TYPE_MODULES=MODULES, JOBS_MESSAGE_SERVICE_URL=service.url)


async def create(jobs: AsyncJobsClient, to: str, **extra: Any) -> str:
    created = await jobs.create(JOB_TYPE, {"to": to, "request": REQUEST, **extra})
    return created.job.id


async def held_waiting(jobs: AsyncJobsClient, job_id: str) -> None:
    """Until an operator's GetJob shows the job waiting for its signal, holding no lease."""

    async def waiting() -> bool:
        job = await jobs.admin.get_job(job_id)
        return job.hold.Reason.Name(job.hold.reason) == "REASON_WAITING_FOR_SIGNAL"

    await eventually(waiting, timeout=30, message=f"job {job_id} is not waiting for a signal")


async def finished(jobs: AsyncJobsClient, job_id: str) -> dict[str, Any]:
    job = await jobs.wait(job_id, timeout=30)
    assert job.status == JobStatus.JOB_STATUS_SUCCEEDED, (job.error_code, job.error_message)
    output: dict[str, Any] = to_python(job.output)
    return output


async def provider_calls(db: asyncpg.Connection, job_id: str) -> int:
    """Model calls made for the job (a checkpoint's reuse is logged too, as no call)."""
    return int(
        await db.fetchval(
            "SELECT count(*) FROM usage_logs WHERE job_id = $1 AND NOT reused", job_id
        )
    )


async def test_an_approved_draft_is_sent_once_and_a_declined_or_unanswered_one_never(
    jobs: AsyncJobsClient,
    db: asyncpg.Connection,
    spawn_worker: SpawnWorker,
    service: MessageService,
) -> None:
    worker(spawn_worker, service, "agent")
    approved = await create(jobs, "ada@example.com")
    declined = await create(jobs, "bob@example.com")
    unanswered = await create(jobs, "cy@example.com", approval_timeout_s=1)
    for job_id in (approved, declined):
        await held_waiting(jobs, job_id)
    assert service.calls == {}  # drafted, nothing sent before the approval

    await jobs.signal(approved, SIGNAL, {"by": "alice"})
    await jobs.signal(declined, SIGNAL, {"approved": False, "by": "alice"})
    sent, declined_output, timed_out = [
        await finished(jobs, job_id) for job_id in (approved, declined, unanswered)
    ]

    key = f"{approved}/2/send"  # after the wait's two steps, signal_wait and signal
    assert service.calls == {key: 1}
    assert service.sent == [
        {
            "message_id": "msg-1",
            "idempotency_key": key,
            "to": "ada@example.com",
            "subject": REQUEST.splitlines()[0],
            "body": sent["draft"]["body"],
        }
    ]
    assert sent["outcome"] == "sent"
    assert sent["approval"] == {"by": "alice"}
    assert sent["receipt"] == {"message_id": "msg-1", "idempotency_key": key}
    assert "ada@example.com" in sent["draft"]["body"]
    assert (declined_output["outcome"], declined_output["receipt"]) == ("rejected", None)
    assert declined_output["approval"] == {"approved": False, "by": "alice"}
    assert timed_out["outcome"] == "timed_out"
    assert (timed_out["approval"], timed_out["receipt"]) == (None, None)
    # the job ran again after its wait, the draft returned as recorded: one model call
    for job_id in (approved, declined, unanswered):
        assert await provider_calls(db, job_id) == 1


async def test_a_worker_killed_after_the_send_before_its_record_sends_once_per_key(
    jobs: AsyncJobsClient,
    db: asyncpg.Connection,
    spawn_worker: SpawnWorker,
    service: MessageService,
    kill_on_apply: list[WorkerProcess],
) -> None:
    doomed = worker(spawn_worker, service, "doomed")
    kill_on_apply.append(doomed)
    job_id = await create(jobs, "ada@example.com")
    await held_waiting(jobs, job_id)

    await jobs.signal(job_id, SIGNAL, {"by": "alice"})
    assert await doomed.wait(30) != 0  # killed by the service once the message was applied
    key = f"{job_id}/2/send"
    assert service.calls == {key: 1}
    assert (
        await db.fetchval(
            "SELECT count(*) FROM job_step_results WHERE job_id = $1 AND name = 'send'", job_id
        )
        == 0
    )  # made, not recorded

    kill_on_apply.clear()
    worker(spawn_worker, service, "survivor")
    output = await finished(jobs, job_id)

    assert service.calls == {key: 2}  # the retry called again, with the same key ...
    assert [m["idempotency_key"] for m in service.sent] == [key]  # ... and nothing was sent twice
    assert output["receipt"] == {"message_id": "msg-1", "idempotency_key": key}
    rows = await db.fetch(
        "SELECT ordinal, name, attempt FROM job_step_results WHERE job_id = $1 ORDER BY ordinal",
        job_id,
    )
    assert [(r["ordinal"], r["name"]) for r in rows] == [
        (0, "signal_wait"),
        (1, "signal"),
        (2, "send"),
    ]
    assert rows[2]["attempt"] > rows[1]["attempt"]  # recorded by the survivor's attempt
    assert await provider_calls(db, job_id) == 1
