"""The admission on its own (pure): CreateJob's request (``screen`` + ``admit``), a
projected child (``admit_child``) and a re-run (``readmit``) refuse the same bad value
with the same error. tests/integration/test_admission.py runs the same table against every
producer end to end (a schedule's slot and CreateJobs included), with nothing stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from job_service.domain.admission import (
    CreateRequest,
    Pins,
    admit,
    admit_child,
    readmit,
    screen,
)
from job_service.domain.checks import MAX_INPUT_BYTES, MAX_INPUT_DEPTH
from job_service.domain.jobs import Job
from job_service.domain.lifecycle import JobStatus
from jobtypes import feynman_evaluation, synthetic
from shared.canonical import content_hash
from shared.credentials import CredentialMode
from shared.errors import InvalidInput, JobsError
from shared.registry import ChildJobDraft
from tests.support.declared import job_types_of

REGISTRY = job_types_of([synthetic.DEFINITION, feynman_evaluation.DEFINITION])
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        value = {"k": value}
    return value


def stored_job(**fields: Any) -> Job:
    values: dict[str, Any] = {
        "id": "00000000-0000-4000-8000-000000000001",
        "user_id": "alice",
        "job_type": "synthetic",
        "status": JobStatus.CANCELLED,
        "queue": "interactive",
        "priority": 0,
        "attempt_count": 0,
        "max_attempts": 3,
        "idempotency_key": None,
        "request_hash": "h",
        "progress": 0.0,
        "validated_output": None,
        "output_hash": None,
        "error_code": None,
        "public_error_message": None,
        "internal_error_message": None,
        "created_at": NOW,
        "updated_at": NOW,
        "started_at": None,
        "finished_at": None,
        "next_run_at": None,
        **fields,
    }
    return Job(**values)


def refusal(attempt: Any) -> tuple[type[JobsError], str, list[str]]:
    with pytest.raises(JobsError) as raised:
        attempt()
    error = raised.value
    return type(error), error.message, [v.field for v in error.violations]


def via_create(job_input: dict[str, Any], priority: int | None = None) -> Any:
    request = CreateRequest("alice", "synthetic", job_input, priority=priority)
    return lambda: admit(screen(REGISTRY, request, NOW))


def via_child(job_input: dict[str, Any], priority: int | None = None) -> Any:
    draft = ChildJobDraft("synthetic", job_input, "key-1", priority)
    return lambda: admit_child(synthetic.DEFINITION, draft, NOW)


def via_rerun(job_input: dict[str, Any], priority: int | None = None) -> Any:
    return lambda: readmit(REGISTRY, stored_job(priority=priority or 0), job_input)


BAD: dict[str, tuple[dict[str, Any], int | None, str]] = {
    "too large": ({"pad": "x" * MAX_INPUT_BYTES}, None, "input is too large"),
    "too deep": (nested(MAX_INPUT_DEPTH + 1), None, "input is nested too deeply"),
    "not JSON": ({"x": float("inf")}, None, "input cannot be stored as JSON"),
    "priority": ({}, 1001, "priority is out of range"),
}


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("producer", [via_create, via_child, via_rerun])
def test_each_entry_refuses_a_bad_value_with_create_jobs_error(producer: Any, case: str) -> None:
    job_input, priority, message = BAD[case]
    field = "priority" if case == "priority" else "input"

    assert refusal(producer(job_input, priority)) == (InvalidInput, message, [field])


def test_a_child_needs_an_idempotency_key_named_as_create_job_names_it() -> None:
    draft = ChildJobDraft("synthetic", {}, "", None)

    assert refusal(lambda: admit_child(synthetic.DEFINITION, draft, NOW)) == (
        InvalidInput,
        "idempotency_key is missing or malformed",
        ["idempotency_key"],
    )


def test_a_rerun_refuses_an_unknown_prompt_version_but_keeps_its_output_schema_version() -> None:
    feynman = feynman_evaluation.DEFINITION
    kept = stored_job(job_type=feynman.job_type, output_schema_version="an older one")
    assert readmit(REGISTRY, kept, {}).definition_version == feynman.version

    unknown = stored_job(
        job_type=feynman.job_type, prompt_key=feynman.prompt_key, prompt_version="9.9.9"
    )
    pinned = CreateRequest("alice", feynman.job_type, {}, pins=Pins(prompt_version="9.9.9"))
    assert refusal(lambda: readmit(REGISTRY, unknown, {})) == refusal(
        lambda: screen(REGISTRY, pinned, NOW)
    )


def test_a_credential_to_confirm_is_left_to_the_caller_in_canonical_form() -> None:
    upper = "0A0B0C0D-0000-4000-8000-000000000000"
    request = CreateRequest(
        "alice", "synthetic", {}, credential_mode=CredentialMode.USER, credential_id=upper
    )

    assert screen(REGISTRY, request, NOW).credential_id == upper.lower()


def _hash(**fields: Any) -> str:
    request = CreateRequest("alice", "synthetic", {"sleep_ms": 1}, "k", **fields)
    return admit(screen(REGISTRY, request, NOW)).request_hash


def test_a_request_without_a_time_hashes_as_before_run_at_and_delay_were_hashed() -> None:
    """Keys stored by earlier releases keep answering the same request; a zero delay is
    no time. (Earlier releases hashed the input as the type's pydantic model dumped it,
    defaults filled in: the declared schema's defaults, factories' included, give the same
    but for a model with a serializer of its own, such as synthetic's.)"""
    validated = synthetic.DEFINITION.validate_input({"sleep_ms": 1}).model_dump(mode="json")
    validated |= {"wait_signals": [], "signal_timeout_ms": 20_000}  # its serializer dropped them
    before = content_hash({"job_type": "synthetic", "input": validated, "priority": 0})

    assert _hash() == _hash(delay_s=0.0) == before


def test_the_request_hash_takes_the_time_as_asked_not_as_resolved() -> None:
    at = NOW + timedelta(hours=1)
    # the same delay at another moment: the same request
    delayed = admit(screen(REGISTRY, CreateRequest("alice", "synthetic", {}, "k", delay_s=60), NOW))
    later = NOW + timedelta(seconds=30)
    again = admit(screen(REGISTRY, CreateRequest("alice", "synthetic", {}, "k", delay_s=60), later))
    assert delayed.request_hash == again.request_hash
    assert delayed.next_run_at != again.next_run_at
    # a run_at in another zone names the same instant
    assert _hash(run_at=at) == _hash(run_at=at.astimezone(timezone(timedelta(hours=2))))
    assert len({_hash(), _hash(run_at=at), _hash(delay_s=3600.0), _hash(delay_s=60.0)}) == 4
