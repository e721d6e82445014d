"""``jobctl`` as installed (the console script), as a subprocess against the running stack:
what it prints for people and for scripts, and the exit statuses scripts rely on."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from devstack.embedded import free_port
from tests.support.stack import ALL_ROLES_TOKEN, client_env
from tests.support.wait import eventually
from worker_service.app import WorkerApp

JOBCTL = str(Path(sys.executable).parent / "jobctl")


@dataclass
class Run:
    status: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


async def jobctl(target: str, *args: str, timeout: float = 30) -> Run:
    process = await asyncio.create_subprocess_exec(
        JOBCTL,
        *args,
        env={
            **os.environ,
            **client_env(ALL_ROLES_TOKEN),
            "JOBS_JOB_SERVICE_TARGET": target,
            "JOBS_USER_ID": "cli-user",
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


async def test_create_get_and_watch_a_job_to_success(target: str, worker: WorkerApp) -> None:
    # watching from the moment of creation: the 1.5 s run cannot pass unseen
    watched = await jobctl(target, "create", "synthetic", "-i", '{"sleep_ms": 1500}', "--watch")

    assert watched.status == 0, watched.err
    first, *rest = watched.out.splitlines()
    assert first.startswith("created ")
    job_id = first.split()[1]
    changes = [line.split()[1] for line in rest]
    assert changes[-1] == "succeeded"
    assert "running" in changes
    again = await jobctl(target, "watch", job_id)
    assert (again.status, again.out.split()[1]) == (0, "succeeded")
    got = await jobctl(target, "get", job_id, "--json")
    assert got.json()["status"] == "JOB_STATUS_SUCCEEDED"
    assert got.json()["user_id"] == "cli-user"
    human = await jobctl(target, "get", job_id)
    lines = dict(line.split(maxsplit=1) for line in human.out.splitlines() if "  " in line)
    assert lines["status"].strip() == "succeeded"
    assert lines["attempts"].strip() == "1/4"


async def test_watch_exits_4_for_a_failed_job_and_5_for_a_cancelled_one(
    target: str, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    failed = await jobctl(target, "create", "synthetic", "-i", '{"fail": "fatal"}', "--watch")
    assert failed.status == 4, failed.err
    assert "failed" in failed.out.splitlines()[-1]
    assert "JOB_REJECTED" in failed.out

    hanging = await jobctl(target, "create", "synthetic", "-i", '{"fail": "hang"}', "--json")
    job_id = hanging.json()["job"]["id"]
    await eventually(
        lambda: db.fetchval("SELECT status = 'running' FROM jobs WHERE id = $1", job_id),
        timeout=15,
        message="never ran",
    )
    cancelled = await jobctl(target, "cancel", job_id)
    assert cancelled.status == 0, cancelled.err
    # the worker may stop the job before jobctl's answer is read: either is a cancel
    [printed_id, status] = cancelled.out.split()
    assert printed_id == job_id
    assert status in {"cancel_requested", "cancelled"}
    watched = await jobctl(target, "watch", job_id, "--json")
    assert watched.status == 5
    assert json.loads(watched.out.splitlines()[-1])["status"] == "JOB_STATUS_CANCELLED"


async def test_refusals_have_distinct_exit_statuses_and_say_why(target: str) -> None:
    missing = await jobctl(target, "get", "00000000-0000-0000-0000-000000000000")
    assert (missing.status, missing.out) == (3, "")
    assert "NOT_FOUND" in missing.err and "JOB_NOT_FOUND" in missing.err

    invalid = await jobctl(target, "create", "synthetic", "-i", '{"sleep_ms": "soon"}')
    assert invalid.status == 6
    assert "INVALID_INPUT" in invalid.err
    assert "input.sleep_ms" in invalid.err

    no_key = await jobctl(
        target, "create", "synthetic", "--credential", "00000000-0000-0000-0000-000000000000"
    )
    assert no_key.status == 6, no_key.err  # not a key of this user's: bad input
    assert "credential_id: " in no_key.err

    assert (await jobctl(target, "create")).status == 2
    not_json = await jobctl(target, "create", "synthetic", "-i", "{oops")
    assert not_json.status == 2
    assert "not JSON" in not_json.err

    unreachable = await jobctl(f"127.0.0.1:{free_port()}", "get", "x", "--json")
    assert unreachable.status == 7
    assert "UNAVAILABLE" in unreachable.err


async def test_list_shows_the_users_jobs_newest_first(target: str) -> None:
    ids = []
    for _ in range(2):
        run = await jobctl(target, "create", "synthetic", "--json")
        ids.append(run.json()["job"]["id"])

    listed = await jobctl(target, "list", "--json")

    assert listed.status == 0, listed.err
    assert [j["id"] for j in listed.json()["jobs"]] == ids[::-1]
    table = (await jobctl(target, "list")).out.splitlines()
    assert table[0].split() == ["ID", "TYPE", "STATUS", "QUEUE", "ATTEMPTS", "CREATED"]
    assert [line.split()[0] for line in table[1:]] == ids[::-1]


async def test_definitions_lists_the_job_types(target: str) -> None:
    run = await jobctl(target, "definitions", "--json")
    assert run.status == 0, run.err
    assert "synthetic" in [d["job_type"] for d in run.json()["definitions"]]


async def test_retry_creates_a_new_job_from_a_failed_one(target: str, worker: WorkerApp) -> None:
    failed = await jobctl(target, "create", "synthetic", "-i", '{"fail": "fatal"}', "--watch")
    assert failed.status == 4
    job_id = failed.out.split()[1]

    retried = await jobctl(target, "retry", job_id, "--json")

    assert retried.status == 0, retried.err
    assert retried.json()["retried_from_job_id"] == job_id
    assert retried.json()["id"] != job_id


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


async def test_watch_on_a_terminal_draws_a_live_progress_bar(
    target: str, worker: WorkerApp
) -> None:
    controller, terminal = pty.openpty()
    try:
        process = await asyncio.create_subprocess_exec(
            JOBCTL,
            "create",
            "synthetic",
            "-i",
            '{"sleep_ms": 1500}',
            "--watch",
            env={
                **os.environ,
                **client_env(ALL_ROLES_TOKEN),
                "JOBS_JOB_SERVICE_TARGET": target,
                "JOBS_USER_ID": "cli-user",
            },
            stdout=terminal,
        )
        os.close(terminal)
        terminal = -1
        screen = (await asyncio.to_thread(_read_all, controller)).decode()
        assert await process.wait() == 0
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)

    assert "\r\033[K" in screen  # the bar is redrawn in place
    assert re.search(r"\[[#-]{24}\]\s+\d+%\s+running\s+attempt 1/4", screen)
    assert screen.rstrip().splitlines()[-1].split()[1] == "succeeded"
