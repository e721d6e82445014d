"""The one output-redaction rule (shared.redaction): what each channel may carry for a job
type that redacts output fields, one that does not, and one this deployment does not know."""

from __future__ import annotations

import dataclasses

from shared import redaction
from shared.canonical import content_hash
from shared.registry import Registry, default_registry

PLAIN = default_registry().get("synthetic")
REDACTING = dataclasses.replace(PLAIN, output_redaction=frozenset({"data"}))


def test_stored_output_replaces_each_redacted_field_by_its_hash() -> None:
    output = {"data": {"secret": 1}, "n": 2}

    assert redaction.stored_output(REDACTING, output) == {
        "data": f"sha256:{content_hash({'secret': 1})}",
        "n": 2,
    }
    assert redaction.stored_output(PLAIN, output) == output


def test_a_redacting_type_neither_streams_nor_records_steps() -> None:
    assert redaction.relays_partial_output(PLAIN) and redaction.records_steps(PLAIN)
    assert not redaction.relays_partial_output(REDACTING)
    assert not redaction.records_steps(REDACTING)


def test_an_unknown_type_counts_as_redacting() -> None:
    registry = Registry([PLAIN])

    assert redaction.definition_of(registry, "synthetic") is PLAIN
    assert redaction.definition_of(registry, "gone") is None
    assert redaction.redacts(None)
    assert not redaction.relays_partial_output(None) and not redaction.records_steps(None)
