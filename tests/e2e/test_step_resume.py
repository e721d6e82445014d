"""A job of two checkpointed steps whose worker process is SIGKILLed between the steps
resumes at step two on another worker: step one's provider call is not repeated — the
fake provider's call log (each worker's log) shows one call per step — and the usage rows
bill it once."""

from __future__ import annotations

import re
import signal
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from shared.registry import Registry, default_registry
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, running_job_service
from tests.support.wait import eventually

MODULES = "tests.support.step_jobtypes"
REGISTRY: Registry = default_registry({"JOBS_JOB_TYPE_MODULES": MODULES})
FAKE_CALL = re.compile(r"fake provider call \d+")
SpawnWorker = Callable[..., WorkerProcess]


@pytest.fixture
async def target(database_url: str, nats_url: str) -> AsyncIterator[str]:
    """The job service, knowing the two-step job type (overrides tests/conftest.py's)."""
    async with running_job_service(database_url, nats_url, REGISTRY) as app:
        yield f"127.0.0.1:{app.port}"


async def step_one_recorded(db: asyncpg.Connection, job_id: str) -> bool:
    return bool(
        await db.fetchval(
            "SELECT count(*) FROM job_steps s JOIN jobs j ON j.id = s.job_id"
            " WHERE s.job_id = $1 AND s.step = 'evaluate' AND j.status = 'running'",
            job_id,
        )
    )


async def test_a_two_step_job_killed_between_its_steps_resumes_at_step_two(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker
) -> None:
    doomed = spawn_worker("doomed", JOBS_JOB_TYPE_MODULES=MODULES)
    created = await client.create(
        job_type="two_step",
        topic="Photosynthesis",
        text="Plants convert sunlight, water and carbon dioxide into sugar.",
        pause_ms=60_000,  # the work between the steps: would outlive the test
    )
    job_id = created.job.id
    await eventually(
        lambda: step_one_recorded(db, job_id), timeout=20, message="step one never recorded"
    )

    doomed.signal(signal.SIGKILL)  # between the steps: step one recorded, step two not begun
    await doomed.wait(5)
    await db.execute(
        "UPDATE job_snapshots SET payload = jsonb_set(payload, '{pause_ms}', '0')"
        " WHERE job_id = $1",
        job_id,
    )
    survivor = spawn_worker("survivor", JOBS_JOB_TYPE_MODULES=MODULES)
    await eventually(
        lambda: db.fetchval("SELECT status = 'succeeded' FROM jobs WHERE id = $1", job_id),
        timeout=30,
        message="the job did not resume",
    )

    # the fake provider's call log: step one on the doomed worker, step two on the survivor
    assert len(FAKE_CALL.findall(doomed.log())) == 1
    assert len(FAKE_CALL.findall(survivor.log())) == 1
    assert "step evaluate reuses the response attempt 1 recorded" in survivor.log()
    steps = await db.fetch(
        "SELECT step, attempt FROM job_steps WHERE job_id = $1 ORDER BY step", job_id
    )
    assert [(s["step"], s["attempt"]) for s in steps] == [("evaluate", 1), ("summarise", 2)]
    usage = await db.fetch(
        "SELECT attempt, reused, input_tokens > 0 AS tokens FROM usage_logs WHERE job_id = $1"
        " ORDER BY attempt, reused DESC, id",
        job_id,
    )
    # step one billed once (recorded with it), reused for nothing, step two billed once
    assert [(u["attempt"], u["reused"], u["tokens"]) for u in usage] == [
        (1, False, True),
        (2, True, False),
        (2, False, True),
    ]
    row = await db.fetchrow("SELECT attempt_count, locked_by FROM jobs WHERE id = $1", job_id)
    assert (row["attempt_count"], row["locked_by"]) == (2, "survivor")
