"""Model calls of running attempts: the tier's route, the key, and one usage record per
call — failed and abandoned calls included — kept with the attempt and submitted with its
outcome (the job service stores them in the same transaction). With a partial-output relay,
a call made for a job streams its text to the job's watchers as it is generated. With call
permits, a call made for a job waits for its tier's fleet-wide permit right before it is
made, and a 429 blocks that tier fleet-wide (``call_permits.py``)."""

from __future__ import annotations

import asyncio
import time
import uuid

from shared import metrics, tracing
from shared.ai.prompts import RenderedPrompt
from shared.ai.provider import ModelTier, ProviderRequest, ProviderResponse, UsageRecord
from shared.credentials import CredentialMode
from shared.errors import ErrorCode, ExecutionError
from worker_service.call_permits import CallPermits
from worker_service.model_router import ModelRouter
from worker_service.partial_output import PartialOutputRelay


class ModelGateway:
    def __init__(
        self,
        router: ModelRouter,
        partials: PartialOutputRelay | None = None,
        permits: CallPermits | None = None,
    ) -> None:
        self._router = router
        self._partials = partials
        self._permits = permits

    async def generate(
        self,
        tier: ModelTier,
        prompt: RenderedPrompt,
        usage: list[UsageRecord],
        *,
        api_key: str | None = None,
        job: tuple[str, int] | None = None,
        lease: tuple[str, str] | None = None,
    ) -> ProviderResponse:
        """One call for ``tier``; ``api_key`` None means the tier's platform key. Appends
        the call's usage record to ``usage`` whatever happens. ``job`` (job id, attempt):
        the call's text streams to that job's watchers (when this gateway relays). ``lease``
        (job id, lease token): the call waits for its tier's permit first (LeaseLost when
        the lease is gone), and a 429 is reported for the tier."""
        try:
            route = self._router.route(tier)
        except ValueError:
            raise ExecutionError(ErrorCode.INTERNAL_ERROR, f"no route for tier {tier!r}") from None
        request = ProviderRequest(
            model=route.model,
            messages=prompt.messages,
            api_key=api_key,
            prompt_key=prompt.key,
            prompt_version=prompt.version,
            variables=prompt.variables,
        )
        mode = CredentialMode.PLATFORM if api_key is None else CredentialMode.USER
        permits = self._permits if lease is not None else None
        if permits is not None and lease is not None:
            await permits.acquire(tier, *lease)
        started = time.monotonic()

        def record(error_code: str, response: ProviderResponse | None = None) -> None:
            tokens_in = response.input_tokens if response else 0
            tokens_out = response.output_tokens if response else 0
            elapsed_s = time.monotonic() - started
            cost_usd = self._router.prices.cost_usd(route.model, tokens_in, tokens_out)
            model = response.model if response else route.model
            usage.append(
                UsageRecord(
                    provider=route.provider.name,
                    model=model,
                    credential_mode=mode.value,
                    input_tokens=tokens_in,
                    output_tokens=tokens_out,
                    cost_usd=cost_usd,
                    latency_ms=int(elapsed_s * 1000),
                    error_code=error_code,
                    call_id=str(uuid.uuid4()),
                )
            )
            metrics.record_provider_call(
                provider=route.provider.name,
                model=model,
                duration_s=elapsed_s,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                cost_usd=float(cost_usd),
                error_code=error_code or None,
            )

        try:
            with tracing.span(
                f"provider {route.provider.name}",
                kind=tracing.CLIENT,
                attributes={"jobs.model": route.model, "jobs.model_tier": tier},
            ):
                if self._partials is None or job is None:
                    response = await route.provider.generate(request)
                else:
                    # the call's number within the attempt: a repair call starts its text again
                    partial = self._partials.stream(*job, call=len(usage) + 1)
                    with partial:
                        response = await route.provider.generate(request, on_delta=partial.add)
        except ExecutionError as exc:
            record(exc.code)
            if permits is not None and lease is not None:
                await permits.rate_limited(tier, *lease, exc)
            raise
        except asyncio.CancelledError:
            record(ErrorCode.CANCELLED)  # timed out or cancelled while the call ran
            raise
        except Exception:
            record(ErrorCode.INTERNAL_ERROR)
            raise
        record("", response)
        return response
