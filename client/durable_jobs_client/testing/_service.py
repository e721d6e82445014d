"""``JobServiceState``: what a fake client reads and changes, in memory, and what every
call of its clients was (``calls``), with the hooks a test puts between a call and its
answer (``on``, ``refuse``)."""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import secrets
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc

from durable_jobs_client._pb.jobs.v1 import admin_service_pb2 as apb
from durable_jobs_client._pb.jobs.v1 import credential_service_pb2 as cpb
from durable_jobs_client._pb.jobs.v1 import job_pb2
from durable_jobs_client.errors import InvalidInput, JobNotFound, JobsError
from durable_jobs_client.statuses import TERMINAL
from durable_jobs_client.usage import Usage

E = TypeVar("E", bound=JobsError)
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 500  # as job_service pages its listings
CODES = {  # the status code job_service answers each refusal with
    "INVALID_INPUT": grpc.StatusCode.INVALID_ARGUMENT,
    "UNKNOWN_JOB_TYPE": grpc.StatusCode.NOT_FOUND,
    "JOB_NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "CREDENTIAL_NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "UNAUTHENTICATED": grpc.StatusCode.UNAUTHENTICATED,
    "PERMISSION_DENIED": grpc.StatusCode.PERMISSION_DENIED,
}


def refusal(kind: type[E], message: str) -> E:
    """A client error as the real client raises it: its class and its status code."""
    return kind(message, code=CODES.get(kind.reason, grpc.StatusCode.FAILED_PRECONDITION))


def new_id() -> str:
    """A version-7 UUID, as job_service makes them: ids made later sort later."""
    ms = time.time_ns() // 1_000_000
    value = ms << 80 | 0x7 << 76 | secrets.randbits(12) << 64 | 0b10 << 62 | secrets.randbits(62)
    return str(uuid.UUID(int=value))


def now_stamp(message: Any) -> None:
    """Sets a Timestamp field (given as the message) to now."""
    message.GetCurrentTime()


@dataclass(frozen=True)
class Call:
    """One call a fake client was asked: ``method`` as the client spells it ("create",
    "admin.get_job", "credentials.put") and every argument by name, defaults included."""

    method: str
    args: dict[str, Any]


@dataclass
class JobServiceState:
    """The job service a fake client talks to, in memory: seed it (``put``, or the lists
    and dicts below), change its jobs as a worker would (``update``), read what was asked
    (``calls``, ``asked``) and make any call wait, answer otherwise or raise (``on``,
    ``refuse``). Its public face, with ``client()``, is ``FakeJobService``."""

    jobs: dict[str, job_pb2.Job] = field(default_factory=dict)
    dead_events: list[apb.DeadOutboxEvent] = field(default_factory=list)
    definitions: list[apb.JobDefinitionInfo] = field(default_factory=list)
    queues: list[apb.QueueInfo] = field(default_factory=list)
    workers: list[apb.Worker] = field(default_factory=list)
    rate_limits: list[apb.RateLimitInfo] = field(default_factory=list)
    credentials: list[cpb.Credential] = field(default_factory=list)
    # console session id -> the principal it belongs to
    console_sessions: dict[str, str] = field(default_factory=dict)
    # what get_usage answers (None: no calls, nothing spent)
    usage: Usage | None = None
    # the caller of AdminService, as the service names it (sessions, paused_by)
    principal: str = "admin"
    calls: list[Call] = field(default_factory=list)
    _hooks: dict[str, Callable[..., Any]] = field(default_factory=dict, repr=False)
    _keys: dict[tuple[str, ...], Any] = field(default_factory=dict, repr=False)
    _waiters: list[asyncio.Future[None]] = field(default_factory=list, repr=False)

    # --- what tests set up and read ---------------------------------------------------

    def put(self, *jobs: job_pb2.Job) -> None:
        """Adds (or replaces) jobs as they are: the stored message is the one given."""
        for job in jobs:
            self.jobs[job.id] = job
        self.changed()

    def update(self, job_id: str, **fields: Any) -> job_pb2.Job:
        """Changes a job as the engine would (``status=JOB_STATUS_SUCCEEDED``, ``output=
        {...}``, ``progress=0.5``) and wakes its watchers; a terminal status sets
        ``finished_at``."""
        job = self.jobs[job_id]
        for name, value in fields.items():
            target = getattr(job, name)
            if hasattr(target, "CopyFrom") and not isinstance(value, dict):
                target.CopyFrom(value)
            elif hasattr(target, "update") and isinstance(value, dict):
                target.Clear()
                target.update(value)
            elif hasattr(target, "extend"):
                del target[:]
                target.extend(value)
            else:
                setattr(job, name, value)
        now_stamp(job.updated_at)
        if "status" in fields and job.status in TERMINAL:
            now_stamp(job.finished_at)
        self.changed()
        return job

    def asked(self, method: str) -> list[dict[str, Any]]:
        """The arguments of each call of ``method`` ("admin.list_jobs"), in order."""
        return [c.args for c in self.calls if c.method == method]

    def on(self, method: str, handler: Callable[..., Any] | None) -> None:
        """From now on each call of ``method`` (a name, or a pattern: "admin.*") first
        calls ``handler`` with the call's arguments by name. The handler may wait (an
        async handler), raise a client error, or return the answer: anything but None
        replaces the in-memory one (for ``watch``, an async iterator of its states).
        None removes the hook; a later hook for the same method replaces an earlier one."""
        if handler is None:
            self._hooks.pop(method, None)
        else:
            self._hooks[method] = handler

    def refuse(self, method: str, error: JobsError | None) -> None:
        """Each call of ``method`` (or pattern) raises ``error`` (None: answers again)."""

        def raising(**_: Any) -> None:
            assert error is not None
            raise error

        self.on(method, None if error is None else raising)

    # --- what the fake clients use -------------------------------------------------------

    async def called(self, method: str, args: dict[str, Any]) -> Any:
        """Records a call, runs its hook; the hook's answer, or None to answer from memory."""
        args = {k: v for k, v in args.items() if k != "self"}
        self.calls.append(Call(method, args))
        for pattern in reversed(list(self._hooks)):
            if pattern == method or fnmatch.fnmatchcase(method, pattern):
                answer = self._hooks[pattern](**args)
                return await answer if inspect.isawaitable(answer) else answer
        return None

    def changed(self) -> None:
        """Wakes every watch waiting for a job to change."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done() and not waiter.get_loop().is_closed():
                waiter.set_result(None)

    async def next_change(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def job(self, job_id: str, user_id: str | None = None) -> job_pb2.Job:
        """The stored job (of ``user_id`` when given), or JobNotFound."""
        job = self.jobs.get(job_id)
        if job is None or (user_id is not None and job.user_id != user_id):
            raise refusal(JobNotFound, "no such job")
        return job

    def once(self, key: tuple[str, ...], make: Callable[[], Any]) -> tuple[Any, bool]:
        """What ``make`` answered the first time ``key`` (an idempotency key and its scope)
        was used, and whether this call made it."""
        if key in self._keys:
            return self._keys[key], False
        self._keys[key] = made = make()
        return made, True


def copy_of(job: job_pb2.Job, *, internal: bool) -> job_pb2.Job:
    """The job as an answer shows it: to its user without what only operators see."""
    shown = job_pb2.Job()
    shown.CopyFrom(job)
    if not internal:
        shown.internal_error_message = ""
        shown.created_by = ""
        if shown.hold.reason != job_pb2.JobHold.REASON_WAITING_FOR_DEPENDENCIES:
            shown.ClearField("hold")
    return shown


def newest_first(jobs: Iterable[job_pb2.Job]) -> list[job_pb2.Job]:
    return sorted(jobs, key=lambda j: (j.created_at.ToNanoseconds(), j.id), reverse=True)


def oldest_first(jobs: Iterable[job_pb2.Job]) -> list[job_pb2.Job]:
    return sorted(jobs, key=lambda j: (j.created_at.ToNanoseconds(), j.id))


def id_ending(suffix: str) -> Callable[[job_pb2.Job], bool]:
    """The jobs whose id's hex digits end with ``suffix`` (6 to 32 of them)."""
    digits = suffix.lower()
    if not 6 <= len(digits) <= 32 or any(c not in "0123456789abcdef" for c in digits):
        raise refusal(InvalidInput, "id_suffix is 6 to 32 hex digits")
    return lambda job: job.id.replace("-", "").endswith(digits)


def cursor(job: job_pb2.Job) -> str:
    """Where a keyset page continues: after this job in its order (a page token)."""
    return f"{job.created_at.ToNanoseconds()}/{job.id}"


def page(
    ordered: Sequence[job_pb2.Job],
    page_size: int,
    page_token: str,
    *,
    newest: bool = True,
    default: int = DEFAULT_PAGE_SIZE,
    most: int = MAX_PAGE_SIZE,
) -> tuple[list[job_pb2.Job], str]:
    """One page of ``ordered`` (``newest`` first, or oldest first) after the job the
    token names, and the next page's token ("" on the last), as job_service pages: by
    keyset, so that a job added or changed meanwhile never shifts a page."""
    if page_size < 0:
        raise refusal(InvalidInput, "page_size must not be negative")
    size = min(page_size or default, most)
    start = 0
    if page_token:
        at, _, last = page_token.partition("/")
        if not at.isdigit() or not last:
            raise refusal(InvalidInput, "page_token is not valid for this listing")
        mark = (int(at), last)
        keys = [(j.created_at.ToNanoseconds(), j.id) for j in ordered]
        after = [i for i, k in enumerate(keys) if (k < mark if newest else k > mark)]
        start = after[0] if after else len(ordered)
    chunk = list(ordered[start : start + size])
    return chunk, cursor(chunk[-1]) if start + size < len(ordered) else ""
