"""The server interceptor that is the single translation point from exceptions to gRPC
status: an API error (a ``JobsError`` other than an attempt's ``ExecutionError``) becomes
its status code with one ``ErrorInfo`` (see ``shared.rpc_errors``); anything unexpected
becomes INTERNAL with a generic message and a request id, its details logged here and
nowhere else. The ErrorInfo's domain is the service called; its metadata carries the
request's ``job_id`` when it names one."""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import grpc

from shared.errors import (
    ExecutionError,
    FieldViolation,
    InternalError,
    InvalidInput,
    JobsError,
    PlatformUnavailable,
)
from shared.rpc_errors import domain_of, status_for

log = logging.getLogger(__name__)

_ABORTED = grpc.aio.AbortError

# Failures that mean the database is unreachable or restarting, not a bug.
_UNAVAILABLE = (
    OSError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.TooManyConnectionsError,
    # asyncpg's protocol-state error on a pooled connection the server was ending (seen in
    # CI when PostgreSQL shut down under a GetJob: "cannot switch to state 11")
    asyncpg.exceptions.InternalClientError,
    # the session guards (adapters/postgres/pool.py, SessionGuards): a session this replica
    # left idle in a transaction too long (it was frozen or cut off), a lock waited for or
    # a statement run past its timeout. Transient: the call may be made again.
    asyncpg.exceptions.IdleInTransactionSessionTimeoutError,
    asyncpg.exceptions.LockNotAvailableError,
    asyncpg.exceptions.QueryCanceledError,
)


def _translate(error: Exception, method: str) -> JobsError:
    # An ExecutionError fails an attempt inside a worker; it answers no call: here, a bug.
    if isinstance(error, JobsError) and not isinstance(error, ExecutionError):
        return error
    request_id = uuid.uuid4().hex
    if isinstance(error, _UNAVAILABLE):
        log.warning("%s: platform unavailable (request %s): %r", method, request_id, error)
        return PlatformUnavailable(f"the job platform is unavailable; request id {request_id}")
    log.exception("%s failed (request %s)", method, request_id)
    return InternalError(f"internal error; request id {request_id}")


class ErrorInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        return guarded(handler, handler_call_details.method)


def guarded(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    """``handler`` with every exception it raises translated to its gRPC status."""
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            _guarded_unary(handler.unary_unary, method),
            request_deserializer=_tolerant(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None and inspect.isasyncgenfunction(handler.unary_stream):
        return grpc.unary_stream_rpc_method_handler(
            _guarded_stream(handler.unary_stream, method),
            request_deserializer=_tolerant(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    if handler.stream_stream is not None and inspect.isasyncgenfunction(handler.stream_stream):
        return grpc.stream_stream_rpc_method_handler(
            _guarded_stream(handler.stream_stream, method, each_request=True),
            request_deserializer=_tolerant(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    return handler  # streams written with context.write (health Watch) report their own


class _Undecodable:
    """A request that is not a valid message (e.g. a string field that is not UTF-8, or
    nesting deeper than protobuf's limit): refused as bad input, not as INTERNAL, which is
    what gRPC answers when a deserializer raises."""


_UNDECODABLE = _Undecodable()


def _tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def tolerant(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception:
            return _UNDECODABLE

    return tolerant


def _check_decoded(request: Any) -> None:
    if request is _UNDECODABLE:
        raise InvalidInput(
            "the request is not a valid message",
            [FieldViolation("request", "valid protobuf: UTF-8 strings, nesting under 100")],
        )


def _guarded_unary(behavior: Callable[..., Any], method: str) -> Callable[..., Any]:
    async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            _check_decoded(request)
            return await behavior(request, context)
        except _ABORTED:
            raise  # a handler outside this product (health) already set the status
        except Exception as error:  # this is the translation point
            await context.abort_with_status(
                status_for(_translate(error, method), domain_of(method), _ids(request))
            )

    return guarded


def _ids(request: Any) -> dict[str, str]:
    """The ids a request names, for the ErrorInfo's metadata."""
    job_id = getattr(request, "job_id", "")
    return {"job_id": job_id} if isinstance(job_id, str) and job_id else {}


def _guarded_stream(
    behavior: Callable[..., Any], method: str, *, each_request: bool = False
) -> Callable[..., Any]:
    async def guarded(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            if each_request:  # a stream of requests (WorkerSession): check each as it comes
                request = _checked(request)
            else:
                _check_decoded(request)
            async for response in behavior(request, context):
                yield response
        except _ABORTED:
            raise
        except Exception as error:  # this is the translation point
            ids = {} if each_request else _ids(request)
            await context.abort_with_status(
                status_for(_translate(error, method), domain_of(method), ids)
            )

    return guarded


async def _checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        _check_decoded(request)
        yield request
