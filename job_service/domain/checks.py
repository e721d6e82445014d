"""The checks of a request's fields, spelled once: names, ids, batches, targets,
priorities, JSON input and run times. Each raises InvalidInput naming the field. Pure: the
use cases check requests with them, and a new job's admission (``domain/admission.py``)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from shared.canonical import canonical_json
from shared.errors import FieldViolation, InvalidInput

MAX_ID_CHARS = 255
# The canonical JSON of a job's input may not exceed this (documented in docs/api.md).
MAX_INPUT_BYTES = 256 * 1024
# Nesting of a job's input (objects and lists); deeper is refused before validation.
# (Protobuf itself stops a Struct near 32 levels: 3 message levels per JSON level.)
MAX_INPUT_DEPTH = 20
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
# Items one batch RPC may carry.
MAX_BATCH = 256
# How far ahead a job may be created to run (CreateJob's run_at / delay).
MAX_SCHEDULE_AHEAD = timedelta(days=366)


def is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def require_uuid(name: str, value: str) -> None:
    if not is_uuid(value):
        raise InvalidInput(f"{name} is not a valid id", [FieldViolation(name, "must be a UUID")])


def require_name(name: str, value: str) -> None:
    if not value or len(value) > MAX_ID_CHARS or not value.isprintable():
        raise InvalidInput(
            f"{name} is missing or malformed",
            [FieldViolation(name, f"1..{MAX_ID_CHARS} printable characters")],
        )


# What a job type may be called (ExecutorService.DeclareJobType refuses other names).
JOB_TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_]{1,63}")


def require_job_type(value: str, name: str = "job_type") -> None:
    """InvalidInput unless ``value`` could name a job type (whether one was declared is
    the declared types' to say: NOT_FOUND)."""
    if not JOB_TYPE_PATTERN.fullmatch(value):
        raise InvalidInput(
            f"{name} is missing or malformed",
            [FieldViolation(name, f"a job type's name: ^{JOB_TYPE_PATTERN.pattern}$")],
        )


# ListJobs' id_suffix: the end of an id's hex digits, long enough to mean something (the
# short id shown is 8) and no longer than an id.
ID_SUFFIX = re.compile(r"[0-9a-f]{6,32}")


def id_suffix(value: str) -> str | None:
    """A request's id_suffix as a filter: lower case without dashes (None: not given);
    InvalidInput unless it is 6 to 32 hexadecimal digits."""
    if not value:
        return None
    digits = value.replace("-", "").lower()
    if not ID_SUFFIX.fullmatch(digits):
        raise InvalidInput(
            "id_suffix is not the end of a job id",
            [FieldViolation("id_suffix", "6 to 32 hexadecimal digits (dashes ignored)")],
        )
    return digits


# A target type is a short name like "knowledge_item" (seed 003: VARCHAR(32)).
TARGET_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}")


def require_target(target_type: str, target_id: str, *, id_needs_type: bool = True) -> None:
    """A target as CreateJob takes it (both or neither) or a listing filters by it (a type,
    or a type and an id): named, well-formed, within the column sizes."""
    if target_type and not TARGET_TYPE.fullmatch(target_type):
        raise InvalidInput(
            "target_type is malformed",
            [FieldViolation("target_type", "1..32 of a-z, 0-9 and _, starting with a letter")],
        )
    if target_id:
        require_name("target_id", target_id)
        if not target_type and id_needs_type:
            raise InvalidInput(
                "target_id needs target_type",
                [FieldViolation("target_type", "required with target_id")],
            )


def require_batch(name: str, items: Sequence[object]) -> None:
    if not 1 <= len(items) <= MAX_BATCH:
        raise InvalidInput(
            f"{name} must hold 1..{MAX_BATCH} items",
            [FieldViolation(name, f"1..{MAX_BATCH} items")],
        )


def priority_in_range(priority: int | None) -> bool:
    return priority is None or MIN_PRIORITY <= priority <= MAX_PRIORITY


def require_priority(priority: int | None) -> None:
    if not priority_in_range(priority):
        raise InvalidInput(
            "priority is out of range",
            [FieldViolation("priority", f"must be within {MIN_PRIORITY}..{MAX_PRIORITY}")],
        )


def require_input(raw_input: dict[str, Any]) -> None:
    """Storable as jsonb, not nested too deeply, not too large."""
    try:
        encoded = canonical_json(raw_input).encode()
    except ValueError:
        raise not_json("input") from None
    if depth(raw_input) > MAX_INPUT_DEPTH:
        raise InvalidInput(
            "input is nested too deeply",
            [FieldViolation("input", f"at most {MAX_INPUT_DEPTH} levels of objects/lists")],
        )
    if len(encoded) > MAX_INPUT_BYTES:
        raise InvalidInput(
            "input is too large",
            [FieldViolation("input", f"at most {MAX_INPUT_BYTES} bytes of JSON")],
        )


def not_json(field: str) -> InvalidInput:
    """NaN, infinities and NUL characters fit in a protobuf Struct, not in jsonb."""
    return InvalidInput(
        f"{field} cannot be stored as JSON",
        [FieldViolation(field, "finite numbers and strings without NUL characters only")],
    )


def depth(value: Any) -> int:
    """Levels of nesting of a JSON-like value, without recursion (deep input is hostile)."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
    return deepest


def require_schedule(
    run_at: datetime | None, delay_s: float | None, now: datetime
) -> datetime | None:
    """When a job created ``now`` with ``run_at`` or ``delay_s`` becomes due; None for
    now (no time, a zero delay or a time already past)."""
    if run_at is not None and delay_s is not None:
        raise InvalidInput(
            "give run_at or delay, not both", [FieldViolation("delay", "not with run_at")]
        )
    if delay_s is not None:
        if delay_s < 0:
            raise InvalidInput("delay is negative", [FieldViolation("delay", "must be >= 0")])
        if delay_s > MAX_SCHEDULE_AHEAD.total_seconds():
            raise InvalidInput("delay is too long", [FieldViolation("delay", "at most 366 days")])
        run_at = now + timedelta(seconds=delay_s) if delay_s > 0 else None
    if run_at is None or run_at <= now:
        return None
    if run_at - now > MAX_SCHEDULE_AHEAD:
        raise InvalidInput(
            "run_at is too far ahead", [FieldViolation("run_at", "at most 366 days from now")]
        )
    return run_at


def require_deadline(
    deadline: datetime | None, due: datetime | None, now: datetime
) -> datetime | None:
    """A job's deadline as CreateJob's ``deadline`` asks (None: unset), for a job created
    ``now`` that becomes due at ``due`` (None: now): ahead of both, and at most 366 days
    after the job is due."""
    if deadline is None:
        return None
    start = due or now
    if deadline <= now:
        raise InvalidInput("deadline has passed", [FieldViolation("deadline", "must be ahead")])
    if deadline <= start:
        raise InvalidInput(
            "deadline is before the job is due",
            [FieldViolation("deadline", "after run_at or delay")],
        )
    if deadline - start > MAX_SCHEDULE_AHEAD:
        raise InvalidInput(
            "deadline is too far ahead",
            [FieldViolation("deadline", "at most 366 days after the job is due")],
        )
    return deadline
