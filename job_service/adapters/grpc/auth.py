"""Who may call what: bearer tokens map to a principal with roles, and one server
interceptor checks each call's role against ``SERVICE_ROLES`` — the one table a new service
is added to. Health and reflection stay open for probes and grpcurl.

Tokens come from ``JOBS_AUTH_TOKENS`` (JSON) or the file named by ``JOBS_AUTH_TOKENS_FILE``::

    {"<token>": {"principal": "orders-service", "roles": ["client"]}, ...}

A client entry may be narrowed to users and job types (``users``, ``job_types``:
``job_service.adapters.grpc.scopes``). The ``operator`` role reads what an admin reads and
changes nothing: it reaches only the methods of ``OPERATOR_READS``.

Only the tokens' SHA-256 digests are kept in memory, and a lookup is by digest, so that
neither a heap dump nor response timing gives a token away.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import grpc

from job_service.adapters.grpc import scopes
from job_service.adapters.grpc.scopes import Scope, ScopeError
from job_service.settings import JobServiceSettings
from shared.errors import JobsError, PermissionDenied, Unauthenticated

log = logging.getLogger(__name__)


class Role(StrEnum):
    CLIENT = "client"  # product services: JobService, CredentialService, ScheduleService
    ADMIN = "admin"  # operators: AdminService, and JobService for any user
    WORKER = "worker"  # executor fleets: ExecutorService
    OPERATOR = "operator"  # on call: an admin's reads (OPERATOR_READS), no change


# The roles each service accepts (any one of them suffices). A service not listed here is
# refused to everyone: forgetting to add a new service fails closed.
SERVICE_ROLES: dict[str, frozenset[Role]] = {
    "jobs.v1.JobService": frozenset({Role.CLIENT, Role.ADMIN, Role.OPERATOR}),
    "jobs.v1.CredentialService": frozenset({Role.CLIENT, Role.ADMIN, Role.OPERATOR}),
    # a client sees the usage of the user it names; an admin or operator any user's, or
    # everyone's
    "jobs.v1.UsageService": frozenset({Role.CLIENT, Role.ADMIN, Role.OPERATOR}),
    # a caller acts for the request's user_id, as with JobService
    "jobs.v1.ScheduleService": frozenset({Role.CLIENT, Role.ADMIN, Role.OPERATOR}),
    "jobs.v1.AdminService": frozenset({Role.ADMIN, Role.OPERATOR}),
    "jobs.v1.ExecutorService": frozenset({Role.WORKER}),
}
# The methods an operator may call: reads, and its own console session (which records who
# looked, and changes no job). Any other method, a new one included, is refused to it.
OPERATOR_READS = frozenset(
    {
        "/jobs.v1.JobService/GetJob",
        "/jobs.v1.JobService/ListJobs",
        "/jobs.v1.JobService/WatchJob",
        "/jobs.v1.CredentialService/ListCredentials",
        "/jobs.v1.UsageService/GetUsage",
        "/jobs.v1.ScheduleService/GetSchedule",
        "/jobs.v1.ScheduleService/ListSchedules",
        "/jobs.v1.AdminService/ListJobs",
        "/jobs.v1.AdminService/GetJob",
        "/jobs.v1.AdminService/ListDeadLetters",
        "/jobs.v1.AdminService/ListJobDefinitions",
        "/jobs.v1.AdminService/ListQueues",
        "/jobs.v1.AdminService/ListRateLimits",
        "/jobs.v1.AdminService/ListWorkers",
        "/jobs.v1.AdminService/CountJobs",
        "/jobs.v1.AdminService/OpenConsoleSession",
        "/jobs.v1.AdminService/CheckConsoleSession",
        "/jobs.v1.AdminService/CloseConsoleSession",
    }
)
# Roles that see every user's data (usage across users, any user's jobs).
SEES_ALL = frozenset({Role.ADMIN, Role.OPERATOR})
# Open to anyone: Kubernetes probes and grpcurl's list/describe carry no token.
OPEN_SERVICES = frozenset(
    {
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.reflection.v1.ServerReflection",
    }
)

_BEARER = "bearer "


class AuthConfigError(ValueError):
    """The token configuration is missing or malformed; the message says how to fix it
    and never quotes a token."""


@dataclass(frozen=True)
class Principal:
    name: str
    roles: frozenset[Role]
    scope: Scope | None = None  # a client narrowed to users and job types


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class TokenTable:
    """Bearer token → principal."""

    def __init__(self, principals: Mapping[str, Principal]) -> None:
        self._by_digest = {_digest(token): p for token, p in principals.items()}

    def __len__(self) -> int:
        return len(self._by_digest)

    def principal(self, token: str) -> Principal | None:
        return self._by_digest.get(_digest(token))

    @classmethod
    def parse(cls, text: str, source: str) -> TokenTable:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as error:
            raise AuthConfigError(f"{source} is not valid JSON ({error.msg})") from None
        if not isinstance(raw, dict):
            raise AuthConfigError(f"{source} must be a JSON object of token → principal")
        principals = {}
        for number, (token, entry) in enumerate(raw.items(), 1):
            where = f"{source}, token #{number}"
            if not isinstance(token, str) or len(token) < 16 or not token.isprintable():
                raise AuthConfigError(f"{where}: a token needs at least 16 printable characters")
            if not isinstance(entry, dict) or not isinstance(entry.get("principal"), str):
                raise AuthConfigError(f'{where}: needs {{"principal": "...", "roles": [...]}}')
            roles = entry.get("roles")
            known = {r.value for r in Role}
            if not isinstance(roles, list) or not roles or not set(roles) <= known:
                raise AuthConfigError(f"{where}: roles must be a non-empty list of {sorted(known)}")
            try:
                scope = scopes.parse_scope(entry)
            except ScopeError as error:
                raise AuthConfigError(f"{where}: {error}") from None
            if scope is not None and set(roles) != {Role.CLIENT}:
                raise AuthConfigError(f"{where}: users and job_types narrow a client token only")
            principals[token] = Principal(
                entry["principal"], frozenset(Role(r) for r in roles), scope
            )
        return cls(principals)

    @classmethod
    def from_settings(cls, settings: JobServiceSettings) -> TokenTable:
        """The configured tokens; AuthConfigError when there are none."""
        if settings.auth_tokens.strip():
            table = cls.parse(settings.auth_tokens, "JOBS_AUTH_TOKENS")
        elif settings.auth_tokens_file:
            path = Path(settings.auth_tokens_file)
            try:
                text = path.read_text()
            except OSError as error:
                raise AuthConfigError(
                    f"JOBS_AUTH_TOKENS_FILE: cannot read {path}: {error.strerror}"
                ) from None
            table = cls.parse(text, f"JOBS_AUTH_TOKENS_FILE ({path})")
        else:
            table = cls({})
        if not table:
            raise AuthConfigError(
                "no auth tokens configured: set JOBS_AUTH_TOKENS to a JSON object "
                '{"<token>": {"principal": "<name>", "roles": ["client"|"admin"|"operator"|'
                '"worker"]}} '
                "or JOBS_AUTH_TOKENS_FILE to a file holding one (`make run` generates them "
                "for a development stack)"
            )
        return table

    def caller(self, metadata: tuple[tuple[str, str | bytes], ...] | None) -> str:
        """The name of the principal whose token the call carries ("" if none)."""
        token = _bearer(metadata)
        principal = self.principal(token) if token else None
        return principal.name if principal else ""

    def scope(self, token: str) -> Scope | None:
        principal = self.principal(token)
        return principal.scope if principal else None

    def roles(self, metadata: tuple[tuple[str, str | bytes], ...] | None) -> frozenset[Role]:
        """The roles of the principal whose token the call carries (none if no token)."""
        token = _bearer(metadata)
        principal = self.principal(token) if token else None
        return principal.roles if principal else frozenset()


def _bearer(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str | None:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            if value[: len(_BEARER)].lower() == _BEARER:
                return value[len(_BEARER) :].strip()
            return None
    return None


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses a call without a known token (UNAUTHENTICATED) or whose principal lacks
    the service's role (PERMISSION_DENIED). Allowed calls reach their handler untouched;
    refused ones get a handler that raises, for the ErrorInterceptor to translate."""

    def __init__(self, tokens: TokenTable) -> None:
        self._tokens = tokens

    def refusal(self, method: str, metadata: Any) -> JobsError | None:
        service = method.lstrip("/").split("/", 1)[0]
        if service in OPEN_SERVICES:
            return None
        token = _bearer(metadata)
        principal = self._tokens.principal(token) if token else None
        if principal is None:
            return Unauthenticated("a valid bearer token is required")
        allowed = principal.roles & SERVICE_ROLES.get(service, frozenset())
        if not allowed:
            log.info("denied %s to principal %s", method, principal.name)
            return PermissionDenied(f"principal {principal.name!r} may not call {service}")
        if allowed == {Role.OPERATOR} and method not in OPERATOR_READS:
            log.info("denied %s to principal %s (read-only)", method, principal.name)
            name = method.rsplit("/", 1)[-1]
            return PermissionDenied(f"principal {principal.name!r} is read-only: may not {name}")
        if principal.scope is not None and method not in scopes.NAMED:
            return PermissionDenied(f"a scoped token may not call {method.rsplit('/', 1)[-1]}")
        return None

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None  # UNIMPLEMENTED, whoever asks
        return await self.admitted(handler, continuation, handler_call_details)

    async def admitted(
        self,
        handler: grpc.RpcMethodHandler,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        """The call's handler: ``handler`` itself when allowed as it is, one that raises
        the refusal, or one held to the token's scope."""
        method, metadata = handler_call_details.method, handler_call_details.invocation_metadata
        error = self.refusal(method, metadata)
        if error is not None:
            return _refusing(handler, error)
        token = _bearer(metadata)
        scope = self._tokens.scope(token) if token else None
        if scope is None:
            return handler

        async def find(other: str) -> grpc.RpcMethodHandler | None:
            # the server's own details type (grpc.aio checks it), naming the other method
            details = type(handler_call_details)(other, metadata)
            return await continuation(details)

        return scopes.scoped_handler(handler, method, scope, find)


def _refusing(handler: grpc.RpcMethodHandler, error: JobsError) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that raises ``error``."""
    serializers = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        raise error

    async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        raise error
        yield  # an async generator, as streaming handlers are

    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(unary, **serializers)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(stream, **serializers)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(unary, **serializers)
    return grpc.stream_stream_rpc_method_handler(stream, **serializers)
