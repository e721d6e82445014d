"""Issue 41, done when: the job service runs no job type code. It is started as a process of
its own with ``jobtypes`` not importable (an import guard refuses it, and any module
JOBS_JOB_TYPE_MODULES names, and writes down every attempt), and serves; a team's job type
whose module is on the path of a worker process only, started after the job service, is
unknown until that worker declares it, then refused for bad input (INVALID_ARGUMENT
naming the field, nothing written) and run to SUCCEEDED with its output and artifact for
good input — over real PostgreSQL and NATS, each service a separate process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import grpc
import pytest
from google.protobuf import json_format

from devstack.embedded.ports import free_port
from shared.pb.jobs.v1 import job_pb2
from tests.chaos.cluster import wait_serving
from tests.support.bad_input import reasons, violated_fields
from tests.support.processes import JobServiceProcess, WorkerProcess
from tests.support.stack import Client, count_rows, open_channel
from tests.support.wait import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TEAM_TYPE = "team_word_count"
CREATE = "/jobs.v1.JobService/CreateJob"

# Installed in the job service's process before anything else runs (site imports a
# sitecustomize from PYTHONPATH): refuses the shipped job types and the team's modules, as
# if the job service's image did not carry them, and writes each attempt down, so that an
# import swallowed by an ``except ImportError`` is seen too.
IMPORT_GUARD = """
import os
import sys
from importlib.abc import MetaPathFinder

_LOG = os.environ["IMPORT_GUARD_LOG"]
_NAMED = os.environ.get("JOBS_JOB_TYPE_MODULES", "").split(",")
_REFUSED = {"jobtypes", *(name.strip().split(".")[0] for name in _NAMED if name.strip())}


def _note(line):
    with open(_LOG, "a") as log:
        log.write(line + "\\n")


class RefuseJobTypes(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _REFUSED:
            _note("refused " + name)
            raise ModuleNotFoundError(f"No module named {name!r} (import guard)", name=name)
        return None


sys.meta_path.insert(0, RefuseJobTypes())
_note("installed")
"""

# A team's job type, written by the test into a folder only the worker's PYTHONPATH names.
TEAM_MODULE = '''
"""team_word_count: how many words a text has, and its most frequent ones."""

from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from shared.constants import Queue
from shared.registry import ArtifactDraft, ExecutionContext, JobDefinition, JobResult


class WordCountInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=10_000)
    top: int = Field(default=2, ge=1, le=10)


class WordCountOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    words: int
    distinct: int


async def execute(job_input: WordCountInput, ctx: ExecutionContext) -> JobResult:
    counts = Counter(job_input.text.lower().split())
    top = [[word, n] for word, n in counts.most_common(job_input.top)]
    return JobResult(
        output=WordCountOutput(words=sum(counts.values()), distinct=len(counts)),
        artifacts=[
            ArtifactDraft(
                artifact_type="word_counts", artifact_id=f"wc_{ctx.job_id}", payload={"top": top}
            )
        ],
    )


DEFINITION = JobDefinition(
    job_type="team_word_count",
    label="Word count",
    domain="text",
    version="1",
    queue=Queue.INTERACTIVE,
    input_model=WordCountInput,
    output_model=WordCountOutput,
    execute=execute,
    timeout_s=20.0,
    max_attempts=2,
    backoff_base_s=0.2,
    backoff_max_s=1.0,
)
'''


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """The import guard's folder (the job service's PYTHONPATH) and the team module's (the
    worker's)."""
    guard, team = tmp_path / "guard", tmp_path / "team"
    guard.mkdir()
    team.mkdir()
    (guard / "sitecustomize.py").write_text(IMPORT_GUARD)
    (team / f"{TEAM_TYPE}.py").write_text(TEAM_MODULE)
    yield guard, team


def guarded_env(guard: Path, log: Path) -> dict[str, str]:
    # JOBS_JOB_TYPE_MODULES set as a careless deployment would: the job service must not
    # read it (and could not import what it names)
    return {
        "PYTHONPATH": str(guard),
        "IMPORT_GUARD_LOG": str(log),
        "JOBS_JOB_TYPE_MODULES": TEAM_TYPE,
    }


def test_the_import_guard_refuses_the_job_types(folders: tuple[Path, Path], tmp_path: Path) -> None:
    """The guard works: the job service's environment cannot import a job type."""
    guard, _ = folders
    log = tmp_path / "probe.log"
    for module in ("jobtypes.synthetic", TEAM_TYPE):
        probe = subprocess.run(
            [sys.executable, "-c", f"import {module}"],
            env={"PATH": "/usr/bin:/bin", **guarded_env(guard, log)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert probe.returncode == 1 and "(import guard)" in probe.stderr, probe.stderr
    assert log.read_text().splitlines() == [
        "installed",
        "refused jobtypes",
        "installed",
        f"refused {TEAM_TYPE}",
    ]


async def test_a_type_only_a_later_worker_declares_is_checked_and_run_by_a_job_service_without_job_type_code(  # noqa: E501
    folders: tuple[Path, Path],
    tmp_path: Path,
    database_url: str,
    nats_url: str,
    db: asyncpg.Connection,
) -> None:
    guard, team = folders
    guard_log = tmp_path / "guard.log"
    service = JobServiceProcess(
        tmp_path, "js-generic", database_url, nats_url, free_port(), **guarded_env(guard, guard_log)
    )
    worker: WorkerProcess | None = None
    try:
        await wait_serving(service.target, service)
        async with open_channel(service.target) as channel:
            client = Client(channel)
            # before any worker declared it: unknown, and said so
            before = await count_rows(database_url)
            with pytest.raises(grpc.aio.AioRpcError) as unknown:
                await client.create(job_type=TEAM_TYPE, text="too early")
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
            assert f"no worker has declared job type '{TEAM_TYPE}'" in str(unknown.value.details())
            assert reasons(unknown.value, CREATE) == ["UNKNOWN_JOB_TYPE"]
            assert await count_rows(database_url) == before

            worker = WorkerProcess(
                tmp_path,
                "team-worker",
                nats_url,
                service.target,
                PYTHONPATH=str(team),
                JOBS_JOB_TYPE_MODULES=TEAM_TYPE,
            )
            declared_by = await eventually(
                lambda: _declared_by(db, worker),
                timeout=60,
                message="the worker never declared its type",
            )
            assert declared_by == "team-worker"

            # bad input: refused by the declared schema, naming the field, nothing written
            before = await _rows(database_url)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await client.create(job_type=TEAM_TYPE, text=5)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert reasons(refused.value, CREATE) == ["INVALID_INPUT"]
            assert violated_fields(refused.value) == "input.text"
            assert await _rows(database_url) == before

            # good input: runs on the worker, to SUCCEEDED with its output and artifact
            created = await client.create(job_type=TEAM_TYPE, text="The cat and the hat")
            assert created.job.definition_version == "1"
            job = await eventually(
                lambda: _finished(client, created.job.id),
                timeout=60,
                message="the team's job never finished",
            )
    finally:
        if worker is not None:
            worker.close()
        service.close()

    assert job is not None and job.status == job_pb2.JOB_STATUS_SUCCEEDED, job
    assert dict(job.output) == {"words": 5, "distinct": 4}
    assert (job.worker_id, job.attempt_count) == ("team-worker", 1)
    [artifact] = job.artifacts
    assert (artifact.artifact_type, artifact.artifact_id) == ("word_counts", f"wc_{job.id}")
    assert json_format.MessageToDict(artifact.payload) == {"top": [["the", 2], ["cat", 1]]}
    # the job service never tried to load a job type (nor swallowed a failed try)
    tried = guard_log.read_text().splitlines()
    assert tried == ["installed"], f"the job service tried to import {tried[1:]}"


async def _rows(database_url: str) -> dict[str, int]:
    """The row counts a request could change, but for the worker's own record of what it
    runs (written when it first claims, whenever that is)."""
    counts = await count_rows(database_url)
    del counts["worker_definitions"]
    return counts


async def _declared_by(db: asyncpg.Connection, worker: WorkerProcess) -> str | None:
    if worker.process.poll() is not None:
        raise AssertionError(f"the worker exited:\n{worker.log()[-3000:]}")
    found: str | None = await db.fetchval(
        "SELECT first_declared_by FROM job_type_specs WHERE job_type = $1", TEAM_TYPE
    )
    return found


async def _finished(client: Client, job_id: str) -> job_pb2.Job | None:
    job = await client.get(job_id)
    terminal = (job_pb2.JOB_STATUS_SUCCEEDED, job_pb2.JOB_STATUS_FAILED)
    return job if job.status in terminal else None
