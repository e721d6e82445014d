"""``jobctl signal`` and ``jobctl watch --partial`` against the real stack: a signal reaches
the job's code and the database once per idempotency key; the model's text streams to the
terminal (or as JSON Lines) between the status lines, as the local OpenAI-compatible
server generates it."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from devstack.openai_server import LocalOpenAIServer
from tests.e2e.test_jobctl import JOBCTL, jobctl, jobctl_env
from tests.support.ai import FEYNMAN_INPUT
from tests.support.stack import worker_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp
from worker_service.model_router import ModelSettings

MISSING = "00000000-0000-0000-0000-000000000000"
STATUS_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d\d\dZ  [a-z_]+  attempt \d+")


async def test_signal_reaches_the_job_once_per_key_and_refusals_say_why(
    target: str, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    created = await jobctl(
        target,
        "create",
        "synthetic",
        "-i",
        '{"wait_signals": ["approve", "edit"], "signal_timeout_ms": 60000}',
        "--json",
    )
    job_id = created.json()["job"]["id"]

    sent = await jobctl(target, "signal", job_id, "approve", "--payload", '{"by": "ana"}')
    assert (sent.status, sent.out.strip()) == (0, f"sent approve #1 to {job_id}"), sent.err
    keyed = await jobctl(
        target, "signal", job_id, "edit", "--idempotency-key", "edit-1", "-o", "json"
    )
    assert keyed.json()["created"] is True
    assert keyed.json()["signal"]["seq"] == "2"  # int64 is a string in proto JSON
    again = await jobctl(target, "signal", job_id, "edit", "--idempotency-key", "edit-1")
    assert (again.status, again.out.strip()) == (0, f"already sent edit #2 to {job_id}")
    reused = await jobctl(
        target, "signal", job_id, "edit", "--payload", '{"n": 2}', "--idempotency-key", "edit-1"
    )
    assert reused.status == 6
    assert "IDEMPOTENCY_KEY_REUSED" in reused.err

    watched = await jobctl(target, "watch", job_id)
    assert watched.status == 0, watched.err
    stored = await db.fetch(
        "SELECT seq, name, payload FROM job_signals WHERE job_id = $1 ORDER BY seq", job_id
    )
    assert [(r["seq"], r["name"], json.loads(r["payload"])) for r in stored] == [
        (1, "approve", {"by": "ana"}),
        (2, "edit", {}),
    ]
    shown = await jobctl(target, "get", job_id)
    fields = dict(line.split(maxsplit=1) for line in shown.out.splitlines() if "  " in line)
    assert fields["signals"].strip() == "#1 approve, #2 edit"
    output = (await jobctl(target, "get", job_id, "--json")).json()["output"]
    assert [(s["name"], s["payload"]) for s in output["signals"]] == [
        ("approve", {"by": "ana"}),
        ("edit", {}),
    ]

    finished = await jobctl(target, "signal", job_id, "approve")
    assert finished.status == 6
    assert "JOB_FINISHED" in finished.err
    missing = await jobctl(target, "signal", MISSING, "approve")
    assert (missing.status, "JOB_NOT_FOUND" in missing.err) == (3, True)
    bad_name = await jobctl(target, "signal", job_id, "not a name!")
    assert bad_name.status == 6
    assert "name: " in bad_name.err
    not_json = await jobctl(target, "signal", job_id, "approve", "--payload", "[1, 2]")
    assert (not_json.status, "--payload must be a JSON object" in not_json.err) == (2, True)
    assert await db.fetchval("SELECT count(*) FROM job_signals") == 2


@pytest.fixture
async def openai_server() -> AsyncIterator[LocalOpenAIServer]:
    async with LocalOpenAIServer(stream_interval_s=0.02, stream_chunk_chars=8) as server:
        yield server


async def _watching(target: str, job_id: str, *options: str) -> asyncio.subprocess.Process:
    """``jobctl watch --partial`` started, once its first status line (the job waiting) is
    out."""
    process = await asyncio.create_subprocess_exec(
        JOBCTL,
        "watch",
        job_id,
        "--partial",
        *options,
        env=jobctl_env(target),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    first = await asyncio.wait_for(process.stdout.readline(), 30)
    assert b"queued" in first.lower() or b"created" in first.lower(), first
    return process


async def _rest(process: asyncio.subprocess.Process) -> tuple[int, str]:
    out, err = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0, err.decode()
    return process.returncode, out.decode()


async def test_watch_partial_prints_the_text_as_it_is_generated(
    target: str, nats_url: str, openai_server: LocalOpenAIServer, db: asyncpg.Connection
) -> None:
    created = await jobctl(
        target, "create", "feynman_evaluation", "-i", json.dumps(FEYNMAN_INPUT), "--json"
    )
    job_id = created.json()["job"]["id"]
    # both watchers are on before any worker runs: no piece can pass unseen
    people = await _watching(target, job_id)
    machines = await _watching(target, job_id, "-o", "jsonl")
    models = ModelSettings(
        model_primary_provider="openai",
        model_primary_base_url=openai_server.url,
        model_primary_model="streaming-model",
        model_primary_api_key="sk-test-primary-0123456789",
    )
    async with WorkerApp(worker_settings(nats_url, target, worker_id="w-partial"), models=models):
        (_, text), (_, lines) = await asyncio.gather(_rest(people), _rest(machines))
        await eventually(
            lambda: db.fetchval("SELECT status = 'succeeded' FROM jobs WHERE id = $1", job_id),
            timeout=30,
            message="the job did not succeed",
        )

    streamed = "".join(piece.text for piece in openai_server.sent)
    assert len(openai_server.sent) > 3  # the answer did come in pieces
    # people: the text inline and the status lines as without --partial, the last line
    # the end. A status change is seen by polling, the text as it comes: a status line may
    # cut into the text (it starts on a line of its own, and the text goes on after it).
    rows = text.splitlines()
    changes = [r.split()[1] for r in rows if STATUS_LINE.match(r)]
    assert changes[-2:] == ["running", "succeeded"]
    assert set(changes[:-2]) <= {"queued"}
    assert STATUS_LINE.match(rows[-1])
    printed = "".join(r for r in rows if not STATUS_LINE.match(r))
    assert printed == streamed.replace("\n", "")  # the watch saw the answer whole

    # scripts: a JSON line per change and per piece, pieces numbered without gaps
    answers: list[dict[str, Any]] = [json.loads(line) for line in lines.splitlines()]
    pieces = [a["partial"] for a in answers if "partial" in a]
    assert "".join(p["text"] for p in pieces) == streamed
    assert [p["seq"] for p in pieces] == list(range(1, len(pieces) + 1))
    assert {(p["attempt"], p["call"]) for p in pieces} == {(1, 1)}
    assert answers[-1]["status"] == "JOB_STATUS_SUCCEEDED"
