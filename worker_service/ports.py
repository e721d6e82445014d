"""What the worker needs from the outside world, as Protocols the adapters satisfy.

Errors: the executor API raises ``shared.errors.JobsError`` subclasses when the job service
refused a call on purpose (``LeaseLost`` above all), ``ExecutorUnreachable`` on transport
failures and ``ExecutorCallFailed`` otherwise; a dispatch source raises
``DispatchUnavailable`` (see ``worker_service.domain.errors``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from shared.registry import ArtifactDraft
from worker_service.domain.model import HeartbeatReply, LockResult


class ExecutorApi(Protocol):
    """The job service's ExecutorService, one call per RPC. ``timeout_s`` bounds each call."""

    async def lock_job(self, job_id: str, worker_id: str, *, timeout_s: float) -> LockResult: ...

    async def heartbeat(
        self, job_id: str, lease_token: str, progress: float, *, timeout_s: float
    ) -> HeartbeatReply: ...

    async def submit_result(
        self,
        job_id: str,
        lease_token: str,
        output: dict[str, Any],
        output_hash: str,
        artifacts: Sequence[ArtifactDraft],
        *,
        timeout_s: float,
    ) -> str:
        """The job's resulting status name, e.g. "SUCCEEDED"."""
        ...

    async def submit_failure(
        self,
        job_id: str,
        lease_token: str,
        error_code: str,
        error_message: str,
        *,
        timeout_s: float,
    ) -> str:
        """The job's resulting status name: "RETRYING", "FAILED" or "CANCELLED"."""
        ...


class Delivery(Protocol):
    """One dispatch message as delivered; settled exactly once by ack or nak.
    (``nats.aio.msg.Msg`` satisfies it as is.)"""

    @property
    def data(self) -> bytes: ...

    async def ack(self) -> None: ...

    async def nak(self, delay: float | None = None) -> None: ...


class DispatchSource(Protocol):
    """The per-queue dispatch streams this worker consumes."""

    async def fetch(self, queue: str, batch: int, wait_s: float) -> Sequence[Delivery]:
        """Up to ``batch`` messages, waiting at most ``wait_s`` seconds for the first;
        an empty sequence when none came."""
        ...
