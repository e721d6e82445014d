"""The engine's refusals and the client library's exceptions stay in step.

The job service puts a ``shared.errors.Reason`` in the ErrorInfo of every refused call;
the client library (``durable_jobs_client.errors``, its own distribution, which imports
nothing of the engine) turns it back into an exception class. Every reason the engine can
answer a caller with must come back as the client class of that reason, under the same
parent, with its message, field violations and retry delay.
"""

from __future__ import annotations

from typing import TypeVar

import durable_jobs_client.errors as client_errors
import pytest

from shared import errors as engine_errors
from shared.errors import FieldViolation, Reason
from shared.rpc_errors import grpc_code, status_for, status_proto_for
from tests.support.fakes import FakeRpcError

DOMAIN = "jobs.v1.JobService"
# Answered by ExecutorService alone (to workers, never to a client of the library).
WORKERS_ONLY = {Reason.LEASE_LOST, Reason.JOB_TYPE_SPEC_CONFLICT}
# The client's own: a deadline that passed on the caller's side, with no ErrorInfo.
CLIENT_ONLY = {"DEADLINE_EXCEEDED"}
E = TypeVar("E", bound=Exception)


def _classes(module: object, root: type[E]) -> dict[str, type[E]]:
    """The module's classes under ``root`` that name a reason of their own, by reason (the
    engine's ExecutionError, an attempt's failure, names none: no call answers with it)."""
    return {
        str(cls.__dict__["reason"]): cls
        for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, root) and "reason" in cls.__dict__
        if cls is not root
    }


ENGINE = _classes(engine_errors, engine_errors.JobsError)
CLIENT = _classes(client_errors, client_errors.JobsError)
SENT = sorted(r for r in Reason if r not in WORKERS_ONLY)


def _ancestry(cls: type[Exception], root: type[Exception]) -> list[str]:
    """The reasons of ``cls`` and its parents below the root, nearest first."""
    return [str(c.reason) for c in cls.__mro__ if issubclass(c, root) and c is not root]  # type: ignore[attr-defined]


def test_every_engine_reason_has_an_engine_class() -> None:
    assert set(ENGINE) == {r.value for r in Reason}


def test_every_reason_the_engine_sends_a_caller_has_a_client_class() -> None:
    assert {r.value for r in SENT} - set(CLIENT) == set()


def test_the_client_has_no_class_for_a_reason_the_engine_never_sends() -> None:
    assert set(CLIENT) - {r.value for r in SENT} == CLIENT_ONLY


@pytest.mark.parametrize("reason", SENT, ids=str)
def test_a_refusal_comes_back_as_the_client_class_of_its_reason(reason: Reason) -> None:
    violations = [FieldViolation("input.sleep_ms", "must be at least 0")]
    sent = ENGINE[reason]("refused: ünïcode", violations, 1.5)
    back = client_errors.error_from_rpc(FakeRpcError.of(status_for(sent, DOMAIN)))
    assert type(back) is CLIENT[reason.value]
    assert back.reason == reason.value
    assert back.code is grpc_code(reason)
    assert back.message == "refused: ünïcode"
    assert [(v.field, v.description) for v in back.violations] == [
        ("input.sleep_ms", "must be at least 0")
    ]
    assert back.retry_after == 1.5


@pytest.mark.parametrize("reason", SENT, ids=str)
def test_a_refused_batch_item_comes_back_as_the_same_class(reason: Reason) -> None:
    status = status_proto_for(ENGINE[reason]("refused"), DOMAIN)
    assert type(client_errors.error_from_status(status)) is CLIENT[reason.value]


@pytest.mark.parametrize("reason", SENT, ids=str)
def test_the_client_classes_nest_as_the_engines_do(reason: Reason) -> None:
    engine = _ancestry(ENGINE[reason], engine_errors.JobsError)
    client = _ancestry(CLIENT[reason.value], client_errors.JobsError)
    assert client == engine


@pytest.mark.parametrize("reason", sorted(WORKERS_ONLY), ids=str)
def test_a_workers_only_reason_reaches_a_client_as_internal_with_its_reason(
    reason: Reason,
) -> None:
    back = client_errors.error_from_rpc(FakeRpcError.of(status_for(ENGINE[reason]("x"), DOMAIN)))
    assert type(back) is client_errors.InternalError
    assert back.reason == reason.value
