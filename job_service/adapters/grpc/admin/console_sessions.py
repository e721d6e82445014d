"""The console's sign-in sessions: open, check, close, and revoke a principal's."""

from __future__ import annotations

import grpc

from job_service.adapters.grpc.admin.base import AdminHandlers
from shared.pb.jobs.v1 import admin_service_pb2 as pb
from shared.pbconv import timestamp


class ConsoleSessionHandlers(AdminHandlers):
    async def OpenConsoleSession(
        self, request: pb.OpenConsoleSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.OpenConsoleSessionResponse:
        opened = await self._console_sessions.open(
            self._tokens.caller(context.invocation_metadata()),
            request.idle_timeout.ToTimedelta(),
            request.max_age.ToTimedelta(),
        )
        return pb.OpenConsoleSessionResponse(
            session_id=opened.secret,
            principal=opened.principal,
            expires_at=timestamp(opened.expires_at),
        )

    async def CheckConsoleSession(
        self, request: pb.CheckConsoleSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.CheckConsoleSessionResponse:
        live = await self._console_sessions.check(
            request.session_id, self._tokens.caller(context.invocation_metadata())
        )
        return pb.CheckConsoleSessionResponse(
            principal=live.principal, expires_at=timestamp(live.expires_at)
        )

    async def CloseConsoleSession(
        self, request: pb.CloseConsoleSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.CloseConsoleSessionResponse:
        await self._console_sessions.close(
            request.session_id, self._tokens.caller(context.invocation_metadata())
        )
        return pb.CloseConsoleSessionResponse()

    async def RevokeConsoleSessions(
        self, request: pb.RevokeConsoleSessionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeConsoleSessionsResponse:
        revoked = await self._console_sessions.revoke(
            request.principal, self._tokens.caller(context.invocation_metadata())
        )
        return pb.RevokeConsoleSessionsResponse(revoked=revoked)
