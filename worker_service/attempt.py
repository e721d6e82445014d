"""One running attempt: the ``ExecutionContext`` job code sees, and the handle that stops it."""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING

from shared.ai.prompts import RenderedPrompt
from shared.ai.provider import ModelTier, ProviderResponse, UsageRecord
from shared.errors import ErrorCode, ExecutionError
from worker_service.credentials import CredentialResolver
from worker_service.domain.errors import means_lease_lost
from worker_service.domain.model import CancelCause, LockedJob

if TYPE_CHECKING:
    from worker_service.gateway import ModelGateway

NO_PROGRESS = -1.0


class Attempt:
    """Created per locked job. ``cancel`` stops the execution task at once (asyncio
    cancellation reaches the awaiting provider call) and records why."""

    __slots__ = (
        "_api_key",
        "_credentials",
        "_gateway",
        "_progress",
        "_resolved",
        "_task",
        "cause",
        "job",
        "usage",
    )

    def __init__(
        self,
        job: LockedJob,
        *,
        credentials: CredentialResolver,
        gateway: ModelGateway | None = None,
    ) -> None:
        self.job = job
        self.cause: CancelCause | None = None
        # One record per provider call of this attempt, submitted with its outcome.
        self.usage: list[UsageRecord] = []
        self._gateway = gateway
        self._task: asyncio.Task[object] | None = None
        self._progress: float | None = None
        self._credentials = credentials
        self._api_key: str | None = None
        self._resolved = False

    # --- ExecutionContext ---------------------------------------------------------------

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def user_id(self) -> str:
        return self.job.user_id

    @property
    def prompt(self) -> tuple[str, str]:
        return self.job.prompt_key, self.job.prompt_version

    async def generate(self, tier: ModelTier, prompt: RenderedPrompt) -> ProviderResponse:
        if self._gateway is None:
            raise ExecutionError(ErrorCode.INTERNAL_ERROR, "this worker has no model gateway")
        # the owner's own key (fetched under this lease) or None: the tier's platform key
        return await self._gateway.generate(
            tier, prompt, self.usage, api_key=await self.api_key(), job=(self.job_id, self.attempt)
        )

    def report_progress(self, fraction: float) -> None:
        """Keep the latest progress (0..1); the next heartbeat carries it."""
        if math.isfinite(fraction):
            self._progress = min(1.0, max(0.0, fraction))

    async def api_key(self) -> str | None:
        """The key to call the provider with (None: the platform's); fetched once per
        attempt. A lost lease stops the attempt, which then reports nothing."""
        if not self._resolved:
            try:
                self._api_key = await self._credentials.resolve(self.job)
            except Exception as exc:
                if means_lease_lost(exc):
                    self.cancel(CancelCause.LEASE_LOST)
                raise
            self._resolved = True
        return self._api_key

    # --- control ------------------------------------------------------------------------

    def take_progress(self) -> float:
        """Progress reported since the last heartbeat, or NO_PROGRESS."""
        progress, self._progress = self._progress, None
        return NO_PROGRESS if progress is None else progress

    def restore_progress(self, progress: float) -> None:
        """Put back progress whose heartbeat failed, unless newer progress arrived."""
        if progress >= 0 and self._progress is None:
            self._progress = progress

    def bind(self, task: asyncio.Task[object]) -> None:
        self._task = task
        if self.cause is not None:
            task.cancel()

    def cancel(self, cause: CancelCause) -> bool:
        """Stop the attempt; True when a running execution was cancelled.

        The first cause wins, except that a lost lease overrides any other: once another
        worker owns the job, this one must report nothing at all."""
        if self.cause is None or cause is CancelCause.LEASE_LOST:
            self.cause = cause
        if self._task is not None and not self._task.done():
            self._task.cancel()
            return True
        return False
