"""What operators see: Prometheus figures that move while a job runs, one trace per job
across both services and NATS, and JSON logs that carry ids but never a job's data."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel, ConfigDict

from job_service.app import JobServiceApp
from jobtypes import synthetic
from shared import logs, tracing
from shared.constants import Queue
from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import struct_from_dict
from shared.registry import ExecutionContext, JobDefinition, JobResult, Registry
from tests.support.metrics import metrics_port_in, scrape, value
from tests.support.processes import WorkerProcess
from tests.support.stack import (
    WORKER_TOKEN,
    Client,
    open_channel,
    running_job_service,
    worker_settings,
)
from tests.support.stack import settings as stack_settings
from tests.support.wait import eventually
from worker_service.app import WorkerApp
from worker_service.settings import WorkerSettings

S = job_pb2
QUEUE = Queue.INTERACTIVE.value


async def test_both_metrics_endpoints_move_while_a_job_runs(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    async with (
        running_job_service(
            database_url, nats_url, metrics_port=0, metrics_collect_interval_s=0.1
        ) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        assert app.metrics.port
        client = Client(channel)
        worker = WorkerProcess(
            tmp_path,
            "metered",
            nats_url,
            f"127.0.0.1:{app.port}",
            JOBS_WORKER_METRICS_PORT="0",
            JOBS_LOG_LEVEL="DEBUG",
        )
        try:
            worker_port = await eventually(
                lambda: metrics_port_in(worker.log()), timeout=20, message="no worker metrics"
            )
            before = await scrape(app.metrics.port)
            created = await client.create(sleep_ms=2000)

            async def running_everywhere() -> bool:
                service, work = await scrape(app.metrics.port), await scrape(worker_port)
                return (
                    value(service, "jobs_queue_depth", queue=QUEUE, status="running") == 1
                    and value(work, "jobs_worker_slots_in_use", queue=QUEUE) == 1
                )

            await eventually(running_everywhere, timeout=15, message="not seen running")

            async def succeeded() -> bool:
                job = await client.get(created.job.id)
                return bool(job.status == S.JOB_STATUS_SUCCEEDED)

            await eventually(succeeded, timeout=15, message="job did not succeed")

            async def settled() -> bool:
                after = await scrape(app.metrics.port)

                def moved(name: str, **labels: str) -> float:
                    return value(after, name, **labels) - value(before, name, **labels)

                return (
                    moved("jobs_created_total", job_type="synthetic", queue=QUEUE) == 1
                    and moved("jobs_finished_total", job_type="synthetic", outcome="succeeded") == 1
                    and moved("jobs_pickup_latency_seconds_count", job_type="synthetic") == 1
                    # the dispatch and the domain event
                    and moved("jobs_outbox_published_total") >= 2
                    and value(after, "jobs_queue_depth", queue=QUEUE, status="running") == 0
                    and value(after, "jobs_outbox_rows", status="pending") == 0
                )

            await eventually(settled, timeout=10, message="job_service figures did not move")
            work = await scrape(worker_port)
            done = {"job_type": "synthetic", "outcome": "succeeded"}
            assert value(work, "jobs_worker_attempts_total", **done) == 1
            assert value(work, "jobs_run_duration_seconds_count", **done) == 1
            assert value(work, "jobs_run_duration_seconds_sum", **done) >= 2.0
            assert value(work, "jobs_worker_slots_in_use", queue=QUEUE) == 0
            assert value(work, "jobs_worker_slots", queue=QUEUE) == synthetic.DEFINITION.concurrency

            # The worker's log lines are JSON objects naming the job, attempt and worker.
            # (gRPC's C core may add plain lines of its own to stderr)
            lines = worker.log().splitlines()
            records = [json.loads(line) for line in lines if line.startswith("{")]
            about_job = [r for r in records if r.get("job_id") == created.job.id]
            assert about_job, "no log line names the job"
            assert all(r["attempt"] == 1 and r["worker_id"] == "metered" for r in about_job)
        finally:
            worker.close()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.configure("durable-jobs-test", exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.shutdown()


async def test_one_trace_links_create_publish_lock_execute_and_submit(
    database_url: str, nats_url: str, spans: InMemorySpanExporter
) -> None:
    async with (
        running_job_service(database_url, nats_url) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
        WorkerApp(
            WorkerSettings(
                auth_token=WORKER_TOKEN,
                nats_url=nats_url,
                job_service_target=f"127.0.0.1:{app.port}",
                worker_id="traced",
                worker_metrics_port=None,
            )
        ),
    ):
        client = Client(channel)
        created = await client.create(sleep_ms=10)

        def submitted() -> bool:
            return any(s.name == "SubmitResult" for s in spans.get_finished_spans())

        await eventually(submitted, timeout=15, message="no SubmitResult span")

    by_name = {s.name: s for s in spans.get_finished_spans()}
    path = ["CreateJob", f"publish jobs.dispatch.{QUEUE}", "job", "LockJob", "execute"]
    path.append("SubmitResult")
    assert set(path) <= by_name.keys(), sorted(by_name)
    trace_ids = {by_name[name].context.trace_id for name in path}
    assert len(trace_ids) == 1, "the spans are not one trace"

    def parent(name: str) -> int | None:
        span = by_name[name]
        return span.parent.span_id if span.parent is not None else None

    assert by_name["CreateJob"].attributes["jobs.job_id"] == created.job.id
    assert parent(f"publish jobs.dispatch.{QUEUE}") == by_name["CreateJob"].context.span_id
    assert parent("job") == by_name[f"publish jobs.dispatch.{QUEUE}"].context.span_id
    for child in ("LockJob", "execute", "SubmitResult"):
        assert parent(child) == by_name["job"].context.span_id


async def test_a_callers_traceparent_is_continued_by_the_jobs_spans(
    database_url: str, nats_url: str, spans: InMemorySpanExporter
) -> None:
    """A product service's trace contains the job: CreateJob's span is a child of the
    caller's span (its `traceparent` metadata), and every later span of the job follows."""
    caller_trace, caller_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    traceparent = f"00-{caller_trace}-{caller_span}-01"
    async with (
        running_job_service(database_url, nats_url) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
        WorkerApp(worker_settings(nats_url, f"127.0.0.1:{app.port}", worker_id="traced")),
    ):
        created = await Client(channel).jobs.CreateJob(
            jpb.CreateJobRequest(
                user_id="user-1", job_type="synthetic", input=struct_from_dict({"sleep_ms": 1})
            ),
            metadata=(("traceparent", traceparent), ("tracestate", "product=1")),
        )

        def submitted() -> bool:
            return any(s.name == "SubmitResult" for s in spans.get_finished_spans())

        await eventually(submitted, timeout=15, message="no SubmitResult span")

    by_name = {s.name: s for s in spans.get_finished_spans()}
    create = by_name["CreateJob"]
    assert create.attributes is not None
    assert create.attributes["jobs.job_id"] == created.job.id
    assert create.parent is not None and f"{create.parent.span_id:016x}" == caller_span
    assert create.parent.is_remote
    path = ["CreateJob", f"publish jobs.dispatch.{QUEUE}", "job", "LockJob", "SubmitResult"]
    assert {f"{by_name[name].context.trace_id:032x}" for name in path} == {caller_trace}


MARKER = "marker-7f3c-never-log-this"


class EchoInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


class EchoOutput(BaseModel):
    text: str


async def echo(job_input: EchoInput, ctx: ExecutionContext) -> JobResult:
    logging.getLogger("tests.echo").info("echoing %d characters", len(job_input.text))
    return JobResult(output=EchoOutput(text=job_input.text))


ECHO = JobDefinition(
    job_type="echo",
    label="Echo",
    domain="testing",
    version="1.0.0",
    queue=Queue.INTERACTIVE,
    input_model=EchoInput,
    output_model=EchoOutput,
    execute=echo,
    timeout_s=10.0,
)


async def test_logs_carry_ids_but_never_job_input_or_output(
    database_url: str, nats_url: str, spans: InMemorySpanExporter
) -> None:
    """A full run at DEBUG, with tracing on, of a job whose input and output carry a
    marker; a refused create whose bad input carries it too."""
    registry = Registry([ECHO, synthetic.DEFINITION])
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    handler.setFormatter(logs.JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    logs.set_worker_id("logged")
    try:
        async with (
            JobServiceApp(stack_settings(database_url, nats_url)) as app,
            open_channel(f"127.0.0.1:{app.port}") as channel,
            WorkerApp(
                WorkerSettings(
                    auth_token=WORKER_TOKEN,
                    nats_url=nats_url,
                    job_service_target=f"127.0.0.1:{app.port}",
                    worker_id="logged",
                    worker_metrics_port=None,
                ),
                registry,
            ),
        ):
            client = Client(channel)
            text = f"please echo {MARKER}"
            created = await client.create(job_type="echo", text=text)

            async def echoed() -> job_pb2.Job | None:
                job = await client.get(created.job.id)
                return job if job.status == S.JOB_STATUS_SUCCEEDED else None

            job = await eventually(echoed, timeout=15, message="echo did not succeed")
            assert MARKER in job.output["text"]
            with pytest.raises(grpc.aio.AioRpcError):
                await client.create(job_type="echo", text=MARKER, extra=MARKER)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        logs.set_worker_id(None)

    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert MARKER not in captured.getvalue()
    echoing = [r for r in lines if r["msg"] == f"echoing {len(text)} characters"]
    assert len(echoing) == 1
    assert echoing[0]["job_id"] == created.job.id
    assert echoing[0]["attempt"] == 1
    assert echoing[0]["worker_id"] == "logged"
    assert len(echoing[0]["trace_id"]) == 32


async def test_a_retry_continues_the_jobs_trace(
    database_url: str, nats_url: str, spans: InMemorySpanExporter
) -> None:
    async with (
        running_job_service(database_url, nats_url) as app,
        open_channel(f"127.0.0.1:{app.port}") as channel,
        WorkerApp(
            WorkerSettings(
                auth_token=WORKER_TOKEN,
                nats_url=nats_url,
                job_service_target=f"127.0.0.1:{app.port}",
                worker_id="retried",
                worker_metrics_port=None,
            )
        ),
    ):
        client = Client(channel)
        await client.create(fail="retryable", fail_times=1)

        def both_attempts() -> bool:
            finished = spans.get_finished_spans()
            return any(s.name == "SubmitResult" for s in finished) and (
                sum(s.name == "SubmitFailure" for s in finished) == 1
            )

        await eventually(both_attempts, timeout=15, message="no retry and success")

    finished = spans.get_finished_spans()
    [create] = [s for s in finished if s.name == "CreateJob"]
    jobs = [s for s in finished if s.name == "job"]
    assert len(jobs) == 2
    assert {s.context.trace_id for s in jobs} == {create.context.trace_id}
