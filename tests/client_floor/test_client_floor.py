"""The client on its lowest supported versions (issue 26, item 6): protobuf, grpcio and
googleapis-common-protos exactly at the floors client/pyproject.toml declares, in a venv of
their own with the client installed from client/ as a consumer installs it (not editable),
against ``make run``'s stack (``python -m devstack`` started by the main venv, in a private
data directory on free ports).

The floor venv's Python runs floor_client.py: it imports every module of the package (the
generated stubs' runtime version checks run at import), creates a job, watches it to the
end, reads it and lists it, reads the ErrorInfo and BadRequest of refusals (CreateJobs'
per-request google.rpc.Status too), and does the same over asyncio and an AdminService call.
This side checks its JSON lines against what the service holds, read with the main venv's
client on the newest protobuf. ``make test-client-floor`` builds the venv and sets
JOBS_CLIENT_FLOOR_PYTHON; plain ``make test`` does not collect this directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import pkgutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from durable_jobs_client import AsyncJobsClient, JobStatus, to_python

from tests.client_floor.floors import CLIENT, floors
from tests.support.devstack_harness import EXTERNAL as STACK_EXTERNAL
from tests.support.devstack_harness import Devstack, private_devstack

# absolute, not resolved: the venv's python is a symlink to the interpreter it was made from
FLOOR_VENV_PYTHON = os.environ.get("JOBS_CLIENT_FLOOR_PYTHON", "")
FLOOR_PYTHON = str(Path(FLOOR_VENV_PYTHON).absolute()) if FLOOR_VENV_PYTHON else ""
SCRIPT = Path(__file__).with_name("floor_client.py")
ARTIFACTS = CLIENT.parent / "artifacts" / "client-floor"
USER = "client-floor"
# what would point the stack or the floor client elsewhere than at each other
EXTERNAL = (
    *STACK_EXTERNAL,
    "JOBS_AUTH_TOKEN",
    "JOBS_TLS_CA_FILE",
    "JOBS_TLS_CERT_FILE",
    "JOBS_TLS_KEY_FILE",
    "PYTHONPATH",
)

pytestmark = [
    pytest.mark.skipif(
        not FLOOR_PYTHON,
        reason="the client on its floor versions: run `make test-client-floor` (builds the "
        "venv, sets JOBS_CLIENT_FLOOR_PYTHON)",
    ),
    # the stack's start (about 15 s here) and the floor client's run
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="module")
def stack() -> Iterator[Devstack]:
    with private_devstack("jobs-client-floor-", ARTIFACTS, without=EXTERNAL) as stack:
        yield stack


@pytest.fixture(scope="module")
async def lines(stack: Devstack) -> dict[str, dict[str, Any]]:
    """floor_client.py's steps by name, run once by the floor venv's Python (from a folder
    of its own, so that nothing of the checkout is importable)."""
    await stack.ready()
    env = {k: v for k, v in os.environ.items() if k not in EXTERNAL}
    env |= {
        "JOBS_JOB_SERVICE_TARGET": stack.target,
        "JOBS_AUTH_TOKEN_FILE": str(stack.token_file("client")),
        "JOBS_FLOOR_ADMIN_TOKEN_FILE": str(stack.token_file("admin")),
        "JOBS_FLOOR_USER_ID": USER,
    }
    process = await asyncio.create_subprocess_exec(
        FLOOR_PYTHON,
        str(SCRIPT),
        cwd=stack.data_dir,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 180)
    except TimeoutError:
        process.kill()
        stdout, stderr = await process.communicate()
        stderr += b"\n(killed: still running after 180 s)"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "floor_client.jsonl").write_bytes(stdout)
    assert process.returncode == 0, f"{stdout.decode()}\n{stderr.decode(errors='replace')}"
    steps = [json.loads(line) for line in stdout.decode().splitlines()]
    by_name = {step.pop("step"): step for step in steps}
    assert len(by_name) == len(steps), steps
    assert "done" in by_name, steps
    return by_name


def _client_modules() -> set[str]:
    """Every module of durable_jobs_client in the checkout (client/)."""
    package = CLIENT / "durable_jobs_client"
    found = {"durable_jobs_client"}
    for module in pkgutil.walk_packages([str(package)], "durable_jobs_client."):
        found.add(module.name)
    return found


def test_the_floor_venv_holds_exactly_the_floors(lines: dict[str, dict[str, Any]]) -> None:
    versions = lines["versions"]
    assert {name: versions[name] for name in floors()} == floors()
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert versions["durable-jobs-client"] == versions["client_version"] == project["version"]
    # the installed copy, not the checkout's client/ (the main venv's is editable)
    installed = Path(versions["package"])
    assert installed.is_relative_to(Path(FLOOR_PYTHON).parents[1]), installed
    assert not installed.is_relative_to(CLIENT), installed


def test_every_module_of_the_client_imports_on_the_floor(lines: dict[str, dict[str, Any]]) -> None:
    imported = set(lines["imports"]["modules"])
    assert imported == _client_modules()
    assert "durable_jobs_client._pb.jobs.v1.job_service_pb2_grpc" in imported


async def test_a_job_runs_through_on_the_floor(
    lines: dict[str, dict[str, Any]], stack: Devstack
) -> None:
    job_id = lines["create"]["job_id"]
    statuses = lines["watch"]["statuses"]
    assert statuses[-1] == JobStatus.JOB_STATUS_SUCCEEDED, statuses
    assert len(statuses) == len(set(statuses)), statuses  # no state shown twice
    # what the floor client read is what the service holds, as the newest protobuf reads it
    token = stack.token("client")
    async with AsyncJobsClient(stack.target, user_id=USER, token=token) as jobs:
        job = await jobs.get(job_id)
        awaited = await jobs.get(lines["async_wait"]["job_id"])
        listed = [summary.id async for summary in jobs.list()]
    got = lines["get"]
    assert (got["job_id"], got["status"]) == (job_id, JobStatus.JOB_STATUS_SUCCEEDED)
    assert got["output"] == _output(job) != {}
    assert lines["async_wait"]["status"] == awaited.status == JobStatus.JOB_STATUS_SUCCEEDED
    assert lines["async_wait"]["output"] == _output(awaited)
    # listed then: the first job; the later ones (CreateJobs', the async one) since
    later = {lines["create_many"]["job_id"], awaited.id}
    assert lines["list"]["job_ids"] == [job_id]
    assert set(listed) == {job_id, *later}
    assert "synthetic" in lines["admin"]["job_types"]


def _output(job: Any) -> Any:
    return to_python(job.output)


def test_refusals_are_read_from_their_error_info_on_the_floor(
    lines: dict[str, dict[str, Any]],
) -> None:
    unknown = lines["unknown_job_type"]
    # NOT_FOUND since the workers declare job types (it was INVALID_ARGUMENT; docs/api.md)
    assert (unknown["class"], unknown["reason"], unknown["code"]) == (
        "UnknownJobType",
        "UNKNOWN_JOB_TYPE",
        "NOT_FOUND",
    )
    invalid = lines["invalid_input"]
    assert (invalid["class"], invalid["reason"], invalid["code"]) == (
        "InvalidInput",
        "INVALID_INPUT",
        "INVALID_ARGUMENT",
    )
    assert "input.sleep_ms" in invalid["fields"], invalid  # BadRequest's field violations
    missing = lines["job_not_found"]
    assert (missing["class"], missing["reason"], missing["code"]) == (
        "JobNotFound",
        "JOB_NOT_FOUND",
        "NOT_FOUND",
    )
    # a refused item of CreateJobs: its google.rpc.Status in the answer, not the call's
    refused = lines["create_many"]["refused"]
    assert (refused["class"], refused["reason"], refused["code"]) == (
        "InvalidInput",
        "INVALID_INPUT",
        "INVALID_ARGUMENT",
    )
    assert "input.sleep_ms" in refused["fields"], refused
    stranger = lines["unauthenticated"]
    assert (stranger["class"], stranger["reason"], stranger["code"]) == (
        "Unauthenticated",
        "UNAUTHENTICATED",
        "UNAUTHENTICATED",
    )
