"""`make run` as a user runs it: the embedded stack starts, runs a job, stops every process
it started on Ctrl-C, and keeps its data for the next start."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import grpc
import httpx
import pytest

from devstack.embedded import free_port
from shared.credentials import fingerprint
from shared.pb.jobs.v1 import credential_service_pb2 as cpb
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from tests.support.ai import feynman_flow, review_cards
from tests.support.devstack_harness import Devstack
from tests.support.metrics import scrape, value
from tests.support.stack import Client, open_channel
from tests.support.wait import eventually

BANNER_END = "Ctrl-C stops everything."
# `make run` up to the end of its banner fits on one screen (issue 31): 40 lines, one of
# them make's echo of the command
MOST_START_LINES = 40 - 1
USER_KEY = "sk-devstack-user-key-3d9f"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's bookkeeping is left


async def create_and_finish(target: str, token: str) -> str:
    async with open_channel(target, token) as channel:
        client = Client(channel)
        job = (await client.create(key="kept", sleep_ms=10)).job

        async def succeeded() -> bool:
            return (await client.get(job.id)).status == job_pb2.JOB_STATUS_SUCCEEDED

        await eventually(succeeded, timeout=20, message="the job did not finish")
        # the reference AI flow on the default (fake) provider: parent, child, cards
        parent, child = await feynman_flow(client)
        assert child.status == job_pb2.JOB_STATUS_SUCCEEDED
        assert 1 <= len(review_cards(child)) <= 3
        assert child.parent_job_id == parent.id
        return job.id


async def run_on_user_key(target: str, token: str, credential_id: str = "") -> str:
    """Runs a job on a user's key (stored first unless given); the credential's id."""
    async with open_channel(target, token) as channel:
        client = Client(channel)
        if not credential_id:
            put = await client.credentials.PutCredential(
                cpb.PutCredentialRequest(user_id="u1", provider="deepseek", api_key=USER_KEY)
            )
            credential_id = put.credential.id
        job = (
            await client.jobs.CreateJob(
                jpb.CreateJobRequest(
                    user_id="u1",
                    job_type="synthetic",
                    credential_mode=job_pb2.CREDENTIAL_MODE_USER,
                    credential_id=credential_id,
                )
            )
        ).job

        async def done() -> job_pb2.Job | None:
            found = await client.get(job.id, "u1")
            return found if found.finished_at.seconds else None

        finished = await eventually(done, timeout=20, message="the job did not finish")
        assert finished.status == job_pb2.JOB_STATUS_SUCCEEDED
        assert finished.artifacts[0].payload["api_key"] == fingerprint(USER_KEY)
        return credential_id


def assert_a_quiet_start(output: str) -> None:
    """A first start (every migration applied) says each thing once, on one screen."""
    start = output[: output.index(BANNER_END) + len(BANNER_END)].splitlines()
    assert len(start) <= MOST_START_LINES, "\n".join(start)
    said = [line.split(" ", 2)[-1] for line in start if line.strip()]  # without the time
    assert len(said) == len(set(said)), "a line said twice"
    assert not [line for line in start if "setup plugin" in line or "Running upgrade" in line]


async def test_the_embedded_stack_runs_a_job_stops_cleanly_and_keeps_its_data(
    pg_data_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    # devstack's own console and metrics ports, as a user's `make run` has them
    first = Devstack(pg_data_dir, tmp_path / "first.log", grpc_port=port, free_ports=False)
    try:
        await first.ready(timeout=90)
        await eventually(lambda: BANNER_END in first.output(), timeout=10, message="cut banner")
        assert_a_quiet_start(first.output())
        # the banner says where the generated tokens are; the worker got its own
        assert f"{pg_data_dir}/{{client,admin,worker}}.token" in first.output()
        tokens = {role: first.token(role) for role in ("client", "admin", "worker")}
        assert len(set(tokens.values())) == 3
        assert first.token_file("client").stat().st_mode & 0o077 == 0
        job_id = await create_and_finish(target, tokens["client"])
        # a client token is not a worker's
        async with open_channel(target, tokens["client"]) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as denied:
                await Client(channel).lock(job_id)
        assert denied.value.code() is grpc.StatusCode.PERMISSION_DENIED
        # both services serve /metrics, on the ports the banner names
        ports = re.findall(
            r"(?:job_service|worker)\s+http://127.0.0.1:(\d+)/metrics", first.output()
        )
        service, work = [await scrape(int(port)) for port in ports]
        done = {"job_type": "synthetic", "outcome": "succeeded"}
        assert value(service, "jobs_finished_total", **done) == 1
        assert value(work, "jobs_worker_attempts_total", **done) == 1
        credential_id = await run_on_user_key(target, tokens["client"])
        # the web console serves where the banner says, behind its sign-in
        console = re.search(r"web console\s+(http://127.0.0.1:\d+/)", first.output())
        assert console is not None
        async with httpx.AsyncClient(base_url=console.group(1)) as web:
            assert (await web.get("/jobs")).headers["location"].startswith("/signin")

        assert await asyncio.to_thread(first.stop) == 0  # Ctrl-C
    finally:
        first.stop()
    # PostgreSQL and NATS are named when ready, the services when being stopped
    pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", first.output())]
    assert len(pids) == 5  # PostgreSQL, NATS, job_service, worker, console
    assert not [pid for pid in pids if alive(pid)]
    assert "PostgreSQL stopped" in first.output()
    assert (pg_data_dir / "credentials-master-key").stat().st_mode & 0o777 == 0o600

    second = Devstack(pg_data_dir, tmp_path / "second.log", grpc_port=port, free_ports=False)
    try:
        await second.ready(timeout=90)
        # the same tokens again after a restart
        async with open_channel(target, second.token("client")) as channel:
            again = await Client(channel).create(key="kept", sleep_ms=10)
        # the master key was kept with the data: the stored key still opens
        await run_on_user_key(target, second.token("client"), credential_id)
        assert await asyncio.to_thread(second.stop) == 0
    finally:
        second.stop()
    assert not again.created
    assert again.job.id == job_id
    assert again.job.status == job_pb2.JOB_STATUS_SUCCEEDED
