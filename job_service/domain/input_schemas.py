"""A job type's declared JSON Schema, compiled once, and what it finds wrong with an input.

The job service admits a job against the input schema its worker declared (draft 2020-12,
as pydantic emits it), without the job type's code. The refusal keeps the shape pydantic
gave it: one ``FieldViolation`` per bad field, named by its dotted path from ``prefix``
("input.items.0.title"); a missing property and a property not allowed are named
themselves, not the object that lacks or holds them. Descriptions say what the schema
asks for, in pydantic's words where it has some, and never quote the rejected value: an
input may hold anything (see ``shared.validation``).

The validator is jsonschema-rs (bench/schema_validators.py measured it against jsonschema
and fastjsonschema): compiled in Rust, draft 2020-12, every error with its instance path
and a typed kind. It runs offline: a ``$ref`` the schema does not hold is a broken schema,
never a fetch from the job service's network.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema_rs

from shared.errors import FieldViolation

_Kind = jsonschema_rs.ValidationErrorKind
# JSON Schema's type names as pydantic words its "Input should be a valid ..." message.
_TYPE_WORDS = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "array": "list",
    "object": "object",
    "null": "null",
}


class SchemaError(ValueError):
    """A schema that is not a valid JSON Schema (draft 2020-12), or one whose references
    do not resolve within it."""


class CompiledSchema:
    """One JSON Schema, compiled once (per spec), checking many instances."""

    def __init__(self, schema: dict[str, Any]) -> None:
        if not jsonschema_rs.meta.is_valid(schema):
            raise SchemaError("is not a valid JSON Schema (draft 2020-12)")
        try:
            # formats checked as pydantic checks them (uuid, date-time, email, ...)
            self._validator = jsonschema_rs.Draft202012Validator(
                schema, validate_formats=True, offline=True
            )
        except (ValueError, jsonschema_rs.ReferencingError):
            raise SchemaError("has a reference that does not resolve within it") from None

    def problems(self, instance: Any, prefix: str) -> list[FieldViolation]:
        """Every bad field of ``instance``, named from ``prefix``; [] when it is valid."""
        if self._validator.is_valid(instance):
            return []
        violations: list[FieldViolation] = []
        for error in self._validator.iter_errors(instance):
            violations.extend(_violations(error, prefix))
        return list(dict.fromkeys(violations))


def _violations(error: jsonschema_rs.ValidationError, prefix: str) -> list[FieldViolation]:
    path = ".".join([prefix, *(str(part) for part in error.instance_path)])
    kind = error.kind
    if isinstance(kind, _Kind.Required):
        return [FieldViolation(f"{path}.{kind.property}", "Field required")]
    if isinstance(kind, _Kind.AdditionalProperties | _Kind.UnevaluatedProperties):
        return [
            FieldViolation(f"{path}.{name}", "Extra inputs are not permitted")
            for name in kind.unexpected
        ]
    return [FieldViolation(path, _description(kind))]


def _description(kind: jsonschema_rs.ValidationErrorKind) -> str:
    for kind_class, describe in _DESCRIPTIONS:
        if isinstance(kind, kind_class):
            return describe(kind)
    return f"Input does not satisfy the schema's {kind.name!r} rule"


def _type(kind: Any) -> str:
    words = [_TYPE_WORDS.get(t, t) for t in kind.types]
    return f"Input should be a valid {' or '.join(words)}"


def _enum(kind: Any) -> str:
    options = [repr(o) for o in kind.options]
    listed = options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"
    return f"Input should be {listed}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


# What each kind of error asks for, in pydantic's words where pydantic has them.
_DESCRIPTIONS: tuple[tuple[type[Any], Callable[[Any], str]], ...] = (
    (_Kind.Type, _type),
    (_Kind.Enum, _enum),
    (_Kind.Constant, lambda k: f"Input should be {k.expected_value!r}"),
    (_Kind.MinLength, lambda k: f"String should have at least {_plural(k.limit, 'character')}"),
    (_Kind.MaxLength, lambda k: f"String should have at most {_plural(k.limit, 'character')}"),
    (_Kind.Pattern, lambda k: f"String should match pattern {k.pattern!r}"),
    (_Kind.Format, lambda k: f"Input should be a valid {k.format}"),
    (_Kind.Minimum, lambda k: f"Input should be greater than or equal to {k.limit}"),
    (_Kind.Maximum, lambda k: f"Input should be less than or equal to {k.limit}"),
    (_Kind.ExclusiveMinimum, lambda k: f"Input should be greater than {k.limit}"),
    (_Kind.ExclusiveMaximum, lambda k: f"Input should be less than {k.limit}"),
    (_Kind.MultipleOf, lambda k: f"Input should be a multiple of {k.multiple_of}"),
    (_Kind.MinItems, lambda k: f"List should have at least {_plural(k.limit, 'item')}"),
    (_Kind.MaxItems, lambda k: f"List should have at most {_plural(k.limit, 'item')}"),
    (_Kind.UniqueItems, lambda k: "List items should be unique"),
    (_Kind.MinProperties, lambda k: f"Object should have at least {_plural(k.limit, 'field')}"),
    (_Kind.MaxProperties, lambda k: f"Object should have at most {_plural(k.limit, 'field')}"),
    (_Kind.AnyOf, lambda k: "Input should match one of the allowed forms"),
    (_Kind.OneOfNotValid, lambda k: "Input should match one of the allowed forms"),
    (_Kind.OneOfMultipleValid, lambda k: "Input should match exactly one of the allowed forms"),
    (_Kind.FalseSchema, lambda k: "No input is allowed here"),
)
