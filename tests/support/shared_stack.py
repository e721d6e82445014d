"""One job service (and database, and NATS) shared by a whole test module, for suites of
many cheap requests whose invariant allows it: "bad input changes nothing" holds between
the requests, so they need not each pay for a fresh stack.

Import the fixture into a test module: ``from tests.support.shared_stack import
shared_stack``. Leases are long, so that nothing changes on its own while the module runs
(no reaper moves, no retries due).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devstack.embedded import EmbeddedNats, create_database, drop_database, with_database
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from tests.support.stack import Client, open_channel, result_request, running_job_service


@dataclass(frozen=True)
class SharedStack:
    target: str
    database_url: str
    client: Client
    # alice's jobs in each state a refusal depends on
    queued: str
    running: str
    lease_token: str
    succeeded: str
    cancelled: str


@pytest.fixture(scope="module")
async def shared_stack(pg_admin_url: str, template_database: str) -> AsyncIterator[SharedStack]:
    name = f"jobs_shared_{uuid.uuid4().hex[:16]}"
    await create_database(pg_admin_url, name, template=template_database)
    database_url = with_database(pg_admin_url, name)
    external_nats = os.environ.get("JOBS_NATS_URL")
    store = Path(tempfile.mkdtemp(prefix="jobs-shared-nats-"))
    nats = None if external_nats else EmbeddedNats(store)
    try:
        if nats is not None:
            nats.start()
        nats_url = external_nats or (nats.url if nats else "")
        async with (
            running_job_service(
                database_url, nats_url, lease_ttl_s=600, heartbeat_interval_s=1
            ) as app,
            open_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            client = Client(channel)
            queued = (await client.create(user_id="alice")).job.id
            running = (await client.create(user_id="alice")).job.id
            lease = await client.lock(running)
            succeeded = (await client.create(user_id="alice")).job.id
            done = await client.lock(succeeded)
            await client.executor.SubmitResult(
                result_request(succeeded, done.job.lease_token, {"attempt": 1, "data": "x"})
            )
            cancelled = (await client.create(user_id="alice")).job.id
            await client.jobs.CancelJob(jpb.CancelJobRequest(job_id=cancelled, user_id="alice"))
            yield SharedStack(
                target=f"127.0.0.1:{app.port}",
                database_url=database_url,
                client=client,
                queued=queued,
                running=running,
                lease_token=lease.job.lease_token,
                succeeded=succeeded,
                cancelled=cancelled,
            )
    finally:
        if nats is not None:
            nats.stop()
        shutil.rmtree(store, ignore_errors=True)
        await drop_database(pg_admin_url, name)
