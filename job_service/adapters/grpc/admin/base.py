"""What every admin handler mixin may read: the use cases and settings ``AdminServicer``
sets, declared once so that each concern's mixin type-checks on its own."""

from __future__ import annotations

from job_service.adapters.grpc.auth import TokenTable
from job_service.adapters.grpc.convert import STATUS_TO_PB
from job_service.domain.lifecycle import JobStatus
from job_service.usecases.admin import Admin
from job_service.usecases.bulk import BulkActions
from job_service.usecases.console_sessions import ConsoleSessions
from job_service.usecases.erasure import UserErasure
from job_service.usecases.job_types import DeclaredJobTypes
from job_service.usecases.outbox import OutboxUpkeep
from job_service.usecases.queues import Queues
from shared.errors import FieldViolation, InvalidInput
from shared.pb.jobs.v1 import admin_service_pb2 as pb

# The ErrorInfo domain of a refused item of a bulk answer: this service's full name.
ADMIN_DOMAIN = pb.DESCRIPTOR.services_by_name["AdminService"].full_name
PB_TO_STATUS = {number: status for status, number in STATUS_TO_PB.items()}


class AdminHandlers:
    """The state the handlers share; ``AdminServicer.__init__`` sets every field."""

    _admin: Admin
    _outbox: OutboxUpkeep
    _queues: Queues
    _declared: DeclaredJobTypes
    _tokens: TokenTable
    _bulk: BulkActions
    _console_sessions: ConsoleSessions
    _erasure: UserErasure
    _job_retention_s: float


def status_from_pb(number: int, field: str = "status") -> JobStatus | None:
    """A filter's job status (None: unset); InvalidInput for a number this build does not
    know."""
    if number == 0:
        return None
    try:
        return PB_TO_STATUS[number]
    except KeyError:
        raise InvalidInput(
            f"{field} is not a known job status",
            [FieldViolation(field, "a JobStatus value, or unset")],
        ) from None
