"""What job code receives and returns: the context an attempt runs in (model calls, keys,
signals, dependency results, durable steps, sleeps and waits) and the result it hands back
(output, artifacts, children). Job type authors import these names from
``shared.registry``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
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

    async def step(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Runs ``fn(*args)`` (awaited when it returns an awaitable) as the job's next
        durable step, once per job: its JSON result is recorded before this returns, and
        every later attempt gets the recorded result back without calling ``fn``. Steps
        must be asked for in the same order on every run (an attempt that asks for
        another step at a position than was recorded there fails NONDETERMINISTIC). While
        ``fn`` runs, ``step_key`` is its idempotency key: pass it to the system the effect
        is made in. A job error ``fn`` raises (ExecutionError) is recorded and raised again
        on replay; any other exception is not, and the next attempt calls ``fn`` again."""
        ...

    async def sleep(self, seconds: float) -> None:
        """A durable sleep: the attempt ends without a failure (its worker slot and lease
        freed, the attempt not spent) and the job runs again from the top ``seconds`` after
        the first run's call, its recorded steps returned as recorded. A sleep is a step
        (``sleep``): keep the order of steps and sleeps the same on every run. The job's
        ``timeout_s`` counts the time an attempt runs, never the time it sleeps."""
        ...

    async def sleep_until(self, when: datetime | float) -> None:
        """``sleep`` until ``when``: an aware datetime, or seconds since the epoch."""
        ...

    async def wait_for_signal(self, name: str, timeout: float) -> dict[str, Any] | None:
        """A durable wait for the next signal named ``name`` (SendSignal; each once, in send
        order): its payload, or None once ``timeout`` seconds (from the first run's call)
        passed without one. A signal already there returns at once; otherwise the attempt
        ends as ``sleep``'s does and the signal (or the timeout) wakes the job. Two steps
        (``signal_wait``, ``signal``). ``signal`` is for short waits that keep the slot."""
        ...

    @property
    def step_key(self) -> str:
        """The idempotency key of the step whose function runs now: the same on every
        attempt of the job (job id, ordinal and name). Outside a step: RuntimeError."""
        ...


Execute = Callable[[Any, ExecutionContext], Awaitable[JobResult]]
