"""The worker's pure rules: message parsing, delays, leases, failure mapping, settings."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from shared.constants import Queue
from shared.errors import ErrorCode, ExecutionError, LeaseLost, PlatformUnavailable
from shared.output_hash import output_hash
from shared.registry import ArtifactDraft, JobResult, Registry
from worker_service.domain.errors import ExecutorCallFailed, ExecutorUnreachable, is_transient
from worker_service.domain.model import (
    CancelCause,
    Failed,
    Lease,
    nak_delay,
    parse_cancel,
    parse_dispatch,
)
from worker_service.domain.outcomes import (
    MAX_ERROR_MESSAGE_CHARS,
    failure_for,
    failure_for_cause,
    succeeded,
)
from worker_service.settings import WorkerSettings

from .fakes import ProbeLog, ProbeOutput, locked, probe_definition


def test_parse_dispatch() -> None:
    dispatch = parse_dispatch(b'{"job_id": "0b5c", "attempt": 2}')
    assert (dispatch.job_id, dispatch.attempt) == ("0b5c", 2)
    assert parse_dispatch(b'{"job_id": "0b5c"}').attempt == 0


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff",
        b"[]",
        b"{}",
        b'{"job_id": ""}',
        b'{"job_id": 7}',
        b'{"job_id": "a", "attempt": "1"}',
    ],
)
def test_parse_dispatch_rejects_what_is_not_a_dispatch(data: bytes) -> None:
    with pytest.raises(ValueError):
        parse_dispatch(data)


def test_parse_cancel() -> None:
    assert parse_cancel(b'{"job_id": "j"}') == "j"
    with pytest.raises(ValueError):
        parse_cancel(b'{"id": "j"}')


def test_nak_delay_waits_until_due_but_never_less_than_a_floor() -> None:
    assert nak_delay(110.0, now=100.0) == 10.0
    assert nak_delay(99.0, now=100.0) == 0.05
    assert nak_delay(None, now=100.0) == 0.05


def test_lease_deadline_follows_the_send_time_of_the_last_good_heartbeat() -> None:
    lease = Lease.granted(locked(ttl_ms=5000), now=10.0)
    assert lease.deadline == 15.0 and not lease.expired(14.9) and lease.expired(15.0)
    lease.extend(sent_at=12.0)
    assert lease.deadline == 17.0
    lease.extend(sent_at=11.0)  # an older beat never shortens it
    assert lease.deadline == 17.0


def test_heartbeat_interval_falls_back_when_unset_and_stays_under_the_ttl() -> None:
    assert locked(heartbeat_ms=250).heartbeat_interval_s == 0.25
    assert locked(heartbeat_ms=0).heartbeat_interval_s == 1.0
    assert locked(heartbeat_ms=0, ttl_ms=0).heartbeat_interval_s == 1.0
    assert locked(heartbeat_ms=9000, ttl_ms=6000).heartbeat_interval_s == 2.0


def test_cancel_causes_map_to_codes_and_lease_lost_to_silence() -> None:
    assert failure_for_cause(CancelCause.CANCEL_REQUESTED) == Failed(
        ErrorCode.CANCELLED, "cancelled while running"
    )
    cause = failure_for_cause(CancelCause.SHUTDOWN)
    assert cause is not None and cause.code == ErrorCode.WORKER_SHUTDOWN
    assert failure_for_cause(CancelCause.LEASE_LOST) is None


def test_failure_for_exceptions() -> None:
    assert failure_for(ExecutionError("CONTENT_SAFETY_BLOCKED", "flagged")) == Failed(
        "CONTENT_SAFETY_BLOCKED", "flagged"
    )
    assert failure_for(ExecutionError("")).code == ErrorCode.INTERNAL_ERROR
    assert failure_for(ValueError("bad")) == Failed(ErrorCode.INTERNAL_ERROR, "ValueError: bad")
    long = failure_for(RuntimeError("x" * 10_000)).message
    assert len(long) == MAX_ERROR_MESSAGE_CHARS


def test_succeeded_validates_dumps_and_hashes_the_output() -> None:
    definition = probe_definition(ProbeLog())
    result = JobResult(
        output=ProbeOutput(value=1, label="a"),
        artifacts=[ArtifactDraft("t", "i", {"when": (1, 2)})],
    )

    outcome = succeeded(definition, result)

    assert outcome.output == {"value": 1, "label": "a"}
    assert outcome.output_hash == output_hash({"label": "a", "value": 1})
    assert outcome.artifacts == [ArtifactDraft("t", "i", {"when": [1, 2]})]


def test_succeeded_rejects_an_output_of_another_shape() -> None:
    class Other(BaseModel):
        something: str

    with pytest.raises(ExecutionError) as raised:
        succeeded(probe_definition(ProbeLog()), JobResult(output=Other(something="secret")))

    assert raised.value.code == ErrorCode.VALIDATION_OUTPUT_SCHEMA
    assert "secret" not in raised.value.detail


def test_transient_errors() -> None:
    assert is_transient(ExecutorUnreachable("x"))
    assert is_transient(PlatformUnavailable("x"))
    assert not is_transient(LeaseLost("x"))
    assert not is_transient(ExecutorCallFailed("x"))


def test_settings_default_to_every_queue_of_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBS_WORKER_QUEUES", raising=False)
    registry = Registry([probe_definition(ProbeLog())])

    settings = WorkerSettings()

    assert settings.queue_slots(registry) == {Queue.INTERACTIVE.value: 4}
    assert settings.worker_id and settings.worker_shutdown_grace_s == 20
    assert settings.worker_fetch_batch == 32


def test_settings_queue_list_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = Registry([probe_definition(ProbeLog())])
    monkeypatch.setenv("JOBS_WORKER_QUEUES", " ai-interactive, ai-interactive ")
    monkeypatch.setenv("JOBS_WORKER_ID", "w-7")

    settings = WorkerSettings()

    assert settings.worker_id == "w-7"
    assert settings.queue_slots(registry) == {"ai-interactive": 4}
    monkeypatch.setenv("JOBS_WORKER_QUEUES", "ai-background")
    with pytest.raises(ValueError, match="ai-background"):
        WorkerSettings().queue_slots(registry)
