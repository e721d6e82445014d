"""The client distribution on its own: installed into a fresh virtualenv (no engine), a
script drives a job service started here, sync and async."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import asyncpg
import pytest

from tests.support.stack import ALL_ROLES_TOKEN

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).parent / "client_scripts" / "roundtrip.py"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def client_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding durable-jobs-client and its dependencies only, installed by
    this environment's pip (``--python``: no pip of its own to bootstrap, ~8 s less)."""
    home = tmp_path_factory.mktemp("client-venv")
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", ROOT / "client"],
        check=True,
        timeout=500,
    )
    return python


async def test_the_client_alone_creates_lists_watches_signals_cancels_and_schedules(
    client_python: Path, target: str, db: asyncpg.Connection
) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "JOBS_JOB_SERVICE_TARGET": target,
        "JOBS_AUTH_TOKEN": ALL_ROLES_TOKEN,
    }
    process = await asyncio.create_subprocess_exec(
        client_python, str(SCRIPT), env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    seen = json.loads(out)

    assert seen["engine_importable"] is False
    sync, aio = seen["sync"], seen["async"]
    assert sync["key"].startswith("client-")  # made by the client
    assert sync["same_job"] is True
    assert sync["listed"] == [sync["id"]]
    assert sync["watched"] == ["JOB_STATUS_CANCELLED"]
    assert sync["watched_with_partial"] == ["JOB_STATUS_CANCELLED"]
    assert sync["signals"] == [1, 2, 2]  # the same key answers the signal stored before
    assert sync["signal_created"] == [True, True, False]
    assert sync["finished"] == "JobFinished"
    assert sync["waited"] == "JOB_STATUS_CANCELLED"
    assert sync["batch"] == ["CreateJobResponse", "InvalidInput"]
    assert sync["missing"] == "JobNotFound"
    assert sync["invalid"] == ["input.sleep_ms"]
    assert aio["listed"] == [aio["id"]]
    assert aio["watched"] == ["JOB_STATUS_CANCELLED"]
    assert aio["waited"] == "JOB_STATUS_CANCELLED"
    assert aio["admin_user"] == "pkg-async"
    assert "ai-interactive" in aio["queues"]
    assert aio["credentials"] is True
    assert await db.fetchval("SELECT count(*) FROM credentials") == 0
    schedule = aio["schedules"]
    assert schedule["key"].startswith("client-")  # made by the client
    assert schedule["paused"] is True
    assert schedule["listed"] == [schedule["id"]]
    assert schedule["resumed_next"] is True
    assert schedule["cron"] == "30 9 * * *"
    assert schedule["triggered"] == schedule["id"]
    assert schedule["next"] == 5
    assert schedule["gone"] == "ScheduleNotFound"
    assert aio["usage"] == [0, "0.000000"]
    blocking = seen["sync_schedules"]  # the blocking client's schedules, the same calls
    assert blocking["key"].startswith("client-") and blocking["same_schedule"] is True
    assert blocking["listed"] == [blocking["id"]]
    assert blocking["paused_after_resume"] is False
    assert blocking["triggered"] == blocking["id"]
    assert blocking["gone"] == "ScheduleNotFound"
    assert (
        await db.fetchval("SELECT count(*) FROM jobs WHERE schedule_id = $1", blocking["id"]) == 1
    )
    # the schedule and its runs are gone; the job it made stays, marked as the schedule's
    assert await db.fetchval("SELECT count(*) FROM schedules") == 0
    triggered = await db.fetchrow(
        "SELECT user_id, schedule_id::text FROM jobs WHERE id = $1", schedule["runs"][0]
    )
    assert dict(triggered) == {"user_id": "pkg-async", "schedule_id": schedule["id"]}
    stored = await db.fetch(
        "SELECT seq, name, payload, idempotency_key FROM job_signals WHERE job_id = $1"
        " ORDER BY seq",
        sync["id"],
    )
    assert [(r["seq"], r["name"], json.loads(r["payload"])) for r in stored] == [
        (1, "approve", {"ok": True}),
        (2, "approve", {"ok": True}),
    ]
    assert stored[0]["idempotency_key"].startswith("client-")  # made by the client
    rows = dict(
        await db.fetch(
            "SELECT id::text, status FROM jobs WHERE id = ANY($1::uuid[])", [sync["id"], aio["id"]]
        )
    )
    assert rows == {sync["id"]: "cancelled", aio["id"]: "cancelled"}
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE user_id = 'pkg-sync'") == 2
