"""What ``jobctl get`` shows of a job, as installed, against the real job service: its
input, its output with whole numbers as whole numbers, the output hash's label, the links
between a retried job and its retry, the error labelled with its attempt, the worker and
the durations. Helpers: tests/e2e/test_jobctl.py. (On constructed answers:
tests/unit/test_jobctl_detail.py.)"""

from __future__ import annotations

import json
import re

from shared.output_hash import output_hash
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from tests.e2e.test_jobctl import fields, jobctl
from tests.support.stack import Client, result_request
from tests.support.wait import eventually
from worker_service.app import WorkerApp

USER = "cli-user"  # jobctl's user in these tests (tests.e2e.test_jobctl.jobctl_env)
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


async def test_an_output_of_29_shows_29_and_its_hash_label_shows_12_digits(
    target: str, client: Client
) -> None:
    created = await jobctl(target, "create", "synthetic", "-i", '{"sleep_ms": 800}', "--json")
    job_id = created.json()["job"]["id"]
    output = {"attempt": 29, "data": "x"}  # synthetic's output schema
    lease = await client.lock(job_id, worker_id="worker-a")
    await client.executor.SubmitResult(
        result_request(job_id, lease.job.lease_token, output, {"pages": 3})
    )

    got = await jobctl(target, "get", job_id)

    assert got.status == 0, got.err
    shown = fields(got.out)
    assert json.loads(shown["output"]) == output
    assert '"attempt": 29' in shown["output"] and "29.0" not in got.out
    # the input as stored for the executor: as given, its defaults filled in
    assert json.loads(shown["input"])["sleep_ms"] == 800
    assert '"sleep_ms": 800' in shown["input"] and "800.0" not in got.out
    assert shown["output hash"] == output_hash(output)[: len("jcs:sha256:") + 12] + "..."
    assert '{"pages":3}' in got.out  # the artifact's payload
    assert shown["worker"] == "worker-a"
    for key in ("created", "started", "finished"):
        assert TIME.match(shown[key]), (key, shown[key])
    assert re.fullmatch(r"\d+(ms|\.\ds)", shown["waited"]) and "ran" in shown
    assert re.search(r"queued -> running\s+attempt 1\s+on worker-a\s+ran ", got.out)
    as_json = (await jobctl(target, "get", job_id, "-o", "json")).json()
    assert as_json["output"] == output and isinstance(as_json["output"]["attempt"], int)
    assert as_json["output_hash"] == output_hash(output)  # scripts get it whole


async def test_a_retried_job_links_to_its_retry_and_labels_its_error_with_the_attempt(
    target: str, worker: WorkerApp
) -> None:
    failed = await jobctl(target, "create", "synthetic", "-i", '{"fail": "fatal"}', "--watch")
    assert failed.status == 4, failed.err
    original = failed.out.split()[1]
    assert "error (attempt 1 of " in failed.out  # watch labels it too

    retried = await jobctl(target, "retry", original[-8:], "--json")

    assert retried.status == 0, retried.err
    retry_id = retried.json()["id"]
    before = fields((await jobctl(target, "get", original)).out)
    assert before["retried as"] == retry_id
    assert re.fullmatch(r"\(attempt 1 of \d+\) JOB_REJECTED: .+", before["error"])
    after = fields((await jobctl(target, "get", retry_id[-8:])).out)
    assert after["retry of"] == original


async def fail_retryably(client: Client, job_id: str, worker_id: str, retry_after_ms: int) -> None:
    """An attempt of ``job_id`` on ``worker_id`` that fails as a provider time-out does."""
    lease = await client.lock(job_id, worker_id=worker_id)
    await client.executor.SubmitFailure(
        epb.SubmitFailureRequest(
            job_id=job_id,
            lease_token=lease.job.lease_token,
            error_code="PROVIDER_TIMEOUT",
            error_message="no answer",
            retry_after_ms=retry_after_ms,
        )
    )


async def test_a_retrying_job_says_when_it_runs_next_and_whose_error_it_shows(
    target: str, client: Client
) -> None:
    made = await jobctl(target, "create", "synthetic", "--json")
    job_id = made.json()["job"]["id"]
    await fail_retryably(client, job_id, "worker-a", retry_after_ms=60_000)

    waiting = fields((await jobctl(target, "get", job_id[-8:])).out)

    assert waiting["status"] == "retrying"
    assert re.fullmatch(r"\S+Z \(in 5\dm?\S*s\)", waiting["next retry"]), waiting["next retry"]
    assert re.fullmatch(r"\(attempt 1 of 4\) PROVIDER_TIMEOUT: .+", waiting["error"])


async def test_a_second_attempt_running_labels_the_first_attempts_error_and_its_worker(
    target: str, client: Client
) -> None:
    made = await jobctl(target, "create", "synthetic", "--json")
    job_id = made.json()["job"]["id"]
    await fail_retryably(client, job_id, "worker-a", retry_after_ms=0)

    async def locked_again() -> bool:
        answer = await client.lock(job_id, worker_id="worker-b")
        return answer.outcome == epb.LOCK_OUTCOME_LOCKED  # else not due yet

    await eventually(locked_again, message="attempt 2 never started")
    got = await jobctl(target, "get", job_id)

    shown = fields(got.out)
    assert (shown["status"], shown["attempts"], shown["worker"]) == ("running", "2/4", "worker-b")
    assert re.fullmatch(
        r"\(attempt 1 of 4\) \[attempt 2 is running\] PROVIDER_TIMEOUT: .+", shown["error"]
    )
    assert re.fullmatch(r"\S+ so far", shown["ran"])
    timeline = got.out.split("timeline\n")[1].splitlines()
    assert re.search(r"-> running\s+attempt 1\s+on worker-a\s+ran \S+$", timeline[1])
    assert re.search(r"-> running\s+attempt 2\s+on worker-b\s+running for \S+$", timeline[-1])
