"""The client library's status helpers (``durable_jobs_client.statuses``) name what the
engine's lifecycle names: the same statuses, the same terminal set, the same retryable
set, each written once on the client side and used by the clients, jobctl and the console."""

from __future__ import annotations

from durable_jobs_client.protos import job_pb2
from durable_jobs_client.statuses import (
    RETRYABLE,
    STATUS_NAMES,
    TERMINAL,
    has_hold,
    hold_name,
    is_terminal,
    status_name,
    status_value,
)

from job_service.domain.lifecycle import RERUNNABLE
from job_service.domain.lifecycle import TERMINAL as ENGINE_TERMINAL
from job_service.domain.lifecycle import JobStatus as EngineStatus


def test_every_engine_status_has_its_name_on_the_client() -> None:
    assert set(STATUS_NAMES) == {s.value for s in EngineStatus}


def test_the_terminal_and_retryable_sets_are_the_engines() -> None:
    assert {status_name(s) for s in TERMINAL} == {s.value for s in ENGINE_TERMINAL}
    assert {status_name(s) for s in RETRYABLE} == {s.value for s in RERUNNABLE}


def test_names_and_values_are_inverses() -> None:
    for name in STATUS_NAMES:
        assert status_name(status_value(name)) == name
    assert status_value("cancel_requested") == job_pb2.JOB_STATUS_CANCEL_REQUESTED


def test_no_name_or_an_unknown_one_is_no_status() -> None:
    assert status_value("") == job_pb2.JOB_STATUS_UNSPECIFIED
    assert status_value("paused") == job_pb2.JOB_STATUS_UNSPECIFIED


def test_a_number_a_newer_service_sends_is_shown_as_the_number() -> None:
    assert status_name(99) == "99"
    assert hold_name(99) == "99"


def test_terminal_jobs() -> None:
    assert is_terminal(job_pb2.Job(status=job_pb2.JOB_STATUS_CANCELLED))
    assert not is_terminal(job_pb2.Job(status=job_pb2.JOB_STATUS_CANCEL_REQUESTED))


def test_holds() -> None:
    held = job_pb2.Job(hold=job_pb2.JobHold(reason=job_pb2.JobHold.REASON_QUEUE_PAUSED))
    assert has_hold(held)
    assert hold_name(held.hold.reason) == "queue_paused"
    assert not has_hold(job_pb2.Job())
    assert not has_hold(job_pb2.Job(hold=job_pb2.JobHold()))
