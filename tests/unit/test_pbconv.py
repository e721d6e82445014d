"""The artifact and usage conversions both services share, one per direction."""

from __future__ import annotations

from decimal import Decimal

import pytest

from shared.ai.provider import UsageRecord
from shared.pb.jobs.v1 import executor_service_pb2 as epb
from shared.pbconv import artifact_from_pb, artifact_to_pb, usage_from_pb, usage_to_pb
from shared.registry import ArtifactDraft


def test_an_artifact_round_trips() -> None:
    draft = ArtifactDraft("review_card", "c1", {"front": "q", "n": [1, 2.5, None]}, ordinal=3)
    message = artifact_to_pb(draft)
    assert (message.artifact_type, message.artifact_id, message.ordinal) == ("review_card", "c1", 3)
    assert artifact_from_pb(message) == draft


def test_usage_round_trips() -> None:
    usage = UsageRecord(
        "openai", "gpt", "user", 10, 20, Decimal("0.002470"), 1500, "PROVIDER_TIMEOUT"
    )
    message = usage_to_pb(usage)
    assert message.cost_usd_decimal == "0.002470"
    assert usage_from_pb(message) == usage


@pytest.mark.parametrize(
    ("decimal", "double", "kept"),
    [
        ("0.1", 0.0, "0.100000"),  # a binary double could not hold it
        ("0.0000004", 0.0, "0.000000"),  # six decimals kept
        ("", 0.00247, "0.002470"),  # an older worker: the double, as it prints
        ("abc", 5.0, "0"),
        ("NaN", 0.0, "0"),
        ("-0.5", 0.0, "0"),
        ("1e9", 0.0, "0"),
    ],
)
def test_a_calls_cost_is_kept_exactly_or_zeroed(decimal: str, double: float, kept: str) -> None:
    message = epb.ProviderUsage(cost_usd_decimal=decimal, cost_usd=double)
    assert usage_from_pb(message).cost_usd == Decimal(kept)


def test_usage_from_a_worker_is_bounded_to_what_a_row_holds() -> None:
    message = epb.ProviderUsage(
        provider="p" * 100,
        model="",
        credential_mode="",
        input_tokens=-5,
        output_tokens=2**40,
        cost_usd=1e9,
        latency_ms=-1,
        error_code="E" * 200,
    )
    usage = usage_from_pb(message)
    assert usage == UsageRecord(
        provider="p" * 64,
        model="unknown",
        credential_mode="platform",
        input_tokens=0,
        output_tokens=2**31 - 1,
        cost_usd=Decimal(0),
        latency_ms=0,
        error_code="E" * 100,
    )
