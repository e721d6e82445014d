"""The documentation's shell examples — README.md and every docs/**/*.md page — run as
written against a live stack, so that they stay true.

How examples are found: a fenced block whose info string is ``sh`` (or ``python``) and that
directly follows an HTML comment ``<!-- tested: readme-examples NAME -->`` (invisible when
the page is rendered) is a tested example; NAME says which one, unique across the pages, so
an example keeps its name and its test when it moves between pages. Every other block is
left alone. A ``python`` block is one command: the venv's ``python`` reading the block, run the
same way (address replaced, in the checkout-like directory).

How a block is run, command by command, as a reader would type it:

- A command is a line, or lines joined by a trailing ``\\`` or by an open quote (a JSON
  argument may span lines). Blank lines and comment lines are skipped.
- Each command runs in ``bash`` with ``set -euo pipefail``, after the block's earlier
  variable assignments (``T=...``, ``export X=...``) and ``source`` lines, in a directory
  laid out like a checkout after ``make run``: ``.venv`` (this interpreter's environment,
  where ``jobctl`` and ``grpcurl`` are installed; its ``bin`` is on ``PATH``, as the quick
  start has the reader arrange) and ``.jobs-data/{client,admin,worker}.token`` holding the
  test stack's tokens. The environment holds no ``JOBS_*`` variable but one: the examples'
  address ``127.0.0.1:50051`` (or ``localhost:50051``) is replaced by the live job service's
  in the text, and ``JOBS_JOB_SERVICE_TARGET`` is set to it, standing for jobctl's default.
  A command that forgets its token therefore fails here as it would for a reader.
- Placeholders stand for what a reader copies from an earlier answer: ``<id>`` is the job id
  the last create (``CreateJob``, ``jobctl create``) printed, ``<child id>`` the first child
  job id a job's answer listed, ``<plan id>`` the id on the first ``study_plan`` line of
  ``jobctl list``, ``<credential id>`` the id ``PutCredential`` (or ``jobctl
  credentials put``) returned, ``<schedule id>`` the id ``CreateSchedule`` (or ``jobctl
  schedule create``) returned.
- Every command must exit 0. The tests below then check what the reader sees: the jobs
  reaching SUCCEEDED, the artifacts printed, the child job and its cards.

The job service and a worker run in this process on real PostgreSQL and NATS (the e2e
fixtures); the commands are subprocesses.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shlex
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest

from tests.support.docs import name, pages
from tests.support.stack import ADMIN_TOKEN, CLIENT_TOKEN, WORKER_TOKEN, worker_settings
from worker_service.app import WorkerApp
from worker_service.model_router import ModelSettings

MARKER = re.compile(r"^<!--\s*tested:\s*readme-examples\s+(\S+)\s*-->\s*$")
README_ADDRESSES = ("127.0.0.1:50051", "localhost:50051")
# Commands whose effect later commands of the block need: assignments, exports, source.
PRELUDE = re.compile(r"^(?:(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=|source\s|\.\s)")
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
COMMAND_TIMEOUT_S = 60.0
# jobctl usage's columns
USAGE_HEADER = [
    "DAY",
    "USER",
    "JOB_TYPE",
    "PROVIDER",
    "MODEL",
    "CALLS",
    "FAILED",
    "IN",
    "OUT",
    "COST",
]

# The blocks README.md and the docs pages mark; a marker removed by accident fails here.
EXPECTED_BLOCKS = {
    "quick-start-jobctl",
    "quick-start-grpcurl",
    "diagnose-grpcurl",
    "feynman-grpcurl",
    "credentials-grpcurl",
    "usage-grpcurl",
    "scheduling-jobctl",
    "scheduling-grpcurl",
    "operating-jobctl",
    "bulk-jobctl",
    "credentials-jobctl",
    "python-client",
    "bulk-grpcurl",
    "schedules-grpcurl",
    "signals-grpcurl",
    "partial-output-grpcurl",
    "schedules-jobctl",
    "signals-jobctl",
    "usage-jobctl",
    "partial-output-jobctl",
    "knowledge-base-jobctl",
}


def documented_blocks() -> dict[str, list[str]]:
    """NAME → the block's commands, over README.md and every docs page."""
    blocks: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for page in pages():
        for block, found in readme_blocks(page.read_text(), name(page)).items():
            assert block not in blocks, (
                f"two blocks are named {block}: {where[block]}, {name(page)}"
            )
            blocks[block], where[block] = found, name(page)
    return blocks


def readme_blocks(text: str, page: str = "README.md") -> dict[str, list[str]]:
    """NAME → the commands of the ``sh`` block that follows its marker, in one page."""
    blocks: dict[str, list[str]] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines):
        marker = MARKER.match(line)
        if not marker:
            continue
        start = number + 1
        while start < len(lines) and not lines[start].strip():
            start += 1
        fence = lines[start].strip() if start < len(lines) else ""
        assert fence in ("```sh", "```python"), (
            f"{page} line {number + 1}: the marker must be followed by a ```sh or ```python block"
        )
        end = lines.index("```", start + 1)
        block = marker.group(1)
        assert block not in blocks, f"two blocks of {page} are named {block}"
        body = lines[start + 1 : end]
        if fence == "```python":  # the whole block, fed to the venv's python
            blocks[block] = ["python - <<'README_PYTHON'\n" + "\n".join(body) + "\nREADME_PYTHON"]
        else:
            blocks[block] = commands(body)
    return blocks


def commands(lines: list[str]) -> list[str]:
    """The block's commands: continuation lines and quoted line breaks joined."""
    found: list[str] = []
    pending = ""
    for line in lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if pending.rstrip().endswith("\\"):
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the argument goes on on the next line
            continue
        found.append(pending)
        pending = ""
    assert not pending, f"unfinished command at the end of a documented block: {pending!r}"
    return found


@dataclass
class Run:
    command: str
    status: int
    out: str
    err: str

    def messages(self) -> list[dict[str, object]]:
        """grpcurl's answers: indented JSON objects, one after another."""
        decoder, found, rest = json.JSONDecoder(), [], self.out.strip()
        while rest:
            message, end = decoder.raw_decode(rest)
            found.append(message)
            rest = rest[end:].strip()
        return found


@dataclass
class Reader:
    """Runs a documented block as a reader would, in a checkout-like directory."""

    workdir: Path
    target: str
    placeholders: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME")
        env = {name: os.environ[name] for name in keep if name in os.environ}
        env["PATH"] = f"{self.workdir / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin"
        env["JOBS_JOB_SERVICE_TARGET"] = self.target
        return env

    def prepare(self, command: str) -> str:
        for address in README_ADDRESSES:
            command = command.replace(address, self.target)
        for placeholder, value in self.placeholders.items():
            command = command.replace(placeholder, value)
        left = re.findall(r"<(?:id|child id|plan id|credential id|schedule id)>", command)
        assert not left, f"{left[0]} used before any answer gave it: {command}"
        return command

    async def run_block(self, block: list[str]) -> list[Run]:
        runs: list[Run] = []
        prelude: list[str] = []
        for text in block:
            command = self.prepare(text)
            script = "\n".join(["set -euo pipefail", *prelude, command])
            process = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                script,
                cwd=self.workdir,
                env=self.env(),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(process.communicate(), COMMAND_TIMEOUT_S)
            assert process.returncode is not None
            run = Run(text, process.returncode, out.decode(), err.decode())
            assert run.status == 0, (
                f"documented command failed (exit {run.status}):\n{command}\n"
                f"--- stdout\n{run.out}--- stderr\n{run.err}"
            )
            if PRELUDE.match(command) and "\n" not in command:
                prelude.append(command)
            self.remember(run)
            runs.append(run)
        return runs

    def remember(self, run: Run) -> None:
        schedule = re.search(r"\bjobctl\s+schedule\s+create\b", run.command)
        if "CreateJob" in run.command or (
            not schedule and re.search(r"\bjobctl\s.*\bcreate\b", run.command)
        ):
            self.placeholders["<id>"] = re.findall(UUID, run.out)[0]
        if "CreateSchedule" in run.command or schedule:
            self.placeholders["<schedule id>"] = re.findall(UUID, run.out)[0]
        if "PutCredential" in run.command or "jobctl credentials put" in run.command:
            self.placeholders["<credential id>"] = re.findall(UUID, run.out)[0]
        children = re.search(
            rf"(?:childJobIds|child_job_ids)\"?:\s*\[\s*\"({UUID})|^children\s+({UUID})",
            run.out,
            re.MULTILINE,
        )
        if children:
            self.placeholders["<child id>"] = children.group(1) or children.group(2)
        plan = re.search(rf"^({UUID})\s+study_plan\s", run.out, re.MULTILINE)
        if plan:
            self.placeholders["<plan id>"] = plan.group(1)


@pytest.fixture
def reader(tmp_path: Path, target: str) -> Reader:
    """A directory like a checkout after ``make run``: the venv and the generated tokens."""
    workdir = tmp_path / "checkout"
    data = workdir / ".jobs-data"
    data.mkdir(parents=True)
    (workdir / ".venv").symlink_to(Path(sys.prefix))
    for role, token in (("client", CLIENT_TOKEN), ("admin", ADMIN_TOKEN), ("worker", WORKER_TOKEN)):
        path = data / f"{role}.token"
        path.write_text(token + "\n")
        path.chmod(0o600)
    return Reader(workdir, target)


@pytest.fixture(scope="module")
def blocks() -> dict[str, list[str]]:
    return documented_blocks()


def run_of(runs: list[Run], *words: str) -> Run:
    """The last run whose command contains every word."""
    matching = [r for r in runs if all(w in r.command for w in words)]
    assert matching, f"no documented command with {words}"
    return matching[-1]


def test_the_docs_mark_their_runnable_examples(blocks: dict[str, list[str]]) -> None:
    assert set(blocks) == EXPECTED_BLOCKS
    assert all(blocks.values())


async def test_quick_start_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp
) -> None:
    runs = await reader.run_block(blocks["quick-start-jobctl"])

    created = run_of(runs, "jobctl create")
    assert created.out.splitlines()[0].startswith("created ")
    assert created.out.splitlines()[-1].split()[1] == "succeeded"
    parent = run_of(runs, "jobctl get <id>").out
    assert re.search(r"^status\s+succeeded$", parent, re.MULTILINE)
    assert re.search(rf"^\s+feynman_result\s+fe_{UUID}\s+\{{", parent, re.MULTILINE)
    assert re.search(r"^\s+focus_item\s+fi_", parent, re.MULTILINE)
    assert re.search(rf"^children\s+{UUID}$", parent, re.MULTILINE)
    child = run_of(runs, "jobctl get <child id>").out
    assert re.search(r"^status\s+succeeded$", child, re.MULTILINE)
    cards = re.findall(rf"^\s+review_card\s+rc_{UUID}_\d\s+\{{", child, re.MULTILINE)
    assert 1 <= len(cards) <= 3
    listed = run_of(runs, "jobctl list").out.splitlines()
    assert listed[0].split()[:3] == ["ID", "TYPE", "STATUS"]
    assert {line.split()[1] for line in listed[1:]} == {
        "feynman_evaluation",
        "review_card_generation",
    }


async def test_quick_start_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp
) -> None:
    runs = await reader.run_block(blocks["quick-start-grpcurl"])

    statuses = [m["job"]["status"] for m in run_of(runs, "WatchJob").messages()]  # type: ignore[index]
    assert statuses[-1] == "JOB_STATUS_SUCCEEDED"
    [job] = [m["job"] for m in run_of(runs, "GetJob").messages()]
    assert job["status"] == "JOB_STATUS_SUCCEEDED"  # type: ignore[index]
    assert [a["artifact_type"] for a in job["artifacts"]] == ["synthetic_result"]  # type: ignore[index]


async def test_diagnose_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp
) -> None:
    runs = await reader.run_block(blocks["diagnose-grpcurl"])

    assert "jobs.v1.JobService" in run_of(runs, " list").out.split()
    assert "rpc WatchJob" in run_of(runs, "describe").out
    assert run_of(runs, "Health/Check").messages() == [{"status": "SERVING"}]
    watched = [m["job"]["status"] for m in run_of(runs, "WatchJob").messages()]  # type: ignore[index]
    assert watched[-1] == "JOB_STATUS_SUCCEEDED"
    cancelled = run_of(runs, "CancelJob").messages()[0]["job"]["status"]  # type: ignore[index]
    assert cancelled in ("JOB_STATUS_CANCEL_REQUESTED", "JOB_STATUS_CANCELLED")
    assert len(run_of(runs, "JobService/ListJobs").messages()[0]["jobs"]) == 2  # type: ignore[arg-type]
    admin_view = run_of(runs, "AdminService/GetJob").messages()[0]["job"]
    assert admin_view["trigger"] == "api"  # type: ignore[index]


async def test_a_feynman_evaluation_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp
) -> None:
    runs = await reader.run_block(blocks["feynman-grpcurl"])

    parent = run_of(runs, "GetJob", "<id>").messages()[0]["job"]
    assert parent["status"] == "JOB_STATUS_SUCCEEDED"  # type: ignore[index]
    types = {a["artifact_type"] for a in parent["artifacts"]}  # type: ignore[index]
    assert {"feynman_result", "focus_item"} <= types
    assert len(parent["child_job_ids"]) == 1  # type: ignore[index, arg-type]
    child = run_of(runs, "GetJob", "<child id>").messages()[0]["job"]
    assert child["status"] == "JOB_STATUS_SUCCEEDED"  # type: ignore[index]
    assert child["parent_job_id"] == parent["id"]  # type: ignore[index]
    cards = [a for a in child["artifacts"] if a["artifact_type"] == "review_card"]  # type: ignore[index]
    assert 1 <= len(cards) <= 3


async def test_credentials_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp
) -> None:
    runs = await reader.run_block(blocks["credentials-grpcurl"])

    stored = run_of(runs, "PutCredential").messages()[0]["credential"]
    assert "api_key" not in stored  # type: ignore[operator]
    job = run_of(runs, "GetJob").messages()[0]["job"]
    assert job["status"] == "JOB_STATUS_SUCCEEDED"  # type: ignore[index]
    assert job["credential_mode"] == "CREDENTIAL_MODE_USER"  # type: ignore[index]
    [artifact] = job["artifacts"]  # type: ignore[index]
    # synthetic puts the fingerprint of the key it was given in its artifact
    assert artifact["payload"]["api_key"] == stored["fingerprint"]  # type: ignore[index]


async def test_usage_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["usage-grpcurl"])

    job_id = reader.placeholders["<id>"]
    calls, cost = await db.fetchrow(
        "SELECT count(*), sum(cost_usd) FROM usage_logs WHERE job_id = $1", job_id
    )
    assert calls >= 1
    groups = run_of(runs, "USAGE_GROUPING_JOB_TYPE").messages()[0]["groups"]
    [evaluation] = [g for g in groups if g["job_type"] == "feynman_evaluation"]  # type: ignore[union-attr, index]
    # the finished parent's calls, to the micro-dollar (its child may still be running)
    assert evaluation["totals"]["calls"] == str(calls)  # type: ignore[index]
    assert evaluation["totals"]["cost_usd"] == f"{cost:.6f}"  # type: ignore[index]
    everyone = run_of(runs, "USAGE_GROUPING_USER").messages()[0]["groups"]
    assert "u7" in {g["user_id"] for g in everyone}  # type: ignore[union-attr, index]


async def test_scheduling_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["scheduling-jobctl"])

    [delayed, urgent] = [r for r in runs if "jobctl create" in r.command]
    delayed_id, urgent_id = (re.findall(UUID, r.out)[0] for r in (delayed, urgent))
    assert re.search(r"^status\s+created$", delayed.out, re.MULTILINE)
    row = await db.fetchrow(
        "SELECT status, next_run_at - created_at AS ahead FROM jobs WHERE id = $1", delayed_id
    )
    assert row is not None and row["status"] == "created"
    assert 85 < row["ahead"].total_seconds() <= 90
    [first_get, second_get] = [r.out for r in runs if "jobctl get" in r.command]
    assert re.search(r"^next run\s+\d{4}-", first_get, re.MULTILINE)
    assert re.search(r"^waiting\s+not_due$", first_get, re.MULTILINE)
    assert urgent_id in second_get
    assert re.search(r"^waiting\s+queue_paused$", second_get, re.MULTILINE)
    assert re.search(r"^priority\s+5$", second_get, re.MULTILINE)
    queues = run_of(runs, "jobctl queues").out.splitlines()
    assert queues[0].split()[:6] == ["QUEUE", "PAUSED", "WAITING", "ELIGIBLE", "RUNNING", "LIMIT"]
    assert run_of(runs, "jobctl pause").out.startswith("paused ai-interactive")
    assert run_of(runs, "jobctl resume").out.startswith("resumed ai-interactive")
    assert await db.fetchval("SELECT paused FROM queue_controls") is False
    # make run configures no rate limit: the command says so
    assert "JOBS_RATE_LIMITS is empty" in run_of(runs, "jobctl rate-limits").out


async def test_scheduling_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["scheduling-grpcurl"])

    created = run_of(runs, "CreateJob").messages()[0]["job"]
    assert created["status"] == "JOB_STATUS_CREATED"  # type: ignore[index]
    assert created["priority"] == 5  # type: ignore[index]
    hold = run_of(runs, "AdminService/GetJob").messages()[0]["job"]["hold"]  # type: ignore[index]
    assert hold["reason"] == "REASON_NOT_DUE"  # type: ignore[index]
    assert hold["until"] == created["next_run_at"]  # type: ignore[index]
    paused = run_of(runs, "PauseQueue").messages()[0]["queue"]
    assert paused["paused"] is True and paused["paused_by"] == "test-admin"  # type: ignore[index]
    listed = {q["name"]: q for q in run_of(runs, "ListQueues").messages()[0]["queues"]}  # type: ignore[union-attr]
    assert listed["ai-interactive"]["paused"] is True
    assert listed["ai-interactive"]["waiting"] == "1"  # int64: a JSON string
    assert "paused" not in run_of(runs, "ResumeQueue").messages()[0]["queue"]  # type: ignore[operator]
    assert run_of(runs, "ListRateLimits").messages() == [{}]  # none configured
    assert await db.fetchval("SELECT paused FROM queue_controls") is False


async def test_operating_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["operating-jobctl"])

    created_id = re.findall(UUID, run_of(runs, "jobctl create").out)[0]
    assert run_of(runs, "jobctl cancel").out.split() == [created_id, "cancelled"]
    retried_id = run_of(runs, "jobctl retry").out.split()[-1]
    assert (
        await db.fetchval("SELECT retried_from_job_id::text FROM jobs WHERE id = $1", retried_id)
        == created_id
    )
    listed = [json.loads(line) for line in run_of(runs, "-o jsonl").out.splitlines()]
    assert [j["id"] for j in listed] == [created_id]
    dead = run_of(runs, "dead-letters list").out
    assert dead.startswith("failed jobs\nnone\n\ndead outbox events\nnone")
    assert run_of(runs, "redrive --all").out.startswith("redriven 0 events")


async def test_bulk_operations_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["bulk-jobctl"])

    job_id = await db.fetchval("SELECT id::text FROM jobs ORDER BY created_at LIMIT 1")
    # the dry run lists what it would touch, by short id
    assert run_of(runs, "--dry-run").out.splitlines() == [
        "1 job matches; cancelled none (dry run)",
        f"  {job_id[-8:]}",
    ]
    assert run_of(runs, "--reason").out.strip() == "cancelled 1 job (0 already finished, left)"
    assert run_of(runs, "retry-many").out.strip() == "retried 1 job as a new job (0 refused)"
    statuses = [r["status"] for r in await db.fetch("SELECT status FROM jobs ORDER BY created_at")]
    assert len(statuses) == 2 and statuses[0] == "cancelled"  # and its retry, a new job


async def test_credentials_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp
) -> None:
    runs = await reader.run_block(blocks["credentials-jobctl"])

    key = "sk-test-0123456789"
    put = run_of(runs, "credentials put")
    [verb, credential_id, provider, fingerprint] = put.out.split()
    assert (verb, provider) == ("stored", "deepseek")
    assert fingerprint == "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:16]
    created = run_of(runs, "jobctl create")
    assert created.out.splitlines()[-1].split()[1] == "succeeded"
    assert credential_id in run_of(runs, "credentials list").out
    assert run_of(runs, "credentials delete").out.strip() == f"deleted {credential_id}"
    assert not any(key in r.out + r.err for r in runs if "printf" not in r.command)


async def test_use_it_from_python(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    [run] = await reader.run_block(blocks["python-client"])

    # the watched job's states, the last one terminal and shown once (JOB_STATUS_SUCCEEDED = 6)
    states = [line.split()[0] for line in run.out.splitlines()[:-1]]
    assert states and states[-1] == "6" and states.count("6") == 1
    assert "input.sleep_ms" in run.out.splitlines()[-1]  # the refusal's field violation
    # the first create and the 50 of create_many (a default stack lets a user have 100
    # unfinished jobs); the refused one stored nothing
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE user_id = 'u1'") == 51
    keys = await db.fetchval(
        "SELECT count(*) FROM jobs WHERE user_id = 'u1' AND idempotency_key LIKE 'client-%'"
    )
    assert keys == 51  # made by the client, so that a retry never makes two


async def test_bulk_cancel_and_retry_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["bulk-grpcurl"])  # no worker: the jobs wait

    [dry, cancel] = [r.messages()[0] for r in runs if "CancelJobs" in r.command]
    assert (dry["matched"], dry["cancelled"]) == ("2", 2)  # int64: a JSON string
    assert cancel["cancelled"] == 2 and "next_page_token" not in cancel
    retried = run_of(runs, "RetryJobs").messages()[0]
    assert retried["retried"] == 2
    assert sorted(o["job_id"] for o in retried["outcomes"]) == sorted(cancel["job_ids"])  # type: ignore[union-attr]
    job = run_of(runs, "AdminService/GetJob").messages()[0]["job"]
    assert job["status"] == "JOB_STATUS_CANCELLED"  # type: ignore[index]
    assert job["events"][-1]["reason"] == "admin test-admin: provider outage"  # type: ignore[index]
    assert await db.fetchval("SELECT count(*) FROM jobs WHERE user_id = 'u7'") == 4


async def test_schedules_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["schedules-grpcurl"])

    created = run_of(runs, "CreateSchedule").messages()[0]
    schedule = created["schedule"]
    assert created["created"] is True  # type: ignore[comparison-overlap]
    assert schedule["spec"]["time_zone"] == "Europe/Berlin"  # type: ignore[index]
    got = run_of(runs, "GetSchedule").messages()[0]
    assert len(got["next_fire_times"]) == 5  # type: ignore[arg-type]
    job = run_of(runs, "TriggerSchedule").messages()[0]["job"]
    assert job["trigger"] == "schedule"  # type: ignore[index]
    assert job["schedule_id"] == schedule["id"]  # type: ignore[index]
    assert run_of(runs, "PauseSchedule").messages()[0]["schedule"]["paused"] is True  # type: ignore[index]
    assert "paused" not in run_of(runs, "ResumeSchedule").messages()[0]["schedule"]  # type: ignore[operator]
    listed = run_of(runs, "ListSchedules").messages()[0]["schedules"]
    assert [s["id"] for s in listed] == [schedule["id"]]  # type: ignore[index, union-attr]
    assert await db.fetchval("SELECT count(*) FROM schedules") == 0  # deleted
    assert await db.fetchval("SELECT schedule_id::text FROM jobs") == schedule["id"]  # type: ignore[index]


async def test_signals_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp
) -> None:
    runs = await reader.run_block(blocks["signals-grpcurl"])

    sent = run_of(runs, "SendSignal").messages()[0]
    assert sent["signal"]["seq"] == "1" and sent["created"] is True  # type: ignore[index]
    job = run_of(runs, "GetJob").messages()[0]["job"]
    assert job["status"] == "JOB_STATUS_SUCCEEDED"  # type: ignore[index]
    assert [(s["seq"], s["name"]) for s in job["signals"]] == [("1", "approve")]  # type: ignore[index]
    assert "payload" not in job["signals"][0]  # type: ignore[index, operator]
    [received] = job["output"]["signals"]  # type: ignore[index]
    assert (received["name"], received["payload"]) == ("approve", {"by": "ada"})


@pytest.fixture
async def slow_worker(nats_url: str, target: str) -> AsyncIterator[WorkerApp]:
    """A worker whose fake provider takes 3 s, streaming its answer in 8 pieces over them:
    the reader's WatchJob starts while the model still writes."""
    settings = worker_settings(nats_url, target, worker_id="slow-worker")
    async with WorkerApp(settings, models=ModelSettings(fake_latency_ms=3000)) as app:
        yield app


async def test_partial_output_with_grpcurl(
    blocks: dict[str, list[str]], reader: Reader, slow_worker: WorkerApp
) -> None:
    runs = await reader.run_block(blocks["partial-output-grpcurl"])

    answers = run_of(runs, "WatchJob").messages()
    partials = [a["partial"] for a in answers if "partial" in a]
    states = [a["job"]["status"] for a in answers if "job" in a]  # type: ignore[index]
    assert states[-1] == "JOB_STATUS_SUCCEEDED"
    assert partials, "no partial output reached the reader"
    assert all(p["text"] and p["attempt"] == 1 for p in partials)  # type: ignore[index]


async def test_schedules_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["schedules-jobctl"])

    created = run_of(runs, "schedule create").out
    assert created.splitlines()[0] == "created"
    schedule_id = reader.placeholders["<schedule id>"]
    assert re.search(r"^time zone\s+Europe/Berlin$", created, re.MULTILINE)
    assert re.search(r"^catch-up\s+3600s$", created, re.MULTILINE)
    got = run_of(runs, "schedule get").out
    fires = got.split("next fire times\n")[1].splitlines()
    assert len([f for f in fires if f.startswith("  ")]) == 5
    assert re.search(r"^cron\s+30 2 \* \* \*$", run_of(runs, "schedule update").out, re.M)
    [word, job_id] = run_of(runs, "schedule trigger").out.split()
    assert word == "triggered"
    assert run_of(runs, "schedule pause").out.split() == [schedule_id, "paused"]
    [header, row] = run_of(runs, "schedule list").out.splitlines()
    assert header.split() == ["ID", "CRON", "TZ", "TYPE", "STATE", "NEXT"]
    assert row.split()[:2] == [schedule_id, "30"] and "paused" in row.split()
    assert run_of(runs, "schedule delete").out.strip() == f"deleted {schedule_id}"
    assert await db.fetchval("SELECT count(*) FROM schedules") == 0
    job = await db.fetchrow("SELECT user_id, schedule_id::text FROM jobs WHERE id = $1", job_id)
    assert dict(job) == {"user_id": "u1", "schedule_id": schedule_id}  # the job stays


async def test_signals_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["signals-jobctl"])

    job_id = reader.placeholders["<id>"]
    first, again = [r.out.strip() for r in runs if "jobctl signal" in r.command]
    assert first == f"sent approve #1 to {job_id}"
    assert again == f"already sent approve #1 to {job_id}"
    assert run_of(runs, "jobctl watch").out.splitlines()[-1].split()[1] == "succeeded"
    assert re.search(r"^signals\s+#1 approve$", run_of(runs, "jobctl get").out, re.MULTILINE)
    stored = await db.fetch("SELECT name, payload FROM job_signals WHERE job_id = $1", job_id)
    assert [(r["name"], json.loads(r["payload"])) for r in stored] == [("approve", {"by": "ada"})]


async def test_usage_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["usage-jobctl"])

    job_id = reader.placeholders["<id>"]
    calls, cost = await db.fetchrow(
        "SELECT count(*), sum(cost_usd) FROM usage_logs WHERE job_id = $1", job_id
    )
    assert calls >= 1
    table = run_of(runs, "--by job-type").out.splitlines()
    header, *rows, total = [line.split() for line in table]
    assert header == USAGE_HEADER
    # the finished parent's calls, to the micro-dollar (its child may still be running)
    [evaluation] = [r for r in rows if r[2] == "feynman_evaluation"]
    assert (evaluation[5], evaluation[9]) == (str(calls), f"{cost:.6f}")
    assert total[0] == "TOTAL" and Decimal(total[-1]) >= cost
    groups = [json.loads(line) for line in run_of(runs, "-o jsonl").out.splitlines()]
    assert groups and all("day" in g and "model" in g for g in groups)
    everyone = run_of(runs, "--all-users").out.splitlines()[1:-1]
    assert "u7" in {line.split()[1] for line in everyone}


async def test_partial_output_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, slow_worker: WorkerApp
) -> None:
    runs = await reader.run_block(blocks["partial-output-jobctl"])

    lines = run_of(runs, "--partial").out.splitlines()
    status = re.compile(r"^\d\d:\d\d:\d\d  [a-z_]+  attempt \d+")
    assert lines[-1].split()[1] == "succeeded"
    text = [line for line in lines if not status.match(line)]
    assert text, "no partial output reached the reader"


async def test_a_knowledge_base_review_with_jobctl(
    blocks: dict[str, list[str]], reader: Reader, worker: WorkerApp, db: asyncpg.Connection
) -> None:
    runs = await reader.run_block(blocks["knowledge-base-jobctl"])

    review_id, plan_id = reader.placeholders["<id>"], reader.placeholders["<plan id>"]
    assert run_of(runs, "jobctl create").out.splitlines()[-1].split()[1] == "succeeded"
    tree = run_of(runs, "jobctl tree").out.splitlines()
    assert tree[0].split() == [review_id[-8:], "knowledge_base_review", "succeeded"]
    children = [re.search(r"\bchild\s+[0-9a-f]{8}\s+([a-z_]+)", line) for line in tree]
    assert sorted(m.group(1) for m in children if m) == sorted(
        ["feynman_evaluation"] * 3 + ["review_card_generation"] * 3 + ["study_plan"]
    )
    assert sum("needs" in line for line in tree) == 3  # the plan's three dependencies
    assert run_of(runs, "jobctl watch <plan id>").out.splitlines()[-1].split()[1] == "succeeded"
    plan = run_of(runs, "jobctl get <plan id>").out
    line = re.search(r"^output\s+(\{.*\})$", plan, re.MULTILINE)
    assert line is not None
    output = json.loads(line.group(1))
    assert (output["items_reviewed"], output["items_failed"]) == (3, 0)
    items = {"ki-photo", "ki-resp", "ki-osmo"}
    assert {w["knowledge_item_id"] for w in output["weakest_items"]} <= items
    assert output["plan"] and {s["knowledge_item_id"] for s in output["plan"]} <= items
    evaluations = await db.fetch(
        "SELECT id::text FROM jobs WHERE parent_job_id = $1 AND job_type = 'feynman_evaluation'",
        review_id,
    )
    depends_on = re.search(r"^depends on\s+(.+)$", plan, re.MULTILINE)
    assert depends_on is not None
    assert sorted(depends_on.group(1).split()) == sorted(r["id"] for r in evaluations)
    # the plan never ran before the last evaluation ended
    last_ended = await db.fetchval(
        "SELECT max(finished_at) FROM jobs WHERE parent_job_id = $1 AND job_type = $2",
        review_id,
        "feynman_evaluation",
    )
    started = await db.fetchval("SELECT started_at FROM jobs WHERE id = $1", plan_id)
    assert started >= last_ended
