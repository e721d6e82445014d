"""One output-redaction rule for every channel (seed 000 ``outputRedaction``, issue 25).

A definition's ``output_redaction`` names output fields that are never stored nor returned.
A job's output, and the model text it is made of, can leave a worker by several channels;
each one asks this module, and nothing else decides::

    channel                                 for a job type that redacts
    stored output (the job row)             each named field becomes "sha256:<hex>" of its
      and what reads it: GetJob, ListJobs,  canonical JSON (``stored_output``), before
      WatchJob states, the admin views      anything is written
    the projection's artifacts and child    every copy of a named field's value becomes the
      inputs (GetJob's artifacts, the       same "sha256:<hex>" (``scrubbed``): an entry
      child's snapshot)                     under the field's name, a whole value equal to
                                            it, and a text value ≥ 8 characters inside a
                                            longer string
    partial output (WatchJob with           none: the worker does not stream the type's
      include_partial_output)               provider calls, and the job service relays no
                                            piece of its jobs (``relays_partial_output``)
    recorded steps (RecordStep)             refused by the job service (``records_steps``):
                                            the Python worker does not ask, a worker in
                                            another language is told INVALID_INPUT
    logs                                    none: output and model text are never logged,
                                            redacted or not

Why no redacted stream: partial output is the text of a JSON object while it is being
generated; a field cannot be told apart reliably before the object is whole (a value may
be cut anywhere, keys repeat inside nested values), so a stream redacted field by field
could leak. A step's response is the whole answer, redacted fields included, and a reused
step is validated and hashed like a new one, so storing it redacted would break resuming:
it is refused instead, and the type's attempts call the provider again.

A job type this deployment does not know counts as redacting: nothing leaks by default.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any, Protocol

from shared.canonical import content_hash
from shared.errors import UnknownJobType


class Redacting(Protocol):
    """A job type as far as redaction is concerned: a Python definition (the worker's) or
    a declared spec (the job service's)."""

    @property
    def output_redaction(self) -> Set[str]: ...


class Types(Protocol):
    def get(self, job_type: str) -> Redacting: ...


def redacts(definition: Redacting | None) -> bool:
    """Whether the type's output has fields never stored nor returned (None: an unknown
    type, counted as redacting)."""
    return definition is None or bool(definition.output_redaction)


def definition_of(registry: Types, job_type: str) -> Redacting | None:
    try:
        return registry.get(job_type)
    except UnknownJobType:
        return None


def stored_output(definition: Redacting, output: dict[str, Any]) -> dict[str, Any]:
    """The output as it may be stored and shown: each ``output_redaction`` field replaced
    by the hash of its canonical JSON."""
    if not definition.output_redaction:
        return output
    return {
        name: (f"sha256:{content_hash(value)}" if name in definition.output_redaction else value)
        for name, value in output.items()
    }


# A redacted text value this long or longer is also found inside longer strings (a
# projection may quote it); shorter scalars are matched only under the field's own name.
MIN_QUOTED_CHARS = 8


def scrubbed(definition: Redacting, output: dict[str, Any], value: Any) -> Any:
    """``value`` (an artifact's payload, a child's input), which the type's projection
    built from ``output``, with every copy of a redacted field's value replaced by what
    ``stored_output`` stores for it."""
    marks = {
        name: (output[name], f"sha256:{content_hash(output[name])}")
        for name in definition.output_redaction
        if name in output
    }
    if not marks:
        return value
    distinct = [(raw, mark) for raw, mark in marks.values() if _distinct(raw)]

    def walk(item: Any, key: str | None = None) -> Any:
        if key in marks and item == marks[key][0]:
            return marks[key][1]
        for raw, mark in distinct:
            if item == raw:
                return mark
        if isinstance(item, dict):
            return {k: walk(v, k) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        if isinstance(item, str):
            for raw, mark in distinct:
                if isinstance(raw, str):
                    item = item.replace(raw, mark)
        return item

    return walk(value)


def _distinct(raw: Any) -> bool:
    """A value unlikely to stand anywhere by chance: a long text, or an object or list."""
    return (isinstance(raw, str) and len(raw) >= MIN_QUOTED_CHARS) or (
        isinstance(raw, dict | list) and bool(raw)
    )


def relays_partial_output(definition: Redacting | None) -> bool:
    """Whether the type's provider calls may stream their text to the job's watchers."""
    return not redacts(definition)


def records_steps(definition: Redacting | None) -> bool:
    """Whether the type's provider responses may be recorded as step checkpoints."""
    return not redacts(definition)
