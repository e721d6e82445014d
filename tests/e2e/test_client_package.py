"""The client distribution on its own: installed into a fresh virtualenv (no engine), a
script drives a job service started here, sync and async."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
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
    """A virtualenv holding durable-jobs-client and its dependencies only."""
    home = tmp_path_factory.mktemp("client-venv")
    venv.create(home, with_pip=True)
    python = home / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", str(ROOT / "client")],
        check=True,
        timeout=500,
    )
    return python


async def test_the_client_alone_creates_lists_watches_and_cancels(
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
    rows = dict(
        await db.fetch(
            "SELECT id::text, status FROM jobs WHERE id = ANY($1::uuid[])", [sync["id"], aio["id"]]
        )
    )
    assert rows == {sync["id"]: "cancelled", aio["id"]: "cancelled"}
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE user_id = 'pkg-sync'") == 2
