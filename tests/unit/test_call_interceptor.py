"""The one server interceptor (issue 42): a method's handler is wrapped once and kept for
every allowed call; a refused call still gets a handler that refuses, and an unknown
method stays UNIMPLEMENTED (None) without being cached."""

from __future__ import annotations

import json
from typing import Any

import grpc

from job_service.adapters.grpc.auth import TokenTable
from job_service.adapters.grpc.interceptor import CallInterceptor

METHOD = "/jobs.v1.JobService/GetJob"
TOKENS = TokenTable.parse(
    json.dumps({"t-client-token-0000": {"principal": "c", "roles": ["client"]}}), "test tokens"
)


class Details:
    def __init__(self, method: str, token: str) -> None:
        self.method = method
        self.invocation_metadata = (("authorization", f"Bearer {token}"),)


async def behavior(request: Any, context: Any) -> Any:
    return request


HANDLER = grpc.unary_unary_rpc_method_handler(behavior)


class Server:
    """The server's routing (``continuation``): counts how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, details: Details) -> grpc.RpcMethodHandler | None:
        self.asked += 1
        return HANDLER if details.method == METHOD else None


async def test_an_allowed_method_is_wrapped_once_and_kept() -> None:
    interceptor, server = CallInterceptor(TOKENS), Server()

    first = await interceptor.intercept_service(server, Details(METHOD, "t-client-token-0000"))
    second = await interceptor.intercept_service(server, Details(METHOD, "t-client-token-0000"))

    assert first is second and first is not HANDLER
    assert server.asked == 1


async def test_a_refused_call_after_an_allowed_one_still_refuses() -> None:
    interceptor, server = CallInterceptor(TOKENS), Server()
    allowed = await interceptor.intercept_service(server, Details(METHOD, "t-client-token-0000"))

    refused = await interceptor.intercept_service(server, Details(METHOD, "no-such-token"))

    assert refused is not allowed
    assert refused.unary_unary is not None


async def test_an_unknown_method_is_unimplemented_and_not_cached() -> None:
    interceptor, server = CallInterceptor(TOKENS), Server()
    for _ in range(2):
        found = await interceptor.intercept_service(
            server, Details("/x.Y/Z", "t-client-token-0000")
        )
        assert found is None
    assert server.asked == 2
