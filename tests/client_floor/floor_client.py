"""What a consumer on the client's lowest supported versions does, run by the floor venv's
Python (``make test-client-floor``), never by the main venv's: it imports only the installed
durable_jobs_client and the standard library.

Settings come from the environment as a consumer's would (``JOBS_JOB_SERVICE_TARGET``,
``JOBS_AUTH_TOKEN_FILE``), plus ``JOBS_FLOOR_USER_ID`` and ``JOBS_FLOOR_ADMIN_TOKEN_FILE``.
One JSON line per step on stdout: test_client_floor.py checks them against the service.
A step that goes otherwise than expected raises (exit status 1, the traceback on stderr).
"""

from __future__ import annotations

import asyncio
import json
import os
import pkgutil
import sys
import uuid
from importlib import import_module, metadata
from pathlib import Path
from typing import Any

import durable_jobs_client
from durable_jobs_client import (
    AsyncJobsClient,
    InvalidInput,
    JobNotFound,
    JobsClient,
    JobsError,
    Unauthenticated,
    UnknownJobType,
    create_request,
    to_python,
)
from durable_jobs_client.statuses import TERMINAL

USER = os.environ["JOBS_FLOOR_USER_ID"]
INPUT = {"sleep_ms": 200}
DISTRIBUTIONS = ("protobuf", "grpcio", "googleapis-common-protos", "durable-jobs-client")


def emit(step: str, **fields: Any) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


def every_module() -> list[str]:
    """Imports each module of the installed package, the generated stubs included (their
    version checks run at import)."""
    names = [durable_jobs_client.__name__]
    prefix = durable_jobs_client.__name__ + "."
    for module in pkgutil.walk_packages(durable_jobs_client.__path__, prefix):
        import_module(module.name)
        names.append(module.name)
    return names


def refusal(error: JobsError) -> dict[str, Any]:
    return {
        "class": type(error).__name__,
        "reason": error.reason,
        "code": error.code.name if error.code else None,
        "fields": [violation.field for violation in error.violations],
    }


def expect_refusal(kind: type[JobsError], call: Any) -> dict[str, Any]:
    try:
        call()
    except kind as error:
        return refusal(error)
    raise AssertionError(f"{call} was not refused with {kind.__name__}")


def blocking() -> None:
    with JobsClient(user_id=USER) as jobs:
        created = jobs.create("synthetic", INPUT)
        assert created.created, created
        job_id = created.job.id
        emit("create", job_id=job_id)
        statuses = [job.status for job in jobs.watch(job_id)]
        assert statuses and statuses[-1] in TERMINAL, statuses
        emit("watch", statuses=statuses)
        job = jobs.get(job_id)
        emit("get", job_id=job.id, status=job.status, output=to_python(job.output))
        emit("list", job_ids=[summary.id for summary in jobs.list()])

        emit(
            "unknown_job_type",
            **expect_refusal(UnknownJobType, lambda: jobs.create("no_such_job_type", INPUT)),
        )
        emit(
            "invalid_input",
            **expect_refusal(InvalidInput, lambda: jobs.create("synthetic", {"sleep_ms": -1})),
        )
        missing = str(uuid.uuid4())
        emit("job_not_found", **expect_refusal(JobNotFound, lambda: jobs.get(missing)))

        # CreateJobs answers each request with a job or a google.rpc.Status of its own
        results = jobs.create_many(
            [
                create_request(USER, "synthetic", INPUT),
                create_request(USER, "synthetic", {"sleep_ms": -1}),
            ]
        )
        first, second = results
        assert not isinstance(first, JobsError), first
        assert isinstance(second, InvalidInput), second
        emit("create_many", job_id=first.job.id, refused=refusal(second))

    with JobsClient(user_id=USER, token="not-a-token") as stranger:
        emit(
            "unauthenticated",
            **expect_refusal(Unauthenticated, lambda: stranger.create("synthetic", INPUT)),
        )


async def asynchronous(admin_token: str) -> None:
    async with AsyncJobsClient(user_id=USER) as jobs:
        job_id = (await jobs.create("synthetic", INPUT)).job.id
        done = await jobs.wait(job_id, timeout=60)
        emit("async_wait", job_id=job_id, status=done.status, output=to_python(done.output))
    async with AsyncJobsClient(token=admin_token) as operator:
        definitions = await operator.admin.list_job_definitions()
        emit("admin", job_types=sorted(d.job_type for d in definitions))


def main() -> None:
    emit(
        "versions",
        **{name: metadata.version(name) for name in DISTRIBUTIONS},
        python=sys.version.split()[0],
        package=str(Path(durable_jobs_client.__file__).parent),
        client_version=durable_jobs_client.__version__,
    )
    emit("imports", modules=every_module())
    blocking()
    admin_token = Path(os.environ["JOBS_FLOOR_ADMIN_TOKEN_FILE"]).read_text().strip()
    asyncio.run(asynchronous(admin_token))
    emit("done")


if __name__ == "__main__":
    main()
