"""Canonical JSON and content hashes (DESIGN §5, §7), and protobuf Struct conversion."""

from __future__ import annotations

import hashlib
import math
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.canonical import canonical_json, check_storable, content_hash
from shared.pbconv import dict_from_struct, struct_from_dict, timestamp

# --- canonical JSON --------------------------------------------------------------------


def test_canonical_json_is_sorted_and_compact() -> None:
    assert canonical_json({"b": 1, "a": [2, {"d": None, "c": True}]}) == (
        '{"a":[2,{"c":true,"d":null}],"b":1}'
    )


def test_canonical_json_keeps_unicode_as_is() -> None:
    # One byte form: UTF-8 of the character, not a \\u escape.
    assert canonical_json({"text": "förklara 解释"}) == '{"text":"förklara 解释"}'


def test_content_hash_is_the_sha256_of_the_canonical_form() -> None:
    value = {"z": "é", "a": 1}
    expected = hashlib.sha256('{"a":1,"z":"é"}'.encode()).hexdigest()
    assert content_hash(value) == expected
    # Pinned: a change to the canonical form would orphan every stored hash.
    assert content_hash({"sleep_ms": 0, "fail": "none"}) == (
        hashlib.sha256(b'{"fail":"none","sleep_ms":0}').hexdigest()
    )


def test_content_hash_tells_different_content_apart() -> None:
    assert content_hash({"a": 1}) != content_hash({"a": "1"})
    assert content_hash({"a": 1}) != content_hash({"a": 2})
    assert content_hash({"a": [1, 2]}) != content_hash({"a": [2, 1]})  # lists keep order
    assert content_hash({"a": None}) != content_hash({})


# what jsonb can store: no NaN, no infinities, no NUL characters
storable_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"))
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | storable_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=25,
)


def _reordered(value: Any, rng: random.Random) -> Any:
    """The same value with every dict's keys inserted in a shuffled order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _reordered(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_reordered(v, rng) for v in value]
    return value


@settings(database=None, max_examples=300)
@given(
    value=st.dictionaries(
        st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8),
        json_values,
        max_size=6,
    ),
    seed=st.integers(),
)
def test_key_order_never_changes_the_form_or_the_hash(value: dict[str, Any], seed: int) -> None:
    shuffled = _reordered(value, random.Random(seed))
    assert shuffled == value
    assert canonical_json(shuffled) == canonical_json(value)
    assert content_hash(shuffled) == content_hash(value)
    assert len(content_hash(value)) == 64


# --- Struct <-> dict -------------------------------------------------------------------


def _strict(value: Any) -> Any:
    """A value with its types spelled out, so 1 and 1.0 and True compare different."""
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    return (type(value).__name__, value)


def test_struct_round_trip_keeps_ints_nesting_and_null() -> None:
    value = {
        "count": 3,
        "negative": -7,
        "big": 2**53 - 1,
        "ratio": 0.25,
        "flag": True,
        "off": False,
        "nothing": None,
        "name": "x",
        "list": [1, 2.5, "s", None, [4, {"deep": 5}]],
        "nested": {"inner": {"n": 0, "items": []}, "empty": {}},
    }
    back = dict_from_struct(struct_from_dict(value))
    assert _strict(back) == _strict(value)


def test_whole_floats_come_back_as_ints() -> None:
    # Struct numbers are doubles; pydantic int fields need ints back.
    back = dict_from_struct(struct_from_dict({"sleep_ms": 5.0, "list": [2.0]}))
    assert _strict(back) == _strict({"sleep_ms": 5, "list": [2]})


def test_bools_are_not_turned_into_ints() -> None:
    back = dict_from_struct(struct_from_dict({"t": True, "f": False}))
    assert back["t"] is True
    assert back["f"] is False


struct_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
    | st.text()
)
struct_values = st.recursive(
    struct_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)


def _expected_back(value: Any) -> Any:
    """What a Struct round trip should give: whole doubles below 2**53 become ints."""
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, dict):
        return {k: _expected_back(v) for k, v in value.items()}
    return [_expected_back(v) for v in value]


@settings(database=None, max_examples=300)
@given(value=st.dictionaries(st.text(max_size=8), struct_values, max_size=6))
def test_struct_round_trip_property(value: dict[str, Any]) -> None:
    back = dict_from_struct(struct_from_dict(value))
    assert _strict(back) == _strict(_expected_back(value))


def test_timestamp() -> None:
    assert timestamp(None) is None
    when = datetime(2025, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
    message = timestamp(when)
    assert message is not None
    assert message.seconds == int(when.timestamp())
    assert message.nanos == 123456000
    assert message.ToDatetime(tzinfo=UTC) == when
    # An aware time in another zone names the same instant.
    elsewhere = when.astimezone(timezone(timedelta(hours=8)))
    assert timestamp(elsewhere) == message


def test_non_finite_numbers_survive_a_struct_but_are_refused_as_json() -> None:
    value = dict_from_struct(struct_from_dict({"a": float("inf"), "b": [float("nan")]}))

    assert value["a"] == float("inf")
    assert math.isnan(value["b"][0])
    with pytest.raises(ValueError):
        canonical_json(value)


@pytest.mark.parametrize("value", [{"a\x00": 1}, {"a": "b\x00"}, {"a": [float("nan")]}])
def test_what_jsonb_cannot_store_is_refused(value: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        check_storable(value)
    with pytest.raises(ValueError):
        content_hash(value)
