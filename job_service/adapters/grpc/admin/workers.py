"""The workers connected to any replica, with what each runs."""

from __future__ import annotations

import grpc

from job_service.adapters.grpc.admin.base import AdminHandlers
from shared.pb.jobs.v1 import admin_service_pb2 as pb
from shared.pbconv import timestamp


class WorkerHandlers(AdminHandlers):
    async def ListWorkers(
        self, request: pb.ListWorkersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkersResponse:
        return pb.ListWorkersResponse(
            workers=[
                pb.Worker(
                    worker_id=w.worker_id,
                    connected_at=timestamp(w.connected_at),
                    definitions=w.definitions,
                    running_jobs=w.running_jobs,
                )
                for w in await self._admin.live_workers()
            ]
        )
