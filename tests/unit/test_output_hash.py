"""output_hash over RFC 8785 canonical JSON (docs/api.md, "The output hash"): the RFC's own
examples, the vectors a worker in another language checks itself against, and the legacy
scheme still accepted."""

from __future__ import annotations

import hashlib
import struct

import pytest

from shared.canonical import content_hash
from shared.output_hash import jcs, matches, output_hash

# RFC 8785 §3.2.2 / §3.2.3: the input of the RFC's example and its canonical form.
RFC_EXAMPLE = {
    "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
    "literals": [None, True, False],
}
RFC_EXAMPLE_CANONICAL = (
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
)


def test_the_rfcs_example_canonicalises_as_the_rfc_says() -> None:
    assert jcs(RFC_EXAMPLE).decode() == RFC_EXAMPLE_CANONICAL


def test_keys_sort_by_utf16_code_units_as_in_the_rfcs_sorting_example() -> None:
    # RFC 8785 §3.2.3: the emoji (a surrogate pair, 0xD83D...) sorts before U+FB33
    keys = ["\u20ac", "\r", "\ufb33", "1", "\U0001f600", "\u0080", "\u00f6"]
    canonical = jcs({k: 0 for k in keys}).decode()
    order = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert canonical == "{" + ",".join(f'"{k}":0' for k in order).replace("\r", "\\r") + "}"


# RFC 8785 Appendix B: IEEE 754 doubles (as hex bits) and their JSON numbers.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),  # minus zero
    ("0000000000000001", "5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("4415af1d78b58c40", "100000000000000000000"),
]


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_numbers_serialise_as_in_appendix_b(bits: str, expected: str) -> None:
    (value,) = struct.unpack(">d", bytes.fromhex(bits))
    assert jcs([value]).decode() == f"[{expected}]"


# Cross-language vectors: the output, its canonical JSON, its output_hash. A worker in
# another language runs the same three (docs/api.md, "The output hash").
VECTORS = [
    ({"b": 2, "a": 1}, '{"a":1,"b":2}'),
    (
        {"label": "résumé", "value": 3.0, "n": 10**16},
        '{"label":"résumé","n":10000000000000000,"value":3}',
    ),
    ({"x": [1e-7, 0.5, None, True]}, '{"x":[1e-7,0.5,null,true]}'),
    ({}, "{}"),
]


@pytest.mark.parametrize(("output", "canonical"), VECTORS)
def test_output_hash_is_the_sha256_of_the_canonical_json(output: object, canonical: str) -> None:
    assert jcs(output).decode() == canonical
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    assert output_hash(output) == f"jcs:sha256:{digest}"


def test_the_readme_vector() -> None:
    assert output_hash({"b": 2, "a": 1}) == (
        "jcs:sha256:43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777"
    )


def test_an_integer_hashes_as_the_double_it_travels_as() -> None:
    # protobuf's Struct carries every number as a double: 2**60 + 1 arrives as 2**60
    assert output_hash({"n": 2**60 + 1}) == output_hash({"n": float(2**60)})
    assert output_hash({"n": 2}) == output_hash({"n": 2.0})


def test_nan_and_infinities_are_not_json() -> None:
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            output_hash({"x": bad})


def test_both_schemes_are_accepted_and_checked() -> None:
    output = {"x": 1e-7, "label": "a"}
    # the schemes differ (Python prints 1e-07), yet each verifies under its own name
    assert content_hash(output) != output_hash(output).removeprefix("jcs:sha256:")
    assert matches(output_hash(output), output)
    assert matches(content_hash(output), output)
    assert not matches(output_hash({"x": 2}), output)
    assert not matches(content_hash({"x": 2}), output)
    assert not matches("jcs:sha256:" + content_hash(output), output)  # scheme ≠ digest
    assert not matches(content_hash(output).upper(), output)
    assert not matches("md5:" + content_hash(output), output)
