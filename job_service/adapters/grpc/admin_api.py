"""AdminService: operators' reads and actions across every user. The one servicer the
server registers, composed of the handlers of each concern (``adapters/grpc/admin/``: a
new RPC goes into its concern's module, or a new one joins the list below). Answers carry
the internal error message (``job_to_pb(..., internal=True)``); the role check is the auth
interceptor's."""

from __future__ import annotations

from job_service.adapters.grpc.admin.bulk import BulkHandlers
from job_service.adapters.grpc.admin.console_sessions import ConsoleSessionHandlers
from job_service.adapters.grpc.admin.dead_letters import DeadLetterHandlers
from job_service.adapters.grpc.admin.definitions import DefinitionHandlers
from job_service.adapters.grpc.admin.erasure import ErasureHandlers
from job_service.adapters.grpc.admin.jobs import JobHandlers
from job_service.adapters.grpc.admin.queues import QueueHandlers
from job_service.adapters.grpc.admin.workers import WorkerHandlers
from job_service.adapters.grpc.auth import TokenTable
from job_service.usecases.admin import Admin
from job_service.usecases.bulk import BulkActions
from job_service.usecases.console_sessions import ConsoleSessions
from job_service.usecases.erasure import UserErasure
from job_service.usecases.job_types import DeclaredJobTypes
from job_service.usecases.outbox import OutboxUpkeep
from job_service.usecases.queues import Queues
from shared.pb.jobs.v1 import admin_service_pb2_grpc


class AdminServicer(
    JobHandlers,
    DefinitionHandlers,
    DeadLetterHandlers,
    QueueHandlers,
    WorkerHandlers,
    ConsoleSessionHandlers,
    BulkHandlers,
    ErasureHandlers,
    admin_service_pb2_grpc.AdminServiceServicer,
):
    def __init__(
        self,
        admin: Admin,
        outbox: OutboxUpkeep,
        queues: Queues,
        declared: DeclaredJobTypes,
        tokens: TokenTable,
        bulk: BulkActions,
        console_sessions: ConsoleSessions,
        *,
        erasure: UserErasure,
        job_retention_s: float = 0.0,
    ) -> None:
        self._erasure = erasure
        self._console_sessions = console_sessions
        self._job_retention_s = job_retention_s
        self._bulk = bulk
        self._admin = admin
        self._outbox = outbox
        self._queues = queues
        self._declared = declared
        self._tokens = tokens
