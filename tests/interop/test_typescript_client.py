"""A second language proves the contract (issue 26): the TypeScript client of
``interop/typescript``, generated from ``proto/`` with npm-installed tools (protoc-gen-es run by
buf, Connect's gRPC transport), against ``make run``'s stack (``python -m devstack`` as a user
starts it, in a private data directory on free ports).

The client creates a job, watches it to SUCCEEDED and checks its output hash, then reads the
ErrorInfo (and BadRequest) of bad requests; it prints one JSON line per step, which this test
checks against what the Python side sees. Run it with ``make test-interop`` (CI: ``.ci/run``);
plain ``make test`` does not collect this directory and needs no Node.js.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from shared.output_hash import output_hash
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import dict_from_struct
from tests.support.devstack_harness import Devstack, private_devstack
from tests.support.stack import Client, open_channel

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "interop" / "typescript"
ARTIFACTS = ROOT / "artifacts" / "interop"
USER = "interop-typescript"
# npm ci again only when package-lock.json changed since node_modules was installed from it
INSTALLED_FROM = PROJECT / "node_modules" / ".installed-from-lock-sha256"

pytestmark = [
    # `make test` collects tests/ and must not need Node.js: only `make test-interop` sets this
    pytest.mark.skipif(
        os.environ.get("JOBS_TEST_INTEROP") != "1",
        reason="the TypeScript client's test: run `make test-interop` (sets JOBS_TEST_INTEROP=1)",
    ),
    pytest.mark.skipif(
        shutil.which("node") is None or shutil.which("npm") is None,
        reason="needs Node.js (>= 20) and npm on PATH; `make test-interop` runs it in CI",
    ),
    # the first run installs the npm packages (about 10 s here, longer on a cold cache)
    pytest.mark.timeout(300),
]


def npm(*args: str) -> None:
    result = subprocess.run(
        ["npm", *args], cwd=PROJECT, capture_output=True, text=True, timeout=240, check=False
    )
    assert result.returncode == 0, f"npm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"


def build_client() -> None:
    """npm ci (only when node_modules is missing or from another lock), then the generation
    from proto/ (every run: the protos may have changed) and tsc."""
    lock = hashlib.sha256((PROJECT / "package-lock.json").read_bytes()).hexdigest()
    if not INSTALLED_FROM.exists() or INSTALLED_FROM.read_text() != lock:
        # --ignore-scripts: nothing in the lock needs an install script (buf's wrapper
        # finds its platform binary without one)
        npm("ci", "--ignore-scripts", "--no-audit", "--no-fund")
        INSTALLED_FROM.write_text(lock)
    npm("run", "generate")
    npm("run", "build")


@pytest.fixture(scope="module")
def stack() -> Iterator[Devstack]:
    with private_devstack("jobs-interop-", ARTIFACTS) as stack:
        yield stack


@pytest.fixture(scope="module")
async def client(stack: Devstack) -> None:
    """The built TypeScript client, with the stack ready: the build runs while it starts."""
    await asyncio.to_thread(build_client)
    await stack.ready()


class Run(NamedTuple):
    status: int
    lines: list[dict[str, Any]]
    stderr: str


async def run_client(stack: Devstack, name: str, **env: str) -> Run:
    """``node dist/main.js`` against the stack: its exit status, its JSON lines (kept in
    artifacts/interop/<name>.jsonl) and what it wrote to stderr."""
    process = await asyncio.create_subprocess_exec(
        "node",
        "dist/main.js",
        cwd=PROJECT,
        env={
            **os.environ,
            "JOBS_JOB_SERVICE_TARGET": stack.target,
            "JOBS_AUTH_TOKEN_FILE": str(stack.token_file("client")),
            "JOBS_INTEROP_USER_ID": USER,
            **env,
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 90)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}.jsonl").write_bytes(stdout)
    try:
        lines = [json.loads(line) for line in stdout.decode().splitlines()]
    except json.JSONDecodeError as exc:
        raise AssertionError(f"not one JSON object a line: {stdout!r} {stderr!r}") from exc
    assert process.returncode is not None
    return Run(process.returncode, lines, stderr.decode(errors="replace"))


def one(lines: list[dict[str, Any]], step: str) -> dict[str, Any]:
    found = [line for line in lines if line["step"] == step]
    assert len(found) == 1, (step, lines)
    return found[0]


@pytest.mark.usefixtures("client")
async def test_typescript_client_creates_watches_and_reads_error_details(stack: Devstack) -> None:
    status, lines, stderr = await run_client(stack, "client")

    assert status == 0, (lines, stderr)
    assert all(line["ok"] for line in lines), lines
    steps = [line["step"] for line in lines]
    assert [step for step in steps if step != "watch"] == [
        "create",
        "succeeded",
        "unknown_job_type",
        "invalid_input",
        "unauthenticated",
        "done",
    ]
    # every state watched between the create and the success
    assert steps[1 : steps.index("succeeded")] == ["watch"] * steps.count("watch") != []
    job_id = one(lines, "create")["job_id"]
    watched = [line for line in lines if line["step"] == "watch"]
    assert {line["job_id"] for line in watched} == {job_id}
    assert watched[-1]["status"] == "JOB_STATUS_SUCCEEDED"
    succeeded = one(lines, "succeeded")
    # what the TypeScript client read is what the service holds, and both languages hash
    # the output alike (RFC 8785)
    token = stack.token("client")
    async with open_channel(stack.target, token) as channel:
        rpc = Client(channel)
        job = await rpc.get(job_id, user_id=USER)
        listed = await rpc.jobs.ListJobs(jpb.ListJobsRequest(user_id=USER))
    assert job.status == job_pb2.JOB_STATUS_SUCCEEDED
    assert succeeded["output"] == dict_from_struct(job.output) != {}
    assert succeeded["output_hash"] == job.output_hash == output_hash(succeeded["output"])
    # the refused creates wrote nothing: the user has the one job
    assert [summary.id for summary in listed.jobs] == [job_id]

    for step, reason in (
        ("unknown_job_type", "UNKNOWN_JOB_TYPE"),
        ("invalid_input", "INVALID_INPUT"),
        ("unauthenticated", "UNAUTHENTICATED"),
    ):
        refused = one(lines, step)
        assert (refused["reason"], refused["domain"]) == (reason, "jobs.v1.JobService"), refused
    assert one(lines, "unknown_job_type")["code"] == "NotFound"  # no worker declared it
    assert one(lines, "unauthenticated")["code"] == "Unauthenticated"
    invalid = one(lines, "invalid_input")
    assert invalid["code"] == "InvalidArgument"
    assert "input.sleep_ms" in [v["field"] for v in invalid["field_violations"]], invalid
    assert "input.sleep_ms" in invalid["metadata"]["field"].split(","), invalid


@pytest.mark.usefixtures("client")
async def test_typescript_client_fails_on_a_refusal_it_did_not_expect(stack: Devstack) -> None:
    # the client's checks can fail: an unknown token refuses its first call
    status, lines, stderr = await run_client(
        stack, "unknown-token", JOBS_AUTH_TOKEN_FILE="", JOBS_AUTH_TOKEN="wrong"
    )

    assert status == 1, (lines, stderr)
    assert [(line["step"], line["ok"]) for line in lines] == [("create", False)]
    assert "a valid bearer token is required" in lines[0]["error"], lines
