"""The client library's newer calls against a scripted in-process JobService: a watch with
partial output that reconnects shows no state and no piece twice and nothing after the
terminal state; a retried signal keeps the key the client made. And the pure parts: usage
answers as Decimals, jobctl's usage options and table, schedule updates that change only
the flags given."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from concurrent import futures
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import grpc
import pytest
from durable_jobs_client import JobsClient, Partial, RetryPolicy
from durable_jobs_client._pb.jobs.v1 import job_pb2, job_service_pb2_grpc
from durable_jobs_client._pb.jobs.v1 import job_service_pb2 as pb
from durable_jobs_client._pb.jobs.v1 import schedule_service_pb2 as spb
from durable_jobs_client._pb.jobs.v1 import usage_service_pb2 as upb
from durable_jobs_client.usage import usage_of, usage_request

from jobctl import render
from jobctl.commands import schedules, usage
from jobctl.exits import UsageError

RUNNING = pb.WatchJobResponse(job=job_pb2.Job(id="j", status=job_pb2.JOB_STATUS_RUNNING))
DONE = pb.WatchJobResponse(job=job_pb2.Job(id="j", status=job_pb2.JOB_STATUS_SUCCEEDED))


def piece(seq: int, text: str, call: int = 1) -> pb.WatchJobResponse:
    return pb.WatchJobResponse(
        partial=pb.PartialOutput(text=text, seq=seq, attempt=1, call=call, offset=0)
    )


class Scripted(job_service_pb2_grpc.JobServiceServicer):
    """WatchJob answers from ``streams`` (one list per call; a stream without a terminal
    state breaks with UNAVAILABLE); SendSignal fails UNAVAILABLE ``signal_failures`` times."""

    def __init__(self, streams: list[list[pb.WatchJobResponse]], signal_failures: int = 0):
        self.streams = streams
        self.watch_requests: list[pb.WatchJobRequest] = []
        self.signal_failures = signal_failures
        self.signal_keys: list[str] = []

    def WatchJob(self, request: pb.WatchJobRequest, context: grpc.ServicerContext) -> Any:
        self.watch_requests.append(request)
        answers = self.streams.pop(0)
        yield from answers
        if answers[-1] is not DONE:
            context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")

    def SendSignal(self, request: pb.SendSignalRequest, context: grpc.ServicerContext) -> Any:
        self.signal_keys.append(request.idempotency_key)
        if self.signal_failures:
            self.signal_failures -= 1
            context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        signal = job_pb2.ReceivedSignal(seq=1, name=request.name)
        return pb.SendSignalResponse(signal=signal, created=True)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[grpc.Server] = []

    def start(servicer: Scripted) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        job_service_pb2_grpc.add_JobServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(None)


FAST = RetryPolicy(initial_backoff=0.01, max_backoff=0.01)


def test_a_reconnecting_partial_watch_shows_each_state_and_piece_once(serve: Any) -> None:
    servicer = Scripted(
        [
            [RUNNING, piece(1, "Hel"), piece(2, "lo")],
            # the reconnect: the state again, a piece shown already, a gap (3 was missed)
            [RUNNING, piece(2, "lo"), piece(4, "!"), piece(1, "again", call=2), DONE],
        ]
    )
    with JobsClient(serve(servicer), user_id="u", token="", retry=FAST) as jobs:
        seen = list(jobs.watch("j", partial_output=True))

    assert [
        (s.seq, s.call, s.text) if isinstance(s, Partial) else job_pb2.JobStatus.Name(s.status)
        for s in seen
    ] == [
        "JOB_STATUS_RUNNING",
        (1, 1, "Hel"),
        (2, 1, "lo"),
        (4, 1, "!"),
        (1, 2, "again"),
        "JOB_STATUS_SUCCEEDED",
    ]
    assert all(r.include_partial_output for r in servicer.watch_requests)


def test_without_partial_output_the_watch_asks_for_none(serve: Any) -> None:
    servicer = Scripted([[RUNNING, DONE]])
    with JobsClient(serve(servicer), user_id="u", token="") as jobs:
        seen = list(jobs.watch("j"))

    assert [s.status for s in seen] == [job_pb2.JOB_STATUS_RUNNING, job_pb2.JOB_STATUS_SUCCEEDED]
    assert not servicer.watch_requests[0].include_partial_output


def test_a_retried_signal_keeps_the_key_the_client_made(serve: Any) -> None:
    servicer = Scripted([], signal_failures=1)
    with JobsClient(serve(servicer), user_id="u", token="", retry=FAST) as jobs:
        sent = jobs.signal("j", "approve", {"by": "ada"})

    assert sent.signal.name == "approve"
    first, second = servicer.signal_keys
    assert first == second and first.startswith("client-")


def test_usage_is_asked_for_utc_days_and_answered_in_decimals() -> None:
    request = usage_request("u", date(2030, 1, 1), date(2030, 1, 3), ["day", "model"])
    assert request.start_time.ToDatetime(UTC) == datetime(2030, 1, 1, tzinfo=UTC)
    assert list(request.group_by) == [upb.USAGE_GROUPING_DAY, upb.USAGE_GROUPING_MODEL]
    group = upb.UsageGroup(
        provider="deepseek",
        model="deepseek-chat",
        totals=upb.UsageTotals(calls=3, failed_calls=1, cost_usd="0.100001"),
    )
    group.day.FromDatetime(datetime(2030, 1, 2, tzinfo=UTC))
    answer = upb.GetUsageResponse(
        groups=[group, group], totals=upb.UsageTotals(calls=6, cost_usd="0.200002")
    )

    found = usage_of(answer, ["day", "model"])

    assert found.groups[0].day == date(2030, 1, 2)
    assert (found.groups[0].user_id, found.groups[0].model) == (None, "deepseek-chat")
    assert sum(g.totals.cost_usd for g in found.groups) == found.totals.cost_usd
    assert found.totals.cost_usd == Decimal("0.200002")
    table = render.usage_table(found).splitlines()
    row = table[1].split()
    assert row[:5] == ["2030-01-02", "*", "*", "deepseek", "deepseek-chat"]
    assert row[5:] == ["3", "1", "0", "0", "0.100001"]
    assert table[-1].split() == ["TOTAL", "6", "0", "0", "0", "0.200002"]


def test_usage_options_are_checked_before_anything_is_sent() -> None:
    assert usage.groupings("day,job-type,day") == ["day", "job_type"]
    assert usage.groupings("none") == []
    with pytest.raises(argparse.ArgumentTypeError):
        usage.groupings("day,planet")
    with pytest.raises(argparse.ArgumentTypeError):
        usage.day("31.01.2030")
    with pytest.raises(UsageError):
        usage._range(date(2030, 1, 2), date(2030, 1, 2))
    assert usage._range(None, date(2030, 2, 1)) == (date(2030, 1, 2), date(2030, 2, 1))


def test_a_schedule_update_changes_only_the_flags_given() -> None:
    parser = argparse.ArgumentParser()
    schedules._spec_options(parser, required=False)
    current = spb.ScheduleSpec(
        cron="0 2 * * *",
        time_zone="Europe/Berlin",
        job_template=spb.JobTemplate(job_type="synthetic"),
        overlap_policy=spb.OVERLAP_POLICY_ALLOW,
    )
    current.job_template.input.update({"sleep_ms": 5})

    spec = schedules._apply(current, parser.parse_args(["--cron", "*/5 * * * *"]))

    assert (spec.cron, spec.time_zone) == ("*/5 * * * *", "Europe/Berlin")
    assert dict(spec.job_template.input) == {"sleep_ms": 5}
    assert spec.overlap_policy == spb.OVERLAP_POLICY_ALLOW
    spec = schedules._apply(spec, parser.parse_args(["--input", '{"fail": "fatal"}']))
    assert dict(spec.job_template.input) == {"fail": "fatal"}  # replaced, not merged


def test_a_create_request_carries_its_dependencies_and_policy() -> None:
    from durable_jobs_client._core import create_request

    request = create_request("u1", "synthetic", {}, depends_on=["a", "b"], dependency_policy="run")
    assert list(request.depends_on) == ["a", "b"]
    assert request.dependency_policy == job_pb2.DEPENDENCY_POLICY_RUN
    plain = create_request("u1", "synthetic", {})
    assert (list(plain.depends_on), plain.dependency_policy) == ([], 0)
