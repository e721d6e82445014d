"""JOBS_MODEL_PRICES: prices per million tokens (the providers' unit), the older per-thousand
list still read as before, and the documentation's own example (docs/ai-execution.md, "Point
the engine at a real endpoint") pricing a known call correctly."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from pydantic import ValidationError

from tests.support.docs import all_text
from worker_service.model_router import ModelSettings, PriceTable


def table(monkeypatch: pytest.MonkeyPatch, prices: str) -> PriceTable:
    monkeypatch.setenv("JOBS_MODEL_PRICES", prices)
    return PriceTable(ModelSettings().model_prices)


def test_the_documented_example_prices_a_call_as_the_provider_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DeepSeek publishes deepseek-chat at $0.27 per million input tokens and $1.10 per
    million output tokens: a call of 1,000 in and 2,000 out costs $0.00247."""
    [example] = re.findall(r"export JOBS_MODEL_PRICES='([^']*)'", all_text())
    assert table(monkeypatch, example).cost_usd("deepseek-chat", 1000, 2000) == Decimal("0.00247")
    assert table(monkeypatch, example).cost_usd("deepseek-chat", 1_000_000, 0) == Decimal("0.27")


def test_the_older_list_form_is_still_per_thousand(monkeypatch: pytest.MonkeyPatch) -> None:
    prices = table(monkeypatch, '{"m": [0.27, 1.1]}')
    assert prices.cost_usd("m", 1000, 2000) == Decimal("2.47")
    assert prices.cost_usd("unlisted", 1000, 2000) == 0


@pytest.mark.parametrize(
    "price",
    [
        {"input_per_million": 1},
        {"input_per_million": 1, "output_per_million": 2, "currency": "eur"},
        {"input_per_1k": 1, "output_per_1k": 2},
        {"input_per_million": "1", "output_per_million": 2},
        {"input_per_million": True, "output_per_million": 2},
        {"input_per_million": -1, "output_per_million": 2},
        [-0.1, 0.2],
        [0.1],
        "0.1",
    ],
)
def test_a_price_that_cannot_be_read_is_refused_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, price: object
) -> None:
    monkeypatch.setenv("JOBS_MODEL_PRICES", json.dumps({"m": price}))
    with pytest.raises(ValidationError) as refused:
        ModelSettings()
    assert "model_prices" in str(refused.value) or "JOBS_MODEL_PRICES" in str(refused.value)
