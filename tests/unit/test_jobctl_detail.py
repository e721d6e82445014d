"""What ``jobctl get`` and ``jobctl watch`` show of one job, on constructed answers: the
input (shown, too large, removed, withheld fields), whole numbers as whole numbers, the
retry links both ways, the error labelled with its attempt, the output hash, costs, times
with their zone, durations per attempt and the worker of each."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from durable_jobs_client.protos import job_pb2
from durable_jobs_client.protos import schedule_service_pb2 as spb
from google.protobuf.timestamp_pb2 import Timestamp

from jobctl.render import as_json, job_detail, schedule_detail, status_change
from jobctl.render.text import duration, money
from tests.unit.test_jobctl_lookup import jid

NOW = datetime(2030, 1, 31, 9, 0, 0, tzinfo=UTC)
S = job_pb2


def at(seconds: float) -> Timestamp:
    """NOW plus ``seconds``."""
    stamp = Timestamp()
    stamp.FromDatetime(NOW + timedelta(seconds=seconds))
    return stamp


def fields(job: job_pb2.Job) -> dict[str, str]:
    """The ``key  value`` lines of the detail (keys hold at most one space)."""
    found = {}
    for line in job_detail(job, NOW).splitlines():
        if line.startswith("  ") or "  " not in line:
            continue
        key, value = line.split("  ", 1)
        found[key.strip()] = value.strip()
    return found


def timeline(job: job_pb2.Job) -> list[str]:
    lines = job_detail(job, NOW).splitlines()
    return [line.strip() for line in lines[lines.index("timeline") + 1 :]]


def test_whole_numbers_in_output_and_input_read_as_whole_numbers() -> None:
    job = S.Job(id=jid("1"), input_state=S.INPUT_STATE_SHOWN)
    job.output.update({"score": 29, "ratio": 0.5, "items": [1, 2.25]})
    job.input.update({"sleep_ms": 800})

    shown = fields(job)

    assert shown["output"] == '{"items": [1, 2.25], "ratio": 0.5, "score": 29}'
    assert shown["input"] == '{"sleep_ms": 800}'
    assert '"score": 29}' in as_json(job)  # -o json too
    assert "29.0" not in job_detail(job, NOW) + as_json(job)


def test_an_input_too_large_or_removed_says_so_and_withheld_fields_are_named() -> None:
    large = S.Job(id=jid("1"), input_state=S.INPUT_STATE_TOO_LARGE, input_bytes=3 * 1024 * 1024)
    removed = S.Job(id=jid("2"), input_state=S.INPUT_STATE_REMOVED)
    secret = S.Job(
        id=jid("3"), input_state=S.INPUT_STATE_SHOWN, input_withheld_fields=["api_key", "token"]
    )
    secret.input.update({"topic": "x"})

    assert fields(large)["input"] == "not shown: 3.0 MiB of JSON (too large)"
    assert fields(removed)["input"] == "removed with the job's snapshot"
    assert fields(secret)["withheld"] == "api_key, token (never stored: not shown)"
    assert "input" not in fields(S.Job(id=jid("4")))  # an older server says nothing


def test_a_retried_job_links_to_its_retries_and_a_retry_to_its_original() -> None:
    original = S.Job(id=jid("1"), retried_as_job_ids=[jid("2"), jid("3")])
    retry = S.Job(id=jid("3"), retried_from_job_id=jid("1"))

    assert fields(original)["retried as"] == f"{jid('2')}, {jid('3')}"
    assert fields(retry)["retry of"] == jid("1")


def test_the_error_of_an_earlier_attempt_says_which_while_the_next_runs() -> None:
    running = S.Job(
        id=jid("1"),
        status=S.JOB_STATUS_RUNNING,
        attempt_count=2,
        max_attempts=3,
        error_code="PROVIDER_TIMEOUT",
        error_message="no answer in 30 s",
        error_attempt=1,
        worker_id="w-2",
    )

    assert fields(running)["error"] == (
        "(attempt 1 of 3) [attempt 2 is running] PROVIDER_TIMEOUT: no answer in 30 s"
    )
    assert status_change(running, NOW) == (
        "09:00:00.000Z  running  attempt 2  on w-2  "
        "error (attempt 1 of 3) PROVIDER_TIMEOUT: no answer in 30 s"
    )
    running.status = S.JOB_STATUS_FAILED
    assert fields(running)["error"] == "(attempt 1 of 3) PROVIDER_TIMEOUT: no answer in 30 s"


def test_times_carry_their_zone_and_the_durations_are_shown() -> None:
    job = S.Job(
        id=jid("1"),
        status=S.JOB_STATUS_SUCCEEDED,
        created_at=at(-10),
        started_at=at(-8.5),
        finished_at=at(-4.3),
        worker_id="w-1",
    )

    shown = fields(job)

    assert shown["created"] == "2030-01-31T08:59:50Z"
    assert (shown["waited"], shown["ran"], shown["worker"]) == ("1.5s", "4.2s", "w-1")


def test_a_running_job_shows_how_long_so_far_and_a_retrying_one_its_next_try() -> None:
    running = S.Job(
        id=jid("1"), status=S.JOB_STATUS_RUNNING, created_at=at(-200), started_at=at(-125)
    )
    retrying = S.Job(id=jid("2"), status=S.JOB_STATUS_RETRYING, next_run_at=at(4.2))

    assert (fields(running)["waited"], fields(running)["ran"]) == ("1m15s", "2m05s so far")
    assert fields(retrying)["next retry"] == "2030-01-31T09:00:04Z (in 4.2s)"
    assert "next retry 2030-01-31T09:00:04Z (in 4.2s)" in status_change(retrying, NOW)


def test_the_timeline_gives_each_attempt_its_worker_and_run_time_to_the_millisecond() -> None:
    job = S.Job(id=jid("1"), status=S.JOB_STATUS_RUNNING)
    job.events.extend(
        [
            S.JobEvent(to_status=S.JOB_STATUS_QUEUED, attempt=0, at=at(-10)),
            S.JobEvent(
                from_status=S.JOB_STATUS_QUEUED,
                to_status=S.JOB_STATUS_RUNNING,
                attempt=1,
                at=at(-9.75),
                worker_id="w-1",
            ),
            S.JobEvent(
                from_status=S.JOB_STATUS_RUNNING,
                to_status=S.JOB_STATUS_RETRYING,
                attempt=1,
                at=at(-7.5),
                reason="PROVIDER_TIMEOUT",
                worker_id="w-1",
            ),
            S.JobEvent(
                from_status=S.JOB_STATUS_RETRYING,
                to_status=S.JOB_STATUS_RUNNING,
                attempt=2,
                at=at(-3),
                worker_id="w-2",
            ),
        ]
    )

    assert timeline(job) == [
        "2030-01-31T08:59:50.000Z  - -> queued  attempt 0",
        "2030-01-31T08:59:50.250Z  queued -> running  attempt 1  on w-1  ran 2.2s",
        "2030-01-31T08:59:52.500Z  running -> retrying  attempt 1  on w-1  (PROVIDER_TIMEOUT)",
        "2030-01-31T08:59:57.000Z  retrying -> running  attempt 2  on w-2  running for 3.0s",
    ]


def test_the_output_hash_shows_its_scheme_and_twelve_hex_digits() -> None:
    digest = "1a2b3c4d5e6f" + "0" * 52
    assert fields(S.Job(id=jid("1"), output_hash=f"jcs:sha256:{digest}"))["output hash"] == (
        "jcs:sha256:1a2b3c4d5e6f..."
    )
    assert fields(S.Job(id=jid("1"), output_hash=digest))["output hash"] == (
        "1a2b3c4d5e6f... (legacy sha256)"
    )


def test_costs_read_with_sensible_precision() -> None:
    assert [money(x) for x in (0, 0.00012, 0.000123456, 0.5, 1.234, 1234.5)] == [
        "$0",
        "$0.00012",
        "$0.0001235",
        "$0.5",
        "$1.23",
        "$1,234.50",
    ]
    job = S.Job(id=jid("1"), total_input_tokens=10, total_output_tokens=5, total_cost_usd=0.00012)
    assert fields(job)["usage"] == "10 tokens in, 5 out, $0.00012"


def test_durations_read_at_a_glance() -> None:
    assert [duration(s) for s in (0.25, 4.2, 185, 7380, 93600)] == [
        "250ms",
        "4.2s",
        "3m05s",
        "2h03m",
        "1d02h",
    ]


def test_schedule_times_say_their_zone_and_template_numbers_are_whole() -> None:
    schedule = spb.Schedule(id="s1", next_fire_at=at(3600))
    schedule.spec.cron = "0 10 * * *"
    schedule.spec.time_zone = "Europe/Berlin"
    schedule.spec.job_template.job_type = "synthetic"
    schedule.spec.job_template.input.update({"sleep_ms": 5})

    lines = schedule_detail(schedule, [at(3600)]).splitlines()

    assert "  2030-01-31T10:00:00Z (2030-01-31 11:00 Europe/Berlin)" in lines
    assert any(line.split() == ["input", '{"sleep_ms":', "5}"] for line in lines)


def test_durable_steps_and_the_deadline_are_shown() -> None:
    job = S.Job(
        id=jid("1"),
        status=S.JOB_STATUS_RETRYING,
        deadline=at(90),
        steps=[
            S.DurableStep(ordinal=0, name="reserve", attempt=1, recorded_at=at(-5)),
            S.DurableStep(
                ordinal=1, name="charge", attempt=2, recorded_at=at(-1), error_code="JOB_DECLINED"
            ),
        ],
        steps_total=3,
    )

    shown = fields(job)

    assert shown["steps"] == ("#0 reserve (attempt 1), #1 charge (attempt 2 JOB_DECLINED) (1 more)")
    assert shown["deadline"] == "2030-01-31T09:01:30Z (in 1m30s)"
    # once finished, the deadline reads as a time
    job.status = S.JOB_STATUS_FAILED
    assert fields(job)["deadline"] == "2030-01-31T09:01:30Z"
