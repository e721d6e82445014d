"""``jobctl`` as installed (the console script), as a subprocess against the running stack:
what it prints for people and for scripts, and the exit statuses scripts rely on."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from devstack.embedded import free_port
from shared.constants import Queue
from tests.support.stack import ALL_ROLES_TOKEN, CLIENT_TOKEN, client_env, running_job_service
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


def jobctl_env(target: str) -> dict[str, str]:
    return {
        **os.environ,
        **client_env(ALL_ROLES_TOKEN),
        "JOBS_JOB_SERVICE_TARGET": target,
        "JOBS_USER_ID": "cli-user",
    }


async def jobctl(target: str, *args: str, timeout: float = 30) -> Run:
    """jobctl with no terminal: stdin is /dev/null, as in a script or CI."""
    process = await asyncio.create_subprocess_exec(
        JOBCTL,
        *args,
        env=jobctl_env(target),
        stdin=asyncio.subprocess.DEVNULL,
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
    assert [line.split()[0] for line in table[1:]] == [i[-8:] for i in ids[::-1]]


async def test_definitions_lists_the_job_types(target: str) -> None:
    run = await jobctl(target, "definitions", "--json")
    assert run.status == 0, run.err
    [synthetic] = [d for d in run.json()["definitions"] if d["job_type"] == "synthetic"]
    assert synthetic["current"] is True
    assert synthetic["first_declared_by"] == "test-declarer"  # tests.support.declared
    assert synthetic["first_declared_at"] <= synthetic["last_declared_at"]
    table = (await jobctl(target, "definitions")).out.splitlines()
    assert table[0].split()[:3] == ["TYPE", "VERSION", "CURRENT"]
    [row] = [line.split() for line in table[1:] if line.startswith("synthetic ")]
    assert row[1:3] == ["1.0.0", "yes"] and row[8:10] == ["by", "test-declarer"]


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
            env=jobctl_env(target),
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


# --- scheduling ------------------------------------------------------------------------

QUEUE = Queue.INTERACTIVE.value  # synthetic's queue


def fields(human: str) -> dict[str, str]:
    """``key  value`` lines of a job's detail (keys may hold one space: "next run")."""
    found = {}
    for line in human.splitlines():
        match = re.match(r"^(\S+(?: \S+)?)\s{2,}(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.splitlines()]


async def test_create_with_a_delay_or_a_time_stores_a_created_job_that_waits(
    target: str, db: asyncpg.Connection
) -> None:
    delayed = await jobctl(target, "create", "synthetic", "--delay", "1h", "--json")

    assert delayed.status == 0, delayed.err
    job = delayed.json()["job"]
    assert job["status"] == "JOB_STATUS_CREATED"
    row = await db.fetchrow(
        "SELECT status, next_run_at - created_at AS ahead FROM jobs WHERE id = $1", job["id"]
    )
    assert row["status"] == "created"
    assert timedelta(minutes=59) < row["ahead"] <= timedelta(hours=1)
    shown = fields((await jobctl(target, "get", job["id"])).out)
    assert shown["status"] == "created"
    # in UTC, saying so, and how far ahead
    assert re.fullmatch(r"\S+Z \(in 5\dm\d\ds\)", shown["next run"]), shown["next run"]
    assert shown["next run"].startswith(job["next_run_at"][:19] + "Z")
    # why it waits: only the admin view carries it
    assert "waiting" not in shown
    admin_view = fields((await jobctl(target, "get", "--admin", job["id"])).out)
    assert admin_view["waiting"] == "not_due"
    assert admin_view["hold until"] == shown["next run"].split()[0]
    assert admin_view["version"] == "1.0.0"

    at = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    local = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") + "Z"
    scheduled = await jobctl(
        target, "create", "synthetic", "--run-at", local, "--priority", "7", "--json"
    )
    assert scheduled.status == 0, scheduled.err
    stored = await db.fetchrow(
        "SELECT status, next_run_at, priority FROM jobs WHERE id = $1",
        scheduled.json()["job"]["id"],
    )
    assert (stored["status"], stored["next_run_at"], stored["priority"]) == ("created", at, 7)

    # cancellable while it waits
    cancelled = await jobctl(target, "cancel", job["id"])
    assert (cancelled.status, cancelled.out.split()[1]) == (0, "cancelled")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--delay", "soon"], "argument --delay: 'soon' is not a delay"),
        (["--delay=-5m"], "argument --delay: '-5m': a delay cannot be negative"),
        (["--delay", "5 minutes"], "argument --delay"),
        (["--run-at", "tomorrow"], "argument --run-at: 'tomorrow' is not an RFC 3339 time"),
        (["--run-at", "2030-01-31T09:00:00"], "with a zone"),  # no offset: whose 9 o'clock?
        (["--run-at", "2030-01-31T09:00:00Z", "--delay", "5m"], "not allowed with"),
        (["--priority", "high"], "argument --priority: invalid int value"),
    ],
)
async def test_a_bad_schedule_is_a_usage_error_and_nothing_is_sent(
    target: str, db: asyncpg.Connection, args: list[str], says: str
) -> None:
    run = await jobctl(target, "create", "synthetic", *args)

    assert run.status == 2
    assert says in run.err
    assert run.out == ""
    assert await db.fetchval("SELECT count(*) FROM jobs") == 0


async def test_a_schedule_the_service_refuses_names_the_field_and_writes_nothing(
    target: str, db: asyncpg.Connection
) -> None:
    too_far = await jobctl(target, "create", "synthetic", "--delay", "400d")
    assert too_far.status == 6
    assert "delay: at most 366 days" in too_far.err
    priority = await jobctl(target, "create", "synthetic", "--priority", "5000")
    assert priority.status == 6
    assert "priority" in priority.err
    assert await db.fetchval("SELECT count(*) FROM jobs") == 0


async def test_queues_pause_and_resume(target: str, db: asyncpg.Connection) -> None:
    waiting = (await jobctl(target, "create", "synthetic", "--json")).json()["job"]["id"]
    listed = rows((await jobctl(target, "queues")).out)
    assert listed[0] == [
        "QUEUE",
        "PAUSED",
        "WAITING",
        "ELIGIBLE",
        "RUNNING",
        "LIMIT",
        "PAUSED-SINCE",
    ]
    by_name = {r[0]: r for r in listed[1:]}
    assert by_name[QUEUE][1:6] == ["no", "1", "1", "0", "-"]

    paused = await jobctl(target, "pause", QUEUE, "--yes")

    assert paused.status == 0, paused.err
    assert paused.out.strip() == f"paused {QUEUE}: 1 waiting, 0 running (they finish)"
    control = await db.fetchrow("SELECT * FROM queue_controls WHERE queue = $1", QUEUE)
    assert (control["paused"], control["paused_by"]) == (True, "test-all")
    shown = {r[0]: r for r in rows((await jobctl(target, "queues")).out)[1:]}
    assert shown[QUEUE][1] == "yes" and shown[QUEUE][-2:] == ["by", "test-all"]
    held = fields((await jobctl(target, "get", "--admin", waiting)).out)
    assert held["waiting"] == "queue_paused"
    assert QUEUE in held["hold detail"]
    as_json = (await jobctl(target, "queues", "--json")).json()
    assert {q["name"]: q.get("paused", False) for q in as_json["queues"]}[QUEUE] is True

    resumed = await jobctl(target, "resume", QUEUE, "--json")

    assert resumed.status == 0, resumed.err
    assert resumed.json()["name"] == QUEUE and "paused" not in resumed.json()
    assert await db.fetchval("SELECT paused FROM queue_controls WHERE queue = $1", QUEUE) is False
    assert fields((await jobctl(target, "get", "--admin", waiting)).out)["waiting"] == "ready"


async def answer_on_a_terminal(target: str, answer: bytes, *args: str) -> Run:
    """jobctl with its stdin on a terminal, and ``answer`` typed there."""
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer)
        process = await asyncio.create_subprocess_exec(
            JOBCTL,
            *args,
            env=jobctl_env(target),
            stdin=terminal,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        os.close(controller)
        os.close(terminal)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


async def test_pause_asks_first_and_refuses_without_a_terminal_to_ask_on(
    target: str, db: asyncpg.Connection
) -> None:
    async def paused_rows() -> int:
        return int(await db.fetchval("SELECT count(*) FROM queue_controls WHERE paused"))

    scripted = await jobctl(target, "pause", QUEUE)
    assert scripted.status == 2
    assert "stdin is not a terminal; add --yes" in scripted.err
    declined = await answer_on_a_terminal(target, b"n\n", "pause", QUEUE)
    assert declined.status == 9, declined.err
    assert f"Pause queue {QUEUE}?" in declined.err and "[y/N]" in declined.err
    assert "was not paused" in declined.err
    unknown = await answer_on_a_terminal(target, b"y\n", "pause", "no-such-queue")
    assert unknown.status == 2
    assert "no queue named 'no-such-queue'; the queues are: " in unknown.err
    assert await paused_rows() == 0

    accepted = await answer_on_a_terminal(target, b"y\n", "pause", QUEUE)

    assert accepted.status == 0, accepted.err
    assert accepted.out.startswith(f"paused {QUEUE}")
    assert await paused_rows() == 1


async def test_the_token_from_a_file_is_the_one_sent(target: str, tmp_path: Path) -> None:
    """--token-file wins over JOBS_AUTH_TOKEN (here a token with every role): the client
    token it names is refused an admin call, which the environment's token would pass."""
    path = tmp_path / "client.token"
    path.write_text(CLIENT_TOKEN + "\n")
    refused = await jobctl(target, "queues", "--token-file", str(path))
    assert refused.status == 8, refused.err
    assert "PERMISSION_DENIED" in refused.err
    allowed = await jobctl(target, "queues")
    assert allowed.status == 0, allowed.err
    missing = await jobctl(target, "queues", "--token-file", str(tmp_path / "none.token"))
    assert missing.status == 2
    assert "JOBS_AUTH_TOKEN_FILE" in missing.err and "cannot read" in missing.err


async def test_queue_controls_are_for_admins_only(target: str, db: asyncpg.Connection) -> None:
    for args in (["pause", QUEUE, "--yes"], ["resume", QUEUE], ["queues"], ["rate-limits"]):
        run = await jobctl(target, *args, "--token", CLIENT_TOKEN)
        assert run.status == 8, (args, run.err)
        assert "PERMISSION_DENIED" in run.err
    assert await db.fetchval("SELECT count(*) FROM queue_controls") == 0
    unknown = await jobctl(target, "pause", "no-such-queue", "--yes")
    assert unknown.status == 6  # the service's own refusal
    assert "INVALID_ARGUMENT" in unknown.err


RATE_LIMITS = {"primary": {"requests_per_minute": 600, "tokens_per_minute": 200000}}


@pytest.fixture
async def limited(database_url: str, nats_url: str) -> AsyncIterator[str]:
    """A job service with a rate limit on the primary tier."""
    async with running_job_service(
        database_url, nats_url, rate_limits=json.dumps(RATE_LIMITS)
    ) as app:
        yield f"127.0.0.1:{app.port}"


async def test_rate_limits_lists_each_tier(limited: str) -> None:
    run = await jobctl(limited, "rate-limits")

    assert run.status == 0, run.err
    [header, primary] = rows(run.out)
    assert header == [
        "KEY",
        "REQ/MIN",
        "TOK/MIN",
        "FACTOR",
        "REQ-AVAIL",
        "TOK-AVAIL",
        "WAITING",
        "429S",
        "BLOCKED-UNTIL",
    ]
    assert primary[:4] == ["primary", "600", "200000", "1.00"]
    assert primary[6:] == ["0", "0", "-"]
    [limit] = (await jobctl(limited, "rate-limits", "--json")).json()["limits"]
    assert (limit["key"], limit["requests_per_minute"]) == ("primary", 600)


async def test_rate_limits_says_when_none_are_configured(target: str) -> None:
    run = await jobctl(target, "rate-limits")
    assert (run.status, run.out.strip()) == (0, "no rate limits (JOBS_RATE_LIMITS is empty)")
