"""EraseUserData: a user's data erased for good (``usecases/erasure.py``), or counted."""

from __future__ import annotations

import grpc

from job_service.adapters.grpc.admin.base import AdminHandlers
from shared.pb.jobs.v1 import admin_service_pb2 as pb


class ErasureHandlers(AdminHandlers):
    async def EraseUserData(
        self, request: pb.EraseUserDataRequest, context: grpc.aio.ServicerContext
    ) -> pb.EraseUserDataResponse:
        erased = await self._erasure.erase(
            request.user_id,
            self._tokens.caller(context.invocation_metadata()),
            dry_run=request.dry_run,
            cancel_running=request.cancel_running,
        )
        d = erased.data
        return pb.EraseUserDataResponse(
            jobs=d.jobs,
            artifacts=d.artifacts,
            steps=d.steps,
            signals=d.signals,
            events=d.events,
            schedules=d.schedules,
            credentials=d.credentials,
            usage_records=d.usage_records,
            data_key_destroyed=erased.key_destroyed,
            unfinished=erased.unfinished,
            cancelled=erased.cancelled,
        )
