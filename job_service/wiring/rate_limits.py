"""Rate limits: the tiers' buckets, the reservations a claim makes in them and the call
permits a worker asks for. Wiring makes sure the buckets exist."""

from __future__ import annotations

from dataclasses import dataclass

from job_service.adapters.postgres.call_permits import CallPermitRepository
from job_service.adapters.postgres.rate_limits import RateLimitRepository
from job_service.domain.rate_limits import TierBudgets
from job_service.usecases.call_permits import CallPermits
from job_service.usecases.rate_limits import RateReservations
from job_service.wiring.connections import Connections


@dataclass(frozen=True)
class RateLimitsWiring:
    budgets: TierBudgets
    rates: RateLimitRepository
    reservations: RateReservations
    permits: CallPermits


async def wire_rate_limits(c: Connections) -> RateLimitsWiring:
    s = c.settings
    budgets = TierBudgets(s.tier_rate_limits(), s.rate_limit_recovery_s)
    rates = RateLimitRepository(c.hot, budgets)
    await rates.ensure_buckets()
    reservations = RateReservations(rates)
    permits = CallPermits(CallPermitRepository(c.hot), budgets, slack_s=s.rate_limit_call_slack_s)
    await permits.ensure_buckets()
    return RateLimitsWiring(budgets, rates, reservations, permits)
