"""A worker in a second language (issue 41): the TypeScript worker of
``interop/typescript/src/worker`` runs ``text_stats``, a job type whose code exists only in
TypeScript, against ``make run``'s stack (``python -m devstack``, a private data directory,
free ports). The job service knows the type by the spec the worker declares
(ExecutorService.DeclareJobType) and nothing else. ``signoff`` (issue 45) runs the
TypeScript worker's durable steps, sleep and signal wait: its effects (lines in a ledger
file, each its step key) are made once per key across a SIGKILL, and a job asleep or
waiting holds no slot of its one-slot queue.

Jobs are created with the Python client (``durable_jobs_client``); the workers are real
``node`` processes, killed, cancelled and stopped as an operator would. Run with ``make
test-interop`` (sets JOBS_TEST_INTEROP=1; CI: ``.ci/run``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from durable_jobs_client.aio import AsyncJobsClient
from durable_jobs_client.errors import InvalidInput
from durable_jobs_client.statuses import status_name
from durable_jobs_client.values import to_python

from shared.output_hash import output_hash
from shared.pb.jobs.v1 import job_pb2
from tests.interop.test_typescript_client import build_client
from tests.support.devstack_harness import Devstack, private_devstack
from tests.support.wait import eventually

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "interop" / "typescript"
ARTIFACTS = ROOT / "artifacts" / "interop"
USER = "interop-typescript-worker"
TEXT = "The cat sat. The cat ran! Did the dog? Naïve café's 😀"
# what text_stats answers for TEXT (top 5 words; characters are code points)
STATS = {
    "words": 11,
    "characters": 53,
    "sentences": 4,
    "top_words": [
        {"word": "the", "count": 3},
        {"word": "cat", "count": 2},
        {"word": "café's", "count": 1},
        {"word": "did", "count": 1},
        {"word": "dog", "count": 1},
    ],
}

# signoff's signal, and the signature a test sends with it
COUNTERSIGN = "countersign"
SIGNATURE = {"by": "ada", "seal": 7}

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("JOBS_TEST_INTEROP") != "1",
        reason="the TypeScript worker's test: run `make test-interop` (sets JOBS_TEST_INTEROP=1)",
    ),
    pytest.mark.skipif(
        shutil.which("node") is None or shutil.which("npm") is None,
        reason="needs Node.js (>= 20) and npm on PATH; `make test-interop` runs it in CI",
    ),
    pytest.mark.timeout(300),
]


class Worker:
    """``npm run worker`` (node dist/worker/main.js) against the stack, its JSON log lines
    in ``log``."""

    def __init__(self, stack: Devstack, nats_url: str, worker_id: str, logs: Path, **env: str):
        self.worker_id = worker_id
        self.log = logs / f"worker-{worker_id}.log"
        self._out = self.log.open("wb")
        self.process = subprocess.Popen(
            ["node", "dist/worker/main.js"],
            cwd=PROJECT,
            env={
                **os.environ,
                "JOBS_JOB_SERVICE_TARGET": stack.target,
                "JOBS_NATS_URL": nats_url,
                "JOBS_WORKER_ID": worker_id,
                "JOBS_AUTH_TOKEN_FILE": str(stack.token_file("worker")),
                **env,
            },
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def lines(self) -> list[dict[str, Any]]:
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                found.append({"message": line})
        return found

    def said(self, message: str, **fields: Any) -> list[dict[str, Any]]:
        return [
            line
            for line in self.lines()
            if line.get("message") == message and all(line.get(k) == v for k, v in fields.items())
        ]

    async def running(self) -> None:
        await eventually(
            lambda: self.said("worker running") or self.process.poll() is not None,
            timeout=30,
            message=f"worker {self.worker_id} did not start",
        )
        assert self.process.poll() is None, self.lines()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._out.close()


class Workers:
    """The workers a test started (``start``), killed after it, their logs kept in
    artifacts/interop."""

    def __init__(self, stack: Devstack, nats_url: str, logs: Path) -> None:
        self._stack, self._nats_url, self._logs = stack, nats_url, logs
        self.started: list[Worker] = []

    async def start(self, worker_id: str, **env: str) -> Worker:
        worker = Worker(self._stack, self._nats_url, worker_id, self._logs, **env)
        self.started.append(worker)
        await worker.running()
        return worker

    def stop(self) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for worker in self.started:
            worker.stop()
            shutil.copy(worker.log, ARTIFACTS / worker.log.name)


@pytest.fixture(scope="module")
def stack() -> Iterator[Devstack]:
    with private_devstack("jobs-interop-worker-", ARTIFACTS) as stack:
        yield stack


@pytest.fixture(scope="module")
async def built() -> None:
    """npm ci (when the lock changed), the generation from proto/ and tsc."""
    await asyncio.to_thread(build_client)


@pytest.fixture(scope="module")
async def nats_url(stack: Devstack, built: None) -> str:
    """The stack's NATS, once the stack is ready (the build ran while it started)."""
    await stack.ready()
    return stack.logged(r"NATS JetStream\s+(nats://\S+)")


@pytest.fixture
async def workers(stack: Devstack, nats_url: str) -> AsyncIterator[Workers]:
    logs = Path(tempfile.mkdtemp(prefix="ts-workers-"))
    started = Workers(stack, nats_url, logs)
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(logs, ignore_errors=True)


@pytest.fixture
async def jobs(stack: Devstack, nats_url: str) -> AsyncIterator[AsyncJobsClient]:
    async with AsyncJobsClient(stack.target, user_id=USER, token=stack.token("client")) as client:
        yield client


@pytest.fixture
async def admin(stack: Devstack, nats_url: str) -> AsyncIterator[AsyncJobsClient]:
    async with AsyncJobsClient(stack.target, token=stack.token("admin")) as client:
        yield client


async def started_on(job_id: str, *among: Worker, attempt: int) -> Worker:
    """The worker that logged the start of ``attempt`` of the job (waits for one)."""

    def which() -> Worker | None:
        return next(
            (w for w in among if w.said("attempt started", job_id=job_id, attempt=attempt)), None
        )

    found = await eventually(
        which, timeout=30, message=f"attempt {attempt} of {job_id} did not start"
    )
    assert found is not None
    return found


async def test_a_job_only_the_typescript_worker_declares_succeeds(
    stack: Devstack, workers: Workers, jobs: AsyncJobsClient
) -> None:
    worker = await workers.start("ts-a")

    created = await jobs.create("text_stats", {"text": TEXT})
    job = await jobs.wait(created.job.id, timeout=30)

    assert status_name(job.status) == "succeeded", job
    output = to_python(job.output)
    assert output == STATS
    # the hash the TypeScript worker computed (RFC 8785) is the one Python computes
    assert job.output_hash == output_hash(output)
    assert job.attempt_count == 1
    assert {e.worker_id for e in job.events if e.worker_id} == {"ts-a"}
    assert worker.said("result submitted", job_id=job.id, status="JOB_STATUS_SUCCEEDED")
    # the job service knows the type from the worker's declaration only
    async with AsyncJobsClient(stack.target, token=stack.token("admin")) as admin:
        definitions = await admin.admin.list_job_definitions()
    [declared] = [d for d in definitions if d.job_type == "text_stats"]
    assert declared.first_declared_by == "ts-a"
    # and checks input against the declared JSON Schema
    with pytest.raises(InvalidInput) as refused:
        await jobs.create("text_stats", {"text": ""})
    assert [v.field for v in refused.value.violations] == ["input.text"]


async def test_a_worker_killed_mid_job_its_job_runs_again_on_another_once(
    workers: Workers, jobs: AsyncJobsClient
) -> None:
    first, second = await workers.start("ts-b1"), await workers.start("ts-b2")
    created = await jobs.create("text_stats", {"text": TEXT, "sleep_ms": 3000})
    job_id = created.job.id

    killed = await started_on(job_id, first, second, attempt=1)
    killed.process.send_signal(signal.SIGKILL)
    killed.process.wait()
    survivor = second if killed is first else first
    job = await jobs.wait(job_id, timeout=60)

    assert status_name(job.status) == "succeeded", job
    assert job.attempt_count == 2
    assert to_python(job.output) == STATS
    assert job.output_hash == output_hash(STATS)
    assert survivor.said("attempt started", job_id=job_id, attempt=2)
    assert not killed.said("result submitted", job_id=job_id)
    # applied once: one result, after the dead worker's attempt ended
    to_succeeded = [e for e in job.events if status_name(e.to_status) == "succeeded"]
    assert [(e.attempt, e.worker_id) for e in to_succeeded] == [(2, survivor.worker_id)]
    ran = [(e.attempt, e.worker_id) for e in job.events if status_name(e.to_status) == "running"]
    assert ran == [(1, killed.worker_id), (2, survivor.worker_id)], job.events


async def test_a_cancel_reaches_a_running_typescript_job(
    workers: Workers, jobs: AsyncJobsClient
) -> None:
    worker = await workers.start("ts-c")
    created = await jobs.create("text_stats", {"text": TEXT, "sleep_ms": 30_000})
    job_id = created.job.id
    await started_on(job_id, worker, attempt=1)

    asked = time.monotonic()
    await jobs.cancel(job_id)
    job = await jobs.wait(job_id, timeout=30)
    took = time.monotonic() - asked

    assert status_name(job.status) == "cancelled", job
    # stopped while it ran (its sleep had 30 s left), by the worker
    assert took < 5, took
    assert worker.said("failure submitted", job_id=job_id, error_code="CANCELLED")
    assert not worker.said("result submitted", job_id=job_id)
    assert not job.HasField("output")


async def test_an_output_breaking_the_declared_schema_is_refused_and_not_stored(
    stack: Devstack, workers: Workers, jobs: AsyncJobsClient
) -> None:
    worker = await workers.start("ts-d")
    created = await jobs.create("text_stats", {"text": TEXT, "break_output_schema": True})
    job = await jobs.wait(created.job.id, timeout=60)

    # every attempt's output was refused: the job failed, as the job service decided
    assert status_name(job.status) == "failed", job
    assert job.error_code != ""
    refused = worker.said("result refused; the job service ended the attempt", job_id=job.id)
    assert len(refused) == job.attempt_count >= 1
    assert not worker.said("result submitted", job_id=job.id)
    # nothing of the output is stored
    assert not job.HasField("output")
    assert job.output_hash == ""
    # and the operator reads why: the field that broke the schema
    async with AsyncJobsClient(stack.target, token=stack.token("admin")) as admin:
        seen = await admin.admin.get_job(job.id)
    assert "output schema" in seen.internal_error_message, seen.internal_error_message
    assert "words" in seen.internal_error_message
    assert not seen.HasField("output")


async def test_sigterm_hands_the_running_job_back_and_says_goodbye(
    workers: Workers, jobs: AsyncJobsClient
) -> None:
    leaving = await workers.start("ts-e1", JOBS_WORKER_SHUTDOWN_GRACE_S="0")
    created = await jobs.create("text_stats", {"text": TEXT, "sleep_ms": 1500})
    job_id = created.job.id
    await started_on(job_id, leaving, attempt=1)

    leaving.process.send_signal(signal.SIGTERM)
    status = await asyncio.to_thread(leaving.process.wait, 15)
    staying = await workers.start("ts-e2")
    job = await jobs.wait(job_id, timeout=60)

    assert status == 0, leaving.lines()
    assert leaving.said("failure submitted", job_id=job_id, error_code="WORKER_SHUTDOWN")
    assert leaving.said("session closed") and leaving.said("stopped")
    # handed back, not failed: it ran again to success on the worker that stayed
    assert status_name(job.status) == "succeeded", job
    assert staying.said("result submitted", job_id=job_id, status="JOB_STATUS_SUCCEEDED")


async def held(admin: AsyncJobsClient, job_id: str, reason: str) -> bool:
    """Whether the job waits for ``reason`` (JobHold.Reason without its prefix): a job
    asleep or waiting for a signal is RETRYING, with no lease."""
    seen = await admin.admin.get_job(job_id)
    return job_pb2.JobHold.Reason.Name(seen.hold.reason) == f"REASON_{reason}"


def effects(ledger: Path) -> Counter[str]:
    """The step keys the ledger received, each with how many times."""
    return Counter(ledger.read_text().split())


def logged_at(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(line["time"]).timestamp()


@pytest.mark.parametrize(
    ("crash_at", "requests"),
    [
        ("after_effect", 2),  # made, not recorded: attempt 2 makes it again, under the same key
        ("after_record", 1),  # recorded: attempt 2 returns the record and makes nothing
    ],
)
async def test_a_signoff_killed_after_its_effect_sleeps_waits_and_makes_each_effect_once_per_key(
    workers: Workers,
    jobs: AsyncJobsClient,
    admin: AsyncJobsClient,
    tmp_path: Path,
    crash_at: str,
    requests: int,
) -> None:
    ledger = tmp_path / "ledger"
    ledger.touch()
    first = await workers.start(f"ts-s1-{crash_at}", JOBS_SIGNOFF_LEDGER=str(ledger))
    second = await workers.start(f"ts-s2-{crash_at}", JOBS_SIGNOFF_LEDGER=str(ledger))
    created = await jobs.create(
        "signoff", {"document": "lease", "pause_ms": 2000, "crash_at": crash_at}
    )
    job_id = created.job.id

    killed = await started_on(job_id, first, second, attempt=1)
    # the job's code SIGKILLed its own worker, right after its first effect
    assert await asyncio.to_thread(killed.process.wait, 30) == -signal.SIGKILL
    survivor = second if killed is first else first
    await eventually(
        lambda: held(admin, job_id, "WAITING_FOR_SIGNAL"),
        timeout=60,
        interval=0.1,
        message="the job did not come to wait for its signature",
    )
    await jobs.signal(job_id, COUNTERSIGN, SIGNATURE)
    job = await jobs.wait(job_id, timeout=30)

    assert status_name(job.status) == "succeeded", job
    request_key, file_key = f"{job_id}/0/request", f"{job_id}/4/file"
    assert to_python(job.output) == {
        "receipts": [f"request:{request_key}", f"file:{file_key}"],
        "signature": SIGNATURE,
        "timed_out": False,
    }
    # one key per effect, the same on both attempts: a system deduplicating by key
    # applied each once
    assert effects(ledger) == {request_key: requests, file_key: 1}
    # the crash spent an attempt; the sleep and the wait did not
    assert job.attempt_count == 2
    ended = survivor.said("failure submitted", job_id=job_id)
    assert [line["error_code"] for line in ended] == ["SUSPENDED_SLEEP", "SUSPENDED_SIGNAL"]
    assert survivor.said("result submitted", job_id=job_id, status="JOB_STATUS_SUCCEEDED")
    # it slept its 2 s between two runs of the attempt, not in one
    starts = survivor.said("attempt started", job_id=job_id, attempt=2)
    assert len(starts) == 3, starts
    asleep = logged_at(starts[1]) - logged_at(ended[0])
    assert 1.5 <= asleep < 10, asleep


async def test_jobs_asleep_or_waiting_hold_no_slot_of_the_one_slot_queue(
    workers: Workers, jobs: AsyncJobsClient, admin: AsyncJobsClient, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    ledger.touch()
    worker = await workers.start("ts-t", JOBS_SIGNOFF_LEDGER=str(ledger))
    assert worker.said("worker running")[0]["queues"]["ai-interactive"] == 1

    waiting = (await jobs.create("signoff", {"document": "a"})).job.id
    await eventually(lambda: held(admin, waiting, "WAITING_FOR_SIGNAL"), timeout=30, interval=0.1)
    sleeping = (await jobs.create("signoff", {"document": "b", "pause_ms": 3000})).job.id
    await eventually(lambda: held(admin, sleeping, "SLEEPING"), timeout=30, interval=0.1)
    # a third runs to its end while the first waits and the second sleeps or waits: its
    # signature does not come, and its wait times out
    timing_out = await jobs.create("signoff", {"document": "c", "timeout_ms": 1500})
    timed_out = await jobs.wait(timing_out.job.id, timeout=30)
    assert status_name(timed_out.status) == "succeeded", timed_out
    assert to_python(timed_out.output)["signature"] is None
    assert to_python(timed_out.output)["timed_out"] is True

    await eventually(lambda: held(admin, sleeping, "WAITING_FOR_SIGNAL"), timeout=30, interval=0.1)
    for job_id in (waiting, sleeping):
        await jobs.signal(job_id, COUNTERSIGN, {**SIGNATURE, "for": job_id})
    for job_id in (waiting, sleeping):
        job = await jobs.wait(job_id, timeout=30)
        assert status_name(job.status) == "succeeded", job
        assert to_python(job.output)["signature"] == {**SIGNATURE, "for": job_id}
        assert job.attempt_count == 1
    ids = (waiting, sleeping, timing_out.job.id)
    assert effects(ledger) == {
        f"{i}/{n}/{step}": 1 for i in ids for n, step in ((0, "request"), (4, "file"))
    }


@pytest.mark.usefixtures("built")
def test_the_workers_unit_tests_pass() -> None:
    """``npm test``: the worker's modules against fakes of the job service and JetStream."""
    result = subprocess.run(
        ["npm", "test", "--silent"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
