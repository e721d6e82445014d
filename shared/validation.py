"""A pydantic ValidationError described without the values it rejected.

``str(ValidationError)`` quotes the offending input, which may be a job's input, a model's
answer or a setting holding a password: none of it may reach a log line, an error message
or a stored row. Every account of a validation failure is built from these, which keep
the location and the message of each error only.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError


@dataclass(frozen=True)
class ValidationProblem:
    """One error of a ValidationError: where (the path of field names and indexes, as
    strings) and why. Never the value."""

    loc: tuple[str, ...]
    message: str


def validation_problems(exc: ValidationError) -> list[ValidationProblem]:
    return [
        ValidationProblem(tuple(str(part) for part in err["loc"]), err["msg"])
        for err in exc.errors(include_url=False, include_input=False)
    ]


def describe_validation_error(exc: ValidationError, max_chars: int | None = None) -> str:
    """``N error(s): a.b: message; c: message``; longer than ``max_chars``, cut with an
    ellipsis."""
    parts = [f"{'.'.join(p.loc) or '<root>'}: {p.message}" for p in validation_problems(exc)]
    text = f"{exc.error_count()} error(s): " + "; ".join(parts)
    if max_chars is None or len(text) <= max_chars:
        return text
    return text[: max_chars - 1] + "…"
