"""The real stack the model-based test drives, built once per test module: job_service
in this process (real PostgreSQL database copied from the template, a private NATS
JetStream server) and worker processes that the test may kill and replace.

Hypothesis's stateful runner is synchronous, so the test runs it in a thread
(``asyncio.to_thread``) while the stack keeps serving on the event loop; ``ModelStack.call``
runs one coroutine of a rule on that loop and waits for its answer.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
import uuid
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from devstack.embedded import EmbeddedNats, create_database, drop_database, with_database
from job_service.app import JobServiceApp
from shared.registry import default_registry
from tests.support.declared import declare
from tests.support.processes import WorkerProcess
from tests.support.stack import Client, open_channel, running_job_service
from tests.support.wait import eventually

T = TypeVar("T")

MODULES = {"JOBS_JOB_TYPE_MODULES": "tests.support.model_jobtypes"}
# The workers load model_versioned 1.0.0 and declare it; the test then declares 2.0.0 (the
# newest declared version is the one new jobs are created with), which no worker runs.
WORKER_VERSION = {"MODEL_TEST_VERSION": "1.0.0"}
WORKERS = 2
RPC_TIMEOUT_S = 30.0
# A job takes at most this many signals (JOBS_MAX_SIGNALS_PER_JOB): small, so that the
# model reaches the cap.
SIGNAL_CAP = 3
# An attempt past its timeout plus this grace is ended by the reaper, which runs this often.
TIMEOUT_GRACE_S = 0.5
REAPER_INTERVAL_S = 0.2


@dataclass
class ModelStack:
    client: Client
    loop: asyncio.AbstractEventLoop
    log_dir: Path
    nats_url: str
    target: str
    workers: list[WorkerProcess] = field(default_factory=list)
    kills: int = 0

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Runs ``coroutine`` on the stack's loop from the runner's thread."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(RPC_TIMEOUT_S)

    def spawn_worker(self) -> WorkerProcess:
        worker_id = f"model-worker-{len(self.workers) + 1}"
        process = WorkerProcess(
            self.log_dir, worker_id, self.nats_url, self.target, **MODULES, **WORKER_VERSION
        )
        self.workers.append(process)
        return process

    def kill_worker(self, index: int) -> None:
        """SIGKILLs a live worker (its attempts are cut off mid-flight) and starts another."""
        live = [w for w in self.workers if w.process.poll() is None]
        victim = live[index % len(live)]
        victim.signal(signal.SIGKILL)
        victim.process.wait(10)
        self.kills += 1
        self.spawn_worker()

    def close_workers(self) -> None:
        for process in self.workers:
            process.close()


async def declare_after_the_workers(app: JobServiceApp) -> None:
    """Once the workers declared every model type at 1.0.0, the model types at 2.0.0 (this
    process's MODEL_TEST_VERSION): declared last, 2.0.0 is what new jobs are created with.
    Every type, not one: a worker declares them one after another, and a 1.0.0 first
    declared after 2.0.0 would be the current version (a job the workers then run)."""
    assert app.declared is not None
    declared = app.declared
    model_types = [d.job_type for d in default_registry(MODULES) if d.job_type.startswith("model_")]

    async def workers_declared() -> bool:
        await declared.load()
        version = WORKER_VERSION["MODEL_TEST_VERSION"]
        return all(declared.types.version(t, version) is not None for t in model_types)

    await eventually(workers_declared, timeout=60, message="the workers never declared their types")
    await declare(app, [d for d in default_registry(MODULES) if d.job_type in model_types])


@asynccontextmanager
async def model_stack(pg_admin_url: str, template_database: str) -> AsyncIterator[ModelStack]:
    """job_service (no per-user quotas; a small signal cap, a short timeout grace), a fresh
    database and NATS, ``WORKERS`` workers."""
    name = f"jobs_model_{uuid.uuid4().hex[:16]}"
    await create_database(pg_admin_url, name, template=template_database)
    database_url = with_database(pg_admin_url, name)
    scratch = Path(tempfile.mkdtemp(prefix="jobs-model-"))
    nats = EmbeddedNats(scratch / "nats")
    nats.start()
    stack: ModelStack | None = None
    try:
        async with (
            running_job_service(
                database_url,
                nats.url,
                default_registry(),
                max_active_jobs_per_user=0,
                daily_job_quota_per_user=0,
                max_signals_per_job=SIGNAL_CAP,
                attempt_timeout_grace_s=TIMEOUT_GRACE_S,
                reaper_interval_s=REAPER_INTERVAL_S,
            ) as app,
            open_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            stack = ModelStack(
                client=Client(channel),
                loop=asyncio.get_running_loop(),
                log_dir=scratch,
                nats_url=nats.url,
                target=f"127.0.0.1:{app.port}",
            )
            for _ in range(WORKERS):
                stack.spawn_worker()
            await declare_after_the_workers(app)
            yield stack
    finally:
        if stack is not None:
            stack.close_workers()
        nats.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        await drop_database(pg_admin_url, name)
