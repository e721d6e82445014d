"""What a scoped token may touch: the users (a list, or a prefix) and the job types an entry
of ``JOBS_AUTH_TOKENS`` narrows a client token to, and the check of each call against them::

    {"<token>": {"principal": "quiz-app", "roles": ["client"],
                 "users": {"prefix": "quiz:"}, "job_types": ["feynman_evaluation"]}}

A request that names a user or a job type outside the scope is refused before its handler
runs (``PERMISSION_DENIED``): nothing is written. Everything else a client reaches is
already one user's (every request names its user, and another user's job or schedule is
``NOT_FOUND``), so the user check is complete. A job type is not in every request: a token
narrowed to job types reads a job or schedule named by id through the service's own Get
first, and another type's is ``NOT_FOUND`` as another user's is; its lists are filtered (a
page may come back shorter than asked; its next_page_token still goes on); usage, which
adds up every type, is refused to it.

Only client tokens are scoped: an admin or operator token sees every user (its listings
cannot be narrowed to a prefix), and a worker is narrowed by what it runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc

from shared.errors import JobNotFound, JobsError, PermissionDenied, ScheduleNotFound
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import schedule_service_pb2 as spb

_JOBS = "/jobs.v1.JobService/"
_SCHEDULES = "/jobs.v1.ScheduleService/"


class ScopeError(ValueError):
    """A malformed scope; the message names the key and never quotes the token."""


@dataclass(frozen=True)
class Scope:
    """Users: ``user_ids`` or ``user_prefix`` (neither: any user); job types: ``job_types``
    (None: any type)."""

    user_ids: frozenset[str] = frozenset()
    user_prefix: str | None = None
    job_types: frozenset[str] | None = None

    def admits_user(self, user_id: str) -> bool:
        if self.user_prefix is not None:
            return user_id.startswith(self.user_prefix)
        return not self.user_ids or user_id in self.user_ids

    def admits_type(self, job_type: str) -> bool:
        return self.job_types is None or job_type in self.job_types


def parse_scope(entry: dict[str, Any]) -> Scope | None:
    """The scope of a token table entry (its ``users`` and ``job_types``), None when it
    has neither; ScopeError when either is malformed."""
    if "users" not in entry and "job_types" not in entry:
        return None
    users, user_ids, prefix = entry.get("users"), frozenset[str](), None
    if isinstance(users, dict) and set(users) == {"prefix"}:
        prefix = users["prefix"]
        if not isinstance(prefix, str) or not prefix:
            raise ScopeError('users: {"prefix": "<non-empty>"}')
    elif isinstance(users, list):
        if not users or not all(isinstance(u, str) and u for u in users):
            raise ScopeError("users: a non-empty list of user ids")
        user_ids = frozenset(users)
    elif users is not None:
        raise ScopeError('users: a list of user ids or {"prefix": "..."}')
    types = entry.get("job_types")
    if types is not None and (
        not isinstance(types, list) or not types or not all(isinstance(t, str) and t for t in types)
    ):
        raise ScopeError("job_types: a non-empty list of job type names")
    return Scope(user_ids, prefix, frozenset(types) if types is not None else None)


class _Named(NamedTuple):
    """What a request names: its users and (where it says) its job types."""

    users: tuple[str, ...]
    job_types: tuple[str, ...] = ()


def _user(request: Any) -> _Named:
    return _Named((request.user_id,))


def _typed(request: Any) -> _Named:
    return _Named((request.user_id,), (request.job_type,))


def _batch(request: Any) -> _Named:
    items = request.requests
    return _Named(tuple(r.user_id for r in items), tuple(r.job_type for r in items))


def _schedule_spec(request: Any) -> _Named:
    job_type = request.spec.job_template.job_type
    return _Named((request.user_id,), (job_type,) if job_type else ())


# Every method a client token reaches, and what its request names. A method missing here is
# refused to a scoped token: a new RPC fails closed until it is added.
NAMED: dict[str, Callable[[Any], _Named]] = {
    _JOBS + "CreateJob": _typed,
    _JOBS + "CreateJobs": _batch,
    _JOBS + "GetJob": _user,
    _JOBS + "CancelJob": _user,
    _JOBS + "ListJobs": _user,
    _JOBS + "WatchJob": _user,
    _JOBS + "SendSignal": _user,
    "/jobs.v1.CredentialService/PutCredential": _user,
    "/jobs.v1.CredentialService/ListCredentials": _user,
    "/jobs.v1.CredentialService/DeleteCredential": _user,
    "/jobs.v1.UsageService/GetUsage": _user,
    _SCHEDULES + "CreateSchedule": _schedule_spec,
    _SCHEDULES + "GetSchedule": _user,
    _SCHEDULES + "ListSchedules": _user,
    _SCHEDULES + "UpdateSchedule": _schedule_spec,
    _SCHEDULES + "PauseSchedule": _user,
    _SCHEDULES + "ResumeSchedule": _user,
    _SCHEDULES + "DeleteSchedule": _user,
    _SCHEDULES + "TriggerSchedule": _user,
}


class _Lookup(NamedTuple):
    """How a by-id call of a type-scoped token finds its object's job type first."""

    method: str  # the service's Get
    request: Callable[[Any], Any]  # the Get request from the call's
    job_type: Callable[[Any], str]  # the job type in the Get's answer
    not_found: Callable[[], JobsError]


_JOB = _Lookup(
    _JOBS + "GetJob",
    lambda r: jpb.GetJobRequest(job_id=r.job_id, user_id=r.user_id),
    lambda a: str(a.job.job_type),
    lambda: JobNotFound("job not found"),
)
_SCHEDULE = _Lookup(
    _SCHEDULES + "GetSchedule",
    lambda r: spb.GetScheduleRequest(schedule_id=r.schedule_id, user_id=r.user_id),
    lambda a: str(a.schedule.spec.job_template.job_type),
    lambda: ScheduleNotFound("schedule not found"),
)
# By-id calls of a type-scoped token: read first (the Gets check their own answer).
LOOKED_UP: dict[str, _Lookup] = {
    **{_JOBS + m: _JOB for m in ("CancelJob", "WatchJob", "SendSignal")},
    **{
        _SCHEDULES + m: _SCHEDULE
        for m in (
            "UpdateSchedule",
            "PauseSchedule",
            "ResumeSchedule",
            "DeleteSchedule",
            "TriggerSchedule",
        )
    },
}
# Answers a type-scoped token sees filtered: the repeated field and an item's job type.
FILTERED: dict[str, tuple[str, Callable[[Any], str]]] = {
    _JOBS + "ListJobs": ("jobs", lambda j: str(j.job_type)),
    _SCHEDULES + "ListSchedules": ("schedules", lambda s: str(s.spec.job_template.job_type)),
}
# Answers that are one object: another type's is not found.
CHECKED: dict[str, _Lookup] = {_JOBS + "GetJob": _JOB, _SCHEDULES + "GetSchedule": _SCHEDULE}
# Not narrowable to job types (usage adds up every type): refused to a type-scoped token.
TYPELESS = frozenset({"/jobs.v1.UsageService/GetUsage"})

FindHandler = Callable[[str], Awaitable[grpc.RpcMethodHandler | None]]


def refusal(scope: Scope, method: str, request: Any) -> JobsError | None:
    """PERMISSION_DENIED when ``request`` names a user or job type outside ``scope``."""
    named = NAMED.get(method)
    if named is None or (scope.job_types is not None and method in TYPELESS):
        return PermissionDenied(f"a scoped token may not call {method.rsplit('/', 1)[-1]}")
    users, job_types = named(request)
    if not all(scope.admits_user(u) for u in users):
        return PermissionDenied("user_id is outside the token's scope")
    if not all(scope.admits_type(t) for t in job_types):
        return PermissionDenied("job_type is outside the token's scope")
    return None


async def _check_first(
    scope: Scope, method: str, request: Any, context: Any, find: FindHandler
) -> None:
    """Raises unless the call may go ahead: its request in scope, and (type-scoped, by id)
    its object of a type in scope."""
    error = refusal(scope, method, request)
    if error is not None:
        raise error
    lookup = LOOKED_UP.get(method) if scope.job_types is not None else None
    if lookup is not None:
        getter = await find(lookup.method)
        assert getter is not None and getter.unary_unary is not None
        answer = await getter.unary_unary(lookup.request(request), context)
        if not scope.admits_type(lookup.job_type(answer)):
            raise lookup.not_found()


def _checked_answer(scope: Scope, method: str, answer: Any) -> Any:
    if scope.job_types is None:
        return answer
    if method in CHECKED:
        lookup = CHECKED[method]
        if not scope.admits_type(lookup.job_type(answer)):
            raise lookup.not_found()
    elif method in FILTERED:
        field, job_type = FILTERED[method]
        kept = [item for item in getattr(answer, field) if scope.admits_type(job_type(item))]
        answer.ClearField(field)
        getattr(answer, field).extend(kept)
    return answer


def scoped_handler(
    handler: grpc.RpcMethodHandler, method: str, scope: Scope, find: FindHandler
) -> grpc.RpcMethodHandler:
    """``handler`` behind ``scope``: refused before it runs when out of scope, its answer
    checked or filtered after."""
    serializers = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await _check_first(scope, method, request, context, find)
            return _checked_answer(scope, method, await inner(request, context))

        return grpc.unary_unary_rpc_method_handler(unary, **serializers)
    if handler.unary_stream is not None:
        streamed = handler.unary_stream

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            await _check_first(scope, method, request, context, find)
            async for answer in streamed(request, context):
                yield answer

        return grpc.unary_stream_rpc_method_handler(stream, **serializers)
    # NAMED has only these shapes (the interceptor refuses a scoped token the others)
    raise TypeError(f"{method}: a scoped call streams no requests")
