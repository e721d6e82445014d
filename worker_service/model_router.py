"""The model router: a job type asks for a tier (``primary``, ``cheap``); the environment
says which provider, base URL, model and platform key serve it.

    JOBS_MODEL_<TIER>_PROVIDER   fake (default) | openai (any OpenAI-compatible API)
    JOBS_MODEL_<TIER>_BASE_URL   e.g. https://api.deepseek.com/v1 (openai only)
    JOBS_MODEL_<TIER>_MODEL      the model name sent to the provider
    JOBS_MODEL_<TIER>_API_KEY    the platform key used when a job brings none
    JOBS_MODEL_PRICES            JSON {"<model>": {"input_per_million": usd,
                                 "output_per_million": usd}} (the providers' unit), or
                                 the older {"<model>": [usd per 1k input, per 1k output]}
    JOBS_PROVIDER_CONNECT_TIMEOUT_S, JOBS_PROVIDER_READ_TIMEOUT_S
    JOBS_FAKE_LATENCY_MS, JOBS_FAKE_FAILURE, JOBS_FAKE_FAILURE_RATE, JOBS_FAKE_FAIL_FIRST
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.ai.provider import ModelTier, Provider
from worker_service.adapters.fake_provider import FakeProvider, FakeSettings
from worker_service.adapters.openai_compat import OpenAICompatibleProvider


class ProviderKind(StrEnum):
    FAKE = "fake"
    OPENAI = "openai"


class ModelSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JOBS_", extra="ignore")

    model_primary_provider: ProviderKind = ProviderKind.FAKE
    model_primary_base_url: str = ""
    model_primary_model: str = "fake-primary"
    model_primary_api_key: SecretStr | None = None
    model_cheap_provider: ProviderKind = ProviderKind.FAKE
    model_cheap_base_url: str = ""
    model_cheap_model: str = "fake-cheap"
    model_cheap_api_key: SecretStr | None = None
    # {"model": (usd per 1k input tokens, usd per 1k output tokens)}, from either form
    model_prices: dict[str, tuple[float, float]] = Field(default_factory=dict)
    provider_connect_timeout_s: float = Field(default=5.0, gt=0)
    provider_read_timeout_s: float = Field(default=60.0, gt=0)
    fake_latency_ms: int = Field(default=0, ge=0, le=600_000)
    fake_failure: str = ""
    fake_failure_rate: float = Field(default=0.0, ge=0, le=1)
    fake_fail_first: int = Field(default=0, ge=0)

    @field_validator("model_prices", mode="before")
    @classmethod
    def _prices_from_json(cls, value: object) -> object:
        prices = json.loads(value) if isinstance(value, str) else value
        if not isinstance(prices, dict):
            return prices  # pydantic refuses it, naming the setting
        return {model: _per_thousand(model, price) for model, price in prices.items()}

    @field_validator("model_prices", mode="after")
    @classmethod
    def _prices_are_not_negative(
        cls, prices: dict[str, tuple[float, float]]
    ) -> dict[str, tuple[float, float]]:
        for model, price in prices.items():
            if min(price) < 0:
                raise ValueError(f"JOBS_MODEL_PRICES[{model!r}]: a price is not negative")
        return prices

    @model_validator(mode="after")
    def _openai_tiers_have_a_base_url(self) -> ModelSettings:
        for tier in ModelTier:
            kind, base_url, _, _ = self.tier(tier)
            if kind is ProviderKind.OPENAI and not base_url:
                raise ValueError(f"JOBS_MODEL_{tier.name}_BASE_URL is required for openai")
        return self

    def tier(self, tier: ModelTier | str) -> tuple[ProviderKind, str, str, str | None]:
        """(provider kind, base URL, model, platform key) configured for ``tier``."""
        prefix = f"model_{ModelTier(tier).value}_"
        key: SecretStr | None = getattr(self, prefix + "api_key")
        return (
            getattr(self, prefix + "provider"),
            getattr(self, prefix + "base_url"),
            getattr(self, prefix + "model"),
            key.get_secret_value() if key else None,
        )


PER_MILLION_KEYS = {"input_per_million", "output_per_million"}


def _per_thousand(model: str, price: object) -> object:
    """A model's price in the table's unit. Providers publish prices per million tokens
    (``{"input_per_million": 0.27, "output_per_million": 1.10}``), the form to use; a
    two-number list is the older form, per thousand. A list given per million would cost
    every call 1,000 times too much, so the object names its unit."""
    if not isinstance(price, dict):
        return price  # the older form: pydantic checks the two numbers
    if set(price) != PER_MILLION_KEYS:
        raise ValueError(
            f"JOBS_MODEL_PRICES[{model!r}]: give exactly input_per_million and"
            f" output_per_million (US dollars per million tokens), not {sorted(price)}"
        )
    per_million = (price["input_per_million"], price["output_per_million"])
    if not all(isinstance(p, int | float) and not isinstance(p, bool) for p in per_million):
        raise ValueError(f"JOBS_MODEL_PRICES[{model!r}]: prices are numbers")
    return tuple(p / 1000 for p in per_million)


@dataclass(frozen=True)
class PriceTable:
    prices: dict[str, tuple[float, float]]

    def cost_usd(self, model: str, input_tokens: int, output_tokens: int) -> Decimal:
        """Exact to the microdollar: the configured prices as written (their shortest
        decimal form), never summed as binary doubles."""
        per_in, per_out = (Decimal(repr(p)) for p in self.prices.get(model, (0.0, 0.0)))
        cost = (input_tokens * per_in + output_tokens * per_out) / 1000
        return cost.quantize(Decimal("0.000001"))


@dataclass(frozen=True)
class Route:
    """A tier's provider (which holds the tier's platform key) and model."""

    provider: Provider
    model: str


class ModelRouter:
    """Routes per tier; tiers with the same provider, base URL and key share one client."""

    def __init__(self, routes: dict[ModelTier, Route], prices: PriceTable) -> None:
        self._routes = routes
        self.prices = prices

    @classmethod
    def from_settings(cls, settings: ModelSettings) -> ModelRouter:
        built: dict[tuple[ProviderKind, str, str | None], Provider] = {}
        routes = {}
        for tier in ModelTier:
            kind, base_url, model, key = settings.tier(tier)
            if kind is ProviderKind.OPENAI and not base_url:
                raise ValueError(f"JOBS_MODEL_{tier.name}_BASE_URL is required for openai")
            provider = built.get((kind, base_url, key))
            if provider is None:
                provider = built[(kind, base_url, key)] = _provider(settings, kind, base_url, key)
            routes[tier] = Route(provider, model)
        return cls(routes, PriceTable(dict(settings.model_prices)))

    def route(self, tier: ModelTier) -> Route:
        return self._routes[ModelTier(tier)]

    async def aclose(self) -> None:
        for provider in {id(r.provider): r.provider for r in self._routes.values()}.values():
            await provider.aclose()


def _provider(
    settings: ModelSettings, kind: ProviderKind, base_url: str, key: str | None
) -> Provider:
    if kind is ProviderKind.OPENAI:
        return OpenAICompatibleProvider(
            base_url,
            default_api_key=key,
            connect_timeout_s=settings.provider_connect_timeout_s,
            read_timeout_s=settings.provider_read_timeout_s,
        )
    return FakeProvider(
        FakeSettings(
            latency_ms=settings.fake_latency_ms,
            failure=settings.fake_failure,
            failure_rate=settings.fake_failure_rate,
            fail_first=settings.fake_fail_first,
        )
    )
