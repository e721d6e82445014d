"""The one description of a pydantic ValidationError: locations and messages, never the
values, used by the registry, the AI pipeline, the worker's outcomes and the settings."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError

from shared.settings_errors import describe
from shared.validation import describe_validation_error, validation_problems

SECRET = "hunter2-do-not-log"


class Inner(BaseModel):
    count: int = Field(ge=0)


class Outer(BaseModel):
    name: str = Field(max_length=3)
    items: list[Inner]


def invalid() -> ValidationError:
    with pytest.raises(ValidationError) as raised:
        Outer.model_validate({"name": SECRET, "items": [{"count": SECRET}]})
    return raised.value


def test_problems_name_locations_and_messages_only() -> None:
    problems = validation_problems(invalid())
    assert [p.loc for p in problems] == [("name",), ("items", "0", "count")]
    assert all(SECRET not in p.message for p in problems)


def test_description_never_quotes_a_value() -> None:
    text = describe_validation_error(invalid())
    assert text.startswith("2 error(s): name: ")
    assert "items.0.count: " in text
    assert SECRET not in text
    assert SECRET not in describe(invalid())


def test_description_is_bounded_with_an_ellipsis() -> None:
    text = describe_validation_error(invalid(), max_chars=20)
    assert len(text) == 20 and text.endswith("…")
