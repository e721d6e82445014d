"""The pure parts of operability: metrics port settings, the tracing switch, JSON log
records and their ids, bounded start-up waits, and jobctl's exit statuses."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import grpc
import pytest
from pydantic import ValidationError

from job_service.settings import JobServiceSettings
from jobctl.exits import Exit, for_status
from shared import logs, tracing
from shared.settings_errors import describe
from shared.startup import DependencyUnavailable, within_startup
from worker_service.settings import WorkerSettings

URL = "postgresql://jobs@db/jobs"


@pytest.mark.parametrize(
    ("raw", "port"), [("9464", 9464), ("0", 0), ("", None), ("off", None), (" OFF ", None)]
)
def test_metrics_ports_may_be_ephemeral_or_off(
    monkeypatch: pytest.MonkeyPatch, raw: str, port: int | None
) -> None:
    monkeypatch.setenv("JOBS_METRICS_PORT", raw)
    monkeypatch.setenv("JOBS_WORKER_METRICS_PORT", raw)

    assert JobServiceSettings(database_url=URL).metrics_port == port
    assert WorkerSettings().worker_metrics_port == port


def test_a_metrics_port_out_of_range_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_WORKER_METRICS_PORT", "70000")
    with pytest.raises(ValidationError) as raised:
        WorkerSettings()
    assert describe(raised.value).startswith("  JOBS_WORKER_METRICS_PORT:")


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, False),
        ({"JOBS_TRACING": "false"}, False),
        ({"JOBS_TRACING": "true"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, True),
    ],
)
def test_tracing_is_on_only_when_configured(env: dict[str, str], wanted: bool) -> None:
    assert tracing.wanted(env) is wanted


def test_while_tracing_is_off_nothing_is_propagated() -> None:
    assert not tracing.enabled()
    with tracing.span(
        "anything", parent={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    ):
        assert tracing.carrier() is None
        assert tracing.current_ids() is None


def _record(logger: logging.Logger, stream: io.StringIO, message: str) -> dict[str, object]:
    logger.info(message)
    return dict(json.loads(stream.getvalue().splitlines()[-1]))


def test_json_records_carry_the_ids_of_their_context() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("tests.operability")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logs.set_worker_id("w-1")
    try:
        outside = _record(logger, stream, "outside")
        with logs.job_context("job-1", 2):
            inside = _record(logger, stream, "inside")
        after = _record(logger, stream, "after")
    finally:
        logs.set_worker_id(None)
        logger.removeHandler(handler)

    assert outside.keys() == {"ts", "level", "logger", "msg", "worker_id"}
    assert inside["msg"] == "inside"
    assert (inside["job_id"], inside["attempt"], inside["worker_id"]) == ("job-1", 2, "w-1")
    assert "job_id" not in after


async def test_start_up_retries_until_the_dependency_answers() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionRefusedError("not yet")
        return "connected"

    assert await within_startup("thing", 5, flaky, retry_interval_s=0.01) == "connected"
    assert calls == 3


async def test_start_up_gives_up_after_its_timeout_naming_the_last_error() -> None:
    async def refused() -> None:
        raise ConnectionRefusedError("refused")

    async def hangs() -> None:
        await asyncio.Event().wait()

    with pytest.raises(
        DependencyUnavailable,
        match=r"^thing unreachable for 0\.2s: ConnectionRefusedError: refused$",
    ):
        await within_startup("thing", 0.2, refused, retry_interval_s=0.01)
    with pytest.raises(DependencyUnavailable, match=r"^hung unreachable for 0\.2s$"):
        await within_startup("hung", 0.2, hangs, retry_interval_s=0.01)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (grpc.StatusCode.NOT_FOUND, Exit.NOT_FOUND),
        (grpc.StatusCode.INVALID_ARGUMENT, Exit.REFUSED),
        (grpc.StatusCode.FAILED_PRECONDITION, Exit.REFUSED),
        (grpc.StatusCode.UNAVAILABLE, Exit.UNAVAILABLE),
        (grpc.StatusCode.UNAUTHENTICATED, Exit.DENIED),
        (grpc.StatusCode.PERMISSION_DENIED, Exit.DENIED),
        (grpc.StatusCode.INTERNAL, Exit.ERROR),
        (grpc.StatusCode.UNIMPLEMENTED, Exit.ERROR),
    ],
)
def test_grpc_codes_map_to_documented_exit_statuses(code: grpc.StatusCode, status: Exit) -> None:
    assert for_status(code) is status
