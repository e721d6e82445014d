"""What job code receives and returns: the context an attempt runs in (model calls, keys,
signals, dependency results) and the result it hands back (output, artifacts, children).
Job type authors import these names from ``shared.registry``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from shared.ai.provider import ModelTier
from shared.dependencies import DependencyOutput, DependencyPolicy

if TYPE_CHECKING:
    from shared.ai.prompts import RenderedPrompt
    from shared.ai.provider import ProviderResponse


@dataclass(frozen=True)
class ArtifactDraft:
    """A piece of a result, stored once per (artifact_type, artifact_id)."""

    artifact_type: str
    artifact_id: str
    payload: dict[str, Any]
    ordinal: int = 0


@dataclass(frozen=True)
class ChildJobDraft:
    """A job a projection creates, committed in the same transaction as its parent's
    result. The idempotency key makes it at most one per (parent's user, type, key).
    A join (fan-in) names the siblings it waits for by their idempotency keys."""

    job_type: str
    input: dict[str, Any]
    idempotency_key: str
    priority: int | None = None
    depends_on_keys: tuple[str, ...] = ()
    dependency_policy: DependencyPolicy = DependencyPolicy.FAIL


@dataclass(frozen=True)
class JobResult:
    output: BaseModel
    artifacts: list[ArtifactDraft] = field(default_factory=list)
    children: list[ChildJobDraft] = field(default_factory=list)


class ExecutionContext(Protocol):
    """What job code may know and do while it runs."""

    @property
    def job_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def user_id(self) -> str: ...

    @property
    def prompt(self) -> tuple[str, str]:
        """(prompt_key, prompt_version) the job was created with; ("", "") if none."""
        ...

    def report_progress(self, fraction: float) -> None: ...

    async def generate(
        self, tier: ModelTier, prompt: RenderedPrompt, *, step: str = ""
    ) -> ProviderResponse:
        """One model call through the provider the tier routes to; its usage is recorded
        with the attempt whether it succeeds or not. A named ``step`` (a-z, 0-9, _) is
        checkpointed: its response is recorded before the call returns, and a later
        attempt of the job gets that response back without a call (once per step and
        attempt: asking for the same step again calls the provider, e.g. to repair an
        answer that failed validation)."""
        ...

    async def api_key(self) -> str | None:
        """The provider key this attempt must use: the job owner's own key (fetched from
        the job service under the attempt's lease, at most once), or None for the platform's
        key. Secret: pass it to the provider only; never log, return or store it."""
        ...

    async def signal(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        """The payload of the next signal named ``name`` sent to this job
        (JobService.SendSignal), waiting up to ``timeout`` seconds (None: as long as the
        attempt may run); TimeoutError when none came. Signals come in send order, each
        once per attempt; a signal sent before the job started is waiting for it, and a
        retried attempt receives every signal again."""
        ...

    async def poll_signal(self, name: str) -> dict[str, Any] | None:
        """The payload of the next signal named ``name`` if one has arrived (each once per
        attempt, in send order), else None; never waits for one."""
        ...

    async def dependency_results(self) -> list[DependencyOutput]:
        """The results of the jobs this one depended on (CreateJob's ``depends_on`` or a
        join's siblings), in job id order, fetched page by page under the attempt's lease;
        empty for a job without dependencies."""
        ...


Execute = Callable[[Any, ExecutionContext], Awaitable[JobResult]]
