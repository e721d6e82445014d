"""``jobctl``'s operator and credential commands, output formats, ``--timeout``, watch
reconnects and shell completion, as a subprocess against the running stack (the helpers
are ``test_jobctl``'s)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pty
import shlex
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from devstack.embedded import free_port
from job_service.app import JobServiceApp
from tests.e2e.test_jobctl import JOBCTL, Run, answer_on_a_terminal, jobctl, jobctl_env, rows
from tests.support.declared import declare
from tests.support.stack import CLIENT_TOKEN, settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp

# --- output formats ----------------------------------------------------------------------


def jsonl(run: Run) -> list[dict[str, object]]:
    assert run.status == 0, run.err
    return [json.loads(line) for line in run.out.splitlines()]


async def test_every_listing_prints_table_json_or_one_object_per_line(target: str) -> None:
    ids = [(await jobctl(target, "create", "synthetic", "--json")).json()["job"]["id"]]
    ids.append((await jobctl(target, "create", "synthetic", "-o", "json")).json()["job"]["id"])

    # -o before or after the command, as every option
    for args in (["list", "-o", "jsonl"], ["-o", "jsonl", "list"], ["--output=jsonl", "list"]):
        assert [j["id"] for j in jsonl(await jobctl(target, *args))] == ids[::-1]
    whole = (await jobctl(target, "list", "-o", "json")).json()
    assert [j["id"] for j in whole["jobs"]] == ids[::-1]
    admin = jsonl(await jobctl(target, "list", "--admin", "--type", "synthetic", "-o", "jsonl"))
    assert {j["id"] for j in admin} == set(ids)
    [one] = jsonl(await jobctl(target, "get", ids[0], "-o", "jsonl"))
    assert one["id"] == ids[0]

    queues = jsonl(await jobctl(target, "queues", "-o", "jsonl"))
    assert "ai-interactive" in {q["name"] for q in queues}
    types = jsonl(await jobctl(target, "definitions", "-o", "jsonl"))
    assert "synthetic" in {d["job_type"] for d in types}
    assert jsonl(await jobctl(target, "rate-limits", "-o", "jsonl")) == []  # none configured
    assert (await jobctl(target, "rate-limits", "-o", "json")).json() == {}
    assert jsonl(await jobctl(target, "credentials", "list", "-o", "jsonl")) == []

    bad = await jobctl(target, "list", "-o", "yaml")
    assert bad.status == 2
    assert "invalid choice: 'yaml'" in bad.err


# --- workers -------------------------------------------------------------------------------


async def test_workers_lists_each_connected_worker_and_what_it_runs(
    target: str, worker: WorkerApp
) -> None:
    # a job run: the worker has said what it runs (each LockJobs call says it)
    ran = await jobctl(target, "create", "synthetic", "--watch")
    assert ran.status == 0, ran.err

    async def listed() -> list[list[str]] | None:
        run = await jobctl(target, "workers")
        assert run.status == 0, run.err
        found = rows(run.out)
        return found if any(r[0] == "inproc-worker" for r in found[1:]) else None

    table = await eventually(listed, timeout=15, message="the worker never showed")

    assert table[0] == ["WORKER", "CONNECTED", "RUNNING", "DEFINITIONS"]
    [row] = [r for r in table[1:] if r[0] == "inproc-worker"]
    assert row[1].endswith("Z") and row[2] == "0"
    assert "synthetic@1.0.0" in row[3].split(",")
    refused = await jobctl(target, "workers", "--token", CLIENT_TOKEN)
    assert refused.status == 8 and "PERMISSION_DENIED" in refused.err


# --- --timeout -----------------------------------------------------------------------------


@pytest.fixture
async def silent_target() -> AsyncIterator[str]:
    """A TCP port that accepts connections and never answers: a hung job service."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_timeout_is_each_calls_deadline(silent_target: str, target: str) -> None:
    started = time.monotonic()
    hung = await jobctl(silent_target, "--timeout", "1.5", "list", timeout=25)
    took = time.monotonic() - started

    assert hung.status == 7, hung.err  # too slow: the service's fault, as UNAVAILABLE
    assert "DEADLINE_EXCEEDED" in hung.err
    assert took < 20  # not the default 30 s deadline
    after = await jobctl(silent_target, "queues", "--timeout", "500ms", timeout=25)
    assert after.status == 7 and "DEADLINE_EXCEEDED" in after.err

    assert (await jobctl(target, "list", "--timeout", "10s")).status == 0  # a live service
    for value, says in (("0", "above zero"), ("soon", "is not a delay")):
        refused = await jobctl(target, "list", "--timeout", value)
        assert refused.status == 2
        assert f"argument --timeout: '{value}'" in refused.err and says in refused.err


# --- credentials ---------------------------------------------------------------------------

SECRET = "sk-test-do-not-show-0123456789abcdef"


def fingerprint(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:16]


async def jobctl_with_stdin(target: str, stdin: bytes, *args: str) -> tuple[Run, list[str]]:
    """jobctl with ``stdin`` piped in; also the command line the process ran with."""
    process = await asyncio.create_subprocess_exec(
        JOBCTL,
        *args,
        env=jobctl_env(target),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    cmdline = await asyncio.to_thread(Path(f"/proc/{process.pid}/cmdline").read_bytes)
    argv = cmdline.decode().split("\0")
    out, err = await asyncio.wait_for(process.communicate(stdin), 30)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode()), argv


async def test_credentials_put_reads_the_key_from_stdin_and_never_shows_it(
    target: str, db: asyncpg.Connection
) -> None:
    stored, argv = await jobctl_with_stdin(
        target,
        f"{SECRET}\n".encode(),
        "credentials",
        "put",
        "--provider",
        "openai",
        "--label",
        "team key",
    )

    assert stored.status == 0, stored.err
    assert SECRET not in " ".join(argv)
    [verb, credential_id, provider, shown] = stored.out.split()
    assert (verb, provider, shown) == ("stored", "openai", fingerprint(SECRET))
    row = await db.fetchrow("SELECT user_id, label, fingerprint FROM credentials")
    assert dict(row) == {"user_id": "cli-user", "label": "team key", "fingerprint": shown}

    listed = await jobctl(target, "credentials", "list")
    assert rows(listed.out)[0] == [
        "ID",
        "PROVIDER",
        "FINGERPRINT",
        "CREATED",
        "LAST-USED",
        "LABEL",
    ]
    assert rows(listed.out)[1][:3] == [credential_id, "openai", shown]
    as_json = await jobctl(target, "credentials", "list", "-o", "json")
    [record] = as_json.json()["credentials"]
    assert record["id"] == credential_id and "api_key" not in record
    for run in (stored, listed, as_json):
        assert SECRET not in run.out + run.err

    # a key on the command line is refused outright, before anything is sent
    as_argument = await jobctl(target, "credentials", "put", "--provider", "openai", SECRET)
    assert as_argument.status == 2
    empty, _ = await jobctl_with_stdin(target, b"\n", "credentials", "put", "--provider", "x")
    assert empty.status == 2 and "no key given" in empty.err
    assert await db.fetchval("SELECT count(*) FROM credentials") == 1

    declined = await answer_on_a_terminal(target, b"n\n", "credentials", "delete", credential_id)
    assert declined.status == 9, declined.err
    assert f"Delete credential {credential_id}?" in declined.err
    assert await db.fetchval("SELECT count(*) FROM credentials") == 1
    deleted = await jobctl(target, "credentials", "delete", credential_id, "--yes")
    assert (deleted.status, deleted.out.strip()) == (0, f"deleted {credential_id}")
    assert await db.fetchval("SELECT count(*) FROM credentials") == 0
    again = await jobctl(target, "credentials", "delete", credential_id, "--yes")
    assert again.status == 3 and "CREDENTIAL_NOT_FOUND" in again.err


def _read_available(fd: int) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 65536)
    except (BlockingIOError, OSError):
        return b""


async def test_credentials_put_on_a_terminal_does_not_echo_the_key(
    target: str, db: asyncpg.Connection
) -> None:
    controller, terminal = pty.openpty()
    try:
        # its own session: no controlling terminal but the one on its stdin
        process = await asyncio.create_subprocess_exec(
            JOBCTL,
            "credentials",
            "put",
            "--provider",
            "deepseek",
            env=jobctl_env(target),
            stdin=terminal,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stderr is not None and process.stdout is not None
        prompt = await asyncio.wait_for(process.stderr.readuntil(b"(not echoed): "), 30)
        assert prompt.endswith(b"deepseek API key (not echoed): ")
        os.write(controller, f"{SECRET}\n".encode())
        out, err = await asyncio.wait_for(process.communicate(), 30)
        screen = _read_available(controller)  # what the terminal showed while typing
    finally:
        os.close(controller)
        os.close(terminal)

    assert process.returncode == 0, err.decode()
    assert SECRET.encode() not in screen + out + err
    assert out.decode().split()[-1] == fingerprint(SECRET)
    assert await db.fetchval("SELECT fingerprint FROM credentials") == fingerprint(SECRET)


# --- dead letters --------------------------------------------------------------------------


async def test_dead_letters_list_and_redrive(
    target: str, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    failed = await jobctl(target, "create", "synthetic", "-i", '{"fail": "fatal"}', "--watch")
    assert failed.status == 4
    job_id = failed.out.split()[1]
    [event_id] = await db.fetch(
        "UPDATE outbox_events SET status = 'dead', attempt_count = 10, last_error = 'boom'"
        " WHERE event_type = 'job.dispatch' AND aggregate_id = $1 RETURNING id",
        job_id,
    )
    event_id = event_id["id"]

    listed = await jobctl(target, "dead-letters", "list")

    assert listed.status == 0, listed.err
    [jobs_part, events_part] = listed.out.split("\n\n")
    assert rows(jobs_part)[1] == ["ID", "TYPE", "USER", "ATTEMPTS", "FINISHED", "ERROR"]
    assert rows(jobs_part)[2][0] == job_id[-8:] and rows(jobs_part)[2][-1] == "JOB_REJECTED"
    assert rows(events_part)[2][:4] == [str(event_id), job_id[-8:], rows(events_part)[2][2], "10"]
    lines = jsonl(await jobctl(target, "dead-letters", "list", "-o", "jsonl"))
    assert [next(iter(line)) for line in lines] == ["failed_job", "dead_event"]

    nothing_named = await jobctl(target, "dead-letters", "redrive")
    assert nothing_named.status == 2 and "or --all" in nothing_named.err
    redriven = await jobctl(target, "dead-letters", "redrive", str(event_id), "-o", "json")
    assert (redriven.status, redriven.json()) == (0, {"redriven": 1})
    status = await db.fetchval("SELECT status FROM outbox_events WHERE id = $1", event_id)
    assert status in {"pending", "processing", "published"}
    assert (await jobctl(target, "dead-letters", "redrive", "--all")).out.startswith(
        "redriven 0 events"
    )


# --- watch reconnects ----------------------------------------------------------------------


async def test_watch_reconnects_across_a_job_service_restart(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    port = free_port()
    own = f"127.0.0.1:{port}"
    on_port = settings(database_url, nats_url).model_copy(update={"grpc_port": port})
    async with JobServiceApp(on_port) as app:
        await declare(app)
        job_id = (await jobctl(own, "create", "synthetic", "--delay", "1h", "--json")).json()[
            "job"
        ]["id"]
        watching = await asyncio.create_subprocess_exec(
            JOBCTL,
            "watch",
            job_id,
            env=jobctl_env(own),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert watching.stdout is not None
        first = await asyncio.wait_for(watching.stdout.readline(), 30)
        assert first.split()[1] == b"created"
    # the service is gone; the watch waits for it to come back
    async with JobServiceApp(on_port):
        cancelled = await jobctl(own, "cancel", job_id)
        assert cancelled.status == 0, cancelled.err
        rest, err = await asyncio.wait_for(watching.communicate(), 60)

    assert watching.returncode == 5, err.decode()
    # the reconnect's first answer (the state it had) is not shown again
    assert [line.split()[1] for line in rest.decode().splitlines()] == ["cancelled"]
    assert await db.fetchval("SELECT status FROM jobs WHERE id = $1", job_id) == "cancelled"


# --- shell completion ------------------------------------------------------------------------


def complete_in_bash(script: str, words: str) -> list[str]:
    """What bash offers for ``words`` (the last word being typed) with the script loaded."""
    typed = shlex.split(words) + ([""] if words.endswith(" ") else [])
    program = (
        f"{script}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in typed)})\n"
        f"COMP_CWORD={len(typed) - 1}\n"
        f"COMP_LINE={shlex.quote(words)}\nCOMP_POINT=${{#COMP_LINE}}\n"
        '_shtab_jobctl\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.split()


def test_bash_completion_offers_commands_subcommands_and_choices() -> None:
    script = subprocess.run(
        [JOBCTL, "completion", "bash"], capture_output=True, text=True, check=True
    ).stdout

    assert "cancel-many" in complete_in_bash(script, "jobctl cancel-")
    assert set(complete_in_bash(script, "jobctl credentials ")) == {"put", "list", "delete"}
    assert set(complete_in_bash(script, "jobctl list -o ")) == {"table", "json", "jsonl"}
    assert "failed" in complete_in_bash(script, "jobctl cancel-many --status ")


def test_zsh_completion_is_a_compdef_for_jobctl() -> None:
    script = subprocess.run(
        [JOBCTL, "completion", "zsh"], capture_output=True, text=True, check=True
    ).stdout

    assert script.startswith("#compdef jobctl")
    for command in ("cancel-many", "retry-many", "dead-letters", "credentials", "watch"):
        assert command in script
    wrong = subprocess.run([JOBCTL, "completion", "fish"], capture_output=True, text=True)
    assert wrong.returncode == 2


def test_a_reader_that_stops_early_is_no_error() -> None:
    """``jobctl ... | head -1``: the pipe closes under jobctl, which stops quietly."""
    piped = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {JOBCTL} completion bash | head -1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (piped.returncode, piped.stderr) == (0, "")
    assert piped.stdout.startswith("#")
