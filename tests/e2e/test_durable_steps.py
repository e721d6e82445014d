"""Durable steps (issue 45) across a worker SIGKILL at every point of a step: a job of three
side effects (``tests/support/effect_jobtypes.py``) whose worker process dies during its
``charge`` step — before the effect, after the effect but before its record, after its
record — finishes on another worker with each effect made under one idempotency key, the
same on both attempts. The external system's log (a file each effect appends its key to)
shows what a system deduplicating by key would have applied: each step once."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import pytest

from shared.pbconv import dict_from_struct
from shared.registry import Registry, default_registry
from tests.support.effect_jobtypes import STEPS
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, running_job_service
from tests.support.wait import eventually

MODULES = "tests.support.effect_jobtypes"
REGISTRY: Registry = default_registry({"JOBS_JOB_TYPE_MODULES": MODULES})
SpawnWorker = Callable[..., WorkerProcess]


@pytest.fixture
async def target(database_url: str, nats_url: str) -> AsyncIterator[str]:
    async with running_job_service(database_url, nats_url, REGISTRY) as app:
        yield f"127.0.0.1:{app.port}"


@pytest.mark.parametrize(
    ("kill_at", "charges"),
    [
        ("before_effect", 1),  # nothing made yet: the retry makes it
        ("after_effect", 2),  # made, not recorded: the retry makes it again, same key
        ("after_record", 1),  # recorded: the retry returns the record, makes nothing
    ],
)
async def test_a_step_killed_at_any_point_is_made_once_per_key(
    client: Client,
    db: asyncpg.Connection,
    spawn_worker: SpawnWorker,
    tmp_path: Path,
    kill_at: str,
    charges: int,
) -> None:
    ledger = tmp_path / "ledger"
    ledger.touch()
    doomed = spawn_worker("doomed", JOBS_JOB_TYPE_MODULES=MODULES)
    job_id = (await client.create(job_type="effects", ledger=str(ledger), kill_at=kill_at)).job.id
    assert await doomed.wait(30) != 0  # the job's code killed it

    spawn_worker("survivor", JOBS_JOB_TYPE_MODULES=MODULES)
    await eventually(
        lambda: db.fetchval("SELECT status = 'succeeded' FROM jobs WHERE id = $1", job_id),
        timeout=30,
        message="the job did not finish on the survivor",
    )

    keys = [f"{job_id}/0/reserve", f"{job_id}/1/charge", f"{job_id}/2/notify"]
    calls = Counter(ledger.read_text().split())
    assert calls == {keys[0]: 1, keys[1]: charges, keys[2]: 1}
    output = dict_from_struct((await client.get(job_id)).output)
    assert output["receipts"] == [f"{n}:{k}" for n, k in zip(STEPS, keys, strict=True)]
    rows = await db.fetch(
        "SELECT ordinal, name, attempt FROM job_step_results WHERE job_id = $1 ORDER BY ordinal",
        job_id,
    )
    charge_attempt = 1 if kill_at == "after_record" else 2
    assert [(r["ordinal"], r["name"], r["attempt"]) for r in rows] == [
        (0, "reserve", 1),
        (1, "charge", charge_attempt),
        (2, "notify", 2),
    ]
    assert await db.fetchval("SELECT attempt_count FROM jobs WHERE id = $1", job_id) == 2


async def test_steps_asked_for_in_another_order_fail_the_job_nondeterministic(
    client: Client, db: asyncpg.Connection, spawn_worker: SpawnWorker, tmp_path: Path
) -> None:
    """Attempt one records ``reserve`` and ``charge`` and dies; attempt two asks for
    ``notify`` first: the job fails NONDETERMINISTIC, is not retried, and makes no effect."""
    ledger = tmp_path / "ledger"
    ledger.touch()
    doomed = spawn_worker("doomed", JOBS_JOB_TYPE_MODULES=MODULES)
    created = await client.create(
        job_type="effects", ledger=str(ledger), kill_at="after_record", reorder_on_retry=True
    )
    job_id = created.job.id
    assert await doomed.wait(30) != 0
    effects_before = ledger.read_text()

    spawn_worker("survivor", JOBS_JOB_TYPE_MODULES=MODULES)
    await eventually(
        lambda: db.fetchval("SELECT status = 'failed' FROM jobs WHERE id = $1", job_id),
        timeout=30,
        message="the reordered job did not fail",
    )
    row = await db.fetchrow(
        "SELECT error_code, attempt_count FROM jobs WHERE id = $1",
        job_id,
    )
    assert (row["error_code"], row["attempt_count"]) == ("NONDETERMINISTIC", 2)
    assert ledger.read_text() == effects_before  # the retry made no effect
    assert (await client.get(job_id)).error_code == "NONDETERMINISTIC"
